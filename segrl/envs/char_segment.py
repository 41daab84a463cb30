"""``segrl/CharSegment-v0``: segment a sentence one candidate boundary at a time, left to right."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from segrl.envs.base import SegmentationEnv
from segrl.envs.masks import position_rule_masks
from segrl.envs.spaces import char_observation, char_observation_space, first


class CharSegmentEnv(SegmentationEnv):
    """Segment one sentence per episode, deciding at each candidate boundary whether to split.

    A sentence of ``n`` characters has ``n - 1`` positions; position ``i`` is the boundary between
    characters ``i`` and ``i + 1``. With known word boundaries (the default, as in the study), the
    positions beside a space are splits already and are skipped; with ``hide_spaces=True`` the spaces
    are removed and every position is a decision (word discovery: a segmented corpus,
    ``segmented:PATH``, gives utterances whose spaces are the gold, scored with
    ``segrl.metrics.word_discovery_metrics``; an LM evaluator then needs ``max_segment_length``,
    which ``segrl.agents.task.hidden_spaces_lm_options`` sets; docs/environments.md).

    ## Action space

    ``Discrete(2)``: 0 = no split, 1 = split after the current character. With ``rules="full"``,
    ``Discrete(5)``: no split, split, split+repeat, split+delete, split+modify (Morfessor and gold
    evaluators score any split alike).

    ## Observation space

    A ``Dict`` of fixed-shape int64 arrays (``L = max_len``, ``P = L - 1``):

    - ``chars`` ``[L]``: character ids of the text (``CharVocab``), 0-padded;
    - ``length`` ``[1]``: characters in the text;
    - ``position`` ``[1]``: the position decided by the next action (``length - 1`` once done);
    - ``decisions`` ``[P]``: actions taken so far; forced word boundaries are 1, positions not yet
      decided and padding 0;
    - with ``teacher_features=True``, ``teacher`` ``[P]`` float32: the evaluator's own log-odds of a
      split at every position (the LM evaluator's posterior, ``Evaluator.teacher``), clipped to
      +-30, 0 at padding: what the teacher would decide, for a student to read.

    ## Rewards

    From the evaluator. ``reward="per-action"``: each step gets the evaluator's action rewards of the
    positions it covers (for Morfessor and gold: +1 if the decision matches the reference, -1 if
    not), so the episode's rewards sum to the whole sentence's. ``reward="sequence"``: 0 at every step
    but the last, which gets the sentence's score (for Morfessor and gold: minus the alpha-weighted
    error rate, in ``[-max(alpha, 1 - alpha), 0]``).

    ## Starting state

    A sentence drawn uniformly from the corpus split with the environment's seeded generator (or the
    text given as ``reset(options={"text": ...})``), no decision taken, at its first free position.

    ## Episode end

    Terminates after the last free position is decided. Never truncates.

    ## Arguments

    - ``corpus``: a ``Corpus``, a path to text, or None for the bundled corpus;
    - ``split``: ``train``, ``valid`` or ``test``; ``texts``: explicit texts to draw from instead;
    - ``max_len``: width of the arrays (default: the corpus's maximum sentence length, 128);
      longer corpus sentences are left out, longer ``texts`` are an error;
    - ``hide_spaces``: remove spaces so that word boundaries are decisions too;
    - ``evaluator``: ``"morfessor"``, ``"gold"`` or an ``Evaluator``; ``gold``: the gold words for
      ``"gold"`` (default: the bundled set);
    - ``reward``: ``"per-action"`` (default) or ``"sequence"``; ``rules``: ``"binary"`` or ``"full"``;
    - ``teacher_features``: add ``teacher`` to the observations (an evaluator with a ``teacher``,
      binary rules);
    - ``render_mode``: None, ``"ansi"`` (the text with ``-`` at splits and ``|`` at the cursor) or
      ``"rgb_array"`` (that text drawn in an image, as stable-baselines3's ``make_vec_env`` and
      Gymnasium's ``RecordVideo`` ask for).

    ``env.unwrapped.vocab`` is the ``CharVocab`` of the observations' character ids.

    ## Action masks

    ``action_masks()`` gives the ``[A]`` actions that make sense at the current position (all of
    them with the binary rules; with ``rules="full"``, the rules the two characters can show:
    ``segrl.envs.masks``), as sb3-contrib's ``MaskablePPO`` reads them.

    ## Info

    ``sentence`` (the sentence played) at reset and at the end, with ``segments`` (the segmentation
    of the text) at the end.
    """

    def __init__(self, render_mode: str | None = None, **options: Any):
        super().__init__(render_mode, **options)
        self.setup.evaluator.check_stepwise(self.setup.config.reward)
        self.observation_space = char_observation_space(self.setup)
        self.action_space = gym.spaces.Discrete(self.setup.n_actions)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        info = self._start(seed, options)
        return first(char_observation(self.slots)), info

    def action_masks(self) -> np.ndarray:
        """[A] bool: the actions allowed at the position the next action decides."""
        slots = self.slots
        return position_rule_masks(slots.texts, slots.current_position(), self.setup.n_actions)[0]

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        self._check_running()
        if (
            not (
                (isinstance(action, int | np.integer) and not isinstance(action, bool))
                or (
                    isinstance(action, np.ndarray)
                    and action.ndim == 0
                    and action.dtype.kind in "iu"
                )
            )
            or not 0 <= int(action) < self.setup.n_actions
        ):
            raise ValueError(f"action {action!r} is not in {self.action_space} (an integer)")
        rewards, terminated = self.slots.step_one(np.array([int(action)]))
        done = bool(terminated[0])
        info: dict[str, Any] = {}
        if done:
            self._done = True
            info = {"sentence": self.slots.sentences[0], "segments": self.slots.segments(0)}
        return first(char_observation(self.slots)), float(rewards[0]), done, False, info
