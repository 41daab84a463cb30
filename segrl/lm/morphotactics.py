"""Hidden segment categories with learnt transitions: prefix, stem and suffix, as in Morfessor
Categories-ML and FlatCat (Creutz and Lagus 2005; Gronroos et al. 2014).

Each segment of a word has one of ``CATEGORIES`` and the categories of a word follow a first-order
Markov chain that starts before the word, restricted to the morphotactics of those models: a word
starts with a prefix or a stem, a prefix is followed by a prefix or a stem, a word ends after a stem
or a suffix, and a suffix follows a stem or a suffix (a suffix may be followed by a stem, for
compounds)::

    log p(word, S, C) = sum_k [ log p(c_k | c_(k-1)) + log p(m_k | c_k) ]    (c_K may end a word)

The segment's probability given its category, ``p(m | c)``, is the span table of one category
(``[W, L, R + 1, K]``: each category mixes the speller with its own lexicon softmax). The word's end
is the segments' own, as without categories: the last segment's terminator (a space follows), or
the end of the text, which the category of the text's last segment decides after it (that
segment's probability taken given that it is not the end: ``SLM``'s span table). The chain has no
end of its own, which would count a word's end twice and leak probability mass: each row of the
transitions is a distribution over the next category, and a word may end after the categories
that the morphotactics let end one (the only mass lost: a word its segments end after a prefix).
Summing over both segmentations and category sequences is a semi-Markov forward algorithm with the
category as its state, so ``log p(X)``, the posterior probability of a boundary at every position
and the Viterbi segmentation stay exact; a text's words are independent given their characters (a
space is always a boundary), so these run word by word (``lattice.words``).
"""

from __future__ import annotations

import torch
from torch import nn

from segrl.lm import lattice
from segrl.lm.lattice import NEG_INF, logsumexp

CATEGORIES = ("prefix", "stem", "suffix")
PREFIX, STEM, SUFFIX = range(3)
START, END = 3, 3
"""Row ``START`` of the transition table is the start of a word; column ``END`` its end."""

_ALLOWED = {
    START: (PREFIX, STEM),
    PREFIX: (PREFIX, STEM),
    STEM: (STEM, SUFFIX, END),
    SUFFIX: (SUFFIX, STEM, END),
}


def category_count(kind: str, free: int) -> int:
    """How many categories a model of ``LMConfig.categories`` ``kind`` has (``free``: its
    ``free_categories``)."""
    return free if kind == "free" else len(CATEGORIES)


def allowed_transitions(kind: str = "prefix-stem-suffix", free: int = 0) -> torch.Tensor:
    """``[K + 1, K + 1]`` bool: rows the previous category (last row: the start of a word), columns
    the next (last column: the end of the word). ``prefix-stem-suffix``: the morphotactics above;
    ``free``: ``free`` classes, any after any, a word of at least one segment."""
    k = category_count(kind, free)
    if kind == "free":
        allowed = torch.ones(k + 1, k + 1, dtype=torch.bool)
        allowed[k, k] = False  # the start of a word is not its end
        return allowed
    allowed = torch.zeros(k + 1, k + 1, dtype=torch.bool)
    for row, columns in _ALLOWED.items():
        allowed[row, list(columns)] = True
    return allowed


