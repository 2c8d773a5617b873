"""Prompts exactly as the official package builds them, and parsing of what the model says."""
from __future__ import annotations

from engine.text.chat_template import prompt_shapes, render_around_audio  # noqa: F401 (re-exported)

LANGUAGES = {
    "ar": "Arabic", "yue": "Cantonese", "zh": "Chinese", "cs": "Czech", "da": "Danish", "nl": "Dutch",
    "en": "English", "fil": "Filipino", "fi": "Finnish", "fr": "French", "de": "German", "el": "Greek",
    "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean",
    "mk": "Macedonian", "ms": "Malay", "fa": "Persian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "es": "Spanish", "sv": "Swedish", "th": "Thai", "tr": "Turkish", "vi": "Vietnamese",
}
# Languages Qwen3-ForcedAligner was trained on.
ALIGNER_LANGUAGES = frozenset({"Chinese", "English", "Cantonese", "French", "German", "Italian", "Japanese",
                               "Korean", "Portuguese", "Russian", "Spanish"})
_BY_NAME = {name.lower(): name for name in LANGUAGES.values()}

AUDIO_PAD = "<|audio_pad|>"
ASR_TEXT = "<asr_text>"


def language_name(language: str | None) -> str | None:
    """'en', 'EN', 'english' -> 'English'; None stays None; anything else is a ValueError."""
    if language is None or not str(language).strip():
        return None
    key = str(language).strip().lower()
    if key in LANGUAGES:
        return LANGUAGES[key]
    if key in _BY_NAME:
        return _BY_NAME[key]
    raise ValueError(f"unknown language {language!r}; use a name or code such as "
                     f"{', '.join(sorted(LANGUAGES.values())[:6])}... or 'en', 'zh', 'de'")


def prompt_text_parts(context: str, language: str | None, tokenizer=None) -> tuple[str, str]:
    """The text before and after the audio placeholder tokens.

    With a chat template in the checkpoint, it is rendered exactly as transformers'
    ``apply_transcription_request`` renders it (system turn only for a non-empty
    context, the forced language prefilled into the assistant turn), so the prompt is
    the reference's whatever the template's whitespace. Without one, the official
    package's format is built by hand; Qwen's own template renders the same text.
    """
    name = language_name(language)
    rendered = prompt_shapes(tokenizer, ASR_TEXT).parts(context, name) if tokenizer is not None else None
    if rendered is not None:
        return rendered
    before = f"<|im_start|>system\n{context}<|im_end|>\n<|im_start|>user\n<|audio_start|>"
    after = "<|audio_end|><|im_end|>\n<|im_start|>assistant\n"
    if name is not None:
        after += f"language {name}{ASR_TEXT}"
    return before, after


def prepare_prompts(tokenizer) -> None:
    """Render the prompt shapes without a language now (at load): a chat template that never
    finishes fails here with a CheckpointError, not in every request."""
    shapes = prompt_shapes(tokenizer, ASR_TEXT)
    shapes.parts("", None)
    shapes.parts("context", None)


def build_prompt_ids(tokenizer, num_audio_tokens: int, *, context: str = "",
                     language: str | None = None) -> tuple[list[int], int]:
    """Prompt token ids and the index of the first audio placeholder.

    Tokenising the two text parts apart equals tokenising the whole expanded
    prompt: the audio start and end tokens are special, so they split the text
    the same way.
    """
    before, after = prompt_text_parts(context, language, tokenizer)
    pad_id = tokenizer.convert_tokens_to_ids(AUDIO_PAD)
    head = tokenizer.encode(before, add_special_tokens=False)
    tail = tokenizer.encode(after, add_special_tokens=False)
    return head + [pad_id] * num_audio_tokens + tail, len(head)


def decode_text(tokenizer, token_ids: list[int]) -> str:
    """Decoded output without special tokens, keeping the ``<asr_text>`` marker even in a
    tokenizer that registered it as special (skipping it would lose the language split)."""
    marker = tokenizer.convert_tokens_to_ids(ASR_TEXT)
    if not isinstance(marker, int) or marker == tokenizer.unk_token_id or marker not in token_ids:
        return tokenizer.decode(token_ids, skip_special_tokens=True)
    cut = token_ids.index(marker)
    return (tokenizer.decode(token_ids[:cut], skip_special_tokens=True) + ASR_TEXT
            + tokenizer.decode(token_ids[cut + 1:], skip_special_tokens=True))


def fix_repetitions(text: str, threshold: int = 20) -> str:
    """Collapse runs of > ``threshold`` identical characters, and a 1-20 character
    pattern repeated ``threshold`` or more times, to one occurrence (as the official package)."""
    out, i, n = [], 0, len(text)
    while i < n:
        j = i
        while j < n and text[j] == text[i]:
            j += 1
        out.append(text[i] if j - i > threshold else text[i:j])
        i = j
    return _fix_pattern_repeats("".join(out), threshold)


def _fix_pattern_repeats(s: str, threshold: int, max_len: int = 20) -> str:
    n = len(s)
    if n < threshold * 2:
        return s
    result, i = [], 0
    while i <= n - threshold * 2:
        for k in range(1, max_len + 1):
            if i + k * threshold > n:
                break
            pattern = s[i:i + k]
            if all(s[i + r * k:i + (r + 1) * k] == pattern for r in range(1, threshold)):
                end = i + threshold * k
                while end + k <= n and s[end:end + k] == pattern:
                    end += k
                return "".join(result) + pattern + _fix_pattern_repeats(s[end:], threshold, max_len)
        result.append(s[i])
        i += 1
    return "".join(result) + s[i:]


def parse_output(text: str, forced_language: str | None = None) -> tuple[str | None, str]:
    """(language, transcription) from decoded output ``language X<asr_text>text``.

    ``language None`` means the model heard no speech. With a forced language the
    prefix was part of the prompt, so the output is the transcription alone.
    """
    text = (text or "").strip()
    if not text:
        return language_name(forced_language), ""
    text = fix_repetitions(text)
    if ASR_TEXT not in text:
        return language_name(forced_language), text.strip()
    prefix, transcription = text.split(ASR_TEXT, 1)
    prefix = prefix.strip()
    if prefix.lower() == "language none":
        return None, transcription.strip()
    language = None
    for line in prefix.splitlines():
        line = line.strip()
        if line:
            language = line[len("language "):].strip() if line.lower().startswith("language ") else line
            break
    return language or language_name(forced_language), transcription.strip()
