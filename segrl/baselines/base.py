"""The one small interface of the classic segmenters: ``train(corpus)``, ``segment(word)``,
``save(path)`` and ``load(path)``, as Morfessor's own model objects have.

Segmenters segment words: spaces are known word boundaries (as in the study). Characters the
segmenter did not see in training are mapped to the corpus placeholder before the backend sees them and
restored afterwards, so ``"".join(segment(w)) == w`` always holds.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from segrl.data.corpus import PLACEHOLDER, Corpus
from segrl.errors import ConfigError, ModelError
from segrl.files import atomic_folder
from segrl.model_files import CLASSIC_META_FILE as META_FILE


class Segmenter(ABC):
    """A classic segmenter. Subclasses implement ``_train``, ``_segment`` and, when they have a model
    file, ``_save_files``/``_load_files``."""

    method: ClassVar[str]
    native_files: ClassVar[tuple[str, ...]] = ()
    """The files ``_save_files`` writes that a native library reads (which cannot tell a damaged
    file from a different model, and may abort the process on one): ``save`` records their size
    and SHA-256 in ``segmenter.json``, and ``load`` refuses a file that no longer matches before
    the library sees it."""
    _classes: ClassVar[dict[str, type[Segmenter]]] = {}
    """Every segmenter class by its ``method``, each entered as it is defined, so that ``load``
    finds the class of a saved segmenter without importing the registry above this module."""

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if "method" in cls.__dict__:
            Segmenter._classes[cls.method] = cls

    def __init__(self, **options: Any):
        self.options = options
        self.alphabet: frozenset[str] | None = frozenset()
        """The characters the backend knows (others go to it as ``placeholder``); None: all."""
        self.placeholder = PLACEHOLDER
        self.trained = False

    # --- public interface -------------------------------------------------------------------------
    def train(self, corpus: Corpus) -> Segmenter:
        """Train on the corpus's training split; returns self."""
        self.alphabet = frozenset(corpus.vocab.symbols[3:])
        self.placeholder = corpus.vocab.placeholder
        self._train(corpus)
        self.trained = True
        return self

    def segment(self, word: str) -> list[str]:
        """Segments of one word (no spaces); they concatenate back to ``word``."""
        if not self.trained:
            raise ModelError(f"the {self.method} segmenter is not trained: call train() or load()")
        if not word:
            return []
        known = word
        if self.alphabet is not None:
            known = "".join(c if c in self.alphabet else self.placeholder for c in word)
        pieces = self._segment(known)
        lengths = [len(p) for p in pieces if p]
        if sum(lengths) != len(word):
            raise ModelError(f"{self.method} returned pieces {pieces} that do not spell {known!r}")
        out, start = [], 0
        for n in lengths:
            out.append(word[start : start + n])
            start += n
        return out

    def segment_words(self, words: list[str]) -> list[list[str]]:
        """Segment a batch of words."""
        return [self.segment(w) for w in words]

    def characters(self) -> frozenset[str]:
        """The characters the trained model knows: its alphabet, or for a model read from another
        tool's file (``alphabet`` None), the characters of its own pieces. Upper case among them
        means it was trained on cased text, and is to be given text as written."""
        return self.alphabet if self.alphabet is not None else self._model_characters()

    def segment_sentence(self, sentence: str) -> list[list[str]]:
        """Segment each space-separated word of a sentence."""
        return self.segment_words(sentence.split())

    def save(self, path: str | Path) -> Path:
        """Save to the folder ``path``, atomically: an interrupted save leaves any earlier model intact."""
        path = Path(path)
        with atomic_folder(path) as tmp:
            self._save_files(tmp)
            meta = {
                "method": self.method,
                "options": self.options,
                "alphabet": None if self.alphabet is None else sorted(self.alphabet),
                "placeholder": self.placeholder,
            }
            if self.native_files:
                meta["files"] = {name: _fingerprint(tmp / name) for name in self.native_files}
            (tmp / META_FILE).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Segmenter:
        """Load a segmenter saved by ``save`` (of this class, or of any class when called on ``Segmenter``)."""
        path = Path(path)
        meta_file = path / META_FILE
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
            method = meta["method"]
        except FileNotFoundError:
            raise ModelError(f"{path}: no saved segmenter here ({META_FILE} missing)") from None
        except (ValueError, KeyError, TypeError) as e:  # ValueError: not UTF-8, or not JSON
            raise ModelError(f"{meta_file}: not a segrl segmenter description ({e})") from None
        klass = Segmenter._classes.get(method) if isinstance(method, str) else None
        if klass is None:
            raise ModelError(
                f"{meta_file}: a {method!r} segmenter, which this segrl does not know (it knows "
                f"{', '.join(Segmenter._classes)})"
            )
        if cls is not Segmenter and not issubclass(klass, cls):
            raise ModelError(f"{path}: holds a {method} segmenter, not a {cls.method} one")
        try:
            segmenter = klass(**meta.get("options", {}))
            alphabet = meta.get("alphabet", [])
            segmenter.alphabet = (
                None if alphabet is None else frozenset(_strings(alphabet, "alphabet"))
            )
            segmenter.placeholder = meta.get("placeholder", PLACEHOLDER)
            if not isinstance(segmenter.placeholder, str) or len(segmenter.placeholder) != 1:
                raise ValueError(
                    f"placeholder must be one character, got {segmenter.placeholder!r}"
                )
        except (TypeError, ValueError) as e:  # edited by hand: options of the wrong name or type
            raise ModelError(
                f"{meta_file}: options that make no {method} segmenter ({e})"
            ) from None
        _check_fingerprints(path, meta.get("files"))
        segmenter._load_files(path)
        segmenter.trained = True
        return segmenter

    # --- for subclasses ----------------------------------------------------------------------------
    @abstractmethod
    def _train(self, corpus: Corpus) -> None: ...

    @abstractmethod
    def _segment(self, word: str) -> list[str]:
        """Pieces of ``word``, whose characters are all in the alphabet; they must spell it."""

    def _model_characters(self) -> frozenset[str]:
        """The characters of the model's own pieces (for ``characters`` where there is no alphabet)."""
        return frozenset()

    def _save_files(self, folder: Path) -> None:  # noqa: B027 - models without files save nothing
        pass

    def _load_files(self, folder: Path) -> None:  # noqa: B027
        pass


