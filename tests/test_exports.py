"""Exporters and subtitle cues: what a user sees in the SRT/VTT/JSON/TXT files."""
from __future__ import annotations

import datetime
import errno
import html
import json
import os
import re

import pytest
import srt
import webvtt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.text import exports
from engine.text.cues import Cue, CueOptions, build_cues, words_by_line
from engine.text.exports import (
    FORMATS,
    ExportError,
    export,
    render_filename,
    to_json,
    to_srt,
    to_txt,
    to_vtt,
    write_atomic,
)
from engine.text.types import Segment, Transcript, Word

STAMP = re.compile(r"<(\d\d):(\d\d):(\d\d)\.(\d\d\d)>")


def timed_segment(text: str, start: float, step: float = 0.35, length: float = 0.3,
                  language: str = "en") -> Segment:
    """A segment whose words follow each other every ``step`` seconds."""
    words, t = [], start
    for token in text.split():
        words.append(Word(token, t, t + length))
        t += step
    return Segment(start, words[-1].end, text, words, language)


def make_transcript(*segments: Segment, duration: float | None = None) -> Transcript:
    end = max(s.end for s in segments)
    return Transcript(" ".join(s.text for s in segments), segments[0].language,
                      end + 2.0 if duration is None else duration, list(segments),
                      model="tiny-test")


LONG = ("Hello world. This is a test of local speech recognition, and it should wrap "
        "nicely across lines when it gets long enough to need two of them. Short one. "
        "Then we keep talking for a while so that several cues are needed; each cue "
        "must stay readable, and nothing may overlap the next cue on screen.")


@pytest.fixture
def speech() -> Transcript:
    return make_transcript(
        timed_segment(LONG, 0.5),
        timed_segment("After a long pause, a second segment starts here.", 30.0),
        Segment(40.0, 44.0, "No aligner ran for this part & its <markup>, sadly.", [], "en"),
    )


def ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def td_ms(delta: datetime.timedelta) -> int:
    return round(delta.total_seconds() * 1000)


def vtt_ms(stamp: str) -> int:
    h, m, s = stamp.split(":")
    return round((int(h) * 3600 + int(m) * 60 + float(s)) * 1000)


def check_timeline(cues: list[Cue], duration: float) -> None:
    for cue in cues:
        assert 0 <= cue.start <= cue.end <= duration
    for cue, nxt in zip(cues, cues[1:]):
        assert cue.end <= nxt.start, "cues overlap"
        assert cue.start <= nxt.start


# --- SRT / VTT -------------------------------------------------------------

def test_srt_parses_and_keeps_times_to_the_millisecond(speech):
    cues = build_cues(speech)
    subs = list(srt.parse(to_srt(speech)))
    assert len(subs) == len(cues) > 3
    for sub, cue in zip(subs, cues):
        assert (td_ms(sub.start), td_ms(sub.end)) == (ms(cue.start), ms(cue.end))
        assert sub.content == cue.text
    assert re.search(r"^\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d$", to_srt(speech), re.M)


def test_vtt_parses_and_keeps_times_to_the_millisecond(speech):
    text = to_vtt(speech)
    assert text.startswith("WEBVTT\n\n")
    cues = build_cues(speech)
    captions = webvtt.from_string(text).captions
    assert len(captions) == len(cues)
    for cap, cue in zip(captions, cues):
        assert (vtt_ms(cap.start), vtt_ms(cap.end)) == (ms(cue.start), ms(cue.end))
        assert html.unescape(cap.text) == cue.text


def test_lines_are_short_and_few(speech):
    for cue in build_cues(speech):
        assert 1 <= len(cue.lines) <= 2
        assert all(0 < len(line) <= 42 for line in cue.lines), cue.lines
    for cue in build_cues(speech, CueOptions(max_line_chars=20, max_lines=1)):
        assert len(cue.lines) == 1 and len(cue.lines[0]) <= 20


def test_text_is_kept_in_order(speech):
    shown = " ".join(cue.text.replace("\n", " ") for cue in build_cues(speech))
    assert shown == " ".join(s.text for s in speech.segments)


def test_durations_bounded_and_no_overlap(speech):
    cues = build_cues(speech)
    check_timeline(cues, speech.duration)
    for i, cue in enumerate(cues):
        assert cue.end - cue.start <= 7.0 + 1e-9
        room = cues[i + 1].start - 0.08 if i + 1 < len(cues) else speech.duration
        if cue.end - cue.start < 1.0 - 1e-9:
            assert cue.end == pytest.approx(room), "a short cue must fill the room it has"
    for cue, nxt in zip(cues, cues[1:]):
        assert nxt.start - cue.end >= 0.08 - 1e-9


