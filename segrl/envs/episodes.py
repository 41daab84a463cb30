"""Episodes side by side: the state of ``N`` segmentation episodes as fixed-width arrays, their
transitions, and their rewards from one batched evaluator call per step.

Every environment in ``segrl.envs`` is a thin shell around ``EpisodeSlots``: the Gymnasium ones use
one slot, the vector ones many, so a transition or reward is computed by one piece of code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from segrl.envs.setup import EnvSetup
from segrl.errors import DataError
from segrl.evaluators import NO_SPLIT, SegmentationBatch, encode_segmentation_batch
from segrl.segmentation import segments_from_decisions

TEACHER_LIMIT = 30.0
"""The teacher's log-odds in observations are clipped to +-this (its ``teacher`` space's bounds)."""


def clip_teacher(log_odds: np.ndarray) -> np.ndarray:
    """A teacher's log-odds as observations carry them: float32, within +-``TEACHER_LIMIT``."""
    return np.clip(log_odds, -TEACHER_LIMIT, TEACHER_LIMIT).astype(np.float32)


class EpisodeSlots:
    """``n`` episodes of one environment setup.

    Per slot: the sentence and the text it segments, character ids ``[L]``, decisions ``[P]`` (forced
    word boundaries already 1), the free positions in order, and for left-to-right play a cursor into
    them. ``P = L - 1``.
    """

    def __init__(self, setup: EnvSetup, n: int):
        self.setup = setup
        self.n = n
        width = setup.max_len
        self.sentences: list[str] = [""] * n
        self.texts: list[str] = [""] * n
        self.ids = np.zeros((n, width), dtype=np.int64)  # [N, L]
        self.lengths = np.zeros(n, dtype=np.int64)  # [N]
        self.decisions = np.zeros((n, width - 1), dtype=np.int64)  # [N, P]
        self.free_mask = np.zeros((n, width - 1), dtype=bool)  # [N, P] True where the agent decides
        self.boundary_mask = np.zeros((n, width - 1), dtype=bool)  # [N, P] True at word boundaries
        self.free_positions = np.zeros((n, width - 1), dtype=np.int64)  # [N, P] free ones first
        self.n_free = np.zeros(n, dtype=np.int64)  # [N]
        self.cursor = np.zeros(n, dtype=np.int64)  # [N] index into free_positions
        self.reward_start = np.zeros(n, dtype=np.int64)  # [N] first position not yet rewarded
        self.position = np.zeros(n, dtype=np.int64)  # [N] the position decided next
        self.teacher = np.zeros((n, width - 1), dtype=np.float32)  # [N, P] teacher's log-odds

    @property
    def positions(self) -> int:
        return self.decisions.shape[1]

    def load(self, slots: Sequence[int], sentences: Sequence[str]) -> None:
        """Start new episodes: ``sentences[k]`` in slot ``slots[k]`` (encoded in one batch)."""
        try:
            rows = encode_segmentation_batch(
                self.setup.corpus.vocab,
                sentences,
                self.setup.max_len,
                self.setup.config.hide_spaces,
            )
        except ValueError as e:
            raise DataError(f"cannot play these texts: {e}") from None
        n_free = rows.free_mask.sum(axis=1)
        if not n_free.all():
            bad = sentences[int(np.flatnonzero(n_free == 0)[0])]
            raise DataError(
                f"{bad[:60]!r} leaves no decision to make (with known word boundaries only words of "
                "two or more characters have positions to decide)"
            )
        index = np.asarray(slots, dtype=np.int64)
        for k, slot in enumerate(index):
            self.sentences[slot] = rows.sentences[k]
            self.texts[slot] = rows.texts[k]
        self.ids[index] = rows.ids
        self.lengths[index] = rows.lengths
        self.decisions[index] = rows.decisions
        self.free_mask[index] = rows.free_mask
        self.boundary_mask[index] = rows.word_boundary_mask
        # free positions first, in order (a stable sort of "not free")
        self.free_positions[index] = np.argsort(~rows.free_mask, axis=1, kind="stable")
        self.n_free[index] = n_free
        self.cursor[index] = 0
        self.reward_start[index] = 0
        if self.setup.config.teacher_features:
            self.teacher[index] = clip_teacher(self.setup.evaluator.teacher.log_odds(rows))
        self._advance()

    def batch(
        self, rows: Sequence[int] | np.ndarray | None = None, copy: bool = True
    ) -> SegmentationBatch:
        """The slots (all, or ``rows``) as a ``SegmentationBatch``: a snapshot, or with
        ``copy=False`` (all rows only) views of the live arrays, for a call that reads them at once."""
        live = SegmentationBatch(
            sentences=self.sentences,
            texts=self.texts,
            ids=self.ids,
            lengths=self.lengths,
            decisions=self.decisions,
            free_mask=self.free_mask,
            word_boundary_mask=self.boundary_mask,
            hide_spaces=self.setup.config.hide_spaces,
        )
        if rows is None and not copy:
            return live
        return live.select(np.arange(self.n) if rows is None else rows)

    def segments(self, slot: int) -> list[str]:
        """The segmentation of the slot's text that its decisions so far give."""
        return segments_from_decisions(
            self.texts[slot], (self.decisions[slot] != NO_SPLIT).tolist()
        )

    # --- one decision per step (CharSegment) ---------------------------------------------------------
    def current_position(self) -> np.ndarray:
        """[N] the position each slot decides next; ``length - 1`` (past the last) once finished."""
        return self.position.copy()

    def _advance(self) -> None:
        finished = self.cursor >= self.n_free
        index = np.minimum(self.cursor, self.positions - 1)
        position = self.free_positions[np.arange(self.n), index]
        self.position = np.where(finished, self.lengths - 1, position)

    def step_one(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Apply one action per slot ([N] ints) at its current position.

        Returns ``(rewards [N], terminated [N] bool)``. Per-action reward: the evaluator's action
        rewards over the positions this step covers (from the first position not yet rewarded up to
        this one, through the end once finished), so an episode's rewards sum to its row of
        ``action_rewards``. Sequence reward: the score, at the end; 0 before.
        """
        rows = np.arange(self.n)
        position = self.position
        self.decisions[rows, position] = actions
        self.cursor += 1
        terminated = self.cursor >= self.n_free
        self._advance()
        rewards = np.zeros(self.n)
        if self.setup.config.reward == "per-action":
            per_position = self.setup.evaluator.action_rewards(self.batch(copy=False))  # [N, P]
            totals = np.zeros((self.n, self.positions + 1))
            np.cumsum(per_position, axis=1, out=totals[:, 1:])
            stop = np.where(terminated, self.positions, position + 1)
            rewards = totals[rows, stop] - totals[rows, self.reward_start]
            self.reward_start = stop
        elif terminated.any():
            done = np.flatnonzero(terminated)
            rewards[done] = self.setup.evaluator.score(self.batch(done))
        return rewards, terminated

    # --- all decisions in one step (SentenceSegment) -------------------------------------------------
    def step_all(
        self, actions: np.ndarray, policy_probs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None, SegmentationBatch]:
        """Apply all decisions of every slot at once (``actions`` [N, P]; non-free columns ignored;
        ``policy_probs`` [N, P, A], optional, goes into the batch the evaluator reads).

        Returns ``(rewards [N], action_rewards [N, P] or None, batch)``: per-action mode gives each
        row's action rewards and their sum as the reward; sequence mode the score.
        """
        self.decisions = np.where(self.free_mask, actions, self.decisions).astype(np.int64)
        self.cursor[:] = self.n_free
        self._advance()
        batch = self.batch()
        if policy_probs is not None:
            batch = replace(batch, policy_probs=np.asarray(policy_probs))
        if self.setup.config.reward == "per-action":
            action_rewards = self.setup.evaluator.action_rewards(batch)
            return action_rewards.sum(axis=1), action_rewards, batch
        return np.asarray(self.setup.evaluator.score(batch), dtype=np.float64), None, batch

    def render(self, slot: int, cursor: bool = True) -> str:
        """The slot's text with ``-`` at the splits decided so far and ``|`` at the position decided
        next (spaces stay spaces)."""
        text = self.texts[slot]
        splits = self.decisions[slot] != NO_SPLIT
        at = self.current_position()[slot] if cursor else -1
        out = []
        for i, char in enumerate(text):
            out.append(char)
            if i < len(text) - 1:
                if i == at and cursor:
                    out.append("|")
                elif splits[i] and char != " " and text[i + 1] != " ":
                    out.append("-")
        return "".join(out)
