"""A baseline speaker 'embedding' with no trained model: MFCC means and spreads per window.

Only for the comparison in bench_diarization.py: it shows what the pretrained GE2E encoder adds
over plain spectral statistics (log mel, DCT, mean and standard deviation of 20 coefficients).
"""
from __future__ import annotations

import numpy as np
import torch

from engine.network.speaker_encoder import ge2e_mels


class MFCCEmbedder:
    name = "mfcc"

    def __init__(self, n_coeffs: int = 20):
        n = 40
        k = np.arange(n)
        self.dct = torch.tensor(np.cos(np.pi / n * (k[None, :] + 0.5) * np.arange(n_coeffs)[:, None]),
                                dtype=torch.float32)   # [coeffs, mels]

    def embed(self, samples: np.ndarray, windows) -> np.ndarray:
        out = []
        for a, b in windows:
            mel = ge2e_mels(samples[a:b])                       # [frames, 40] power
            mfcc = torch.log(mel + 1e-6) @ self.dct.T           # [frames, coeffs]
            mfcc = mfcc[:, 1:]                                  # c0 is loudness, not voice
            v = torch.cat([mfcc.mean(0), mfcc.std(0)]).numpy()
            out.append(v / (np.linalg.norm(v) + 1e-8))
        return np.array(out, np.float32)
