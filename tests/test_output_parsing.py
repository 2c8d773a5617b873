"""What the model says becomes (language, text), whatever the tokenizer marks as special."""
from __future__ import annotations

from checkpoints import build_tokenizer

from engine.text.prompt import ASR_TEXT, decode_text, parse_output


def _ids(tok, text):
    return tok.encode(text, add_special_tokens=False)


def test_language_split_survives_a_special_asr_text_token(tmp_path):
    tok = build_tokenizer(tmp_path)
    tok.add_special_tokens({"additional_special_tokens": [ASR_TEXT]}, replace_extra_special_tokens=False)
    marker = tok.convert_tokens_to_ids(ASR_TEXT)
    assert marker in tok.all_special_ids
    ids = _ids(tok, "language English") + [marker] + _ids(tok, "Hello world.") + [tok.convert_tokens_to_ids("<|im_end|>")]
    assert parse_output(decode_text(tok, ids)) == ("English", "Hello world.")


def test_plain_asr_text_token_and_no_marker(tmp_path):
    tok = build_tokenizer(tmp_path)
    ids = _ids(tok, "language German<asr_text>Hello world.")
    assert parse_output(decode_text(tok, ids)) == ("German", "Hello world.")
    assert parse_output(decode_text(tok, _ids(tok, "Hello world.")), "en") == ("English", "Hello world.")


def test_no_speech_and_repetitions():
    assert parse_output("language None<asr_text>") == (None, "")
    assert parse_output("language English<asr_text>" + "ha" * 40) == ("English", "ha")
