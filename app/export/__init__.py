"""Exports: formats, where they go, the Export dialog."""

# Modules other screens may import; the rest are this screen's own (tests/test_layers.py).
PUBLIC = ()
