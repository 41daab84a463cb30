"""Morfessor Baseline (the ``morfessor`` package) trained on the corpus's word counts, cached by corpus.

Training is deterministic for a given corpus and options (Morfessor's shuffles are seeded), so the model
is cached under ``<cache_dir>/morfessor-<corpus fingerprint>-<options hash>.txt`` as a Morfessor
segmentation file (plain text, written atomically) and reloaded instead of retrained.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import typing
from pathlib import Path

import morfessor
import morfessor.utils

from segrl.baselines.base import Segmenter
from segrl.config import Dampening
from segrl.data.corpus import Corpus, read_lines
from segrl.errors import DataError, ModelError

MORPH_SEPARATOR = " + "
"""Between the morphs of a word in a Morfessor segmentation file (Morfessor's default)."""

morfessor.utils.show_progress_bar = False  # its dots would clutter segrl's own progress output

MODEL_FILE = "morfessor.segmentations.txt"
PICKLE_START = b"\x80"
"""How a pickle of protocol 2 or later, as Morfessor's binary models are, starts."""
DAMPENING: tuple[str, ...] = typing.get_args(Dampening)
VITERBI_MAXLEN = 30
"""The longest segment Viterbi considers: the ``morfessor`` command's ``--viterbi-maxlen`` default."""
DECODING_OPTIONS = ("viterbi_smoothing",)
"""Options that change how words are segmented, not what is trained (kept out of the cache key)."""


def default_cache_dir() -> Path:
    """``$SEGRL_CACHE_DIR`` or ``~/.cache/segrl``."""
    return Path(os.environ.get("SEGRL_CACHE_DIR") or Path.home() / ".cache" / "segrl")


def cache_folder(cache_dir: str | Path | None) -> Path | None:
    """A segmenter's training cache: ``default_cache_dir()`` for None, none for ``""``, else
    ``cache_dir``."""
    if cache_dir is None:
        return default_cache_dir()
    return Path(cache_dir) if cache_dir else None


class MorfessorSegmenter(Segmenter):
    """Morfessor Baseline, batch-trained (recursive algorithm) on word counts of the training split.

    Options: ``corpusweight`` (Morfessor's alpha), ``dampening`` of counts (``ones``: each word type
    counts once, the default, which gives the best boundary F1 on the bundled gold set; ``log``:
    ``round(log2(count + 1))``; ``none``: token counts), ``seed``, ``annotations`` (a file of
    Morfessor's annotation format, ``word morph morph, other analysis``, for semi-supervised
    training, as ``morfessor -A``; such models are not cached) and ``annotation_weight``
    (``morfessor -W``; None: Morfessor balances the annotated and unannotated tokens),
    ``max_epochs`` (None: until Morfessor's cost stops improving), ``cache_dir`` (None: the default
    cache; ``""``: no cache).

    Words are segmented as the ``morfessor`` command segments them (``morfessor -L model.txt -T
    words``): Viterbi over the model's morphs and single characters, segments at most
    ``VITERBI_MAXLEN`` long, with additive smoothing ``viterbi_smoothing`` (``morfessor
    --viterbi-smoothing``; 0, the command's default: no morph the model does not know, other than a
    single character, is chosen). The library's own ``viterbi_segment`` smooths by 1 unless told
    otherwise, which splits unseen words differently; segrl never uses that default.
    """

    method = "morfessor"

    def __init__(
        self,
        corpusweight: float = 1.0,
        dampening: str = "ones",
        seed: int = 0,
        annotations: str | None = None,
        annotation_weight: float | None = None,
        max_epochs: int | None = None,
        viterbi_smoothing: float = 0.0,
        cache_dir: str | None = None,
    ):
        if dampening not in DAMPENING:
            raise ValueError(f"dampening must be one of {DAMPENING}, got {dampening!r}")
        if max_epochs is not None and max_epochs < 1:
            raise ValueError(f"max_epochs must be at least 1 or None, got {max_epochs}")
        if isinstance(corpusweight, bool) or not isinstance(corpusweight, int | float):
            raise ValueError(f"corpusweight must be a number, got {corpusweight!r}")
        if not corpusweight > 0:
            raise ValueError(f"corpusweight must be above 0, got {corpusweight!r}")
        if not viterbi_smoothing >= 0:
            raise ValueError(f"viterbi_smoothing must be 0 or more, got {viterbi_smoothing!r}")
        super().__init__(
            corpusweight=corpusweight,
            dampening=dampening,
            seed=seed,
            annotations=annotations,
            annotation_weight=annotation_weight,
            max_epochs=max_epochs,
            viterbi_smoothing=viterbi_smoothing,
        )
        self.cache_dir = cache_folder(cache_dir)
        self.model: morfessor.BaselineModel | None = None
        self.from_cache = False

    @classmethod
    def from_segmentation_file(cls, path: str | Path) -> MorfessorSegmenter:
        """The segmenter of a Morfessor segmentation file (``morfessor -S FILE``, Morfessor's text
        model: ``count morph + morph`` lines). Morfessor's binary models (``morfessor -s``) are
        Python pickles, which can run code when read: they are refused, never unpickled."""
        path = Path(path)
        refuse_binary_model(path)
        segmenter = cls(cache_dir="")
        segmenter._read(path)
        segmenter.alphabet = None  # every character goes to Morfessor as it is, as the command does
        segmenter.trained = True
        return segmenter

    def _model_characters(self) -> frozenset[str]:
        return frozenset(c for morph, _count in self.model.get_constructions() for c in morph)

    def _train(self, corpus: Corpus) -> None:
        cached = self._cache_path(corpus)
        if cached is not None and cached.exists():
            try:
                self._read(cached)
                self.from_cache = True
                return
            except ModelError:
                cached.unlink(missing_ok=True)  # a damaged cache entry is retrained
        counts = corpus.word_counts("train")
        modifier = {
            "none": None,
            "log": lambda n: int(round(math.log2(n + 1))),
            "ones": lambda n: 1,
        }[self.options["dampening"]]
        model = morfessor.BaselineModel(corpusweight=self.options["corpusweight"])
        model.load_data([(n, w) for w, n in sorted(counts.items())], count_modifier=modifier)
        if self.options["annotations"] is not None:
            annotations = read_annotations_file(Path(self.options["annotations"]))
            model.set_annotations(annotations, self.options["annotation_weight"])
        state = random.getstate()
        random.seed(self.options["seed"])
        try:
            model.train_batch(max_epochs=self.options.get("max_epochs"))
        finally:
            random.setstate(state)
        self.model = model
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
            self._write(tmp)
            tmp.replace(cached)

    def _segment(self, word: str) -> list[str]:
        # as `morfessor -T` does: the smoothing and maxlen of its --viterbi-* flags
        segments, _cost = self.model.viterbi_segment(
            word, addcount=self.options["viterbi_smoothing"], maxlen=VITERBI_MAXLEN
        )
        return list(segments)

    def _cache_path(self, corpus: Corpus) -> Path | None:
        if self.cache_dir is None or self.options["annotations"] is not None:
            return None
        trained = {k: v for k, v in self.options.items() if k not in DECODING_OPTIONS}
        key = hashlib.sha256(json.dumps(trained, sort_keys=True).encode()).hexdigest()[:8]
        return self.cache_dir / f"morfessor-{corpus.fingerprint}-{key}.txt"

    def _write(self, path: Path) -> None:
        io = morfessor.MorfessorIO(encoding="utf-8", construction_separator=MORPH_SEPARATOR)
        io.write_segmentation_file(str(path), self.model.get_segmentations())

    def _read(self, path: Path) -> None:
        try:
            model = morfessor.BaselineModel(corpusweight=self.options["corpusweight"])
            segmentations = read_segmentation_file(path)
            model.load_segmentations(segmentations)
        except (OSError, ValueError, IndexError) as e:  # ValueError: not UTF-8 or no count
            raise ModelError(f"{path}: cannot read the Morfessor model ({e})") from None
        if not segmentations:
            raise ModelError(f"{path}: no segmentations in it; damaged or not a Morfessor model")
        self.model = model

    def _save_files(self, folder: Path) -> None:
        self._write(folder / MODEL_FILE)

    def _load_files(self, folder: Path) -> None:
        self._read(folder / MODEL_FILE)


def refuse_binary_model(path: Path) -> None:
    """A ``ModelError`` if ``path`` is a pickle (Morfessor's binary model), told by its first byte
    without unpickling it."""
    try:
        with path.open("rb") as file:
            start = file.read(1)
    except OSError as e:
        raise ModelError(f"{path}: cannot read it ({e.strerror})") from None
    if start == PICKLE_START:
        raise ModelError(
            f"{path}: a Morfessor binary model (a Python pickle, which segrl never loads: it can "
            "run code); give Morfessor's segmentation file instead (morfessor -l MODEL -S model.txt)"
        )


def read_annotations_file(path: Path) -> dict[str, list[list[str]]]:
    """Each word's analyses in a Morfessor annotation file (``word morph morph, morph morph`` lines:
    the word, then after any white space (a tab too, as in Morpho Challenge files) its analyses
    separated by ``,``, morphs by spaces; ``#`` comments), as Morfessor's ``read_annotations_file``
    (``morfessor -A``) gives them. A line whose analysis does not spell its word is a ``DataError``
    naming the file and line."""
    annotations: dict[str, list[list[str]]] = {}
    for _file, number, line in read_lines(path):
        if not line.strip() or line.startswith("#"):
            continue
        word, *rest = line.split(None, 1)  # at any white space, as Morfessor's reader splits
        analyses = [a.split() for a in "".join(rest).split(",")]
        if not all("".join(morphs) == word for morphs in analyses):
            raise DataError(
                f"{path}:{number}: an analysis that does not spell {word!r}; Morfessor's "
                "annotation lines are 'word morph morph, morph morph'"
            )
        annotations.setdefault(word, []).extend(analyses)
    if not annotations:
        raise DataError(f"{path}: no annotations in it; give 'word morph morph' lines")
    return annotations


def read_segmentation_file(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """The ``(count, word, morphs)`` of a Morfessor segmentation file (``count morph + morph`` lines,
    ``#`` comments), as Morfessor's ``read_segmentation_file`` gives them, with the file closed after
    reading (Morfessor's reader leaves it open). A count that is not a whole number above 0 is a
    ``ValueError`` naming its line: Morfessor's cost is a logarithm of the counts."""
    out = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            line = line.rstrip()
            if not line or line.startswith("#"):
                continue
            count, word = line.split(" ", 1)
            if int(count) < 1:
                raise ValueError(f"line {number}: count {count}, where a count is at least 1")
            morphs = tuple(word.split(MORPH_SEPARATOR))
            out.append((int(count), "".join(morphs), morphs))
    return out
