"""Dynamic programs over all segmentations of a text: the forward algorithm (exact ``log p(X)``),
posterior boundary probabilities, and Viterbi decoding.

They work on a span table ``[B, L, R + 1]``: ``table[b, a, l]`` is the log-probability of the segment
of ``l`` characters starting at character ``a`` of text ``b`` (its terminator included, and the end of
the text for a span that reaches it), -inf where no such segment can occur (``l = 0``, across a
space, past the text, longer than the model allows). A segment ending right before a space is followed
by the next segment after the space (the space was its terminator).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

NEG_INF = float("-inf")


def logsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``torch.logsumexp`` that is -inf with a zero gradient (not NaN) where every entry is -inf."""
    some = torch.isfinite(x).any(dim)
    safe = torch.where(some.unsqueeze(dim), x, torch.zeros_like(x))
    return torch.where(
        some, torch.logsumexp(safe, dim), torch.full_like(some, NEG_INF, dtype=x.dtype)
    )


def spans_by_end(table: torch.Tensor) -> torch.Tensor:
    """``[B, L + 1, R + 1]``: ``out[b, e, l] = table[b, e - l, l]``, the segment of length l ending
    before character e (-inf where ``e - l < 0``)."""
    batch, width, top = table.shape[:3]
    ends = torch.arange(width + 1, device=table.device).unsqueeze(1)  # [L + 1, 1]
    lengths = torch.arange(top, device=table.device).unsqueeze(0)  # [1, R + 1]
    starts = ends - lengths  # [L + 1, R + 1]
    valid = (starts >= 0) & (starts < width)
    gathered = table[:, starts.clamp(0, width - 1), lengths.expand_as(starts)]
    return torch.where(_trailing(valid, table), gathered, NEG_INF)


def _trailing(mask: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``mask`` with a unit dimension for each of ``table``'s dimensions past ``[B, L, R + 1]`` (a
    span table with categories, ``segrl.lm.morphotactics``, has one more)."""
    return mask.view(mask.shape + (1,) * (table.dim() - 3))


def forward(
    table: torch.Tensor, space: torch.Tensor, lengths: torch.Tensor, viterbi: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The forward algorithm over segment ends.

    Args:
        table: [B, L, R + 1] span log-probabilities.
        space: [B, L] bool, True at spaces.
        lengths: [B] characters per text.
        viterbi: max instead of sum, and back-pointers.
    Returns:
        ``log p(X)`` (or the best segmentation's log-probability) [B], and with ``viterbi`` the
        back-pointers [B, L + 1] (length of the best segment ending before each position).
    """
    batch, width, top = table.shape
    # One column per end position (unbind: a slice per step would cost a full-size gradient each)
    by_end = spans_by_end(table)[:, :, 1:].unbind(1)  # L + 1 tensors [B, R]
    space_before = space.unbind(1)  # L tensors [B]
    window = table.new_full((batch, max(top - 1, 1)), NEG_INF)  # alpha at starts e-1, e-2, ...
    window[:, 0] = 0.0
    end_scores = [table.new_full((batch,), NEG_INF)]  # A_end[0]
    pointers = []
    for e in range(1, width + 1):
        candidates = window[:, : top - 1] + by_end[e]  # [B, R]
        if viterbi:
            best, arg = candidates.max(dim=1)
            pointers.append(arg + 1)
        else:
            best = logsumexp(candidates, dim=1)
        end_scores.append(best)
        # A segment may start at e unless a space precedes it; after a space, the segment that
        # ended before the space is the one that counts.
        start_score = torch.where(space_before[e - 1], end_scores[e - 1], best)
        window = torch.cat([start_score.unsqueeze(1), window[:, :-1]], dim=1)
    stacked = torch.stack(end_scores, dim=1)  # [B, L + 1]
    total = stacked.gather(1, lengths.unsqueeze(1)).squeeze(1)
    if not viterbi:
        return total, None
    back = torch.stack([torch.zeros_like(pointers[0]), *pointers], dim=1) if pointers else None
    return total, back


def run_remaining(inside: torch.Tensor) -> torch.Tensor:
    """``[B, L]``: at each position where ``inside`` is True, the positions from it to the end of
    its run of True (itself included); 0 elsewhere. With ``inside`` the characters of words, each
    character's room to the end of its word."""
    width = inside.shape[1]
    positions = torch.arange(width, device=inside.device).expand_as(inside)
    stops = torch.where(inside, width, positions)  # the first position outside at or after each
    next_stop = torch.flip(torch.cummin(torch.flip(stops, [1]), dim=1).values, [1])
    return torch.where(inside, next_stop - positions, 0)


