"""Any function that segments a text, as a segrl segmenter: a custom agent's policy, a rule, another
tool called from Python. It answers the two calls every loaded segmenter answers
(``segment_words``, ``segment_sentences``), so ``segrl.metrics`` scores it as it scores segrl's own.

    >>> segmenter = FunctionSegmenter(lambda text: [text[:-2], text[-2:]], "last-two")
    >>> segmenter.segment_words(["walked"])
    [['walk', 'ed']]
    >>> segmenter = FunctionSegmenter.from_agent(agent.act, env)   # a custom agent's decisions
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from segrl.errors import ModelError


class FunctionSegmenter:
    """The segmenter that ``segment`` is: a function from a text (a word, or a sentence with single
    spaces) to its segments, which must spell the text. ``name`` names it in errors and in
    ``segrl compare`` where it is logged."""

    def __init__(self, segment: Callable[[str], Sequence[str]], name: str = "custom"):
        self.segment = segment
        self.name = name

    @classmethod
    def from_agent(
        cls, act: Callable[[Any], Any], env: Any, name: str = "custom-agent"
    ) -> FunctionSegmenter:
        """The segmenter of an agent acting in a segrl environment (``segrl/CharSegment-v0`` or
        ``segrl/SentenceSegment-v0``, from ``gymnasium.make``): each text is one episode, started
        with ``env.reset(options={"text": text})``, in which ``act(observation)`` gives every action
        until the episode ends; its segments are the episode's ``info["segments"]``. The text goes
        to the environment as given: the characters its corpus lacks are unknown to the agent (the
        bundled corpus is lower-case)."""

        def segment(text: str) -> list[str]:
            observation, info = env.reset(options={"text": text})
            terminated = truncated = False
            while not (terminated or truncated):
                observation, _reward, terminated, truncated, info = env.step(act(observation))
            return info["segments"]

        return cls(segment, name)

    def segment_words(self, words: Sequence[str]) -> list[list[str]]:
        """Each word's segments (an empty word has none)."""
        return [self._segments(w) if w else [] for w in words]

    def segment_sentences(self, sentences: Sequence[str]) -> list[list[str]]:
        """Each sentence's segments, the sentence taken with its whitespace collapsed to single
        spaces (the function decides whether a space is a segment of its own)."""
        return [self._segments(" ".join(s.split())) for s in sentences]

    def _segments(self, text: str) -> list[str]:
        segments = [s for s in self.segment(text) if s]
        if "".join(segments) != text:
            raise ModelError(f"{self.name}: segments {segments!r} that do not spell {text!r}"[:300])
        return segments
