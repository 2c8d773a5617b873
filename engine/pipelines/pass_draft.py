"""The draft a live stream gives each pass of its open utterance: the previous pass's tokens.

Every update re-transcribes the open utterance, grown by an update interval since the last pass,
so the last pass's tokens are a good guess at this one's: the engine verifies several of them a
step instead of decoding one a step (``Request.draft``), and keeps exactly greedy's tokens. A new
utterance has no previous pass; its first one gets the last utterance's language prefix
(``language English<asr_text>``) as its draft, which a stream in one language says again.

(The rest of what a pass reuses is found by serving itself: the encoder outputs of unchanged
audio in the runner's encoder cache, the prompt prefix in the KV cache's prefix cache.)
"""
from __future__ import annotations

from engine.serving.request import Request


class PassDraft:
    """The tokens of the open utterance's last finished pass, handed to its next pass as a draft."""

    def __init__(self, tokenizer):
        from engine.text.prompt import ASR_TEXT

        self.tokens: list[int] = []
        self._marker = tokenizer.convert_tokens_to_ids(ASR_TEXT)   # ends the language prefix

    def give(self, request: Request) -> None:
        """Before ``request`` (a pass of the open utterance) is queued: the last tokens as its draft."""
        request.draft = list(self.tokens)

    def take(self, request: Request) -> None:
        """A pass finished: its tokens become the draft (a failed or cancelled one leaves it)."""
        if not request.error and request.finish_reason != "cancelled":
            self.tokens = list(request.token_ids)

    def next_utterance(self) -> None:
        """The utterance is over: only its language prefix stays, as the next one's first draft."""
        self.tokens = language_prefix(self.tokens, self._marker)

    def reset(self) -> None:
        self.tokens = []


def language_prefix(tokens: list[int], marker: int | None) -> list[int]:
    """The tokens up to and including the ``<asr_text>`` marker (``language English<asr_text>``),
    or [] when there is none (a prompt that forces the language, or no pass yet)."""
    return tokens[:tokens.index(marker) + 1] if marker is not None and marker in tokens else []
