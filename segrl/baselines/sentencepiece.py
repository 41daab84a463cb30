"""SentencePiece BPE and unigram-LM segmenters (the default BPE/unigram implementation)."""

from __future__ import annotations

import bisect
import io
import itertools
import tempfile
from pathlib import Path

import numpy as np
import sentencepiece as spm
from google.protobuf.message import DecodeError
from sentencepiece.sentencepiece_model_pb2 import ModelProto, TrainerSpec

from segrl.baselines.base import Segmenter, check_vocab_size
from segrl.data.corpus import Corpus
from segrl.errors import ConfigError, ModelError

MODEL_FILE = "sentencepiece.model"
WORD_MARKER = "\u2581"
"""What starts a word's first piece in SentencePiece's pieces."""
SAMPLE_NBEST = 64
"""How many of a word's best segmentations sampling draws from (SentencePiece's ``nbest_size``)."""


class SentencePieceSegmenter(Segmenter):
    """SentencePiece trained on the training sentences (pieces never cross spaces), identity
    normalisation so pieces spell the input exactly, full character coverage. On a word list it
    trains on the words with their counts (SentencePiece's ``tsv`` input: ``word<TAB>count``), as if
    each word occurred that many times in running text.

    Options: ``model_type`` (``bpe`` or ``unigram``), ``vocab_size`` (a soft limit on small corpora),
    ``character_coverage`` (SentencePiece's: the fraction of the training characters that get pieces
    of their own; the rest are unknown, ``<unk>``, and stay whole segments of the input).

    A segmenter is also made from a SentencePiece model file that ``spm_train`` wrote
    (``from_model_file``). A segment is the part of the input a piece covers, so segments spell the
    input whatever the model's normalisation (``nmt_nfkc``, ``spm_train``'s default, included).
    """

    method = "sentencepiece"
    native_files = (MODEL_FILE,)

    def __init__(
        self, model_type: str = "unigram", vocab_size: int = 2000, character_coverage: float = 1.0
    ):
        if model_type not in ("bpe", "unigram"):
            raise ValueError(f"model_type must be bpe or unigram, got {model_type!r}")
        if not 0 < character_coverage <= 1:
            raise ValueError(f"character_coverage must be in (0, 1], got {character_coverage!r}")
        super().__init__(
            model_type=model_type, vocab_size=vocab_size, character_coverage=character_coverage
        )
        self._proto: bytes = b""
        self._processor: spm.SentencePieceProcessor | None = None
        self._sampling: tuple[float, np.random.Generator] | None = None  # alpha, generator

    @classmethod
    def from_model_file(cls, path: str | Path) -> SentencePieceSegmenter:
        """The segmenter of a SentencePiece model file (``spm_train``'s ``PREFIX.model``, or the
        ``sentencepiece.model`` segrl saves), read with SentencePiece's own loader."""
        path = Path(path)
        segmenter = cls()
        try:
            proto = path.read_bytes()
        except OSError as e:
            raise ModelError(f"{path}: cannot read it ({e.strerror})") from None
        problem = model_proto_problem(proto)
        if problem is not None:
            raise ModelError(f"{path}: not a SentencePiece model ({problem})")
        try:
            segmenter._set_proto(proto)
        except RuntimeError as e:
            raise ModelError(f"{path}: not a SentencePiece model ({e})") from None
        processor = segmenter._processor
        segmenter.alphabet = None  # the model's own normalisation and <unk> see every character
        spec = ModelProto.FromString(segmenter._proto).trainer_spec
        segmenter.options["model_type"] = TrainerSpec.ModelType.Name(spec.model_type).lower()
        segmenter.options["vocab_size"] = processor.get_piece_size()
        segmenter.options["character_coverage"] = spec.character_coverage
        segmenter.trained = True
        return segmenter

    def _model_characters(self) -> frozenset[str]:
        # the characters of its normal pieces (not <unk>, control, byte or unused ones), without
        # the word-start marker
        processor = self._processor
        pieces = (
            processor.id_to_piece(i)
            for i in range(processor.get_piece_size())
            if not (
                processor.is_unknown(i)
                or processor.is_control(i)
                or processor.is_byte(i)
                or processor.is_unused(i)
            )
        )
        return frozenset(c for piece in pieces for c in piece) - {WORD_MARKER}

    def sample(self, alpha: float, seed: int) -> None:
        """From now on, segment by sampling (subword regularisation, as SentencePiece's
        ``enable_sampling`` with ``nbest_size=SAMPLE_NBEST`` does it: one of the word's
        ``SAMPLE_NBEST`` best segmentations, with probability proportional to its probability to
        the power ``alpha``), drawn with a generator of segrl's own seeded with ``seed``: the same
        seed and words give the same samples in every run (SentencePiece's own generator is global
        and per thread, and no seed makes it repeat across runs). A unigram model only: a BPE
        model's n-best is not defined (SentencePiece samples it by BPE-dropout, from that
        generator)."""
        if not 0 < alpha <= 1:
            raise ConfigError(f"--sample {alpha:g}: give a smoothing alpha in (0, 1]")
        if self.options["model_type"] != "unigram":
            raise ConfigError(
                f"--sample: a SentencePiece {self.options['model_type']} model, which SentencePiece "
                "samples from a generator that no seed makes repeat across runs (BPE-dropout); "
                "sample a unigram model"
            )
        self._sampling = (alpha, np.random.default_rng(seed))

    def _train(self, corpus: Corpus) -> None:
        texts = corpus.word_counts("train") if corpus.kind == "words" else corpus.train
        if self.options["character_coverage"] == 1:  # else some characters need no piece
            check_vocab_size(self.options["vocab_size"], texts, 1, self.method)  # <unk>
        if corpus.kind == "words":
            with tempfile.TemporaryDirectory() as tmp:
                words = Path(tmp) / "words.tsv"
                counts = corpus.word_counts("train")
                # relative frequencies, the rarest word counting once: SentencePiece's memory and
                # time grow with the counts' size (7 GB and 4 minutes with wordfreq's counts per
                # billion words, under 1 GB and 10 s divided down)
                unit = min(counts.values())
                words.write_text(
                    "".join(f"{w}\t{max(1, n // unit)}\n" for w, n in sorted(counts.items())),
                    encoding="utf-8",
                )
                self._train_from(input=str(words), input_format="tsv")
        else:
            self._train_from(sentence_iterator=iter(corpus.train))

    def _train_from(self, **source: object) -> None:
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            **source,
            model_writer=model,
            vocab_size=self.options["vocab_size"],
            model_type=self.options["model_type"],
            character_coverage=self.options["character_coverage"],
            normalization_rule_name="identity",
            hard_vocab_limit=False,
            bos_id=-1,
            eos_id=-1,
            num_threads=1,  # one thread: the same corpus gives the same model
            minloglevel=2,
        )
        self._set_proto(model.getvalue())

    def _set_proto(self, proto: bytes) -> None:
        self._proto = proto
        self._processor = spm.SentencePieceProcessor(model_proto=proto)

    def _segment(self, word: str) -> list[str]:
        if self._sampling is None:
            text = self._processor.encode(word, return_type="proto")
        else:
            alpha, generator = self._sampling
            nbest = self._processor.nbest_encode(
                word, nbest_size=SAMPLE_NBEST, return_type="proto"
            ).nbests
            weights = alpha * np.array([n.score for n in nbest])  # log-probabilities, smoothed
            p = np.exp(weights - weights.max())
            text = nbest[int(generator.choice(len(nbest), p=p / p.sum()))]
        # a piece covers the input's bytes from its ``begin``: cut the word where a piece begins
        # (characters that normalisation dropped go with the piece after them)
        byte_ends = list(itertools.accumulate(len(c.encode()) for c in word))
        cuts = {bisect.bisect_right(byte_ends, piece.begin) for piece in text.pieces}
        bounds = sorted(cuts - {0, len(word)})
        return [word[a:b] for a, b in itertools.pairwise([0, *bounds, len(word)])]

    def _save_files(self, folder: Path) -> None:
        (folder / MODEL_FILE).write_bytes(self._proto)

    def _load_files(self, folder: Path) -> None:
        path = folder / MODEL_FILE
        try:
            proto = path.read_bytes()
        except OSError as e:
            raise ModelError(
                f"{path}: cannot read the SentencePiece model ({e.strerror})"
            ) from None
        problem = model_proto_problem(proto)
        if problem is not None:
            raise ModelError(
                f"{path}: damaged or cut short ({problem}); copy it again from where the model "
                "was saved, or train the model again"
            )
        try:
            self._set_proto(proto)
        except RuntimeError as e:
            raise ModelError(f"{path}: cannot load the SentencePiece model ({e})") from None


