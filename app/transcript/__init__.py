"""The transcript screen: segments with times and speakers, playback, search, edits."""

# Modules other screens may import; the rest are this screen's own (tests/test_layers.py).
PUBLIC = ('transcript_model', 'transcript_notes', 'speaker_setup')
