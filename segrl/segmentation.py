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

import warnings
from collections.abc import Callable, Iterable, Sequence

from segrl.errors import DataWarning


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


def split_long(text: str, limit: int | None) -> list[tuple[str, bool]]:
    """``text`` as pieces of at most ``limit`` characters (all of it where ``limit`` is None), each
    with whether a space (left out of the pieces) follows it: cut at the last space that keeps a
    piece within the limit, else after ``limit`` characters.

    >>> split_long("ab cd ef", 5)
    [('ab cd', True), ('ef', False)]
    """
    pieces = []
    while limit is not None and len(text) > limit:
        cut = text.rfind(" ", 1, limit + 1)
        if cut > 0:
            pieces.append((text[:cut], True))
            text = text[cut + 1 :]
        else:
            pieces.append((text[:limit], False))
            text = text[limit:]
    return [*pieces, (text, False)]


def segment_in_pieces(
    segment: Callable[[list[str]], list[list[str]]],
    texts: Sequence[str],
    limit: int | None,
    reader: str,
) -> list[list[str]]:
    """``segment(texts)`` for a segmenter that reads at most ``limit`` characters at a time (None:
    any number): a longer text is segmented as its pieces (``split_long``), each on its own, with a
    boundary at each cut and a space between two pieces a segment of its own. The first time a
    text is cut, a ``DataWarning`` says so, naming ``reader``, what reads at most ``limit``
    characters (``"runs/units: a unit model"``)."""
    pieces = [split_long(text, limit) for text in texts]
    if any(len(parts) > 1 for parts in pieces):
        warnings.warn(
            DataWarning(
                f"{reader} reads at most {limit} characters at a time: a longer word or sentence "
                f"is segmented in pieces of at most {limit} characters, cut at a space where "
                "there is one, with a boundary at each cut"
            ),
            stacklevel=2,
        )
    found = iter(segment([piece for parts in pieces for piece, _space in parts]))
    out = []
    for parts in pieces:
        segments: list[str] = []
        for _piece, space in parts:
            segments += next(found) + ([" "] if space else [])
        out.append(segments)
    return out
