"""Small widgets and dialogs every screen may use."""

# Modules other screens may import; the rest are this screen's own (tests/test_layers.py).
PUBLIC = ('*',)
