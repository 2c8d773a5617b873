"""How many speakers: the eigengap of a pruned nearest-neighbour graph of the embeddings.

Each window is joined to its ``p`` most similar windows (a 0/1 graph, made symmetric); the
graph Laplacian of k well separated voices has k eigenvalues near zero and then a jump, so
the count is where the largest gap between consecutive eigenvalues is. ``p`` is chosen per
file as the one whose gap is largest for its size (Park et al., 2019, "Auto-tuning spectral
clustering for speaker diarization using normalized maximum eigengap"), so no distance
threshold has to suit every recording. Silhouette over average-linkage cuts (the previous
rule) prefers the top split of a hierarchy: four voices that form two pairs came out as two.
"""
from __future__ import annotations

import numpy as np

MIN_WINDOWS = 8          # fewer windows: the graph says nothing; the caller's fallback decides


def _laplacian_eigenvalues(sim: np.ndarray, p: int) -> np.ndarray:
    """The whole spectrum, ascending, of the Laplacian of the p-nearest-neighbour graph."""
    n = len(sim)
    graph = np.zeros((n, n), np.float64)
    nearest = np.argpartition(-sim, p, axis=1)[:, :p]
    np.put_along_axis(graph, nearest, 1.0, axis=1)
    graph = (graph + graph.T) / 2
    laplacian = np.diag(graph.sum(1)) - graph
    return np.linalg.eigvalsh(laplacian)


def eigengap_count(embeddings: np.ndarray, max_speakers: int = 8) -> int | None:
    """The number of speakers among unit ``embeddings`` (rows), 1..max_speakers, or None when
    there are too few windows to tell."""
    emb = np.asarray(embeddings, dtype=np.float64)
    n = len(emb)
    if n < MIN_WINDOWS:
        return None
    sim = emb @ emb.T
    np.fill_diagonal(sim, np.inf)                 # every window is its own nearest neighbour
    top = min(max_speakers, n - 2)
    best_ratio, best_k = np.inf, None
    for p in sorted({max(2, int(n * f)) for f in np.linspace(0.02, 0.25, 12)}):
        if p >= n - 1:
            continue
        ev = _laplacian_eigenvalues(sim, p)
        gaps = np.diff(ev[:top + 2])[:top]
        k = int(np.argmax(gaps)) + 1
        # The gap relative to the largest eigenvalue (Park et al.'s normalisation). Relative to
        # the (top+2)-th, a graph of few neighbours that splits one voice into two components
        # looked best on some files and the count changed with the last bit of dither.
        gap = gaps[k - 1] / max(ev[-1], 1e-10)
        ratio = p / max(gap, 1e-10)               # few neighbours and a clear gap is best
        if ratio < best_ratio:
            best_ratio, best_k = ratio, k
    return best_k


# Mean cosine of GE2E windows to their file's mean voice: 0.874-0.894 for one voice (each
# speaker of the pyannote sample alone, one espeak voice), 0.797-0.846 for two to four voices
# (the sample, espeak conversations). Centred embeddings cannot tell: centring one voice
# leaves only noise, which any count can split.
ONE_VOICE_SIMILARITY = 0.86


def one_voice(embeddings: np.ndarray, weights: np.ndarray) -> bool:
    """True when the unit ``embeddings`` (not centred) sit so close to their mean that they
    are one speaker."""
    emb = np.asarray(embeddings, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    mean = (emb * w[:, None]).sum(0)
    mean /= max(np.linalg.norm(mean), 1e-12)
    return float(((emb @ mean) * w).sum() / w.sum()) >= ONE_VOICE_SIMILARITY
