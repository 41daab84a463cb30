"""youtokentome BPE (optional backend: ``pip install 'segrl[yttm]'``, see the README)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from segrl.baselines.base import Segmenter, check_vocab_size, strip_word_marker
from segrl.data.corpus import Corpus
from segrl.errors import ConfigError, ModelError

MODEL_FILE = "yttm.model"
WORD_MARKER = "\u2581"
"""What starts a word's first piece in youtokentome's pieces."""
INSTALL = "pip install Cython wheel && pip install --no-build-isolation youtokentome"
_NUMBERS = re.compile(r"-?[0-9]+(?: -?[0-9]+)*")
_DIGITS_AND_SPACES = re.compile(r"[-0-9 \n]*")


def yttm_available() -> bool:
    try:
        import youtokentome  # noqa: F401
    except ImportError:
        return False
    return True


class YttmBPE(Segmenter):
    """youtokentome BPE trained on the training sentences, full character coverage.

    A segmenter is also made from a model file that ``yttm bpe --model FILE`` wrote
    (``from_model_file``); its segments are youtokentome's pieces, the word-start marker dropped.
    """

    method = "yttm-bpe"
    native_files = (MODEL_FILE,)

    def __init__(self, vocab_size: int = 2000):
        if not yttm_available():
            raise ConfigError(f"the yttm-bpe segmenter needs youtokentome: {INSTALL}")
        super().__init__(vocab_size=vocab_size)
        self._model_bytes = b""
        self._bpe = None

    @classmethod
    def from_model_file(cls, path: str | Path) -> YttmBPE:
        """The segmenter of a youtokentome model file (``yttm bpe --model FILE``, or the
        ``yttm.model`` segrl saves), read with youtokentome's own loader once its layout is checked
        (``is_yttm_model``); its own unknown piece sees every character it does not know."""
        path = Path(path)
        if not yttm_available():
            raise ModelError(
                f"{path}: a youtokentome model, and reading it needs youtokentome, which is not "
                f"installed: {INSTALL}"
            )
        if not is_yttm_model(path):
            raise ModelError(f"{path}: not a youtokentome model (not the layout yttm bpe writes)")
        segmenter = cls()
        segmenter._use(path)
        segmenter.alphabet = None
        segmenter.options["vocab_size"] = segmenter._bpe.vocab_size()
        segmenter.trained = True
        return segmenter

    def _model_characters(self) -> frozenset[str]:
        characters = model_characters(self._model_bytes.decode("ascii", errors="replace"))
        return frozenset(characters or ()) - {WORD_MARKER}

    def _train(self, corpus: Corpus) -> None:
        import youtokentome as yttm

        lines = _training_lines(corpus)
        check_vocab_size(self.options["vocab_size"], lines, 4, self.method)  # pad, unk, bos, eos
        with tempfile.TemporaryDirectory() as tmp:
            data, model = Path(tmp) / "train.txt", Path(tmp) / MODEL_FILE
            data.write_text("\n".join(lines) + "\n", encoding="utf-8")
            with _quiet_native_output():
                yttm.BPE.train(
                    data=str(data),
                    model=str(model),
                    vocab_size=self.options["vocab_size"],
                    coverage=1.0,
                    n_threads=1,
                )
            self._use(model)

    def _use(self, model_path: Path) -> None:
        import youtokentome as yttm

        self._model_bytes = model_path.read_bytes()
        self._bpe = yttm.BPE(str(model_path))

    def _segment(self, word: str) -> list[str]:
        import youtokentome as yttm

        pieces = self._bpe.encode([word], output_type=yttm.OutputType.SUBWORD)[0]
        return strip_word_marker(pieces)

    def _save_files(self, folder: Path) -> None:
        (folder / MODEL_FILE).write_bytes(self._model_bytes)

    def _load_files(self, folder: Path) -> None:
        path = folder / MODEL_FILE
        if not path.exists():
            raise ModelError(f"{path}: youtokentome model missing")
        if not is_yttm_model(path):
            raise ModelError(f"{path}: not a youtokentome model (not the layout yttm bpe writes)")
        self._use(path)


def is_yttm_model(path: Path) -> bool:
    """Whether the file ``path`` is laid out as a youtokentome model (``model_characters``); a
    file that cannot be read as ASCII text is not one."""
    text = _numbers_text(path)
    return text is not None and model_characters(text) is not None


def has_numbers_only(path: Path) -> bool:
    """Whether the file ``path`` holds numbers only, as a youtokentome model does (one that is not
    laid out as one is damaged or cut short, even within a number or after a space, and no other
    tool's model)."""
    text = _numbers_text(path)
    return text is not None and _DIGITS_AND_SPACES.fullmatch(text) is not None


def _numbers_text(path: Path) -> str | None:
    """The text of ``path`` if it starts with a number and is ASCII, else None."""
    try:
        with path.open("rb") as file:
            first = file.readline(64)
            if not first[:1].isdigit():
                return None  # not even a count: spare reading a large file whole
            return (first + file.read()).decode("ascii")
    except (OSError, UnicodeDecodeError):
        return None


def model_characters(text: str) -> list[str] | None:
    """The characters of the youtokentome model ``text`` (the file ``yttm bpe --model`` writes),
    or None if ``text`` is not laid out as one: a line ``CHARACTERS MERGES``, then a line
    ``codepoint id`` per character, a line ``left right id`` per merge (of ids defined above it),
    and a line of the special pieces' ids; the word-start marker among the characters (youtokentome
    aborts the process on a model without it). Told from the text alone, without youtokentome, so
    a file of another kind, or one cut short, never reaches its loader."""
    lines = text.splitlines()
    if not lines or not _NUMBERS.fullmatch(lines[0]):
        return None
    head = [int(n) for n in lines[0].split()]
    if len(head) != 2 or min(head) < 0 or len(lines) != 2 + sum(head):
        return None
    n_characters = head[0]
    rows = []
    for line in lines[1:]:
        if not _NUMBERS.fullmatch(line):
            return None
        rows.append([int(n) for n in line.split()])
    characters, merges, special = rows[:n_characters], rows[n_characters:-1], rows[-1]
    if len(special) != 4 or any(len(r) != 2 or min(r) < 0 for r in characters):
        return None
    if any(not 0 <= codepoint < 0x110000 for codepoint, _id in characters):
        return None
    if ord(WORD_MARKER) not in {codepoint for codepoint, _id in characters}:
        return None
    defined = {piece for _codepoint, piece in characters}
    if len(defined) != n_characters:
        return None
    for merge in merges:
        if len(merge) != 3 or merge[0] not in defined or merge[1] not in defined:
            return None
        if merge[2] in defined:
            return None
        defined.add(merge[2])
    return [chr(codepoint) for codepoint, _id in characters]


@contextlib.contextmanager
def _quiet_native_output() -> Iterator[None]:
    """youtokentome's trainer logs from C++ straight to file descriptors 1 and 2; send that to
    /dev/null (its failures still arrive as Python exceptions)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        ctypes.CDLL(None).fflush(None)  # flush C stdio while it still goes nowhere
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)


def _training_lines(corpus: Corpus) -> list[str]:
    """The training sentences; for a word list, every word repeated by its log-dampened count
    (youtokentome reads only running text, and token counts would make the file enormous)."""
    if corpus.kind == "text":
        return corpus.train
    weights = corpus.weights(corpus.train, "log")
    return [word for word, n in zip(corpus.train, weights, strict=True) for _ in range(n)]
