"""A segmentation of a string, as segments or as boundary positions.

A segmentation of ``text`` is a list of non-empty segments whose concatenation is ``text``. Its
boundaries are the positions ``i`` (``0 < i < len(text)``) where a segment ends before ``text[i]``;
its decisions are the ``len(text) - 1`` binary choices "split after character i".

    >>> boundaries_of(["walk", "ed"])
    frozenset({4})
    >>> segments_at("walked", {4})
    ['walk', 'ed']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def boundaries_of(segments: Sequence[str]) -> frozenset[int]:
    """Positions of the internal boundaries of a segmentation (empty segments are ignored)."""
    positions = []
    offset = 0
    for segment in segments:
        if not segment:
            continue
        if offset:
            positions.append(offset)
        offset += len(segment)
    return frozenset(positions)


def segments_at(text: str, boundaries: Iterable[int]) -> list[str]:
    """Split ``text`` at the given boundary positions (out-of-range positions are an error)."""
    cuts = sorted(set(boundaries))
    if cuts and (cuts[0] <= 0 or cuts[-1] >= len(text)):
        raise ValueError(f"boundaries {cuts} outside 1..{len(text) - 1} for {text!r}")
    edges = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


def segments_from_decisions(text: str, decisions: Sequence[int]) -> list[str]:
    """Split ``text`` where ``decisions[i]`` is true (split after character ``i``).

    Decisions beyond ``len(text) - 1`` (padding) are ignored.
    """
    n = len(text)
    return segments_at(text, [i + 1 for i, d in enumerate(decisions[: max(n - 1, 0)]) if d])


def decisions_of(segments: Sequence[str]) -> list[int]:
    """The ``len(text) - 1`` binary decisions of a segmentation."""
    n = sum(len(s) for s in segments)
    cuts = boundaries_of(segments)
    return [int(i + 1 in cuts) for i in range(max(n - 1, 0))]


def render(words: Sequence[Sequence[str]], joiner: str = "-") -> str:
    """A sentence's word segmentations as text: segments joined by ``joiner``, words by spaces.

    >>> render([["the"], ["cat", "s"]])
    'the cat-s'
    """
    return " ".join(joiner.join(segments) for segments in words)
