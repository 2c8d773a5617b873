"""The UI's side of the engine: the engine thread (worker), its client, a server as the engine."""

# Modules other screens may import; the rest are this screen's own (tests/test_layers.py).
PUBLIC = ('engine_client', 'remote_engine', 'segment_align')
