"""Who spoke when: speaker embeddings over speech windows, clustered into speakers.

A stage beside the aligner: the file job hands it each speech chunk as it is cut (only
small embeddings are kept, never the samples), and at the end of the file it clusters them
and returns turns, which ``engine.text.speakers`` merges into the transcript. Speech inside
a chunk is found with Silero VAD; windows of 1.5 s every 0.75 s are embedded (GE2E by
default); every 50 ms frame of speech takes the speaker its covering windows are closest to.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.network.features import SAMPLE_RATE
from engine.pipelines.speaker_clustering import cluster
from engine.text.speakers import SpeakerTurn, check_speakers  # noqa: F401 (check_speakers re-exported)

FRAME = 0.05          # seconds: the resolution of speaker changes


@dataclass(frozen=True)
class DiarizationOptions:
    """How speech is cut into windows and grouped.

    Attributes:
        num_speakers: a fixed count, or None to find it (the count whose clusters separate best).
        window_s: length of one embedding window; shorter speech regions get one window.
        hop_s: step between windows inside a region.
        threshold: the silhouette score two or more clusters need to beat one speaker (automatic count).
        min_window_s: windows shorter than this do not shape the clusters (they are
            labelled by their nearest speaker afterwards).
        min_turn_s: a speaker change lasting less than this inside a region is smoothed away.
    """

    num_speakers: int | None = None
    window_s: float = 1.5
    hop_s: float = 0.75
    threshold: float = 0.1
    min_window_s: float = 0.6
    min_turn_s: float = 0.4

    def __post_init__(self):
        if self.num_speakers is not None and (not isinstance(self.num_speakers, int) or self.num_speakers < 1):
            raise ValueError(f"num_speakers must be a whole number of at least 1 or None, got "
                             f"{self.num_speakers!r}")
        if not 0.3 <= self.window_s <= 10 or not 0.05 <= self.hop_s <= self.window_s:
            raise ValueError("window_s must be 0.3-10 s and hop_s between 0.05 s and window_s")


class GE2EEmbedder:
    """Embeds windows with the pretrained GE2E voice encoder (engine.network.speaker_encoder)."""

    name = "ge2e"

    def __init__(self, weights=None, data_dir=None, device="cpu"):
        from engine.network.speaker_encoder import load_encoder

        self.model = load_encoder(weights, data_dir, device)

    def embed(self, samples: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
        """Unit embeddings [len(windows), 256] of ``samples[a:b]`` for each window."""
        import torch

        from engine.network.speaker_encoder import embed_windows, ge2e_mels, raise_volume

        if not windows:
            return np.zeros((0, 256), np.float32)
        mels, spans, pos = [], [], 0
        for a, b in windows:
            m = ge2e_mels(raise_volume(samples[a:b]))
            mels.append(m)
            spans.append((pos, pos + len(m)))
            pos += len(m)
        return embed_windows(self.model, torch.cat(mels), spans)


def _windows(region: tuple[int, int], window: int, hop: int) -> list[tuple[int, int]]:
    a, b = region
    if b - a <= window + hop // 2:
        return [(a, b)]
    starts = list(range(a, b - window + 1, hop))
    if starts[-1] + window < b:
        starts.append(b - window)
    return [(s, s + window) for s in starts]


class Diarizer:
    """Collects speech windows chunk by chunk (``add``), then labels speakers (``finish``)."""

    def __init__(self, embedder, options: DiarizationOptions | None = None, detector=None):
        self.embedder = embedder
        self.options = options or DiarizationOptions()
        self._detector = detector
        self._windows: list[tuple[float, float]] = []     # seconds in file time
        self._regions: list[tuple[float, float]] = []
        self._embeddings: list[np.ndarray] = []
        self.voices: dict[str, np.ndarray] = {}           # label -> unit voice, set by finish()

    def _speech(self, samples: np.ndarray) -> list[tuple[int, int]]:
        if self._detector is None:
            from engine.audio.vad import SpeechDetector

            self._detector = SpeechDetector.shared()
        return self._detector.speech_regions(samples)

    def add(self, samples: np.ndarray, start_s: float = 0.0, regions=None) -> None:
        """Take one stretch of audio (float32 16 kHz) that starts at ``start_s`` in the file;
        ``regions`` are its speech ranges in samples (found with Silero VAD when None)."""
        samples = np.asarray(samples, dtype=np.float32)
        regions = self._speech(samples) if regions is None else regions
        o = self.options
        window, hop = int(o.window_s * SAMPLE_RATE), int(o.hop_s * SAMPLE_RATE)
        spans = [w for r in regions if r[1] - r[0] >= int(0.2 * SAMPLE_RATE) for w in _windows(r, window, hop)]
        if not spans:
            return
        self._embeddings.append(self.embedder.embed(samples, spans))
        self._windows += [(start_s + a / SAMPLE_RATE, start_s + b / SAMPLE_RATE) for a, b in spans]
        self._regions += [(start_s + a / SAMPLE_RATE, start_s + b / SAMPLE_RATE) for a, b in regions
                          if b - a >= int(0.2 * SAMPLE_RATE)]

    def add_chunk(self, samples: np.ndarray, start: int, end: int, chunker=None) -> None:
        """A file job's chunk ``[start, end)`` (sample indices): its speech regions come from the
        job's VAD chunker (``chunker.regions``) instead of a second VAD pass."""
        regions = None
        if chunker is not None and getattr(chunker, "regions", None) is not None:
            regions = [(max(a, start) - start, min(b, end) - start) for a, b in chunker.regions
                       if min(b, end) > max(a, start)]
            last = max((b for _, b in chunker.regions), default=start)
            if last < end:                   # a region still open when the chunk was cut
                regions.append((max(last, start) - start, end - start))
        self.add(samples, start / SAMPLE_RATE, regions)

    def reset(self) -> None:
        """Forget what was added (the file starts again)."""
        self._windows, self._regions, self._embeddings = [], [], []

    def label(self, transcript) -> None:
        """Put speakers on ``transcript``'s segments and words (splitting at speaker changes), and
        each label's voice in ``transcript.voices`` (4 decimals: a few KB per speaker)."""
        from engine.text.speakers import label_transcript

        label_transcript(transcript, self.finish())
        transcript.voices = {label: [round(float(x), 4) for x in v] for label, v in self.voices.items()}

    def finish(self, num_speakers: int | None = None) -> list[SpeakerTurn]:
        """Turns labelled ``S1``, ``S2``... in order of first speech; ``num_speakers`` overrides
        the options' count."""
        if not self._windows:
            return []
        o = self.options
        num = num_speakers if num_speakers is not None else o.num_speakers
        emb = np.concatenate(self._embeddings)
        spans = np.array(self._windows)
        dur = spans[:, 1] - spans[:, 0]
        long = dur >= o.min_window_s
        if long.sum() < 2:
            long[:] = True
        labels, _ = cluster(emb[long], dur[long], num, o.threshold)
        cent = np.stack([emb[long][labels == c].mean(0) for c in range(labels.max() + 1)])
        cent = cent - (emb[long] * dur[long, None]).sum(0) / dur[long].sum() if len(cent) > 1 else cent
        emb = emb - (emb[long] * dur[long, None]).sum(0) / dur[long].sum() if len(cent) > 1 else emb
        emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-8)
        cent = cent / np.maximum(np.linalg.norm(cent, axis=1, keepdims=True), 1e-8)
        sim = emb @ cent.T                                   # [windows, speakers]
        turns: list[SpeakerTurn] = []
        order = np.argsort(spans[:, 0])
        spans, sim = spans[order], sim[order]
        first = 0
        for ra, rb in sorted(self._regions):
            frames = np.arange(ra, rb, FRAME) + FRAME / 2
            score = np.zeros((len(frames), len(cent)))
            while first < len(spans) and spans[first, 1] <= ra:
                first += 1
            for k in range(first, len(spans)):
                a, b = spans[k]
                if a >= rb:
                    break
                inside = (frames >= a) & (frames < b)
                score[inside] += sim[k]
            labels = np.argmax(score, axis=1)
            turns += self._runs(frames, labels, ra, rb)
        turns = self._renumber(turns)
        self.voices = self._voices(turns)
        return turns

    def _voices(self, turns: list[SpeakerTurn]) -> dict[str, np.ndarray]:
        """Each label's voice: the unit mean of the (raw) embeddings of the windows whose middle
        falls in its turns (engine.pipelines.speaker_profiles matches names by them)."""
        emb = np.concatenate(self._embeddings)
        mids = np.array([(a + b) / 2 for a, b in self._windows])
        sums: dict[str, np.ndarray] = {}
        for t in turns:
            inside = (mids >= t.start) & (mids < t.end)
            if inside.any():
                sums[t.speaker] = sums.get(t.speaker, 0) + emb[inside].sum(0)
        return {k: v / max(float(np.linalg.norm(v)), 1e-8) for k, v in sums.items()}

    def _runs(self, frames, labels, ra, rb) -> list[SpeakerTurn]:
        runs = []   # [label, start, end]
        for t, lab in zip(frames, labels):
            if runs and runs[-1][0] == lab:
                runs[-1][2] = t + FRAME / 2
            else:
                runs.append([int(lab), t - FRAME / 2, t + FRAME / 2])
        changed = True
        while changed and len(runs) > 1:      # fold runs shorter than min_turn_s into a neighbour
            changed = False
            k = min(range(len(runs)), key=lambda i: runs[i][2] - runs[i][1])
            if runs[k][2] - runs[k][1] < self.options.min_turn_s:
                j = k - 1 if k > 0 else k + 1
                runs[j][1], runs[j][2] = min(runs[j][1], runs[k][1]), max(runs[j][2], runs[k][2])
                del runs[k]
                merged = []
                for r in runs:
                    if merged and merged[-1][0] == r[0]:
                        merged[-1][2] = r[2]
                    else:
                        merged.append(r)
                runs, changed = merged, True
        runs[0][1], runs[-1][2] = ra, rb
        return [SpeakerTurn(str(lab), round(a, 3), round(b, 3)) for lab, a, b in runs]

    @staticmethod
    def _renumber(turns: list[SpeakerTurn]) -> list[SpeakerTurn]:
        names: dict[str, str] = {}
        for t in turns:
            names.setdefault(t.speaker, f"S{len(names) + 1}")
        return [SpeakerTurn(names[t.speaker], t.start, t.end) for t in turns]


