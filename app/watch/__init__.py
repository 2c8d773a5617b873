"""The watch folder: audio appearing in a folder is queued and exported by itself."""

# Modules other screens may import; the rest are this screen's own (tests/test_layers.py).
PUBLIC = ('watch_folder_page',)