def words(
    table: torch.Tensor, space: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The texts' words (runs between spaces) as texts of their own: their span table ``[W, Lw, R'
    + 1]`` (``Lw`` the longest word, ``R' = min(R, Lw)``), lengths ``[W]``, and the text ``[W]`` and
    first character ``[W]`` of each. A space is always a boundary, so the forward algorithm over a
    text is the sum of its words' (each word's last segment carries its terminator, and the text's
    end, in ``table``), and each word's posteriors are the text's."""
    batch, width, top = table.shape[:3]
    positions = torch.arange(width, device=table.device)
    inside = (positions < lengths.unsqueeze(1)) & ~space  # [B, L]
    before = torch.cat([inside.new_zeros(batch, 1), inside[:, :-1]], dim=1)
    rows, starts = (inside & ~before).nonzero(as_tuple=True)  # [W] each
    word_lengths = run_remaining(inside)[rows, starts]
    longest = int(word_lengths.max()) if len(rows) else 1
    offsets = torch.arange(longest, device=table.device)
    columns = starts.unsqueeze(1) + offsets  # [W, Lw]
    word_table = table[rows.unsqueeze(1), columns.clamp(max=width - 1), : min(top, longest + 1)]
    valid = (offsets < word_lengths.unsqueeze(1)).unsqueeze(2)
    return torch.where(_trailing(valid, table), word_table, NEG_INF), word_lengths, rows, starts


def log_partition(table: torch.Tensor, space: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``forward``'s total (``log p(X)``, differentiable) [B], computed word by word (``words``):
    the same sum, with the dynamic program's sequential loop as long as the longest word instead
    of the longest text."""
    word_table, word_lengths, rows, _ = words(table, space, lengths)
    totals, _ = forward(
        word_table, torch.zeros_like(word_table[..., 0], dtype=torch.bool), word_lengths
    )
    return totals.new_zeros(table.shape[0]).index_add(0, rows, totals)


def expected_lengths(
    table: torch.Tensor, space: torch.Tensor, lengths: torch.Tensor, power: float
) -> torch.Tensor:
    """Differentiable ``[B]``: the expected ``sum_k |m_k| ** power`` over the segments of each text
    under its posterior ``p(S | X)`` (the span table's), the expected-length regulariser of
    Kawakami, Dyer & Blunsom (2019). One forward pass in the expectation semiring, word by word as
    ``log_partition``: beside each end's ``log alpha`` it carries the expected cost of the segments
    before that end, ``E_e = sum_l w_(e,l) (E_(e-l) + l ** power)`` with ``w_(e,l)`` the posterior
    share of the last segment's length given the prefix; its gradient is the regulariser's."""
    word_table, word_lengths, rows, _ = words(table, space, lengths)
    batch, width, top = word_table.shape
    by_end = spans_by_end(word_table)[:, :, 1:].unbind(1)  # L + 1 tensors [W, R]
    cost = torch.arange(1, top, device=table.device, dtype=table.dtype) ** power  # [R]
    alpha = word_table.new_full((batch, max(top - 1, 1)), NEG_INF)  # at starts e-1, e-2, ...
    alpha[:, 0] = 0.0
    expected = word_table.new_zeros((batch, max(top - 1, 1)))
    ends = [word_table.new_zeros((batch,))]
    for e in range(1, width + 1):
        candidates = alpha[:, : top - 1] + by_end[e]  # [W, R]
        best = logsumexp(candidates, dim=1)
        weights = _shares(candidates, best.unsqueeze(1))
        here = (weights * (expected[:, : top - 1] + cost)).sum(1)
        ends.append(here)
        alpha = torch.cat([best.unsqueeze(1), alpha[:, :-1]], dim=1)
        expected = torch.cat([here.unsqueeze(1), expected[:, :-1]], dim=1)
    totals = torch.stack(ends, dim=1).gather(1, word_lengths.unsqueeze(1)).squeeze(1)
    return totals.new_zeros(table.shape[0]).index_add(0, rows, totals)


