"""The Models dialog: downloads, sizes, the model kind of a folder."""

# Modules other screens may import; the rest are this screen's own (tests/test_layers.py).
PUBLIC = ()
