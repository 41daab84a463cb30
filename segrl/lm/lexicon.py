"""A lexicon of frequent segments, mixed with the speller.

With a lexicon, a segment and its terminator come from one of two paths, chosen by a gate
``lambda(h)`` on the context vector ``h``:

    p(m, t | h) = lambda(h) p_lex(m | h) p_lex(t | h, m)  +  (1 - lambda(h)) p_spell(m, t | h)

``p_lex`` is a softmax over the lexicon's entries (non-empty strings), ``p_lex(t | h, m)`` a binary
choice between ``<eos>`` and a following space, and ``p_spell`` the speller (``segrl.lm.speller``),
which alone can end the text. Both paths are normalised, so the mixture is too; a segment outside the
lexicon gets the speller's share only. The lexicon is what lets a word-level or BPE-level model
predict whole units as a closed-vocabulary model does while staying an open-vocabulary model of
characters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn


def build_lexicon(
    segmentations: Iterable[Sequence[str]], size: int, min_count: int = 2
) -> list[str]:
    """The ``size`` most frequent segments seen at least ``min_count`` times (ties by the string)."""
    counts: Counter[str] = Counter()
    for segments in segmentations:
        counts.update(s for s in segments if s and " " not in s)
    frequent = [s for s, n in counts.items() if n >= min_count]
    frequent.sort(key=lambda s: (-counts[s], s))
    return frequent[:size]


class Lexicon(nn.Module):
    """The lexicon path of the mixture; ``entries`` are its segments, ``cond_dim`` the context size."""

    def __init__(self, entries: Sequence[str], cond_dim: int):
        super().__init__()
        if not entries:
            raise ValueError("a lexicon needs at least one entry")
        self.entries = list(entries)
        self.index = {s: i for i, s in enumerate(self.entries)}
        self.gate = nn.Linear(cond_dim, 1)
        self.out = nn.Linear(cond_dim, len(self.entries))
        self.terminator = nn.Embedding(len(self.entries), cond_dim + 1)

    def __len__(self) -> int:
        return len(self.entries)

    def ids(self, segments: Sequence[str], device: torch.device) -> torch.Tensor:
        """[N] lexicon ids of ``segments``, -1 for segments not in the lexicon."""
        get = self.index.get
        return torch.tensor([get(s, -1) for s in segments], dtype=torch.long, device=device)

    def mix(
        self,
        cond: torch.Tensor,
        ids: torch.Tensor,
        spelled: torch.Tensor,
        space_follows: torch.Tensor,
    ) -> torch.Tensor:
        """[N] mixture log-probabilities of segments with their terminators.

        Args:
            cond: [N, cond_dim] context vectors; ids: [N] lexicon ids (-1: not in the lexicon);
            spelled: [N] the speller's ``log p(m, t | h)``; space_follows: [N] bool, t is a space.
        """
        gate = self.gate(cond).squeeze(-1)  # [N]
        spell_share = F.logsigmoid(-gate) + spelled
        known = ids >= 0
        safe = ids.clamp(min=0)
        logits = self.out(cond)  # [N, M]
        entry = logits.gather(1, safe.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=1)
        weights = self.terminator(safe)  # [N, cond_dim + 1]
        term_logit = (weights[:, :-1] * cond).sum(-1) + weights[:, -1]
        term = F.logsigmoid(torch.where(space_follows, term_logit, -term_logit))
        lexical = F.logsigmoid(gate) + entry + term
        return torch.where(known, torch.logaddexp(lexical, spell_share), spell_share)

    def end(self, cond: torch.Tensor, spelled_end: torch.Tensor) -> torch.Tensor:
        """[B] ``log p(end of text | h)``: only the speller ends a text."""
        return F.logsigmoid(-self.gate(cond).squeeze(-1)) + spelled_end
