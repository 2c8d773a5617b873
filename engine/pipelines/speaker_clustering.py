"""Grouping speaker embeddings into speakers: average-linkage clustering on cosine similarity.

Embeddings are first centred on the file's mean voice. With a fixed count N, the merging is
stopped at N..N+6 clusters, the N biggest keep their centroids, and the grouping with the best
silhouette wins. With ``None``, the count (1-8) comes from the eigengap of the windows'
neighbour graph (speaker_count) and is grouped the same way, one speaker when that grouping's
silhouette does not beat ``threshold``; clusters holding less than ``min_share`` of the speech are folded
into their nearest neighbour (a cough, a laugh, a window straddling two voices). Every window
then goes to its nearest centroid, refined a few times.
"""
from __future__ import annotations

import numpy as np

MAX_DIRECT = 1200        # windows clustered directly; more are assigned to the centroids found


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-8)


def _agglomerate(emb: np.ndarray, weights: np.ndarray, counts: set[int]) -> dict[int, np.ndarray]:
    """Cluster index per row of ``emb`` (unit rows) by average linkage, for each count in ``counts``."""
    n = len(emb)
    sim = emb @ emb.T
    np.fill_diagonal(sim, -np.inf)
    size = weights.astype(np.float64).copy()
    alive = np.ones(n, bool)
    members = [[i] for i in range(n)]
    out: dict[int, np.ndarray] = {}
    count = n
    while True:
        if count in counts:
            labels = np.empty(n, int)
            for k, i in enumerate(np.flatnonzero(alive)):
                labels[members[i]] = k
            out[count] = labels
        if count <= min(counts):
            return out
        a, b = divmod(int(np.argmax(sim)), n)
        # Lance-Williams update for average linkage, weighted by speech duration
        merged = (size[a] * sim[a] + size[b] * sim[b]) / (size[a] + size[b])
        sim[a], sim[:, a] = merged, merged
        sim[a, a] = -np.inf
        sim[b], sim[:, b] = -np.inf, -np.inf
        size[a] += size[b]
        members[a] += members[b]
        members[b] = []
        alive[b] = False
        count -= 1


