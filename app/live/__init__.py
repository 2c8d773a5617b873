"""The live captions window and its input choice."""

# Modules other screens may import; the rest are this screen's own (tests/test_layers.py).
PUBLIC = ()
