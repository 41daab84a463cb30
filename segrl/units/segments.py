"""Segments read off an attention map, as in the NVIB and DCSA papers.

Each query position (a character of the text) attends most to one key; maximal runs of consecutive
query positions that share their argmax key form one segment.

    >>> import numpy as np
    >>> attention = np.array([[.9, .1], [.8, .2], [.3, .7]])   # [queries = characters, keys]
    >>> segments_from_attention(attention, "abc")
    ['ab', 'c']
"""

from __future__ import annotations

from typing import Any

import numpy as np


def segments_from_attention(attention: Any, text: str) -> list[str]:
    """Segments of ``text`` from an attention map ``[len(text), keys]`` (rows beyond the text, e.g.
    padding, are ignored; a NumPy array or a tensor)."""
    weights = np.asarray(attention.detach().cpu() if hasattr(attention, "detach") else attention)
    if weights.ndim != 2 or weights.shape[0] < len(text):
        raise ValueError(
            f"attention of shape {weights.shape} does not cover {len(text)} characters"
        )
    if not text:
        return []
    keys = weights[: len(text)].argmax(axis=1)  # [len(text)]
    cuts = [i for i in range(1, len(text)) if keys[i] != keys[i - 1]]
    edges = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]
