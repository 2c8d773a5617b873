"""Log-mel features, equal to transformers' Qwen3ASRFeatureExtractor on a single clip.

Computed per clip: a clip's features never depend on what it is batched with
(transformers' batched path pads with silence and so changes a clip's tail).
"""
from __future__ import annotations

import functools

import numpy as np
import torch

SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
N_MELS = 128
MIN_SAMPLES = 8000  # the official package zero-pads clips shorter than 0.5 s


def _hz_to_mel_slaney(hz):
    hz = np.asarray(hz, dtype=np.float64)
    f_sp = 200.0 / 3
    mel = hz / f_sp
    min_log_hz, logstep = 1000.0, np.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    return np.where(hz >= min_log_hz, min_log_mel + np.log(np.maximum(hz, 1e-10) / min_log_hz) / logstep, mel)


def _mel_to_hz_slaney(mel):
    mel = np.asarray(mel, dtype=np.float64)
    f_sp = 200.0 / 3
    min_log_hz, logstep = 1000.0, np.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    return np.where(mel >= min_log_mel, min_log_hz * np.exp(logstep * (mel - min_log_mel)), f_sp * mel)


@functools.lru_cache(maxsize=4)
def mel_filters(n_mels: int = N_MELS, n_fft: int = N_FFT, sr: int = SAMPLE_RATE) -> np.ndarray:
    """Slaney-scale, Slaney-normalised triangular filters: [n_fft // 2 + 1, n_mels]."""
    fft_freqs = np.linspace(0, sr // 2, n_fft // 2 + 1)
    mel_edges = np.linspace(_hz_to_mel_slaney(0.0), _hz_to_mel_slaney(8000.0), n_mels + 2)
    hz_edges = _mel_to_hz_slaney(mel_edges)
    diff = np.diff(hz_edges)
    slopes = hz_edges[None, :] - fft_freqs[:, None]           # [freqs, n_mels + 2]
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    filters = np.maximum(0.0, np.minimum(down, up))
    enorm = 2.0 / (hz_edges[2:n_mels + 2] - hz_edges[:n_mels])
    return (filters * enorm[None, :]).astype(np.float32)


def log_mel(audio, device: torch.device | str = "cpu") -> torch.Tensor:
    """Features of one clip: float32 [n_mels, frames] with frames = floor(max(n, 8000) / 160)."""
    wave = torch.as_tensor(np.asarray(audio, dtype=np.float32), device=device)
    if wave.ndim != 1:
        raise ValueError(f"expected mono audio as a 1-D array, got shape {tuple(wave.shape)}")
    if wave.numel() < MIN_SAMPLES:
        wave = torch.nn.functional.pad(wave, (0, MIN_SAMPLES - wave.numel()))
    window = torch.hann_window(N_FFT, device=device)
    stft = torch.stft(wave, N_FFT, HOP, window=window, return_complex=True)
    power = stft[..., :-1].abs() ** 2                             # [freqs, frames]
    filters = torch.from_numpy(mel_filters()).to(device)
    mel = filters.T @ power                                       # [n_mels, frames]
    log_spec = torch.clamp(mel, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def num_frames(num_samples: int) -> int:
    return max(num_samples, MIN_SAMPLES) // HOP
