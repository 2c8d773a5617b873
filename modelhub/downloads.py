"""Finding and downloading Qwen3-ASR checkpoints from the Hugging Face Hub.

No Qt here: the desktop app runs ``download_model`` in a background thread and
turns the ``progress`` callback into signals; the CLI can call it directly.
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import appdirs
from tqdm import tqdm as _BaseTqdm

APP_DIR_NAME = "qwen3-asr-desktop"
# Lets tests, portable installs and the crash-recovery test keep every file in one folder.
DATA_DIR_ENV = "QWEN3_ASR_DATA_DIR"

# Everything a checkpoint needs, and nothing else (repos also hold README images, ONNX, ...).
ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken",
                  "tokenizer*", "vocab*", "merges*"]
_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model", "tokenizer_config.json")


@dataclass(frozen=True)
class KnownModel:
    repo_id: str
    kind: str  # "asr" or "aligner"
    description: str


KNOWN_MODELS: list[KnownModel] = [
    KnownModel("Qwen/Qwen3-ASR-0.6B", "asr", "Small and fast; good for live captions and laptops."),
    KnownModel("Qwen/Qwen3-ASR-1.7B", "asr", "More accurate; wants a GPU or a fast CPU."),
    KnownModel("Qwen/Qwen3-ForcedAligner-0.6B", "aligner",
               "Optional: adds word timestamps (click a word to play from it)."),
    KnownModel("Qwen/Qwen3-ASR-0.6B-hf", "asr", "The 0.6B model in the transformers layout."),
    KnownModel("Qwen/Qwen3-ASR-1.7B-hf", "asr", "The 1.7B model in the transformers layout."),
]


class NetworkUnavailable(RuntimeError):
    """The Hub cannot be reached (offline mode or no connection)."""


class DownloadCancelled(RuntimeError):
    """The user cancelled a download."""


def data_dir() -> Path:
    """The per-user data folder (history, models); ``$QWEN3_ASR_DATA_DIR`` overrides it."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    return Path(appdirs.user_data_dir(APP_DIR_NAME, appauthor=False))


def models_dir() -> Path:
    return data_dir() / "models"


def default_model_dest(repo_id: str) -> Path:
    return models_dir() / repo_id.replace("/", "--")


def is_model_dir(path) -> bool:
    """True when ``path`` looks like a checkpoint folder: config, weights and a tokenizer."""
    try:
        folder = Path(path)
        if not (folder / "config.json").is_file():
            return False
        has_weights = any(folder.glob("*.safetensors"))
        has_tokenizer = any((folder / name).is_file() for name in _TOKENIZER_FILES)
        return has_weights and has_tokenizer
    except OSError:
        return False


# huggingface.co's own rule for the two halves of "owner/name".
_HUB_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def looks_like_path(name: str) -> bool:
    """True for anything a user meant as a folder on this computer rather than a Hub id.

    That is: it starts with ``.``, ``/`` or ``~``; holds a backslash, a drive colon or more
    than one ``/``; exists here; or its first part is a folder here (``models/typo``).
    """
    text = str(name)
    if text.startswith((".", "/", "~")) or "\\" in text or ":" in text or text.count("/") > 1:
        return True
    path = Path(text)
    return path.exists() or ("/" in text and Path(text.split("/", 1)[0]).is_dir())


def is_hub_id(name: str) -> bool:
    """True for ``owner/name`` in the Hub's spelling that does not look like a local path."""
    owner, _, model = str(name).partition("/")
    return (not looks_like_path(name) and bool(_HUB_PART.fullmatch(owner)) and bool(_HUB_PART.fullmatch(model))
            and ".." not in name)


def local_model_folder(name) -> Path:
    """``name`` as an existing folder, or ValueError saying plainly what is there instead.

    Checks the path only (never the network or the data folder); whether the folder holds a
    usable checkpoint is the loader's to say.
    """
    path = Path(os.path.expanduser(str(name)))
    if path.is_dir():
        return path
    if path.exists():
        raise ValueError(f"{path} is a file, not a model folder")
    raise ValueError(f"no model folder at {path}")


def resolve_model_name(name: str) -> tuple[str, Path | str]:
    """("local", folder) or ("hub", repo_id) for what a user typed as a model.

    A local path must exist (ValueError from ``local_model_folder`` otherwise); only an
    ``owner/name`` that exists nowhere here is a Hub id, so a typo never becomes a download.
    """
    if is_hub_id(name):
        return "hub", str(name)
    return "local", local_model_folder(name)


def _offline_message(repo_id: str) -> str:
    return (f"Cannot reach huggingface.co to download {repo_id}. Check your internet "
            f"connection, or choose a local model folder.")