def model_proto_problem(proto: bytes) -> str | None:
    """What keeps ``proto`` from being a whole SentencePiece model, or None: it must parse as
    SentencePiece's ``ModelProto`` and hold pieces, then the trainer's and the normaliser's
    settings, in the order SentencePiece writes them. A model cut short loses the settings at its
    end, and SentencePiece's own loader then takes what is left and segments otherwise (an empty
    file loads as no model at all), so the file is read here first, by protobuf, which runs no code."""
    if not proto:
        return "an empty file"
    try:
        model = ModelProto.FromString(proto)
    except DecodeError:
        return "not laid out as SentencePiece's ModelProto"
    if not model.pieces:
        return "no pieces"
    missing = [name for name in ("trainer_spec", "normalizer_spec") if not model.HasField(name)]
    if missing:
        return f"its {len(model.pieces)} pieces are not followed by its {' and '.join(missing)}"
    return None


def is_cut_sentencepiece_model(path: Path) -> bool:
    """Whether the file ``path`` holds SentencePiece pieces but not the settings that follow them
    in a whole model (one cut short: ``model_proto_problem``)."""
    try:
        proto = path.read_bytes()
        model = ModelProto.FromString(proto)
    except (OSError, DecodeError):
        return False
    return len(model.pieces) > 1 and model_proto_problem(proto) is not None


class SentencePieceBPE(SentencePieceSegmenter):
    method = "bpe"

    def __init__(
        self, vocab_size: int = 2000, model_type: str = "bpe", character_coverage: float = 1.0
    ):
        super().__init__("bpe", vocab_size, character_coverage)


class SentencePieceUnigram(SentencePieceSegmenter):
    method = "unigram"

    def __init__(
        self, vocab_size: int = 2000, model_type: str = "unigram", character_coverage: float = 1.0
    ):
        super().__init__("unigram", vocab_size, character_coverage)
