"""youtokentome BPE (optional backend: ``pip install 'segrl[yttm]'``, see the README)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from segrl.baselines.base import Segmenter, check_vocab_size, strip_word_marker
from segrl.data.corpus import Corpus
from segrl.errors import ConfigError, ModelError

MODEL_FILE = "yttm.model"


def yttm_available() -> bool:
    try:
        import youtokentome  # noqa: F401
    except ImportError:
        return False
    return True


class YttmBPE(Segmenter):
    """youtokentome BPE trained on the training sentences, full character coverage."""

    method = "yttm-bpe"

    def __init__(self, vocab_size: int = 2000):
        if not yttm_available():
            raise ConfigError(
                "the yttm-bpe segmenter needs youtokentome: pip install Cython wheel && "
                "pip install --no-build-isolation youtokentome"
            )
        super().__init__(vocab_size=vocab_size)
        self._model_bytes = b""
        self._bpe = None

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
        self._use(path)


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