def _fingerprint(path: Path) -> dict[str, Any]:
    """The size and SHA-256 of the file ``path``, as ``segmenter.json`` records them."""
    data = path.read_bytes()
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _check_fingerprints(folder: Path, recorded: Any) -> None:
    """Raise ``ModelError`` unless each file ``recorded`` (``segmenter.json``'s ``files``; absent
    in folders saved before it was kept) is still the one ``save`` wrote into ``folder``."""
    if recorded is None:
        return
    if not isinstance(recorded, dict):
        raise ModelError(f"{folder / META_FILE}: 'files' must map file names to their fingerprints")
    for name, saved in recorded.items():
        path = folder / name
        try:
            found = _fingerprint(path)
        except OSError as e:
            raise ModelError(f"{path}: cannot read it ({e.strerror})") from None
        if found == saved:
            continue
        if not isinstance(saved, dict):
            raise ModelError(f"{folder / META_FILE}: no size and SHA-256 recorded for {name}")
        how = (
            f"{found['bytes']} bytes, saved with {saved.get('bytes')}"
            if saved.get("bytes") != found["bytes"]
            else "its content differs from what was saved"
        )
        raise ModelError(
            f"{path}: not the file this segmenter was saved with ({how}): damaged or changed "
            f"since; copy the folder again from where it was saved, or train the segmenter again"
        )


def _strings(value: Any, name: str) -> list[str]:
    """``value`` if it is a list of strings, else a ``TypeError`` naming ``name``."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{name} must be a list of strings, got {value!r}"[:200])
    return value


def strip_word_marker(pieces: list[str], marker: str = "\u2581") -> list[str]:
    """Drop the word-start marker that SentencePiece and youtokentome put on a word's first piece."""
    out = [p.replace(marker, "") for p in pieces]
    return [p for p in out if p]


def check_vocab_size(vocab_size: int, texts: Iterable[str], reserved: int, method: str) -> None:
    """Raise ``ConfigError`` unless ``vocab_size`` holds a piece for each character of ``texts``, the
    word-start marker and the backend's ``reserved`` special pieces (SentencePiece and youtokentome
    keep every character: with full coverage a smaller vocabulary fails inside them)."""
    characters = {c for text in texts for c in text} - {" "}
    needed = len(characters) + 1 + reserved
    if vocab_size < needed:
        raise ConfigError(
            f"--vocab-size {vocab_size} is too small for {method} on this corpus: its "
            f"{len(characters)} characters, the word marker and {reserved} special piece(s) need "
            f"{needed}; give --vocab-size {needed} or more"
        )
