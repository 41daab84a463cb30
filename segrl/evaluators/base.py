"""What an evaluator scores, and the interface every evaluator implements.

A ``SegmentationBatch`` is texts plus the decisions taken on them: position ``i`` is the boundary
between characters ``i`` and ``i + 1`` ("split after character i"), so a text of ``n`` characters has
``n - 1`` positions and a batch of width ``L`` has ``P = L - 1`` columns. It is defined once here and
used by the environments, the agents and every evaluator (Morfessor, gold, a co-trained LM).

Word boundaries, in one of two modes (the same for every row of a batch):

- **known** (the study's setting, the default): the text is the sentence with its spaces; the two
  positions beside every space are forced splits (each space is a segment of its own) and are not the
  agent's decisions. ``free_mask`` is False there and ``decisions`` holds 1.
- **hidden** (word discovery): the text is the sentence with its spaces removed; every position is a
  decision, and ``word_boundary_mask`` marks where the removed spaces were.

Decisions are action ids: 0 = no split, 1 = split, and with the full rule set 2..4 = split with the
repeat, delete or modify rule (``RULES``). Every evaluator treats any non-zero action as a split.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from segrl.data.vocab import CharVocab
from segrl.segmentation import segments_from_decisions

RULES = ("no-split", "split", "split+repeat", "split+delete", "split+modify")
"""The full rule set (after Narasimhan et al. 2015, as in the study); the first two are the binary one."""
NO_SPLIT = 0
SPLIT = 1


@dataclass(frozen=True)
class SegmentationBatch:
    """Texts and the decisions taken on them: the one thing every evaluator reads.

    Rows beyond a text's ``length - 1`` positions are padding: ``decisions`` 0, both masks False.
    """

    sentences: list[str]
    """The original sentences, with their spaces."""
    texts: list[str]
    """What is segmented: the sentences, or the sentences without spaces when word boundaries are hidden."""
    ids: np.ndarray  # [B, L] int64 character ids of ``texts``, padded with ``CharVocab.pad_id``
    lengths: np.ndarray  # [B] int64 characters per text
    decisions: np.ndarray  # [B, P] int64 action at position i (split after character i), P = L - 1
    free_mask: np.ndarray  # [B, P] bool, True where the agent decides
    word_boundary_mask: np.ndarray  # [B, P] bool, True beside a word boundary of the sentence
    hide_spaces: bool = False
    policy_probs: np.ndarray | None = None
    """[B, P, A] float: the sampling policy's probability of every action at every position, where
    the learner gives it (rewards that need ``p(S|X)``, its entropy, or a redraw of a decision)."""

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def splits(self) -> np.ndarray:
        """[B, P] bool: True where the decisions split (any action but ``NO_SPLIT``)."""
        return self.decisions != NO_SPLIT

    @property
    def positions(self) -> int:
        return self.decisions.shape[1]

    def with_decisions(self, actions: np.ndarray) -> SegmentationBatch:
        """A copy whose free positions take ``actions`` ([B, P] ints); forced positions keep their
        value and padding stays 0."""
        actions = np.asarray(actions)
        if actions.shape != self.decisions.shape:
            raise ValueError(
                f"actions of shape {actions.shape} for a batch of shape {self.decisions.shape}"
            )
        decisions = np.where(self.free_mask, actions, self.decisions).astype(np.int64)
        return replace(self, decisions=decisions)

    def select(self, rows: Sequence[int] | np.ndarray) -> SegmentationBatch:
        """The rows ``rows`` as a batch of their own (same width)."""
        rows = np.asarray(rows, dtype=np.int64)
        return SegmentationBatch(
            sentences=[self.sentences[i] for i in rows],
            texts=[self.texts[i] for i in rows],
            ids=self.ids[rows],
            lengths=self.lengths[rows],
            decisions=self.decisions[rows],
            free_mask=self.free_mask[rows],
            word_boundary_mask=self.word_boundary_mask[rows],
            hide_spaces=self.hide_spaces,
            policy_probs=None if self.policy_probs is None else self.policy_probs[rows],
        )

    def segments(self, row: int) -> list[str]:
        """The segmentation of ``texts[row]`` that the decisions give."""
        return segments_from_decisions(self.texts[row], self.splits[row].tolist())

    def segmentations(self) -> list[list[str]]:
        return [self.segments(row) for row in range(len(self))]


def text_of(sentence: str, hide_spaces: bool) -> str:
    """What is segmented for ``sentence``: itself, or its characters without spaces."""
    return sentence.replace(" ", "") if hide_spaces else sentence


def decision_layout(sentence: str, hide_spaces: bool) -> tuple[str, np.ndarray, np.ndarray]:
    """The text to segment, its free positions and its word-boundary positions (each ``[n - 1]`` bool).

    Known spaces: the positions beside a space are word boundaries, forced splits, not free. Hidden
    spaces: every position is free; word boundaries are where a removed space was.
    """
    text = text_of(sentence, hide_spaces)
    n_positions = max(len(text) - 1, 0)
    boundary = np.zeros(n_positions, dtype=bool)
    if hide_spaces:
        offset = 0
        for word in sentence.split()[:-1]:
            offset += len(word)
            boundary[offset - 1] = True
        return text, np.ones(n_positions, dtype=bool), boundary
    # surrogatepass: a lone surrogate (from a badly decoded file) is a character like any other here
    chars = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    is_space = chars == ord(" ")
    boundary[:] = is_space[:-1] | is_space[1:]
    return text, ~boundary, boundary


def encode_segmentation_batch(
    vocab: CharVocab,
    sentences: Sequence[str],
    max_len: int | None = None,
    hide_spaces: bool = False,
) -> SegmentationBatch:
    """A batch with no decisions taken yet: free positions 0, forced word boundaries 1.

    ``max_len`` fixes the width ``L`` (texts longer than it are an error); None uses the longest text
    (at least 2, so that there is one position).
    """
    layouts = [decision_layout(s, hide_spaces) for s in sentences]
    longest = max((len(text) for text, _, _ in layouts), default=0)
    width = max(longest, 2) if max_len is None else max_len
    if longest > width:
        raise ValueError(f"a text of {longest} characters does not fit max_len={width}")
    batch_size = len(layouts)
    ids = np.full((batch_size, width), vocab.pad_id, dtype=np.int64)
    lengths = np.zeros(batch_size, dtype=np.int64)
    free = np.zeros((batch_size, width - 1), dtype=bool)
    boundary = np.zeros((batch_size, width - 1), dtype=bool)
    for row, (text, free_row, boundary_row) in enumerate(layouts):
        ids[row, : len(text)] = vocab.encode(text)
        lengths[row] = len(text)
        free[row, : len(free_row)] = free_row
        boundary[row, : len(boundary_row)] = boundary_row
    decisions = np.where(boundary & ~free, SPLIT, NO_SPLIT).astype(np.int64)
    return SegmentationBatch(
        sentences=list(sentences),
        texts=[text for text, _, _ in layouts],
        ids=ids,
        lengths=lengths,
        decisions=decisions,
        free_mask=free,
        word_boundary_mask=boundary,
        hide_spaces=hide_spaces,
    )


def with_spaces(sentence: str, segments: Sequence[str]) -> list[str]:
    """A segmentation of ``sentence`` from a segmentation of its space-free text: each space goes back
    inside the segment that spans it, or becomes a segment of its own where a boundary falls at it.

        >>> with_spaces("the cat", ["th", "ecat"])
        ['th', 'e cat']
        >>> with_spaces("the cat", ["the", "cat"])
        ['the', ' ', 'cat']
    """
    out: list[str] = []
    position = 0  # index into sentence
    for segment in segments:
        piece = []
        for char in segment:
            while sentence[position] == " ":
                if piece:
                    piece.append(" ")
                else:
                    out.append(" ")
                position += 1
            piece.append(char)
            position += 1
        out.append("".join(piece))
    if position < len(sentence):
        out.append(sentence[position:])
    return out


class Evaluator(ABC):
    """A reward source for segmentation: Morfessor's decisions, a gold segmentation, a co-trained LM.

    Every method takes a whole batch, so a model-based evaluator scores many sentences in one pass.
    Scores and rewards are "higher is better".

    - ``score(batch)`` -> ``[B]``: the sequence-level score of each row's segmentation.
    - ``action_rewards(batch)`` -> ``[B, P]``: one reward per position, **causal**: column ``i``
      depends only on the text and ``decisions[:, : i + 1]``, except that the text's last position
      (``lengths - 2``) also carries whatever closes at the end of the text. An environment that
      decides left to right can therefore reward step ``i`` with the decisions made so far (later
      ones set to 0). Columns that are no reward (padding, for reference evaluators also forced
      positions) are 0.
    - ``update(batch)`` -> stats: one co-training step on the agent's latest segmentations (a no-op
      for fixed evaluators); the stats are logged.
    - ``pretrain(batches)`` -> stats: before training starts, learn from the untrained policy's
      segmentations (a no-op for fixed evaluators). ``segrl.agents.task.pretrain_evaluator`` calls it
      for any agent; a resumed run skips it (the evaluator's state is in the checkpoint).
    - ``heldout_metrics(batches)`` -> metrics of the evaluator itself on the agent's held-out
      segmentations (e.g. a language model's bits per character); empty for fixed evaluators.
    - ``reference(batch)`` -> ``(splits, known)`` ``[B, P]`` bool each, or None: the decisions the
      evaluator considers right, where it has one (``known`` False where it has no opinion).
    - ``teacher`` -> a ``Teacher`` or None: the evaluator's own boundary log-odds per position, for
      observations that carry them (``EnvConfig.teacher_features``); the co-trained ``slm`` has one.
    - ``own_segmenters()`` -> the evaluator's own segmentations of words, by name (``OwnSegmenter``),
      which a training job scores beside the agent; none for fixed evaluators.
    - ``state_dict``/``load_state_dict``: what a training checkpoint must keep of the evaluator.
    """

    name: ClassVar[str]

    @abstractmethod
    def score(self, batch: SegmentationBatch) -> np.ndarray:
        """[B] float64 sequence score of each row, higher is better."""

    @abstractmethod
    def action_rewards(self, batch: SegmentationBatch) -> np.ndarray:
        """[B, P] float64 per-decision reward (causal; see the class docstring)."""

    def update(self, batch: SegmentationBatch) -> dict[str, float]:
        """One co-training step on ``batch``; returns stats to log. Fixed evaluators do nothing."""
        return {}

    def pretrain(self, batches: Sequence[SegmentationBatch]) -> dict[str, float]:
        """Learn from the untrained policy's segmentations before training; returns stats."""
        return {}

    def check_stepwise(self, reward_mode: str) -> None:  # noqa: B027 - every decision can be
        """Raise ``ConfigError`` where ``reward_mode``'s rewards cannot be given one decision at a
        time from the decisions so far (``CharSegment``). Reference evaluators always can."""

    def heldout_metrics(self, batches: Sequence[SegmentationBatch]) -> dict[str, float]:
        """Metrics of the evaluator on held-out segmentations (logged beside the agent's)."""
        return {}

    def reference(self, batch: SegmentationBatch) -> tuple[np.ndarray, np.ndarray] | None:
        """``(splits, known)``, each [B, P] bool, for evaluators with a right answer; else None."""
        return None

    @property
    def teacher(self) -> Teacher | None:
        """The evaluator's boundary log-odds per position (see ``Teacher``), where it has them."""
        return None

    def own_segmenters(self) -> dict[str, OwnSegmenter]:
        """The evaluator's own segmentations of words as it stands, by a name that says which
        (``lm-viterbi``): a training job scores them beside the agent the evaluator rewards, its
        teacher's rows in ``segrl compare``. Empty for evaluators that do not segment."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - nothing to restore
        pass


class OwnSegmenter(Protocol):
    """A segmentation an evaluator makes itself (``Evaluator.own_segmenters``), as a segmenter."""

    kind: str
    """The ``segrl.kind`` its runs are logged as (``segrl compare --kind``)."""

    def segment_words(self, words: list[str]) -> list[list[str]]:
        """Each word's segments."""
        ...

    def segment_sentence(self, sentence: str) -> list[list[str]]:
        """The segments of each word of ``sentence`` (split at its spaces)."""
        ...


class Teacher(Protocol):
    """What a student that reads its teacher sees: at every position, the log-odds that the
    evaluator's own model splits there, ``log q - log(1 - q)`` (``[B, P]`` float64, 0 at padding).
    A ``Teacher`` is data a trained agent keeps beside its policy (``save``), since it needs it to
    segment."""

    def log_odds(self, batch: SegmentationBatch) -> np.ndarray:
        """[B, P] float64 log-odds of a split at every position of ``batch``'s texts."""
        ...

    def save(self, path: Path) -> None:
        """Write the teacher to the new folder ``path``."""
        ...