class Transitions(nn.Module):
    """Learnt transition probabilities between categories, zero where the morphotactics forbid;
    ``logits``' last column (the end of a word) is not read: the segments end a word."""

    def __init__(self, kind: str = "prefix-stem-suffix", free: int = 0) -> None:
        super().__init__()
        self.register_buffer("allowed", allowed_transitions(kind, free), persistent=False)
        self.logits = nn.Parameter(torch.zeros(self.allowed.shape))

    def forward(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``start`` [K] and ``between`` [K, K] (from, to) log-probabilities, each row a
        distribution over the next category (``start``'s over the first), and ``end`` [K]: 0 where
        a word may end after the category, -inf where the morphotactics forbid it. The word's end
        itself is its last segment's (``p(m | c)``), not the chain's."""
        k = self.allowed.shape[0] - 1
        allowed = self.allowed[:, :k]
        masked = torch.where(allowed, self.logits[:, :k], NEG_INF)
        table = torch.log_softmax(masked, dim=1)  # [K + 1, K]; -inf where forbidden
        end = torch.where(self.allowed[:k, k], 0.0, NEG_INF).to(table)
        return table[k], table[:k], end


def forward(
    table: torch.Tensor,
    lengths: torch.Tensor,
    transitions: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    viterbi: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None]:
    """The forward algorithm over segment ends and categories, for texts without spaces (words).

    Args:
        table: [W, L, R + 1, K] span log-probabilities per category (``lattice.spans_by_end``'s
            convention); lengths: [W] characters per word; transitions: ``Transitions()``.
        viterbi: max instead of sum, with back-pointers.
    Returns:
        ``log p(word)`` (or the best segmentation and categories' log-probability) [W], and with
        ``viterbi`` the back-pointers: for each end e and category k, the best segment's length
        [W, L + 1, K], the category before it [W, L + 1, K], and the last category [W].
    """
    start, between, end = transitions
    words, width, top, k = table.shape
    by_end = lattice.spans_by_end(table)[:, :, 1:].unbind(1)  # L + 1 tensors [W, R, K]
    # incoming[:, j] is the score of starting a segment of each category at e - 1 - j
    incoming = table.new_full((words, max(top - 1, 1), k), NEG_INF)
    incoming[:, 0] = start
    alphas = [table.new_full((words, k), NEG_INF)]
    lengths_back, previous_back = [], []
    for e in range(1, width + 1):
        candidates = incoming[:, : top - 1] + by_end[e]  # [W, R, K]
        if viterbi:
            alpha, arg = candidates.max(dim=1)  # [W, K]
            lengths_back.append(arg + 1)
            into = alpha.unsqueeze(2) + between  # [W, K from, K to]
            next_start, came_from = into.max(dim=1)
            previous_back.append(came_from)
        else:
            alpha = logsumexp(candidates, dim=1)
            next_start = logsumexp(alpha.unsqueeze(2) + between, dim=1)  # [W, K]
        alphas.append(alpha)
        incoming = torch.cat([next_start.unsqueeze(1), incoming[:, :-1]], dim=1)
    stacked = torch.stack(alphas, dim=1)  # [W, L + 1, K]
    last = stacked.gather(1, lengths.view(-1, 1, 1).expand(-1, 1, k)).squeeze(1) + end  # [W, K]
    if not viterbi:
        return logsumexp(last, dim=1), None
    best, final = last.max(dim=1)
    zeros = torch.zeros((words, k), dtype=torch.long, device=table.device)
    back_lengths = torch.stack([zeros, *lengths_back], dim=1)
    back_previous = torch.stack([zeros, *previous_back], dim=1)
    return best, (back_lengths, back_previous, final)


def log_partition(
    table: torch.Tensor,
    space: torch.Tensor,
    lengths: torch.Tensor,
    transitions: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> torch.Tensor:
    """Differentiable ``log p(X)`` [B] of texts (``[B, L, R + 1, K]`` span table), word by word."""
    word_table, word_lengths, rows, _ = lattice.words(table, space, lengths)
    totals, _ = forward(word_table, word_lengths, transitions)
    return totals.new_zeros(table.shape[0]).index_add(0, rows, totals)


def viterbi(
    table: torch.Tensor,
    space: torch.Tensor,
    lengths: torch.Tensor,
    transitions: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The most probable segmentation and categories of each text: segment ends ``[B, L]`` (True at
    each segment's last character), each segment's category at its last character ``[B, L]`` (-1
    elsewhere), and the log-probability ``[B]``."""
    word_table, word_lengths, rows, starts = lattice.words(table, space, lengths)
    best, (back_lengths, back_previous, final) = forward(
        word_table, word_lengths, transitions, viterbi=True
    )
    ends = torch.zeros(space.shape, dtype=torch.bool)
    categories = torch.full(space.shape, -1, dtype=torch.long)
    lengths_rows, previous_rows = back_lengths.cpu().tolist(), back_previous.cpu().tolist()
    for w, (row, first, n, category) in enumerate(
        zip(rows.tolist(), starts.tolist(), word_lengths.tolist(), final.tolist(), strict=True)
    ):
        e = n
        while e > 0:
            ends[row, first + e - 1] = True
            categories[row, first + e - 1] = category
            segment_start = e - lengths_rows[w][e][category]
            if segment_start > 0:
                category = previous_rows[w][segment_start][category]
            e = segment_start
    totals = best.new_zeros(table.shape[0]).index_add(0, rows, best)
    return ends.to(space.device), categories.to(space.device), totals
