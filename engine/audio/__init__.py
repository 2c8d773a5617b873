"""Audio in: decoding files, live sources (microphone, file playback, recording), VAD and chunking.

Everything hands out float32 mono 16 kHz samples. Imports nothing from the rest of
``engine`` but ``engine.errors``.
"""
