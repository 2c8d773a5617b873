"""The forced aligner on our model code against transformers' Qwen3ASRForTokenClassification.

Same tiny random checkpoints, same clips, same texts: the words and their start
and end times must be identical to what the reference processor decodes.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch
from checkpoints import build_checkpoint, to_original_layout
from conftest import tone_clip as clip
from reference import load_reference
from transformers.models.qwen3_asr.processing_qwen3_asr import _fix_timestamps

import engine
from engine.errors import CheckpointError
from engine.pipelines.aligner import fix_timestamps
from engine.text.word_split import display_spans, split_words

TEXTS = {
    "english": ("Hello, world! It's a test of speech-to-text: 3 short words... isn't it?", "en"),
    "chinese": ("今天天气很好，我们去公园散步。", "zh"),
    "mixed": ("Qwen3 说 hello 世界, ok? 模型（tiny）works!", None),
}
SECONDS = [1.0, 8.5, 20.0]
CASES = [(name, seconds) for name in TEXTS for seconds in SECONDS]
# The second checkpoint: every text on short clips, one long clip (five 400-frame windows).
OTHER_CASES = [(name, seconds) for name in TEXTS for seconds in (1.0, 8.5)] + [("english", 20.0)]

OTHER_DIMS = dict(
    encoder=dict(d_model=96, encoder_layers=3, encoder_attention_heads=6, encoder_ffn_dim=160,
                 downsample_hidden_size=48, n_window=50, n_window_infer=400),
    text=dict(hidden_size=96, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=3,
              head_dim=16, intermediate_size=192, rope_theta=500_000.0),
)


@pytest.fixture(scope="module")
def other_aligner_dir(tmp_path_factory):
    """A second aligner: other seed, other widths and depths, a 400-frame attention window."""
    return build_checkpoint(tmp_path_factory.mktemp("aligner-other"), seed=7, dims=OTHER_DIMS,
                            aligner=True, num_labels=3000)


@pytest.fixture(scope="module")
def original_aligner_dir(tiny_aligner_dir, tmp_path_factory):
    """The tiny aligner in the original layout (score head stored as thinker.lm_head)."""
    return to_original_layout(tiny_aligner_dir, tmp_path_factory.mktemp("aligner-original"))


_loaded: dict[str, object] = {}


def our_aligner(path):
    key = str(path)
    if key not in _loaded:
        _loaded[key] = engine.load_aligner(path, device="cpu", dtype="float32")
    return _loaded[key]


@torch.no_grad()
def reference_alignment(model_dir, audio, text, language):
    """(words as dicts, raw class argmax at each timestamp token) from transformers."""
    model, processor = load_reference(str(model_dir), aligner=True)
    inputs, word_lists = processor.prepare_forced_aligner_inputs(audio=[audio], transcript=text,
                                                                 language=language)
    logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                   input_features=inputs["input_features"],
                   input_features_mask=inputs["input_features_mask"]).logits
    ts_id = model.config.timestamp_token_id
    words = processor.decode_forced_alignment(logits, inputs["input_ids"], word_lists, ts_id)[0]
    raw = logits[0][inputs["input_ids"][0] == ts_id].argmax(-1).tolist()
    return words, raw


@functools.lru_cache(maxsize=None)
def reference_case(model_dir: str, name: str, seconds: float):
    """The reference result for one named text on its own clip (cached: the tests share it)."""
    text, language = TEXTS[name]
    return reference_alignment(model_dir, case_clip(name, seconds), text, language)


def case_clip(name: str, seconds: float) -> np.ndarray:
    return clip(seconds, int(seconds * 10) + len(name))


def as_tuples(words):
    return [(w.text, w.start, w.end) for w in words]


def ref_tuples(words):
    return [(w["text"], w["start_time"], w["end_time"]) for w in words]


@pytest.mark.parametrize("name,seconds", CASES)
def test_word_times_equal_transformers(tiny_aligner_dir, name, seconds):
    text, language = TEXTS[name]
    audio = case_clip(name, seconds)
    ref_words, raw = reference_case(str(tiny_aligner_dir), name, seconds)
    aligner = our_aligner(tiny_aligner_dir)
    ours = aligner.align(audio, text, language=language)
    assert as_tuples(ours) == ref_tuples(ref_words)
    # The raw classes too, not just the repaired times.
    req = aligner.submit(audio, split_words(text, language))
    while not req.finished:
        aligner.step()
    assert req.result == raw


@pytest.mark.parametrize("name,seconds", OTHER_CASES)
def test_other_checkpoint_equals_transformers(other_aligner_dir, name, seconds):
    text, language = TEXTS[name]
    audio = case_clip(name, seconds)
    ref_words, _ = reference_case(str(other_aligner_dir), name, seconds)
    assert as_tuples(our_aligner(other_aligner_dir).align(audio, text, language=language)) == ref_tuples(ref_words)


def test_score_head_with_bias_equals_transformers(tmp_path):
    """transformers' token_classification_bias gives the score head a bias; it must be used."""
    model_dir = build_checkpoint(tmp_path / "biased", seed=3, aligner=True, score_bias=True)
    name, seconds = CASES[0]
    text, language = TEXTS[name]
    audio = case_clip(name, seconds)
    ref_words, _ = reference_alignment(model_dir, audio, text, language)
    ours = engine.load_aligner(model_dir, device="cpu", dtype="float32")
    assert ours.net.score.bias is not None
    assert as_tuples(ours.align(audio, text, language=language)) == ref_tuples(ref_words)


