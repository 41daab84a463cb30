"""Morfessor FlatCat (the ``morfessor-flatcat`` package) initialised from Morfessor Baseline, as its
authors train it: Morfessor Baseline on the corpus's word counts (``segrl.baselines.morfessor``,
with its cache), then FlatCat's hidden Markov model of morph categories (prefix, stem, suffix,
non-morpheme) trained in batch from the Baseline's segmentation.

The model is FlatCat's text model, the form FlatCat recommends for keeping one: the tagged analysis
of the training words (``count morph/STM + morph/SUF`` lines) and its parameter file
(``key:<tab>value`` lines). segrl writes both, then reads them back with FlatCat's own readers and
segments with that model, so the model that segments after training is the one FlatCat's
``flatcat-segment`` loads from the files. Trained models are cached under
``<cache_dir>/flatcat-<corpus fingerprint>-<options hash>/``.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import pickletools
import shutil
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

import flatcat
import flatcat.flatcat
import flatcat.utils
from flatcat.exception import MorfessorException

from segrl.baselines.base import Segmenter
from segrl.baselines.morfessor import DAMPENING, MorfessorSegmenter, cache_folder
from segrl.data.corpus import Corpus
from segrl.errors import ModelError
from segrl.files import atomic_folder
from segrl.segmentation import segment_in_pieces

flatcat.utils.show_progress_bar = False  # its dots would clutter segrl's own progress output
logging.getLogger("flatcat.flatcat").addFilter(
    # FlatCat warns when its first 100 words are unsegmented, which a Baseline's segmentation
    # sorted by word may well be: the warning is about files read with the wrong separator
    lambda record: record.getMessage() != flatcat.flatcat.CONS_SEP_WARNING
)

ANALYSIS_FILE = "flatcat.analysis.txt"
"""FlatCat's tagged analysis of the training words (``flatcat --save-analysis``)."""
PARAMS_FILE = "flatcat.params.txt"
"""FlatCat's parameter file (``flatcat --save-parameters``, read with ``--load-parameters``)."""
LONGEST_WORD = 256
"""The most characters FlatCat's Viterbi reads at once: it looks at every substring of a word,
and from every one at every earlier position, so that its time grows faster than the square of
the word's length (2,000 characters took 10 s, 4,000 took 52 s); a longer word is segmented in
pieces of this many, with a boundary at each cut."""
CATEGORIES = ("PRE", "STM", "SUF", "ZZZ")
"""FlatCat's morph categories, the tags of its analysis files."""
FORCESPLIT = "-"
"""Characters that are always morphs of their own: the ``flatcat`` command's ``--forcesplit``."""
MIN_DIFFERENCE_PROPORTION = 0.005
"""When tagging the Baseline's segmentation stops: ``flatcat --min-difference-proportion``."""
BATCH_TRAINING = {
    "min_iteration_cost_gain": 0.0025,
    "min_epoch_cost_gain": None,
    "max_iterations_first": 1,
    "max_iterations": 1,
    "max_resegment_iterations": 2,
    "max_shift_distance": 2,
    "min_shift_remainder": 2,
}
"""``FlatcatModel.train_batch``'s settings other than its epochs, as the ``flatcat`` command sets
them by default (they differ from the library's own defaults)."""
BASELINE_OPTIONS = {
    "baseline_corpusweight": "corpusweight",
    "dampening": "dampening",
    "seed": "seed",
    "baseline_annotations": "annotations",
    "baseline_annotation_weight": "annotation_weight",
    "baseline_max_epochs": "max_epochs",
}
"""The options of the Morfessor Baseline FlatCat starts from, by their names in
``MorfessorSegmenter``."""


