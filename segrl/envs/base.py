"""What the two Gymnasium environments share: options, one episode slot, the choice of sentence."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from segrl.data.vocab import CharVocab
from segrl.envs.episodes import EpisodeSlots
from segrl.envs.rendering import text_frame
from segrl.envs.setup import EnvSetup
from segrl.evaluators import Evaluator

RESET_OPTIONS = frozenset({"text"})
"""What ``reset(options=...)`` takes: ``text``, the text of the episode (else one is drawn)."""


class SegmentationEnv(gym.Env):
    """Base of ``CharSegmentEnv`` and ``SentenceSegmentEnv`` (whose docstrings give the options)."""

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None, **options: Any):
        """``options``: those of ``EnvSetup.create`` (``corpus``, ``split``, ``texts``, ``max_len``,
        ``hide_spaces``, ``evaluator``, ``reward``, ``rules``, ``gold``)."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None, 'ansi' or 'rgb_array', got {render_mode!r}"
            )
        self.setup = EnvSetup.create(**options)
        self.render_mode = render_mode
        self.slots = EpisodeSlots(self.setup, 1)
        self._done = True

    @property
    def evaluator(self) -> Evaluator:
        return self.setup.evaluator

    @property
    def vocab(self) -> CharVocab:
        """The characters of the observations: ``chars`` holds ``vocab``'s ids (0 is padding), and
        ``vocab.decode(ids)`` gives the text back."""
        return self.setup.corpus.vocab

    def _start(self, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
        """Seed, then load ``options["text"]`` or a sentence drawn with the seeded generator (a word
        list's words with probability proportional to their dampened counts)."""
        super().reset(seed=seed)
        unknown = sorted(set(options or {}) - RESET_OPTIONS)
        if unknown:
            raise ValueError(
                f"unknown reset option {', '.join(map(repr, unknown))}; reset takes: "
                f"{', '.join(sorted(RESET_OPTIONS))}"
            )
        text = (options or {}).get("text")
        if text is None:
            sentences, p = self.setup.sentences, self.setup.draw_probabilities
            if p is None:
                text = sentences[int(self.np_random.integers(len(sentences)))]
            else:
                text = sentences[int(self.np_random.choice(len(sentences), p=p))]
        self.slots.load([0], [text])
        self._done = False
        return {"sentence": text}

    def _check_running(self) -> None:
        if self._done:
            raise RuntimeError("the episode is over: call reset() before step()")

    def render(self) -> str | np.ndarray | None:
        """The text with ``-`` at the splits so far and ``|`` at the position decided next: as a
        string (``"ansi"``) or drawn in a ``[H, W, 3]`` uint8 array (``"rgb_array"``, the same
        size for every frame: ``segrl.envs.rendering``); None without a render mode."""
        if self.render_mode is None:
            return None
        text = self.slots.render(0, cursor=not self._done)
        if self.render_mode == "rgb_array":
            return text_frame(text, self.setup.max_len)
        return text
