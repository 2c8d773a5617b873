"""Public result types: what a transcription gives back.

Plain dataclasses with no torch inside, so the UI, the exporters and the
history database can hold them without touching the model.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Word:
    """One word with its time in the audio.

    Attributes:
        text: the word as it appears in the segment text (punctuation kept).
        start: start time in seconds from the beginning of the file or stream.
        end: end time in seconds; ``end >= start``.
        speaker: the speaker label (e.g. ``"S1"``) when speakers were labelled, else None.
    """

    text: str
    start: float
    end: float
    speaker: str | None = None


@dataclass
class Segment:
    """A stretch of speech transcribed as one unit (a VAD chunk or an utterance).

    Attributes:
        start: start time in seconds.
        end: end time in seconds.
        text: the transcribed text of this stretch.
        words: word timestamps when an aligner ran, else an empty list.
        language: the language the model detected or was told, if any.
        timing: ``"aligned"`` when start, end and word times come from the forced
            aligner, ``"estimated"`` when they were placed from the audio without it.
        speaker: the speaker label (e.g. ``"S1"``) when speakers were labelled, else None.
    """

    start: float
    end: float
    text: str
    words: list[Word] = field(default_factory=list)
    language: str | None = None
    timing: str = "estimated"
    speaker: str | None = None


@dataclass
class Transcript:
    """A whole file's transcription.

    Attributes:
        text: all segment texts joined.
        language: the main language (the most frequent one over segments).
        duration: audio duration in seconds.
        segments: the segments in time order.
        model: the model folder or id that produced it.
        words_note: why words carry no timestamps, when they don't (no aligner,
            unsupported language); empty when word times are present.
        audio_track: the audio track transcribed (1-based) when the file has several.
        notes: what a user should know about this result: the track used, audio
            brought back into range, the model stopped for repeating itself.
        speaker_names: names the user gave to speaker labels (``{"S1": "Alice"}``);
            a label without a name shows as itself.
        voices: each speaker label's voice (the unit mean GE2E embedding, 256 floats) when
            speakers were labelled: a later run of the same file carries the user's names to
            the same voices, and a remembered voice names a later file's speaker
            (engine.pipelines.speaker_profiles). Not part of the exports.
    """

    text: str
    language: str | None
    duration: float
    segments: list[Segment] = field(default_factory=list)
    model: str = ""
    words_note: str = ""
    audio_track: int | None = None
    notes: list[str] = field(default_factory=list)
    speaker_names: dict[str, str] = field(default_factory=dict)
    voices: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Transcript":
        segments = [
            Segment(
                start=s["start"], end=s["end"], text=s["text"],
                words=[Word(**w) for w in s.get("words", [])],
                language=s.get("language"),
                # transcripts saved before the field existed: word times meant the aligner ran
                timing=s.get("timing") or ("aligned" if s.get("words") else "estimated"),
                speaker=s.get("speaker"),
            )
            for s in data.get("segments", [])
        ]
        return cls(
            text=data.get("text", ""), language=data.get("language"),
            duration=data.get("duration", 0.0), segments=segments,
            model=data.get("model", ""), words_note=data.get("words_note", ""),
            audio_track=data.get("audio_track"), notes=list(data.get("notes") or []),
            speaker_names=dict(data.get("speaker_names") or {}),
            voices={str(k): [float(x) for x in v] for k, v in (data.get("voices") or {}).items()},
        )