def test_aligner_prompt_follows_the_checkpoints_chat_template(tiny_aligner_dir, tmp_path):
    """A template that separates the words differently: the prompt is still the reference's."""
    import shutil

    d = Path(shutil.copytree(tiny_aligner_dir, tmp_path / "template"))
    (d / "chat_template.jinja").write_text(
        "{%- for message in messages -%}{%- for item in message.content -%}"
        "{%- if item.type == 'audio' -%}<|audio_start|><|audio_pad|><|audio_end|> "
        "{%- elif item.type == 'text' -%}{{ item.text }} <timestamp><timestamp>{%- endif -%}"
        "{%- endfor -%}{%- endfor -%}")
    name, seconds = CASES[0]
    text, language = TEXTS[name]
    audio = case_clip(name, seconds)
    model, processor = load_reference(str(d), aligner=True)
    inputs, _ = processor.prepare_forced_aligner_inputs(audio=[audio], transcript=text, language=language)
    aligner = engine.load_aligner(d, device="cpu", dtype="float32")
    assert aligner.make_request(audio, split_words(text, language)).prompt_ids == inputs["input_ids"][0].tolist()
    ref_words, _ = reference_alignment(d, audio, text, language)
    assert as_tuples(aligner.align(audio, text, language=language)) == ref_tuples(ref_words)


@pytest.mark.parametrize("name", list(TEXTS))
def test_original_layout_equals_transformers(tiny_aligner_dir, original_aligner_dir, name):
    text, language = TEXTS[name]
    audio = case_clip(name, 8.5)
    ref_words, _ = reference_case(str(tiny_aligner_dir), name, 8.5)
    assert as_tuples(our_aligner(original_aligner_dir).align(audio, text, language=language)) \
        == ref_tuples(ref_words)


@pytest.mark.parametrize("which", ["tiny", "other"])
def test_reference_predictions_vary(tiny_aligner_dir, other_aligner_dir, which):
    """The parity tests prove something only if the timestamp argmax depends on word and clip.
    A random head can saturate on one class for a long clip, so two thirds of the cases, not
    all, must vary; the cases are the ones the parity tests above compare."""
    model_dir = str(tiny_aligner_dir if which == "tiny" else other_aligner_dir)
    cases = CASES if which == "tiny" else OTHER_CASES
    raws = [reference_case(model_dir, name, seconds)[1] for name, seconds in cases]
    varying = sum(len(set(raw)) > 1 for raw in raws)
    assert varying >= 2 * len(raws) // 3, f"only {varying} of {len(raws)} cases have varying timestamp classes"
    assert len({tuple(r) for r in raws}) == len(raws), "different clips gave identical predictions"


def test_words_keep_order_and_are_monotonic(tiny_aligner_dir):
    text, language = TEXTS["english"]
    words = our_aligner(tiny_aligner_dir).align(clip(8.5, 3), text, language=language)
    assert [w.text for w in words] == split_words(text, language)
    assert all(w.start <= w.end for w in words)
    assert all(a.end <= b.start for a, b in zip(words, words[1:]))


def test_empty_text_gives_no_words(tiny_aligner_dir):
    assert our_aligner(tiny_aligner_dir).align(clip(1.0, 1), " ... ！？ ", language="en") == []


