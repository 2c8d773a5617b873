"""Finding and downloading Qwen3-ASR checkpoints: a service of the CLI and the app, not of the engine."""