def backtrack(back: torch.Tensor, space: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Segment ends ``[B, L]`` (True at each segment's last character) from Viterbi back-pointers."""
    ends = torch.zeros(space.shape, dtype=torch.bool)
    back_rows, space_rows = back.cpu().tolist(), space.cpu().tolist()
    for row, n in enumerate(lengths.cpu().tolist()):
        e = n
        while e > 0:
            ends[row, e - 1] = True
            e -= back_rows[row][e]
            if e > 0 and space_rows[row][e - 1]:
                e -= 1
    return ends.to(space.device)


def boundary_marginals(
    table: torch.Tensor,
    space: torch.Tensor,
    lengths: torch.Tensor,
    partition: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Posterior probability ``[B, L]`` that a segment ends at each character, given the text: the
    gradient of ``log p(X)`` with respect to the span log-probabilities is each span's posterior,
    summed here over the spans that end at each character. ``partition`` maps the table to ``log
    p(X)`` [B] (``log_partition`` by default; with categories, ``segrl.lm.morphotactics``, whose
    table's last dimension, the category, is summed over)."""
    with torch.enable_grad():
        leaf = table.detach().requires_grad_(True)
        total = log_partition(leaf, space, lengths) if partition is None else partition(leaf)
        (marginals,) = torch.autograd.grad(total.sum(), leaf)  # [B, L, R + 1, ...]
    marginals = marginals.flatten(3).sum(3) if marginals.dim() > 3 else marginals
    batch, width, top = marginals.shape
    last = (
        torch.arange(width, device=table.device).unsqueeze(1)
        + torch.arange(top, device=table.device).unsqueeze(0)
        - 1
    )  # [L, R + 1], last character of span (a, l)
    out = torch.zeros(batch, width + top, device=table.device, dtype=table.dtype)
    index = (last.clamp(min=0)).flatten().expand(batch, -1)
    out.scatter_add_(1, index, marginals.flatten(1))
    return out[:, :width]


def bigram_forward(
    table: torch.Tensor,
    lengths: torch.Tensor,
    viterbi: bool = False,
    power: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The forward algorithm over segment ends where a segment's score depends on the length of the
    segment before it (a bigram over segments; texts without spaces).

    Args:
        table: [B, L, R + 1, R + 1]: ``table[b, a, l, p]`` the log-probability of the segment of
            ``l`` characters starting at ``a`` given that the segment before it has ``p``
            characters (``p = 0``: it starts the text, so only at ``a = 0``).
        lengths: [B] characters per text.
        viterbi: max instead of sum, and the best segmentation's segment ends.
        power: instead of the ends, the expected ``sum_k |m_k| ** power`` under the posterior
            ``p(S | X)`` (differentiable; ``expected_lengths``' regulariser, carried the same way
            beside each ``(end, last length)``'s ``log alpha``).
    Returns:
        ``log p(X)`` (or the best segmentation's log-probability) [B], and with ``viterbi`` its
        segment ends [B, L] (True at each segment's last character), with ``power`` the
        expectation [B].
    """
    batch, width, top, previous = table.shape
    if previous != top:
        raise ValueError(f"a bigram span table is [B, L, R + 1, R + 1], got {list(table.shape)}")
    by_end = spans_by_end(table)[:, :, 1:].unbind(1)  # L + 1 tensors [B, R, R + 1]
    # alpha at ends e-1, e-2, ... over the last segment's length: [B, R, R + 1]
    window = table.new_full((batch, max(top - 1, 1), top), NEG_INF)
    window[:, 0, 0] = 0.0
    expected = torch.zeros_like(window)  # the expected cost of the segments up to each end
    cost = torch.arange(1, top, device=table.device, dtype=table.dtype) ** (power or 1.0)
    alphas, costs = [window[:, 0]], [expected[:, 0]]  # at each end [B, R + 1]
    pointers = []
    impossible = table.new_full((batch, 1), NEG_INF)  # no segment of length 0 ends anywhere
    for e in range(1, width + 1):
        candidates = window[:, : top - 1] + by_end[e]  # [B, R, R + 1]: (length, previous length)
        if viterbi:
            best, arg = candidates.max(dim=2)
            pointers.append(arg)
        else:
            best = logsumexp(candidates, dim=2)  # [B, R]
        here = torch.cat([impossible, best], dim=1)  # [B, R + 1]
        alphas.append(here)
        window = torch.cat([here.unsqueeze(1), window[:, :-1]], dim=1)
        if power is not None:
            share = _shares(candidates, best.unsqueeze(2))  # p(previous length | end, length)
            spent = (share * expected[:, : top - 1]).sum(2) + cost  # [B, R]
            spent = torch.cat([spent.new_zeros(batch, 1), spent], dim=1)
            costs.append(spent)
            expected = torch.cat([spent.unsqueeze(1), expected[:, :-1]], dim=1)
    rows = torch.arange(batch, device=table.device)
    final = torch.stack(alphas, dim=1)[rows, lengths]  # [B, R + 1]
    if power is not None:
        total = logsumexp(final, dim=1)
        share = _shares(final, total.unsqueeze(1))
        return total, (share * torch.stack(costs, dim=1)[rows, lengths]).sum(1)
    if not viterbi:
        return logsumexp(final, dim=1), None
    best, last = final.max(dim=1)
    ends = torch.zeros(batch, width, dtype=torch.bool)
    back = [p.cpu() for p in pointers]
    for row, (n, length) in enumerate(zip(lengths.tolist(), last.tolist(), strict=True)):
        e = n
        while e > 0 and length > 0:
            ends[row, e - 1] = True
            length, e = int(back[e - 1][row, length - 1]), e - length
    return best, ends.to(table.device)


def _shares(scores: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """``exp(scores - total)``, 0 where either is -inf (a posterior share without NaNs)."""
    shift = torch.where(torch.isfinite(total), total, torch.zeros_like(total))
    return torch.where(torch.isfinite(scores), scores - shift, NEG_INF).exp()