def test_short_cue_extends_into_silence_but_not_into_next_cue():
    tr = make_transcript(Segment(1.0, 1.3, "Hi.", [Word("Hi.", 1.0, 1.3)]),
                         Segment(1.6, 2.0, "Yo.", [Word("Yo.", 1.6, 2.0)]),
                         Segment(5.0, 5.2, "Bye.", [Word("Bye.", 5.0, 5.2)]), duration=5.5)
    cues = build_cues(tr, CueOptions(max_gap=0.1))
    assert [c.text for c in cues] == ["Hi.", "Yo.", "Bye."]
    assert cues[0].end == pytest.approx(1.6 - 0.08)        # blocked by the next cue
    assert cues[1].end == pytest.approx(2.6)               # stretched to 1 s
    assert cues[2].end == pytest.approx(5.5)               # blocked by the end of the audio


def test_breaks_at_sentence_ends_first():
    tr = make_transcript(timed_segment("This is the first sentence. And here comes a second one.",
                                       0.0, step=0.5, length=0.45))
    assert [c.text.replace("\n", " ") for c in build_cues(tr)] == [
        "This is the first sentence.", "And here comes a second one."]


def test_long_stretch_splits_at_max_duration_and_long_gaps():
    slow = timed_segment("one two three four five six seven eight nine ten", 0.0, step=1.2,
                         length=1.0)
    cues = build_cues(make_transcript(slow))
    assert len(cues) >= 2
    assert all(c.end - c.start <= 7.0 + 1e-9 for c in cues)
    gap = Segment(0, 10, "left right", [Word("left", 0.0, 0.5), Word("right", 2.5, 3.0)])
    assert [c.text for c in build_cues(make_transcript(gap))] == ["left", "right"]


def test_overlong_word_stands_alone():
    word = "Pneumonoultramicroscopicsilicovolcanoconiosis-and-more-letters"
    tr = make_transcript(timed_segment(f"a {word} b", 0.0))
    lines = [line for cue in build_cues(tr) for line in cue.lines]
    assert word in lines
    assert all(len(line) <= 42 for line in lines if line != word)


def test_cue_options_reject_nonsense():
    for bad in [dict(max_line_chars=0), dict(max_lines=-1), dict(min_duration=-1),
                dict(max_duration=0), dict(min_duration=8, max_duration=7),
                dict(min_gap=float("nan")), dict(max_line_chars=4.5)]:
        with pytest.raises(ValueError):
            CueOptions(**bad)


def test_vtt_escapes_and_srt_keeps_raw_text():
    tr = make_transcript(timed_segment("Tom & Jerry <3 a>b", 0.0))
    vtt = to_vtt(tr)
    assert "Tom &amp; Jerry &lt;3 a&gt;b" in vtt
    assert "Tom & Jerry <3 a>b" in to_srt(tr)
    assert "&amp;" in to_vtt(tr, karaoke=True) and "&lt;3" in to_vtt(tr, karaoke=True)


def test_karaoke_timestamps_are_monotonic_inside_cues(speech):
    text = to_vtt(speech, karaoke=True)
    captions = webvtt.from_string(text).captions
    cues = build_cues(speech)
    assert len(captions) == len(cues)
    stamped = 0
    for cap, cue in zip(captions, cues):
        times = [ms((int(h) * 3600 + int(m) * 60 + int(s)) + int(f) / 1000)
                 for h, m, s, f in STAMP.findall(cap.raw_text)]
        assert times == sorted(times)
        assert all(vtt_ms(cap.start) <= t <= vtt_ms(cap.end) for t in times)
        if cue.words:
            assert len(times) == len(cue.words) - 1
            stamped += 1
        assert html.unescape(STAMP.sub("", cap.raw_text)) == cue.text
    assert stamped > 2
    assert "<00:00:00.850>world." in text


# --- no word times, CJK -------------------------------------------------------

