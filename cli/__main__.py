"""``python -m cli``: the same as the ``qwen3-asr`` command."""
import sys

from cli.main import main

sys.exit(main())
