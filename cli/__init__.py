"""The ``qwen3-asr`` command line, over the ``engine`` package and ``modelhub`` downloads."""