_EMBEDDERS: dict = {}


def shared_embedder(weights=None):
    """One GE2E embedder per weights file for the process (loaded on first use)."""
    from engine.network.speaker_encoder import find_weights

    path = str(find_weights(weights))
    if path not in _EMBEDDERS:
        _EMBEDDERS[path] = GE2EEmbedder(path)
    return _EMBEDDERS[path]


def file_diarizer(engine, speakers) -> Diarizer:
    """A Diarizer for one file job: ``speakers`` is "auto" or a count; the embedder is the
    engine's ``speaker_embedder`` when set, else GE2E from ``engine.speaker_model`` (a path,
    or None to look where ``find_weights`` does).

    Raises:
        SpeakerModelMissing: no speaker model weights; the message says how to get them.
    """
    speakers = check_speakers(speakers)
    embedder = engine.speaker_embedder or shared_embedder(engine.speaker_model)
    return Diarizer(embedder, DiarizationOptions(num_speakers=None if speakers == "auto" else speakers))


def diarize(samples, num_speakers: int | None = None, embedder=None, options: DiarizationOptions | None = None,
            detector=None) -> list[SpeakerTurn]:
    """Turns of a whole recording (float32 mono 16 kHz) in one call."""
    diarizer = Diarizer(embedder or GE2EEmbedder(), options, detector)
    diarizer.add(np.asarray(samples, dtype=np.float32))
    return diarizer.finish(num_speakers)