def silhouette(emb: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> float:
    """Weighted mean silhouette with cosine distance (-1 bad .. 1 well separated)."""
    k = labels.max() + 1
    if k < 2:
        return 0.0
    dist = 1.0 - emb @ emb.T
    w = weights.astype(np.float64)
    sums = np.stack([(dist[:, labels == c] * w[labels == c]).sum(1) for c in range(k)], 1)
    mass = np.array([w[labels == c].sum() for c in range(k)])
    idx = np.arange(len(emb))
    own_mass = mass[labels] - w                      # the point itself does not count
    own = sums[idx, labels] / np.maximum(own_mass, 1e-8)
    per = sums / mass
    per[idx, labels] = np.inf
    other = per.min(1)
    s = np.where(own_mass > 1e-8, (other - own) / np.maximum(np.maximum(own, other), 1e-8), 0.0)
    return float((s * w).sum() / w.sum())


def _fixed_count(emb: np.ndarray, w: np.ndarray, num: int, min_share: float) -> np.ndarray:
    """``num`` clusters. Merging is stopped at each count from ``num`` to ``num + 6``; the
    ``num`` largest clusters of each keep their centroids and every window goes to the
    nearest; the grouping with the best silhouette wins. So an odd window (a cough, a window
    straddling two voices) never takes a speaker's place, and a speaker with little speech
    is not swallowed by a close voice."""
    counts = set(range(num, min(num + 6, len(emb)) + 1))
    best, best_score = None, -np.inf
    for k, lab in sorted(_agglomerate(emb, w, counts).items()):
        share = np.array([w[lab == c].sum() for c in range(k)])
        big = np.argsort(-share)[:num]
        cent = _unit(np.stack([(emb[lab == c] * w[lab == c, None]).sum(0) for c in big]))
        labels = np.argmax(emb @ cent.T, axis=1)
        for _ in range(3):
            if len(set(labels.tolist())) < num:
                break
            cent = _centroids(emb, w, labels)
            labels = np.argmax(emb @ cent.T, axis=1)
        score = silhouette(emb, labels, w) if len(set(labels.tolist())) == num else -np.inf
        if score > best_score:
            best, best_score = labels, score
    return best if best is not None else np.zeros(len(emb), int)


def _automatic_count(emb: np.ndarray, w: np.ndarray, threshold: float, min_share: float,
                     max_speakers: int) -> np.ndarray:
    """Labels for a count found from the data: the eigengap of the windows' neighbour graph
    (speaker_count), grouped as for a fixed count; one speaker when that grouping's silhouette
    stays under ``threshold``. Too few windows for the graph: the best silhouette over the
    average-linkage cuts."""
    from engine.pipelines.speaker_count import eigengap_count

    count = eigengap_count(emb, min(max_speakers, len(emb)))
    if count is None:
        options = _agglomerate(emb, w, set(range(1, min(max_speakers, len(emb)) + 1)))
        scores = {k: silhouette(emb, lab, w) for k, lab in options.items() if k > 1}
        best = max(scores, key=scores.get) if scores else 1
        return options[best] if scores and scores[best] >= threshold else options[1]
    if count < 2:
        return np.zeros(len(emb), int)
    labels = _fixed_count(emb, w, count, min_share)
    return labels if silhouette(emb, labels, w) >= threshold else np.zeros(len(emb), int)


def _centroids(emb: np.ndarray, weights: np.ndarray, labels: np.ndarray) -> np.ndarray:
    k = labels.max() + 1
    return _unit(np.stack([(emb[labels == c] * weights[labels == c, None]).sum(0) for c in range(k)]))


def cluster(embeddings: np.ndarray, weights=None, num_speakers: int | None = None,
            threshold: float = 0.1, min_share: float = 0.04, center: bool = True,
            max_speakers: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Speaker index per embedding (0 = the first to speak) and the speakers' unit centroids.

    ``weights`` (seconds of speech per window) weigh centroids and the ``min_share`` rule.

    Raises:
        ValueError: ``num_speakers`` below 1.
    """
    emb = _unit(np.asarray(embeddings, dtype=np.float32))
    n = len(emb)
    w = np.ones(n, np.float32) if weights is None else np.asarray(weights, dtype=np.float32)
    if num_speakers is None and n >= 2:
        from engine.pipelines.speaker_count import one_voice

        if one_voice(emb, w):
            return np.zeros(n, int), _centroids(emb, w, np.zeros(n, int))
    if center and n > 1:
        # GE2E vectors of any two voices are close (cosine 0.8-0.95, all positive); taking the
        # file's mean voice away leaves what tells its speakers apart
        emb = _unit(emb - (emb * w[:, None]).sum(0) / w.sum())
    if num_speakers is not None and num_speakers < 1:
        raise ValueError(f"num_speakers must be at least 1, got {num_speakers}")
    if n == 0:
        return np.zeros(0, int), np.zeros((0, emb.shape[1] if emb.ndim == 2 else 0), np.float32)
    if n == 1:
        return np.zeros(1, int), emb.copy()
    pick = np.arange(n) if n <= MAX_DIRECT else np.linspace(0, n - 1, MAX_DIRECT).astype(int)
    labels = np.zeros(n, int)
    if num_speakers:
        labels[pick] = _fixed_count(emb[pick], w[pick], min(num_speakers, len(pick)), min_share)
    else:
        labels[pick] = _automatic_count(emb[pick], w[pick], threshold, min_share, max_speakers)
    cent = _centroids(emb[pick], w[pick], labels[pick])
    labels = np.argmax(emb @ cent.T, axis=1)
    if num_speakers is None:           # fold the tiny clusters into their nearest neighbours
        while len(cent) > 1:
            share = np.array([w[labels == c].sum() for c in range(len(cent))]) / w.sum()
            small = int(np.argmin(share))
            if share[small] >= min_share:
                break
            cent = np.delete(cent, small, axis=0)
            labels = np.argmax(emb @ cent.T, axis=1)
    for _ in range(3):                 # a few refinement passes: centroids from their windows
        keep = [c for c in range(len(cent)) if (labels == c).any()]
        cent = _centroids(emb, w, np.searchsorted(keep, labels)) if keep else cent
        labels = np.argmax(emb @ cent.T, axis=1)
    # number speakers by first appearance
    order = list(dict.fromkeys(labels.tolist()))
    remap = {old: new for new, old in enumerate(order)}
    labels = np.array([remap[x] for x in labels])
    cent = cent[order]
    return labels, cent
