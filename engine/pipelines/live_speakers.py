"""Speaker labels for a live stream: each committed utterance is labelled as it commits.

Online clustering against the speakers heard so far: an utterance's audio is embedded with the
GE2E encoder (the mean of its 1.5 s windows) when the stream ends it, and on commit it joins the
speaker whose running centroid is most similar, or starts a new speaker when none reaches
``threshold``. Labels are ``S1``, ``S2``... in order of first speech and never renumbered.

An early label may be wrong (a first short utterance gives a poor centroid): after every commit
the centroids are recomputed from their utterances, two speakers whose centroids have come
within ``MERGE_SIMILARITY`` are merged (the later into the earlier), and an earlier utterance that now
sits clearly closer to another speaker moves there. Each such correction changes the committed
segment's ``speaker`` in place and is recorded as a ``SpeakerChange`` (``changes``, and the
``on_change`` callback), so a caller can show it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.network.features import SAMPLE_RATE

# One utterance against another (the first utterances of a speaker are all a centroid has): in a
# 2-voice espeak stream the same voice gave 0.69-0.90, two voices 0.50-0.64. Real voices on one
# telephone line sit closer (the pyannote sample's two speakers: 0.85 between their mean voices),
# so this suits clearly different voices; a caller may pass another threshold.
DEFAULT_THRESHOLD = 0.72
# Two speakers merge only when their centroids are this close: an utterance holding two voices
# (a turn change inside too short a pause) pulls centroids together, and two espeak voices 0.75
# apart were merged at the new-speaker threshold.
MERGE_SIMILARITY = 0.92
MOVE_MARGIN = 0.03        # an earlier utterance moves only when the other speaker is this much closer
MIN_EMBED_S = 0.4         # shorter utterances get the nearest speaker and do not shape centroids


@dataclass(frozen=True)
class SpeakerChange:
    """A committed utterance's speaker was corrected: ``index`` into the stream's ``committed``."""

    index: int
    old: str
    new: str


def _unit(x: np.ndarray) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), 1e-8)


class LiveSpeakers:
    """Online speaker labels for one stream (see the module docstring)."""

    def __init__(self, embedder, threshold: float = DEFAULT_THRESHOLD, window_s: float = 1.5,
                 hop_s: float = 0.75):
        if not 0.0 < float(threshold) < 1.0:
            raise ValueError(f"speaker threshold must be between 0 and 1, got {threshold!r}")
        self.embedder = embedder
        self.threshold = float(threshold)
        self._window, self._hop = int(window_s * SAMPLE_RATE), int(hop_s * SAMPLE_RATE)
        self._heard: dict[int, tuple[np.ndarray | None, float]] = {}   # id(final) -> (embedding, seconds)
        self._items: list[tuple[int, np.ndarray | None, float]] = []  # (committed index, embedding, seconds)
        self._labels: list[str] = []                                  # parallel to _items
        self._segments: dict[int, object] = {}                        # committed index -> Segment
        self._count = 0
        self.changes: list[SpeakerChange] = []
        self.on_change: Callable[[SpeakerChange], None] | None = None

    # ---------------------------------------------------------------- stream hooks
    def hear(self, key, samples: np.ndarray) -> None:
        """An utterance ended: embed its audio now (its samples are not kept)."""
        samples = np.asarray(samples, dtype=np.float32)
        seconds = len(samples) / SAMPLE_RATE
        self._heard[id(key)] = (self.embed(samples) if seconds >= MIN_EMBED_S else None, seconds)

    def resolved(self, key, committed: list) -> None:
        """``key``'s final pass resolved; when it committed, its segment is ``committed[-1]``."""
        embedding, seconds = self._heard.pop(id(key), (None, 0.0))
        segment = getattr(key, "segment", None)
        if segment is None or not committed or committed[-1] is not segment:
            return
        self.commit(len(committed) - 1, segment, embedding, seconds)

    # ---------------------------------------------------------------- the clustering
    def embed(self, samples: np.ndarray) -> np.ndarray:
        """The unit mean GE2E embedding of one utterance's windows."""
        n = len(samples)
        if n <= self._window + self._hop // 2:
            windows = [(0, n)]
        else:
            windows = [(s, s + self._window) for s in range(0, n - self._window + 1, self._hop)]
        return _unit(np.asarray(self.embedder.embed(samples, windows), np.float64).mean(0))

    def commit(self, index: int, segment, embedding: np.ndarray | None, seconds: float) -> str:
        """Label ``segment`` (committed at ``index``) and correct earlier labels; its label."""
        centroids = self._centroids()
        if embedding is None:                     # too short to tell: the nearest, or the last speaker
            label = self._labels[-1] if self._labels else self._new()
        elif centroids:
            names = list(centroids)
            sims = np.array([embedding @ centroids[k] for k in names])
            best = int(np.argmax(sims))
            label = names[best] if sims[best] >= self.threshold else self._new()
        else:
            label = self._new()
        self._items.append((index, embedding, seconds))
        self._labels.append(label)
        self._segments[index] = segment
        segment.speaker = label
        self._correct()
        return segment.speaker

    @property
    def speakers(self) -> list[str]:
        """The labels in use, in order of first speech."""
        return list(dict.fromkeys(self._labels))

    def _new(self) -> str:
        self._count += 1
        return f"S{self._count}"

    def _sums(self) -> dict[str, np.ndarray]:
        sums: dict[str, np.ndarray] = {}
        for (_, emb, seconds), label in zip(self._items, self._labels):
            if emb is not None:
                sums[label] = sums.get(label, 0) + emb * max(seconds, 0.1)
        return sums

    def _centroids(self) -> dict[str, np.ndarray]:
        return {k: _unit(v) for k, v in self._sums().items()}

    def _correct(self) -> None:
        for _ in range(2 * len(self._labels)):   # each pass changes something or ends the loop
            sums = self._sums()
            centroids = {k: _unit(v) for k, v in sums.items()}
            names = sorted(centroids, key=self._labels.index)
            merge = next(((a, b) for i, a in enumerate(names) for b in names[i + 1:]
                          if centroids[a] @ centroids[b] >= max(self.threshold, MERGE_SIMILARITY)), None)
            if merge is not None:
                self._relabel([k for k, lab in enumerate(self._labels) if lab == merge[1]], merge[0])
                continue
            if not self._move_one(sums, centroids, names):
                return

    def _move_one(self, sums, centroids, names) -> bool:
        """Move the first earlier utterance that is clearly closer to another speaker than to the
        rest of its own (its own centroid without it); a speaker's only utterance moves when
        another speaker is within the threshold."""
        for k, (_, emb, seconds) in enumerate(self._items):
            if emb is None or len(names) < 2:
                continue
            own = self._labels[k]
            rest = sums[own] - emb * max(seconds, 0.1)
            alone = float(np.linalg.norm(rest)) < 1e-6
            own_sim = -np.inf if alone else float(emb @ _unit(rest))
            others = [n for n in names if n != own]
            best = max(others, key=lambda n: emb @ centroids[n])
            best_sim = float(emb @ centroids[best])
            if (alone and best_sim >= self.threshold) or (not alone and best_sim >= own_sim + MOVE_MARGIN):
                self._relabel([k], best)
                return True
        return False

    def _relabel(self, positions: list[int], label: str) -> None:
        for k in positions:
            old = self._labels[k]
            if old == label:
                continue
            self._labels[k] = label
            index = self._items[k][0]
            self._segments[index].speaker = label
            change = SpeakerChange(index, old, label)
            self.changes.append(change)
            if self.on_change is not None:
                self.on_change(change)


def stream_speakers(engine, threshold: float | None = None) -> LiveSpeakers:
    """LiveSpeakers with the engine's embedder (``speaker_embedder``, else GE2E from
    ``speaker_model``); raises SpeakerModelMissing with how to get the weights."""
    from engine.pipelines.diarize import shared_embedder

    embedder = engine.speaker_embedder or shared_embedder(engine.speaker_model)
    return LiveSpeakers(embedder, DEFAULT_THRESHOLD if threshold is None else threshold)