def test_segments_without_words_are_split_by_characters():
    text = ("This segment has no word times because no aligner ran, so its text is "
            "shared out over the segment by character count. It is long on purpose.")
    tr = make_transcript(Segment(2.0, 14.0, text, [], "en"), duration=20.0)
    cues = build_cues(tr)
    assert len(cues) >= 2
    assert cues[0].start == pytest.approx(2.0)
    assert all(not c.words for c in cues)
    assert " ".join(c.text.replace("\n", " ") for c in cues) == text
    for cue in cues:
        assert len(cue.lines) <= 2 and all(len(line) <= 42 for line in cue.lines)
    check_timeline(cues, 20.0)
    assert cues[-1].end <= 14.0 + 1e-9 or cues[-1].end - cues[-1].start <= 1.0 + 1e-9


def test_cjk_wraps_by_characters():
    text = "今天天气非常好我们一起去公园散步然后在湖边坐一会儿看看风景再回家吃一顿丰盛的晚饭大家都很开心"
    words = [Word(c, i * 0.18, i * 0.18 + 0.15) for i, c in enumerate(text)]
    chars = Segment(0.0, 9.0, text, words, "zh")
    for tr in (make_transcript(chars), make_transcript(Segment(0.0, 9.0, text, [], "zh")),
               make_transcript(Segment(0.0, 9.0, text, [Word(text, 0.0, 9.0)], "zh"))):
        cues = build_cues(tr, CueOptions(max_line_chars=16))
        assert "".join(c.text.replace("\n", "") for c in cues) == text
        assert all(len(line) <= 16 for c in cues for line in c.lines)
        assert all(len(c.lines) <= 2 for c in cues)
        check_timeline(cues, tr.duration)
    assert next(srt.parse(to_srt(make_transcript(chars)))).content.startswith("今天")


# --- JSON / TXT -------------------------------------------------------------

def test_json_has_nested_words_and_metadata(speech):
    data = json.loads(to_json(speech))
    assert data["language"] == "en" and data["model"] == "tiny-test"
    assert data["duration"] == round(speech.duration, 3)
    assert data["text"] == speech.text
    first = data["segments"][0]
    assert first["words"][0] == {"text": "Hello", "start": 0.5, "end": 0.8}
    assert data["segments"][2]["words"] == []
    cjk = to_json(make_transcript(Segment(0, 1, "你好", [], "zh")))
    assert "你好" in cjk and "\n  " in cjk


def test_txt_with_and_without_timestamps(speech):
    plain = to_txt(speech).splitlines()
    assert plain == [s.text for s in speech.segments]
    stamped = to_txt(speech, timestamps=True).splitlines()
    assert stamped[1] == ("[00:00:30.000 --> 00:00:33.100] "
                          "After a long pause, a second segment starts here.")
    assert stamped[2].startswith("[00:00:40.000 --> 00:00:44.000] No aligner")


def test_empty_transcript_exports():
    tr = Transcript("", None, 0.0, [])
    assert list(srt.parse(to_srt(tr))) == []
    assert webvtt.from_string(to_vtt(tr)).captions == []
    assert json.loads(to_json(tr))["segments"] == []
    assert to_txt(tr) == ""


# --- files ------------------------------------------------------------------

def leftovers(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_export_writes_every_format(speech, tmp_path):
    for fmt, info in FORMATS.items():
        path = export(speech, fmt, tmp_path / "out", "talk")
        assert path == tmp_path / "out" / f"talk.{info.ext}"
        assert path.read_text(encoding="utf-8").strip()
    named = export(speech, "srt", tmp_path, "talk", template="{date}_{stem}_{lang}.{ext}",
                   date=datetime.date(2024, 5, 1))
    assert named.name == "2024-05-01_talk_en.srt"
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "out") == []
    with pytest.raises(ValueError, match="format"):
        export(speech, "docx", tmp_path, "talk")


def test_render_filename():
    day = datetime.date(2024, 5, 1)
    assert render_filename("{stem}.{ext}", stem="talk", fmt="vtt", date=day,
                           language="en") == "talk.vtt"
    assert render_filename("{date}_{stem}_{lang}.{ext}", stem='a/b:c*d?"e"<f>|g', fmt="srt",
                           date=day, language=None) == "2024-05-01_abcdefg_und.srt"
    for bad in ["{stem}.{nope}", "{stem.upper}.{ext}", "{stem", "{0}.{ext}"]:
        with pytest.raises(ValueError):
            render_filename(bad, stem="x", fmt="srt", date=day, language="en")


