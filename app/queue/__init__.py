"""The queue screen: files waiting, running and done, with their progress and time left."""

# Modules other screens may import; the rest are this screen's own (tests/test_layers.py).
PUBLIC = ('eta', 'queue_model', 'file_collect')
