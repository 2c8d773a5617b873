"""How much the Models dialog's downloads weigh: a known figure at once, the Hub's exact one later.

Someone choosing between models on a laptop or a metered link wants to know that one is
"about 1.9 GB" and another "about 4.7 GB" before pressing Download. The Hub's file listing
(modelhub.downloads.download_size) is exact but takes a round trip per model, seconds on a
slow link and nothing at all offline, so it runs on a daemon thread, only once the dialog
is shown, and its answers are kept for the rest of the session. Until it answers the
dialog shows the figure below, or "size unknown" where none is known: never a guess.
"""
from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, Signal

from modelhub import downloads as hub

log = logging.getLogger(__name__)

# Approximate download sizes (bytes), read off the Hub's file listings: bf16 weights plus
# tokenizer and config files. The -hf repositories are not listed here: shown as "size
# unknown" until the Hub answers.
KNOWN_SIZES: dict[str, int] = {
    "Qwen/Qwen3-ASR-0.6B": 1_900_000_000,            # 0.9 B parameters in bf16
    "Qwen/Qwen3-ASR-1.7B": 4_700_000_000,            # the repository's listed total
    "Qwen/Qwen3-ForcedAligner-0.6B": 1_840_000_000,  # model.safetensors, 1.84 GB
}
UNKNOWN = "size unknown"

_hub_sizes: dict[str, int] = {}   # exact answers from the Hub, this session
_asking: set[str] = set()         # asked and not failed: never asked twice at once
_lock = threading.Lock()


def format_size(size: float) -> str:
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


def download_size_text(repo_id: str) -> str:
    """"1.9 GB" from the Hub, "about 1.9 GB" from the table above, or "size unknown"."""
    with _lock:
        exact = _hub_sizes.get(repo_id)
    if exact:
        return format_size(exact)
    known = KNOWN_SIZES.get(repo_id)
    return f"about {format_size(known)}" if known else UNKNOWN


class SizeLookup(QObject):
    """Asks the Hub in the background; ``found`` names each model whose size just arrived.

    One lives for the whole session (``lookup()``): the thread may outlast the dialog that
    started it, and a signal from a deleted object would crash where this one cannot.
    """

    found = Signal(str)

    def ask(self, repo_ids) -> None:
        with _lock:
            todo = [r for r in repo_ids if r not in _hub_sizes and r not in _asking]
            _asking.update(todo)
        if todo:
            threading.Thread(target=self._ask_hub, args=(todo,), name="model-sizes",
                             daemon=True).start()

    def _ask_hub(self, repo_ids) -> None:
        for repo_id in repo_ids:
            try:
                size = hub.download_size(repo_id)
            except Exception as exc:   # offline, Hub down, repository gone: keep the table's figure
                log.info("no download size for %s: %s", repo_id, exc)
                with _lock:
                    _asking.discard(repo_id)   # the next opening of the dialog may try again
                continue
            with _lock:
                _asking.discard(repo_id)
                if size > 0:
                    _hub_sizes[repo_id] = size
            if size > 0:
                self.found.emit(repo_id)


_lookup: SizeLookup | None = None


def lookup() -> SizeLookup:
    """The session's SizeLookup (created on first use, in the UI thread)."""
    global _lookup
    if _lookup is None:
        _lookup = SizeLookup()
    return _lookup
