"""The Qwen3-ASR network itself: config, weights, log-mel features, encoder, decoder, linear methods.

Plain torch modules and forward functions. Imports nothing from the rest of ``engine``
but ``engine.errors`` (and the ``asr_kernels`` package): serving, audio, text and pipelines
build on it.
"""