class FlatCatSegmenter(Segmenter):
    """Morfessor FlatCat initialised from Morfessor Baseline's segmentation of the training words.

    Options of FlatCat: ``perplexity_threshold`` (``flatcat -p``; 10, the value for small corpora
    and little morphology in FlatCat's advice, which ranges to 400 for large corpora and rich
    morphology: the threshold of the sigmoid that turns a morph's left and right perplexity into
    how prefix- or suffix-like it is), ``corpusweight`` (``flatcat -w``; FlatCat's alpha) and
    ``max_epochs`` (``flatcat --max-epochs``; 4, the command's default). Every other setting is
    the ``flatcat`` command's default (``FORCESPLIT``, ``BATCH_TRAINING``, the morph-length sigmoid
    at 3 characters, token perplexity of morphs of 4 characters or more).

    Options of the Baseline it starts from, as ``MorfessorSegmenter`` takes them:
    ``baseline_corpusweight``, ``dampening`` of the word counts (``ones``, the default: each type
    counts once), ``seed``, ``baseline_annotations`` and ``baseline_annotation_weight``
    (semi-supervised Baseline; FlatCat itself trains unsupervised), ``baseline_max_epochs``. FlatCat
    takes the Baseline's counts as they are (already dampened), as ``flatcat -d none``, its default,
    does. ``cache_dir``: None, the default cache (the Baseline is cached there too); ``""``, none.

    Words are segmented as ``flatcat-segment`` segments them: FlatCat's Viterbi search over its
    morphs and categories, with no smoothing and no post-processing (no
    ``--remove-nonmorphemes``). A word that no sequence of the model's morphs spells stays whole.
    """

    method = "flatcat"

    def __init__(
        self,
        perplexity_threshold: float = 10.0,
        corpusweight: float = 1.0,
        max_epochs: int = 4,
        baseline_corpusweight: float = 1.0,
        dampening: str = "ones",
        seed: int = 0,
        baseline_annotations: str | None = None,
        baseline_annotation_weight: float | None = None,
        baseline_max_epochs: int | None = None,
        cache_dir: str | None = None,
    ):
        if not perplexity_threshold > 0:
            raise ValueError(f"perplexity_threshold must be above 0, got {perplexity_threshold!r}")
        if not corpusweight > 0:
            raise ValueError(f"corpusweight must be above 0, got {corpusweight!r}")
        if isinstance(max_epochs, bool) or not isinstance(max_epochs, int) or max_epochs < 1:
            raise ValueError(f"max_epochs must be at least 1, got {max_epochs!r}")
        if dampening not in DAMPENING:
            raise ValueError(f"dampening must be one of {DAMPENING}, got {dampening!r}")
        super().__init__(
            perplexity_threshold=perplexity_threshold,
            corpusweight=corpusweight,
            max_epochs=max_epochs,
            baseline_corpusweight=baseline_corpusweight,
            dampening=dampening,
            seed=seed,
            baseline_annotations=baseline_annotations,
            baseline_annotation_weight=baseline_annotation_weight,
            baseline_max_epochs=baseline_max_epochs,
        )
        self.cache_dir = cache_folder(cache_dir)
        self.model: flatcat.FlatcatModel | None = None
        self._characters: frozenset[str] = frozenset()
        self.from_cache = False

    @classmethod
    def from_tarball(cls, path: str | Path) -> FlatCatSegmenter:
        """The segmenter of FlatCat's tarball model (``flatcat-train ... -s model.tar.gz``: its
        parameter file and analysis, text files in a ``.tar.gz``), read as ``flatcat-segment
        model.tar.gz`` reads it, with FlatCat's own reader."""
        path = Path(path)
        reader = flatcat.FlatcatIO(encoding="utf-8")
        try:
            model = reader.read_tarball_model_file(str(path))
        except (
            OSError,
            tarfile.TarError,
            EOFError,
            ValueError,
            IndexError,
            MorfessorException,
        ) as e:
            raise ModelError(f"{path}: cannot read the FlatCat model ({e})") from None
        segmenter = cls(cache_dir="")
        segmenter._use(model, path)
        segmenter.options.update(_options_of(model))
        segmenter.alphabet = None  # every character goes to FlatCat as it is, as the command does
        segmenter.trained = True
        return segmenter

    def _model_characters(self) -> frozenset[str]:
        return self._characters

    def _train(self, corpus: Corpus) -> None:
        cached = self._cache_path(corpus)
        if cached is not None and cached.is_dir():
            try:
                self._load_files(cached)
                self.from_cache = True
                return
            except ModelError:
                shutil.rmtree(cached, ignore_errors=True)  # a damaged cache entry is retrained
        baseline = MorfessorSegmenter(
            **{name: self.options[option] for option, name in BASELINE_OPTIONS.items()},
            cache_dir="" if self.cache_dir is None else str(self.cache_dir),
        ).train(corpus)
        model = train_flatcat(
            ((count, morphs) for count, _word, morphs in baseline.model.get_segmentations()),
            self.options["perplexity_threshold"],
            self.options["corpusweight"],
            self.options["max_epochs"],
        )
        # the model that segments is the one its files give FlatCat's own loader
        with tempfile.TemporaryDirectory() as tmp:
            folder = cached if cached is not None else Path(tmp) / "flatcat"
            with atomic_folder(folder) as out:
                write_model(model, out)
            self._load_files(folder)

    def _segment(self, word: str) -> list[str]:
        if word not in self.model.annotations and not self._characters.issuperset(word):
            # a character of no morph: FlatCat's Viterbi finds no path and gives the word whole,
            # after a search that grows with the cube of the word's length
            return [word]
        if len(word) > LONGEST_WORD:
            return segment_in_pieces(self._viterbi, [word], LONGEST_WORD, "FlatCat")[0]
        return self._viterbi([word])[0]

    def _viterbi(self, words: list[str]) -> list[list[str]]:
        # as flatcat-segment: no post-processing
        return [list(self.model.viterbi_segment(word)[0]) for word in words]

    def _cache_path(self, corpus: Corpus) -> Path | None:
        if self.cache_dir is None or self.options["baseline_annotations"] is not None:
            return None
        key = hashlib.sha256(json.dumps(self.options, sort_keys=True).encode()).hexdigest()[:8]
        return self.cache_dir / f"flatcat-{corpus.fingerprint}-{key}"

    def _save_files(self, folder: Path) -> None:
        write_model(self.model, folder)

    def _load_files(self, folder: Path) -> None:
        self._use(read_model(folder / ANALYSIS_FILE, folder / PARAMS_FILE), folder)

    def _use(self, model: flatcat.FlatcatModel, source: Path) -> None:
        """Segment with ``model``, read from ``source``: tagged as FlatCat loads it
        (``initialize_hmm``), the characters of its morphs noted."""
        if not model.segmentations:
            raise ModelError(f"{source}: no analyses in it; damaged or not a FlatCat model")
        if model.get_params().get("perplexity-threshold") is None:
            raise ModelError(f"{source}: no perplexity-threshold in its parameters")
        try:
            model.initialize_hmm()
        except (ValueError, KeyError, ZeroDivisionError, MorfessorException) as e:
            raise ModelError(f"{source}: not a FlatCat model FlatCat can use ({e!r})") from None
        self.model = model
        self._characters = frozenset(
            c for word in model.segmentations for m in word.analysis for c in m.morph
        )