def _is_offline() -> bool:
    # huggingface_hub reads HF_HUB_OFFLINE once at import; read it again so a
    # change made after import (tests, the settings dialog) is honoured.
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in {"1", "ON", "YES", "TRUE"}


def _progress_class(progress: Callable[[int, int], None] | None,
                    cancel: threading.Event | None):
    """A tqdm subclass that reports byte progress and stops the download on cancel.

    huggingface_hub creates several bars from ``tqdm_class``: byte bars (unit "B")
    for transfer and for writing, and a file-count bar. Bytes come from the
    largest byte bar; every update checks ``cancel`` and raises, which unwinds
    the download threads.
    """
    lock = threading.Lock()

    class ProgressTqdm(_BaseTqdm):
        def __init__(self, *args, **kwargs):
            kwargs.pop("name", None)
            kwargs["disable"] = True  # no console output from a GUI
            super().__init__(*args, **kwargs)
            self._bytes = kwargs.get("unit") == "B"
            self._done = int(kwargs.get("initial") or 0)
            self._check()

        def _check(self):
            if cancel is not None and cancel.is_set():
                raise DownloadCancelled("Download cancelled.")

        def update(self, n=1):
            self._check()
            with lock:
                self._done += int(n or 0)
                if self._bytes and progress is not None:
                    progress(self._done, int(self.total or 0))
            return True

        def refresh(self, *args, **kwargs):
            self._check()

    return ProgressTqdm


def download_model(repo_id: str, dest=None, progress: Callable[[int, int], None] | None = None,
                   cancel: threading.Event | None = None) -> Path:
    """Download the checkpoint files of ``repo_id`` into ``dest`` (default: models_dir()).

    ``progress(done_bytes, total_bytes)`` is called from download threads.
    Setting ``cancel`` stops the download with DownloadCancelled.

    Raises:
        NetworkUnavailable: offline mode is on or huggingface.co cannot be reached.
        DownloadCancelled: ``cancel`` was set.
    """
    if not is_hub_id(repo_id):   # a mistyped path must never create a folder or reach the network
        local_model_folder(repo_id)
        raise ValueError(f"{repo_id!r} is not a Hugging Face model id (owner/name)")
    if _is_offline():
        raise NetworkUnavailable(_offline_message(repo_id))
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

    dest = Path(dest) if dest is not None else default_model_dest(repo_id)
    dest.mkdir(parents=True, exist_ok=True)
    if cancel is not None and cancel.is_set():
        raise DownloadCancelled("Download cancelled.")
    try:
        path = snapshot_download(repo_id, local_dir=str(dest), allow_patterns=ALLOW_PATTERNS,
                                 tqdm_class=_progress_class(progress, cancel))
    except DownloadCancelled:
        raise
    except (OfflineModeIsEnabled, LocalEntryNotFoundError, ConnectionError, TimeoutError) as exc:
        raise NetworkUnavailable(_offline_message(repo_id)) from exc
    except OSError as exc:
        # httpx / requests connection failures are OSError subclasses in some versions.
        if "connect" in str(exc).lower() or "resolve" in str(exc).lower():
            raise NetworkUnavailable(_offline_message(repo_id)) from exc
        raise
    return Path(path)


def download_size(repo_id: str, timeout: float = 15.0) -> int:
    """Bytes ``download_model(repo_id)`` would fetch: the ALLOW_PATTERNS files the Hub lists.

    One metadata request, no file is downloaded. Raises NetworkUnavailable offline or when
    huggingface.co cannot be reached; other Hub errors (a repository gone) pass through.
    """
    if not is_hub_id(repo_id):
        raise ValueError(f"{repo_id!r} is not a Hugging Face model id (owner/name)")
    if _is_offline():
        raise NetworkUnavailable(_offline_message(repo_id))
    from huggingface_hub import HfApi
    from huggingface_hub.errors import OfflineModeIsEnabled
    from huggingface_hub.utils import filter_repo_objects

    try:
        info = HfApi().model_info(repo_id, files_metadata=True, timeout=timeout)
    except Exception as exc:
        # httpx's ConnectError / ConnectTimeout are neither OSError nor ConnectionError.
        name, text = type(exc).__name__, str(exc).lower()
        if isinstance(exc, (OfflineModeIsEnabled, ConnectionError, TimeoutError)) or \
                "Connect" in name or "Timeout" in name or "connect" in text or "resolve" in text:
            raise NetworkUnavailable(_offline_message(repo_id)) from exc
        raise
    wanted = filter_repo_objects(info.siblings or [], allow_patterns=ALLOW_PATTERNS,
                                 key=lambda sibling: sibling.rfilename)
    return sum(int(sibling.size or 0) for sibling in wanted)
