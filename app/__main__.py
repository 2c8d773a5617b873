"""``python -m app``: start Qwen3 ASR Desktop (see app.main for the options)."""
import sys

from app.main import main

sys.exit(main())
