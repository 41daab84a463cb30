"""Character noise for denoising autoencoders and for robustness tests.

- ``delete_characters``: the training noise of the NVIB paper (BART-style deletion): every character
  is deleted independently with probability ``prob``, re-drawn for every batch.
- ``perturb``: synthetic perturbations in the style of TextAttack's character transformations, at a
  per-character rate: ``swap`` (exchange with the next character), ``delete``, ``insert`` (a random
  character after this one), ``substitute`` (a different random character).

Noise never leaves a text empty (an encoder needs a character to read): when every character would
go, one character (chosen by the same generator) stays.

    >>> import random
    >>> delete_characters("abc", 0.0, random.Random(0))
    'abc'
"""

from __future__ import annotations

import random
import typing
from collections.abc import Sequence
from typing import Literal

NoiseKind = Literal["swap", "delete", "insert", "substitute"]
NOISE_KINDS: tuple[str, ...] = typing.get_args(NoiseKind)


def delete_characters(text: str, prob: float, rng: random.Random) -> str:
    """``text`` with each character deleted with probability ``prob`` (at least one stays)."""
    if prob <= 0 or not text:
        return text
    kept = [c for c in text if rng.random() >= prob]
    if not kept:
        return text[rng.randrange(len(text))]
    return "".join(kept)


def perturb(text: str, kind: str, rate: float, rng: random.Random, alphabet: Sequence[str]) -> str:
    """``text`` with each character perturbed by ``kind`` with probability ``rate``.

    ``alphabet`` supplies inserted and substituted characters.
    """
    if kind not in NOISE_KINDS:
        raise ValueError(f"unknown noise {kind!r}: use one of {', '.join(NOISE_KINDS)}")
    if kind == "delete":
        return delete_characters(text, rate, rng)
    if not alphabet:
        raise ValueError("perturbation needs a non-empty alphabet")
    chars = list(text)
    if kind == "swap":
        i = 0
        while i < len(chars) - 1:
            if rng.random() < rate:
                chars[i], chars[i + 1] = chars[i + 1], chars[i]
                i += 2
            else:
                i += 1
        return "".join(chars)
    out: list[str] = []
    for c in chars:
        hit = rng.random() < rate
        if kind == "insert":
            out.append(c)
            if hit:
                out.append(rng.choice(alphabet))
        elif hit:  # substitute
            choices = [a for a in alphabet if a != c] or list(alphabet)
            out.append(rng.choice(choices))
        else:
            out.append(c)
    return "".join(out)


def noise_alphabet(symbols: Sequence[str]) -> list[str]:
    """Characters that insertion and substitution draw from: single printable non-space characters
    of a vocabulary (special symbols and the placeholder left out)."""
    return [
        s for s in symbols if len(s) == 1 and s.isprintable() and not s.isspace() and s != "\ufffd"
    ]