def train_flatcat(
    segmentations: Iterable[tuple[int, list[str]]],
    perplexity_threshold: float,
    corpusweight: float,
    max_epochs: int,
) -> flatcat.FlatcatModel:
    """FlatCat trained from a Baseline's ``(count, morphs)`` segmentations as the ``flatcat``
    command trains it from a Baseline segmentation file (``flatcat baseline.txt -p P -w W
    --max-epochs N``): its categories initialised on the segmentation, then batch training."""
    usage = flatcat.MorphUsageProperties(ppl_threshold=perplexity_threshold)
    model = flatcat.FlatcatModel(
        usage, forcesplit=list(FORCESPLIT), corpusweight=corpusweight, ml_emissions_epoch=0
    )
    model.add_corpus_data((count, tuple(morphs)) for count, morphs in segmentations)
    model.initialize_hmm(min_difference_proportion=MIN_DIFFERENCE_PROPORTION)
    model.train_batch(max_epochs=max_epochs, **BATCH_TRAINING)
    return model


def write_model(model: flatcat.FlatcatModel, folder: Path) -> None:
    """FlatCat's text model in ``folder``: ``ANALYSIS_FILE`` and ``PARAMS_FILE``, written by
    FlatCat's own writers. ``type-perplexity`` is left out of the parameters where it is False,
    its default: FlatCat reads the value ``False`` back as True (``bool("False")``)."""
    writer = flatcat.FlatcatIO(encoding="utf-8")
    params = model.get_params()
    if params.get("type-perplexity") is False:
        del params["type-perplexity"]
    writer.write_parameter_file(str(folder / PARAMS_FILE), params)
    writer.write_segmentation_file(str(folder / ANALYSIS_FILE), model.segmentations)