@pytest.mark.parametrize("seed", range(12))
def test_fix_timestamps_equals_transformers(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    if seed % 3 == 0:     # mostly increasing with outlier runs, as a real aligner gives
        values = np.sort(rng.integers(0, 400, n)).astype(np.float64) * 80
        bad = rng.random(n) < 0.3
        values[bad] = rng.integers(0, 400, bad.sum()) * 80
    elif seed % 3 == 1:   # many ties
        values = rng.integers(0, 5, n).astype(np.float32) * 80
    else:                 # arbitrary floats, decreasing runs included
        values = rng.normal(1000, 600, n)
    expected = _fix_timestamps(values)
    assert fix_timestamps(values.tolist()) == expected
    assert all(a <= b for a, b in zip(expected, expected[1:])) or n < 2


def test_fix_timestamps_edge_cases():
    assert fix_timestamps([]) == []
    for values in ([5.0], [3.0, 1.0], [0.0, 800.0, 80.0, 160.0], [9.0, 8.0, 7.0, 6.0, 5.0],
                   [0.0, 100.0, 1.0, 2.0, 3.0, 200.0, 300.0], [80.0] * 7):
        assert fix_timestamps(values) == _fix_timestamps(np.array(values))


SPLIT_CASES = [
    ("Hello, world! It's a test.", None),
    ("  spaces\tand\nnewlines  everywhere ", "English"),
    ("speech-to-text: 100% (really) — done…", "English"),
    ("今天天气很好，我们去公园。", "Chinese"),
    ("Qwen3说hello世界, ok?", None),
    ("Ça va? Très bien, merci «beaucoup».", "French"),
    ("Привет, мир! Как дела?", "Russian"),
    ("e\u0301te\u0301 cafe\u0301 naïve", "French"),
    ("🙂 emoji 👍 and ₂ subscripts ½", None),
    ("'quoted' rock'n'roll don't", "English"),
    ("粤语：你食咗饭未呀？", "Cantonese"),
    ("", None),
    ("!!! ... ???", None),
]


@pytest.mark.parametrize("text,language", SPLIT_CASES)
def test_split_words_equals_processor(tiny_aligner_dir, text, language):
    _, processor = load_reference(str(tiny_aligner_dir), aligner=True)
    assert split_words(text, language) == processor.split_words_for_alignment(text, language)


@pytest.mark.parametrize("text,pieces", [
    ("Hello, world! It's fine.", ["Hello,", "world!", "It's", "fine."]),
    ("Wait , what ?", ["Wait ,", "what ?"]),
    ("so ,then (maybe) -- no", ["so", ",then", "(maybe) --", "no"]),
    ("  «Oui», dit-il.  ", ["«Oui»,", "dit-il."]),
    ("你好，世界。ok", ["你", "好，", "世", "界。", "ok"]),
])
def test_word_pieces_keep_punctuation_and_rejoin_the_text(text, pieces):
    """What a word shows (Word.text): its punctuation, cut at the spaces of the text."""
    words = split_words(text, None)
    assert display_spans(text, words) == pieces
    if not any("\u4e00" <= ch <= "\u9fff" for ch in text):
        assert " ".join(pieces) == " ".join(text.split())


def test_split_words_accepts_language_codes():
    assert split_words("Hello, world!", "en") == split_words("Hello, world!", "English") == ["Hello", "world"]


def test_batched_requests_equal_one_by_one(tiny_aligner_dir):
    aligner = our_aligner(tiny_aligner_dir)
    jobs = [(clip(1.0, 21), *TEXTS["chinese"]), (clip(20.0, 22), *TEXTS["english"]),
            (clip(8.5, 23), *TEXTS["mixed"])]
    alone = [[(w.start, w.end) for w in aligner.align(a, t, language=lang)] for a, t, lang in jobs]
    reqs = [aligner.submit(a, split_words(t, lang)) for a, t, lang in jobs]
    rows_per_step = []
    while not all(r.finished for r in reqs):
        rows_per_step.append(len(aligner.scheduler.waiting))
        aligner.step()
    assert rows_per_step[0] == 3 and len(rows_per_step) == 1, "the three clips should run in one step"
    together = []
    for req in reqs:
        assert req.error is None
        ms = aligner.times(req)
        together.append([(round(ms[2 * i] / 1000, 3), round(ms[2 * i + 1] / 1000, 3))
                         for i in range(len(req.result) // 2)])
    assert together == alone
    assert aligner.cache.allocator.num_free == aligner.cache.allocator.num_blocks


def test_non_aligner_checkpoint_is_refused(tiny_model_dir):
    with pytest.raises(CheckpointError, match="not a Qwen3-ForcedAligner"):
        engine.load_aligner(tiny_model_dir, device="cpu")


def test_missing_aligner_folder_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        engine.load_aligner(tmp_path / "nope", device="cpu")

