"""Which actions of the full rule set make sense where (for ``MaskablePPO`` and the batched PPO).

Position ``i`` of a text is the boundary between characters ``a = text[i]`` and ``b = text[i + 1]``.
The full rule set (``segrl.evaluators.RULES``, after Narasimhan et al. 2015; spec §1.1) says how the
left part's last character relates to the stem it stands for; a rule is valid only where the text
can show it:

- ``no-split`` and ``split``: everywhere;
- ``split+repeat`` (plan + n + ing -> "planning"): the boundary doubles a letter, so ``a == b``;
- ``split+delete`` (create - e + ed -> "created"): a stem's final ``e`` was dropped before a
  vowel-initial suffix, so ``a`` is a consonant letter and ``b`` a vowel (``aeiouy``);
- ``split+modify`` (study, y -> i, + ed -> "studied"): the stem's final ``y`` shows as ``i``, so
  ``a == "i"`` and ``b`` is a letter.

Masks are boolean and True where an action is allowed. The binary rule set allows both actions
everywhere. Every evaluator scores any split alike, so masks shape what is explored, not the reward.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from segrl.evaluators import RULES

REPEAT, DELETE, MODIFY = (RULES.index(r) for r in ("split+repeat", "split+delete", "split+modify"))
VOWELS = frozenset("aeiouy")


def rule_mask(left: str, right: str, n_actions: int) -> np.ndarray:
    """[A] bool: the actions allowed between the characters ``left`` and ``right``."""
    allowed = np.ones(n_actions, dtype=bool)
    if n_actions == 2:
        return allowed
    letters = left.isalpha() and right.isalpha()
    allowed[REPEAT] = letters and left == right
    allowed[DELETE] = letters and left not in VOWELS and right in VOWELS
    allowed[MODIFY] = letters and left == "i"
    return allowed


def text_rule_masks(text: str, positions: int, n_actions: int) -> np.ndarray:
    """[P, A] bool: the allowed actions at every position of ``text`` (padding allows all)."""
    masks = np.ones((positions, n_actions), dtype=bool)
    if n_actions == 2:
        return masks
    for i in range(min(len(text) - 1, positions)):
        masks[i] = rule_mask(text[i], text[i + 1], n_actions)
    return masks


def batch_rule_masks(texts: Sequence[str], positions: int, n_actions: int) -> np.ndarray:
    """[B, P, A] bool: ``text_rule_masks`` of every text."""
    return np.stack([text_rule_masks(text, positions, n_actions) for text in texts])


def position_rule_masks(texts: Sequence[str], position: np.ndarray, n_actions: int) -> np.ndarray:
    """[N, A] bool: the allowed actions of each text at its ``position`` [N] (all allowed past the
    last position)."""
    masks = np.ones((len(texts), n_actions), dtype=bool)
    if n_actions == 2:
        return masks
    for row, (text, i) in enumerate(zip(texts, position, strict=True)):
        if i + 1 < len(text):
            masks[row] = rule_mask(text[i], text[i + 1], n_actions)
    return masks