def test_write_atomic_replaces_and_cleans_up(tmp_path):
    path = tmp_path / "out.srt"
    write_atomic(path, "old")
    write_atomic(path, "nouveau – 新しい")
    assert path.read_text(encoding="utf-8") == "nouveau – 新しい"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("stage", ["fsync", "replace"])
def test_disk_full_keeps_old_file_and_no_temp(tmp_path, monkeypatch, stage):
    path = tmp_path / "out.txt"
    path.write_text("old content", encoding="utf-8")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(exports.os, stage, full)
    with pytest.raises(ExportError) as info:
        write_atomic(path, "new content")
    monkeypatch.undo()
    assert str(path) in str(info.value) and "disk full" in str(info.value)
    assert info.value.errno == errno.ENOSPC and isinstance(info.value, OSError)
    assert path.read_text(encoding="utf-8") == "old content"
    assert leftovers(tmp_path) == []


def test_read_only_folder_names_the_path(tmp_path, monkeypatch):
    real_open = os.open

    def refuse(file, *args, **kwargs):
        if str(file).startswith(str(tmp_path)):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(exports.os, "open", refuse)
    with pytest.raises(ExportError, match=re.escape(f"cannot write {tmp_path / 'talk.srt'}")):
        export(make_transcript(timed_segment("hi there", 0.0)), "srt", tmp_path, "talk")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


# --- fuzz -------------------------------------------------------------------

ALPHABET = st.one_of(st.sampled_from(list("abcxyzABC &<>.,!?;'\"。，！你好世界日本語한국")),
                     st.characters(blacklist_categories=("Cs",)))


@st.composite
def transcripts(draw):
    t = draw(st.floats(0, 3))
    segments = []
    for _ in range(draw(st.integers(0, 4))):
        tokens = draw(st.lists(st.text(ALPHABET, min_size=1, max_size=14), max_size=14))
        start = t
        words = []
        for token in tokens:
            t += draw(st.floats(0, 2.0))
            end = t + draw(st.floats(0, 2.5))
            words.append(Word(token, t, end))
            t = end
        t += draw(st.floats(0, 1.0))
        timed = draw(st.booleans())
        segments.append(Segment(start, t, " ".join(tokens), words if timed else [],
                                draw(st.sampled_from([None, "en", "zh"]))))
        t += draw(st.floats(0, 3.0))
    duration = draw(st.sampled_from([0.0, t, t + 1.5]))
    return Transcript(" ".join(s.text for s in segments), "en", duration, segments)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts())
def test_fuzz_exporters_never_raise_and_parse_back(tr):
    cues = build_cues(tr)
    limit = tr.duration or max([0.0] + [s.end for s in tr.segments]
                               + [w.end for s in tr.segments for w in s.words])
    check_timeline(cues, limit)
    for cue in cues:
        assert cue.lines and all(cue.lines)
        if cue.words:
            assert words_by_line(cue) is not None
    srt_text = to_srt(tr)
    assert [(td_ms(s.start), td_ms(s.end)) for s in srt.parse(srt_text)] == \
        [(ms(c.start), ms(c.end)) for c in cues]
    for karaoke in (False, True):
        caps = webvtt.from_string(to_vtt(tr, karaoke=karaoke)).captions
        assert [(vtt_ms(c.start), vtt_ms(c.end)) for c in caps] == \
            [(ms(c.start), ms(c.end)) for c in cues]
    assert len(json.loads(to_json(tr))["segments"]) == len(tr.segments)
    assert isinstance(to_txt(tr), str) and isinstance(to_txt(tr, timestamps=True), str)


def test_cues_stay_inside_a_zero_length_transcript():
    """Regression (found by the fuzz test): the 'always visible' millisecond must not
    push a cue past the end of the audio."""
    from engine.text.cues import build_cues
    words = [Word("a", 0.0, 0.0), Word("b", 0.0, 0.0)]
    t = Transcript(text="a b", language=None, duration=0.0,
                   segments=[Segment(0.0, 0.0, "a b", words=words)])
    for cue in build_cues(t):
        assert 0.0 <= cue.start <= cue.end <= 0.0
    crowded = [Word(str(i), 1.0, 1.0) for i in range(30)]
    t = Transcript(text="", language=None, duration=2.0,
                   segments=[Segment(1.0, 1.0, " ".join(w.text for w in crowded), words=crowded)])
    cues = build_cues(t)
    assert all(0.0 <= c.start <= c.end <= 2.0 for c in cues)
    assert all(a.end <= b.start for a, b in zip(cues, cues[1:]))
