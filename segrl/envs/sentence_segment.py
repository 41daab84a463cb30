"""``segrl/SentenceSegment-v0``: segment a whole sentence in one step (the study's REINFORCE set-up)."""

from __future__ import annotations

from typing import Any

import numpy as np

from segrl.envs.base import SegmentationEnv
from segrl.envs.spaces import (
    first,
    sentence_action_space,
    sentence_observation,
    sentence_observation_space,
)


class SentenceSegmentEnv(SegmentationEnv):
    """Segment one sentence per episode with all decisions at once: ``p(S|X) = prod_i p(s_i|X)``.

    Positions, known and hidden word boundaries, and the arguments are those of ``CharSegmentEnv``.

    ## Action space

    ``MultiBinary(P)`` (``P = max_len - 1``): entry ``i`` is 1 to split after character ``i``. With
    ``rules="full"``, ``MultiDiscrete([5] * P)``. Entries at positions that are not the agent's
    (beyond the text, beside a known space) are ignored.

    ## Observation space

    A ``Dict`` of fixed-shape arrays: ``chars`` ``[L]`` int64 character ids, 0-padded; ``length``
    ``[1]`` int64; ``free`` ``[P]`` (``MultiBinary``): 1 at the positions the agent decides; with
    ``teacher_features=True``, ``teacher`` ``[P]`` float32, the evaluator's own log-odds of a split
    at every position (as in ``CharSegmentEnv``).

    ## Rewards

    ``reward="sequence"``: the evaluator's score of the segmentation (Morfessor and gold: minus the
    alpha-weighted error rate, in ``[-max(alpha, 1 - alpha), 0]``). ``reward="per-action"``: the sum of the
    per-decision rewards, whose vector (``[P]``, 0 where there is no decision) is
    ``info["action_rewards"]``: for Morfessor and gold +1 per right decision, -1 per wrong one.

    ## Starting state

    A sentence drawn uniformly from the corpus split with the seeded generator (or
    ``reset(options={"text": ...})``).

    ## Episode end

    Terminates after its one step. Never truncates.

    ## Info

    ``sentence`` at reset; after the step ``sentence``, ``segments`` and, with per-action rewards,
    ``action_rewards``.
    """

    def __init__(self, render_mode: str | None = None, **options: Any):
        super().__init__(render_mode, **options)
        self.observation_space = sentence_observation_space(self.setup)
        self.action_space = sentence_action_space(self.setup)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        info = self._start(seed, options)
        return first(sentence_observation(self.slots)), info

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        self._check_running()
        action = np.asarray(action)
        if action.shape != self.action_space.shape or not self.action_space.contains(
            action.astype(self.action_space.dtype)
        ):
            raise ValueError(f"action of shape {action.shape} is not in {self.action_space}")
        rewards, action_rewards, batch = self.slots.step_all(action[None, :])
        self._done = True
        info: dict[str, Any] = {"sentence": self.slots.sentences[0], "segments": batch.segments(0)}
        if action_rewards is not None:
            info["action_rewards"] = action_rewards[0]
        return first(sentence_observation(self.slots)), float(rewards[0]), True, False, info
