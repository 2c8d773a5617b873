"""Speaker embeddings: the GE2E voice encoder (a 3-layer LSTM over 40 mel bands, 256-d output).

The weights are the pretrained GE2E encoder that ships inside the ``resemblyzer`` PyPI wheel
(``resemblyzer/pretrained.pt``, 17 MB). Only that file is used: the network is rebuilt here,
so neither resemblyzer nor its dependencies (librosa, webrtcvad, scipy) are needed. The
features follow what the encoder was trained on: power (not log) mel spectrograms, 25 ms
Hann windows every 10 ms, 40 Slaney mel bands, volume raised to -30 dBFS.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from engine.network.features import mel_filters

SAMPLE_RATE = 16000
N_MELS = 40
N_FFT = 400          # 25 ms
HOP = 160            # 10 ms
PARTIAL_FRAMES = 160  # the encoder was trained on 1.6 s partials
EMBEDDING_SIZE = 256
WEIGHTS_ENV = "QWEN3_ASR_SPEAKER_MODEL"
WEIGHTS_HELP = ("the GE2E speaker model (17 MB) is not installed. Get it with "
                "`pip install --no-deps resemblyzer==0.1.4` (only its weights file is used), "
                "with the app's model manager (Speaker model), or point "
                f"{WEIGHTS_ENV} at a resemblyzer pretrained.pt")


class SpeakerModelMissing(FileNotFoundError):
    """No speaker-model weights were found; the message says how to get them."""


class GE2EEncoder(nn.Module):
    """The GE2E network: LSTM(40 -> 256, 3 layers) -> Linear(256) -> ReLU -> L2 norm."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(N_MELS, 256, 3, batch_first=True)
        self.linear = nn.Linear(256, EMBEDDING_SIZE)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        """[batch, frames, 40] power mels -> [batch, 256] unit-length embeddings."""
        _, (hidden, _) = self.lstm(mels)
        raw = torch.relu(self.linear(hidden[-1]))
        return raw / raw.norm(dim=1, keepdim=True).clamp_min(1e-8)


def find_weights(path=None, data_dir=None) -> Path:
    """The GE2E weights file: ``path``; else ``$QWEN3_ASR_SPEAKER_MODEL``; else an installed
    ``resemblyzer`` package (found without importing it); else ``data_dir/ge2e/pretrained.pt``
    (where the model manager puts it).

    Raises:
        SpeakerModelMissing: none of them holds the file; the message says how to get it.
    """
    candidates = []
    if path is not None:
        candidates.append(Path(path))
    elif os.environ.get(WEIGHTS_ENV):
        candidates.append(Path(os.environ[WEIGHTS_ENV]))
    else:
        try:
            spec = importlib.util.find_spec("resemblyzer")
        except (ImportError, ValueError):
            spec = None
        for folder in (spec.submodule_search_locations or []) if spec else []:
            candidates.append(Path(folder) / "pretrained.pt")
        if data_dir is not None:
            candidates.append(Path(data_dir) / "ge2e" / "pretrained.pt")
    for candidate in candidates:
        if candidate.is_dir():
            candidate = candidate / "pretrained.pt"
        if candidate.is_file():
            return candidate
    where = ", ".join(str(c) for c in candidates) or "nowhere"
    raise SpeakerModelMissing(f"{WEIGHTS_HELP} (looked in: {where})")


def load_encoder(path=None, data_dir=None, device="cpu", dtype=None) -> GE2EEncoder:
    """The GE2E encoder with its pretrained weights (see ``find_weights``), in eval mode.

    ``dtype`` defaults to bfloat16 on CPUs that compute it natively (about twice as fast,
    embeddings within cosine 0.999 of float32), else float32.

    Raises:
        SpeakerModelMissing: no weights file.
        ValueError: the file is not a GE2E state dict.
    """
    weights = find_weights(path, data_dir)
    try:
        checkpoint = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"{weights} is not a readable speaker model: {exc}") from None
    state = checkpoint.get("model_state", checkpoint) if isinstance(checkpoint, dict) else None
    model = GE2EEncoder()
    if not isinstance(state, dict):
        raise ValueError(f"{weights} holds no GE2E weights (expected a state dict)")
    wanted = set(model.state_dict())
    missing = wanted - set(state)
    if missing:
        raise ValueError(f"{weights} is not a GE2E speaker model: missing {sorted(missing)[:3]}")
    model.load_state_dict({k: state[k] for k in wanted})
    if dtype is None:
        from engine.network import platform

        dtype = torch.bfloat16 if str(device) == "cpu" and platform.current().native_bf16 else torch.float32
    return model.to(device=device, dtype=dtype).eval()


def ge2e_mels(samples: np.ndarray) -> torch.Tensor:
    """[frames, 40] power mel spectrogram as the encoder expects (centred frames, zero padded)."""
    wave = torch.as_tensor(np.asarray(samples, dtype=np.float32))
    if wave.numel() < N_FFT:
        wave = nn.functional.pad(wave, (0, N_FFT - wave.numel()))
    stft = torch.stft(wave, N_FFT, HOP, window=torch.hann_window(N_FFT), center=True,
                      pad_mode="constant", return_complex=True)
    power = stft.abs() ** 2                                      # [201, frames]
    filters = torch.from_numpy(mel_filters(N_MELS, N_FFT, SAMPLE_RATE))
    return (filters.T @ power).T.contiguous()                    # [frames, 40]


def raise_volume(samples: np.ndarray, target_dbfs: float = -30.0) -> np.ndarray:
    """Quiet audio raised to ``target_dbfs`` (never lowered), as the encoder's training data was."""
    x = np.asarray(samples, dtype=np.float32)
    rms = float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) if x.size else 0.0
    if rms <= 1e-9:
        return x
    gain_db = target_dbfs - 20 * np.log10(rms)
    return x * np.float32(10 ** (gain_db / 20)) if gain_db > 0 else x


@torch.no_grad()
def embed_windows(model: GE2EEncoder, mels: torch.Tensor, windows: list[tuple[int, int]],
                  batch: int = 64) -> np.ndarray:
    """One unit embedding per ``(first_frame, last_frame)`` window of ``mels`` ([frames, 40]).

    Windows of equal length run as one batch."""
    dtype = next(model.parameters()).dtype
    out = np.zeros((len(windows), EMBEDDING_SIZE), np.float32)
    by_len: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(windows):
        by_len.setdefault(b - a, []).append(i)
    for length, idx in by_len.items():
        for k in range(0, len(idx), batch):
            part = idx[k:k + batch]
            x = torch.stack([mels[windows[i][0]:windows[i][1]] for i in part])
            out[part] = model(x.to(dtype)).float().numpy()
    return out
