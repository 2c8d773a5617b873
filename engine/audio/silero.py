"""The Silero VAD network: loading the packaged model and scoring 512-sample windows.

Silero's encoder has no memory, so windows are scored in batches and only the small
LSTM runs in order; ``_ProbStream`` turns pushed audio into window probabilities.
"""
from __future__ import annotations

import warnings

import numpy as np

SAMPLE_RATE = 16000
WINDOW = 512          # samples per Silero window at 16 kHz
CONTEXT = 64          # samples of the previous window Silero prepends
GROUP = 64            # windows per scoring batch in file mode (~2 s)


def _load_silero():
    """Import silero-vad and load its bundled TorchScript model (offline)."""
    import torch

    # Importing silero_vad.model calls torch.set_num_threads(1) for the whole process, which
    # would leave the engine on one core after the first file: keep the caller's count.
    threads = torch.get_num_threads()
    try:
        try:
            from silero_vad import load_silero_vad
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("voice activity detection needs the 'silero-vad' package "
                              "(pip install silero-vad)") from exc
        with warnings.catch_warnings():   # silero and torch.jit warn about their own deprecations
            warnings.simplefilter("ignore", DeprecationWarning)
            return load_silero_vad()
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


class _SileroNet:
    """Stateless scoring with the Silero model: the caller holds the LSTM state.

    Uses the model's parts directly (batched STFT/encoder, LSTM over the
    sequence). If that path is missing or disagrees with the packaged model,
    falls back to one private model copy per stream, scored window by window.
    """

    def __init__(self):
        import torch
        self._torch = torch
        self._model = _load_silero().eval()
        try:
            inner = self._model._model
            rnn = inner.decoder.rnn
            self._lstm = torch.nn.LSTM(rnn.weight_ih.shape[1], rnn.weight_hh.shape[1],
                                       batch_first=True)
            with torch.no_grad():
                for ours, theirs in (("weight_ih_l0", rnn.weight_ih), ("weight_hh_l0", rnn.weight_hh),
                                     ("bias_ih_l0", rnn.bias_ih), ("bias_hh_l0", rnn.bias_hh)):
                    getattr(self._lstm, ours).copy_(theirs)
            self._inner = inner
            self.batched = self._self_check()
        except Exception:  # noqa: BLE001 - any mismatch in internals means: use the safe path
            self.batched = False

    def _self_check(self) -> bool:
        """Compare the batched path with the packaged model on a short test signal."""
        rng = np.random.default_rng(0)
        t = np.arange(WINDOW * 12) / SAMPLE_RATE
        sig = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
        ours, _ = self.score(sig.reshape(-1, WINDOW), None)
        ref = self.reference_model()
        with self._torch.inference_mode():
            theirs = [ref(self._torch.from_numpy(w.copy()), SAMPLE_RATE).item()
                      for w in sig.reshape(-1, WINDOW)]
        return bool(np.max(np.abs(ours - np.asarray(theirs))) < 1e-3)

    def reference_model(self):
        """A fresh copy of the packaged model with its own internal state."""
        return _load_silero().eval()

    def score(self, frames: np.ndarray, state):
        """Score windows ``frames`` [N, 512] continuing from ``state``; return (probs, state)."""
        torch = self._torch
        with torch.inference_mode():
            if state is None:
                zeros = torch.zeros(1, 1, self._lstm.hidden_size)
                state = (torch.zeros(CONTEXT), zeros, zeros)
            ctx, h, c = state
            flat = torch.cat([ctx, torch.from_numpy(np.ascontiguousarray(frames).reshape(-1))])
            x = flat.unfold(0, WINDOW + CONTEXT, WINDOW)
            feats = self._inner.encoder(self._inner.run_extractors(x)).squeeze(-1)
            y, (h, c) = self._lstm(feats.unsqueeze(0), (h, c))
            out = self._inner.decoder.decoder(y[0].unsqueeze(-1)).squeeze(1).mean(1)
            return out.numpy().astype(np.float32), (flat[-CONTEXT:].clone(), h, c)


class _ProbStream:
    """Speech probability per 512-sample window for audio arriving in blocks."""

    def __init__(self, net: _SileroNet, group: int | None):
        self._net = net
        self._group = group
        self._pending = np.zeros(0, np.float32)
        self._state = None
        self._ref = None if net.batched else net.reference_model()

    def _score(self, frames: np.ndarray) -> np.ndarray:
        """Score whole windows with whichever path the net supports."""
        if len(frames) == 0:
            return np.zeros(0, np.float32)
        if self._ref is None:
            probs, self._state = self._net.score(frames, self._state)
            return probs
        torch = self._net._torch
        with torch.inference_mode():
            return np.array([self._ref(torch.from_numpy(f.copy()), SAMPLE_RATE).item()
                             for f in frames], np.float32)

    def push(self, block: np.ndarray) -> np.ndarray:
        """Add samples; return the probabilities of the windows completed so far."""
        self._pending = np.concatenate([self._pending, block])
        n = len(self._pending) // WINDOW
        step = (self._group or max(n, 1)) * WINDOW
        n = n * WINDOW - (n * WINDOW) % step
        out = [self._score(self._pending[i:i + step].reshape(-1, WINDOW)) for i in range(0, n, step)]
        self._pending = self._pending[n:]
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def flush(self) -> np.ndarray:
        """Score what is left, zero-padding the last partial window (as Silero does)."""
        tail = self._pending
        self._pending = np.zeros(0, np.float32)
        if len(tail) == 0:
            return np.zeros(0, np.float32)
        pad = (-len(tail)) % WINDOW
        return self._score(np.concatenate([tail, np.zeros(pad, np.float32)]).reshape(-1, WINDOW))