def read_model(analysis: Path, params: Path) -> flatcat.FlatcatModel:
    """The FlatCat model of an analysis file and its parameter file, read as ``flatcat-segment
    ANALYSIS --load-parameters PARAMS`` reads them (and as FlatCat reads its tarball), with
    FlatCat's own readers; untagged until ``initialize_hmm``."""
    reader = flatcat.FlatcatIO(encoding="utf-8")
    model = flatcat.FlatcatModel()
    try:
        with params.open("rb") as lines:
            model.set_params(reader.read_parameter_file(lines))
    except (OSError, ValueError) as e:
        raise ModelError(f"{params}: cannot read FlatCat's parameters ({e})") from None
    try:
        with analysis.open("rb") as lines:
            model.add_corpus_data(reader.read_segmentation_file(lines))
    except (OSError, ValueError, IndexError, MorfessorException) as e:
        raise ModelError(f"{analysis}: cannot read FlatCat's analysis ({e})") from None
    return model


def _options_of(model: flatcat.FlatcatModel) -> dict[str, float]:
    """The FlatCat options a model read from a file was trained with, as far as its parameters
    say (the Baseline it started from is not recorded)."""
    params = model.get_params()
    return {
        "perplexity_threshold": float(params["perplexity-threshold"]),
        "corpusweight": float(params["corpusweight"]),
    }


def is_tarball(path: Path) -> bool:
    """Whether ``path`` starts as a gzip file does (FlatCat's tarball model is one)."""
    with path.open("rb") as file:
        return file.read(2) == b"\x1f\x8b"


def is_analysis_file(path: Path, lines: int = 20) -> bool:
    """Whether the first ``lines`` lines of ``path`` (comments aside) are FlatCat's tagged analysis
    (``count morph/STM + morph/SUF``), which Morfessor's reader would take for morphs with tags
    in them."""
    seen = 0
    try:
        with path.open(encoding="utf-8") as file:
            for line in file:
                if not line.strip() or line.startswith("#"):
                    continue
                _count, _, analysis = line.strip().partition(" ")
                morphs = analysis.split(" + ")
                if not all(m.rpartition("/")[2] in CATEGORIES and "/" in m for m in morphs):
                    return False
                seen += 1
                if seen == lines:
                    break
    except (OSError, UnicodeDecodeError):
        return False
    return seen > 0


def refuse_binary_model(path: Path) -> None:
    """A ``ModelError`` if ``path`` is a pickle of FlatCat's (its binary model,
    ``flatcat-train --save-binary-model``, or its reduced model), told by the module of the first
    class it names, read with ``pickletools`` (which runs nothing) without unpickling it."""
    try:
        with path.open("rb") as file:
            head = file.read(4096)
    except OSError as e:
        raise ModelError(f"{path}: cannot read it ({e.strerror})") from None
    if head[:1] != b"\x80" or not _first_module(head).startswith("flatcat"):
        return
    raise ModelError(
        f"{path}: a FlatCat binary model (a Python pickle, which segrl never loads: it can run "
        "code); give FlatCat's text model instead (flatcat MODEL -m none -s model.tar.gz)"
    )


def _first_module(head: bytes) -> str:
    """The module of the first class a pickle's opening bytes name ("" if none there)."""
    strings: list[str] = []
    try:
        for opcode, arg, _pos in pickletools.genops(io.BytesIO(head)):
            if opcode.name == "GLOBAL":
                return str(arg).partition(" ")[0]
            if opcode.name == "STACK_GLOBAL":
                return strings[-2] if len(strings) >= 2 else ""
            if isinstance(arg, str):
                strings.append(arg)
    except (ValueError, EOFError, IndexError):  # cut off at the head's end, or not a pickle
        pass
    return ""
