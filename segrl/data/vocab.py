"""The character vocabulary, saved and reloaded with every model that reads characters."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from segrl.errors import ModelError

PAD = "<pad>"
BOS = "<bos>"
EOS = "<eos>"
"""End of segment: closes each segment when a language model spells it character by character."""
SPECIALS = (PAD, BOS, EOS)


class CharVocab:
    """Characters <-> integer ids. Ids 0..2 are ``<pad>``, ``<bos>``, ``<eos>``; then the placeholder
    character that stands for every rare or unseen character; then the corpus's characters, most
    frequent first (ties broken by code point), so the same corpus always gives the same ids.
    """

    pad_id = 0
    bos_id = 1
    eos_id = 2

    def __init__(self, chars: Sequence[str], placeholder: str):
        if placeholder in chars:
            chars = [c for c in chars if c != placeholder]
        self.placeholder = placeholder
        self.symbols: list[str] = [*SPECIALS, placeholder, *chars]
        self._ids = {s: i for i, s in enumerate(self.symbols)}
        self.unk_id = self._ids[placeholder]

    @classmethod
    def from_texts(cls, texts: Iterable[str], placeholder: str) -> CharVocab:
        counts = Counter()
        for text in texts:
            counts.update(text)
        chars = sorted(counts, key=lambda c: (-counts[c], c))
        return cls(chars, placeholder)

    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, char: str) -> bool:
        return char in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharVocab) and self.symbols == other.symbols

    def encode(self, text: str) -> list[int]:
        """Ids of the characters of ``text``; characters not in the vocabulary get the placeholder's id."""
        get = self._ids.get
        return [get(c, self.unk_id) for c in text]

    def decode(self, ids: Iterable[int]) -> str:
        """Characters of ``ids``; special symbols are dropped."""
        return "".join(self.symbols[i] for i in ids if i >= len(SPECIALS))

    def to_dict(self) -> dict:
        return {"placeholder": self.placeholder, "symbols": self.symbols}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=0), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> CharVocab:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            symbols = data["symbols"]
            placeholder = data["placeholder"]
        except FileNotFoundError:
            raise ModelError(
                f"{path}: vocabulary file missing; the model was not saved completely"
            ) from None
        except (ValueError, KeyError, TypeError) as e:  # ValueError: not UTF-8, or not JSON
            raise ModelError(f"{path}: not a segrl character vocabulary ({e})") from None
        if (
            not isinstance(symbols, list)
            or not all(isinstance(s, str) for s in symbols)
            or tuple(symbols[: len(SPECIALS) + 1]) != (*SPECIALS, placeholder)
        ):
            raise ModelError(f"{path}: vocabulary layout not recognised; was it written by segrl?")
        return cls(symbols[len(SPECIALS) + 1 :], placeholder)
