"""One loader for every kind of segmenter segrl trains (it imports every kind, so it sits at the top
of the layers: ``docs/architecture.md``).

    >>> seg = load_segmenter("runs/reinforce-bilstm-lm-per-action-posterior")   # a run folder
    >>> seg = load_segmenter("runs:/0123abcd/model")                             # an MLflow run
    >>> seg = load_segmenter("models:/english-morphs/1")                         # the model registry
    >>> seg.segment_words(["unexpectedly"])
    [['un', 'expected', 'ly']]
    >>> seg.segment_sentences(["the cats sat"])
    [['the', ' ', 'cat', 's', ' ', 'sat']]

A source is a model file of another tool, told by its content (a SentencePiece ``.model``, a
youtokentome model: ``yttm bpe --model``, a Morfessor segmentation file: ``morfessor -S``, a
Morfessor FlatCat tarball: ``flatcat-train -s model.tar.gz``; any other file is refused), a folder
that a segrl job wrote (a classic segmenter's, an agent's run folder or its ``segmenter`` folder,
``segrl lm train``'s run folder or a saved ``slm``, a unit model's run folder), an MLflow model
folder (``MLmodel`` beside ``artifacts/segmenter``), or an MLflow URI (``runs:/``,
``models:/``, ``mlflow-artifacts:/``; ``runs:/RUN_ID`` alone means its ``model``), downloaded from
the tracking store in use.

Every segmenter is given text as it comes: it segments the text lower-cased (as it was trained)
and the segments are cut from the original, so they always spell their input; a segmenter whose
characters include upper case (trained on a segmented corpus read as written, such as the phonemic
``br-phono``, where ``D`` and ``d`` differ; for another tool's model file, its own pieces or morphs:
a SentencePiece model trained on cased text) is given the text as it is. Sentences are split at
whitespace; their segments have each space between two words as a segment of its own. Utterances
(``segment_utterances``, word discovery) are segmented whole, their spaces removed.
"""

from __future__ import annotations

import bisect
import itertools
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from segrl.errors import ModelError
from segrl.model_files import (
    AGENT_META_FILE,
    CLASSIC_META_FILE,
    SEGMENTER_ARTIFACT,
    is_model_uri,
    logged_segmenter_folder,
)

if TYPE_CHECKING:
    from segrl.baselines.base import Segmenter

KINDS = ("classic", "agent", "slm", "units")
"""What a saved segmenter can be: a classic segmenter (Morfessor, BPE, unigram, trivial), an RL
agent's policy, a segmental LM (Viterbi), a unit model (segments read off its attention)."""
MODEL_FILE_KINDS = (
    "a SentencePiece model (spm_train's .model), a youtokentome model (yttm bpe --model), a "
    "Morfessor segmentation file (morfessor -S) or a FlatCat tarball (flatcat-train -s model.tar.gz)"
)
"""The other tools' model files ``load_segmenter`` reads, as its errors name them."""


@dataclass
class LoadedSegmenter:
    """A trained segmenter of any kind, with the two calls every kind answers."""

    kind: str
    """One of ``KINDS``."""
    folder: Path
    """The local folder (or another tool's model file) it was loaded from."""
    _words: Callable[[list[str]], list[list[str]]]
    _sentences: Callable[[list[str]], list[list[str]]] | None = None
    _download: tempfile.TemporaryDirectory | None = None
    """Where an MLflow URI was downloaded to; removed with the segmenter (or at exit)."""
    _sample: Callable[[float, int], None] | None = None
    """Turns sampling on, where the segmenter samples (a SentencePiece model)."""
    cased: bool = False
    """Whether it was trained on text with upper case (a segmented corpus is read as written): it
    is then given text as it comes, not lower-cased."""
    characters: frozenset[str] = frozenset()
    """The characters it was trained on (its pieces' or morphs', for another tool's model file);
    others it sees as unknown. Upper case among them makes it ``cased``."""

    def _case(self, text: str) -> str:
        return text if self.cased else text.lower()

    def sample(self, alpha: float, seed: int = 0) -> None:
        """From now on, segment by sampling a segmentation (subword regularisation, smoothing
        ``alpha``, seeded with ``seed``); only SentencePiece models sample."""
        if self._sample is None:
            raise ModelError(
                f"{self.folder}: a {self.kind} segmenter, which does not sample; --sample needs a "
                "SentencePiece model (bpe, unigram, or a .model file)"
            )
        self._sample(alpha, seed)

    def segment_words(self, words: Sequence[str]) -> list[list[str]]:
        """Each word's segments (they spell the word; an empty word has none)."""
        words = list(words)
        found = self._words([self._case(w) for w in words if w])
        it = iter(found)
        return [_cut_like(w, next(it)) if w else [] for w in words]

    def segment_sentences(self, sentences: Sequence[str]) -> list[list[str]]:
        """Each sentence's segments, with each space between two words a segment of its own; the
        sentence is taken with its whitespace collapsed to single spaces."""
        texts = [" ".join(s.split()) for s in sentences]
        if self._sentences is not None:
            found = self._sentences([self._case(t) for t in texts])
            return [_cut_like(t, segs) for t, segs in zip(texts, found, strict=True)]
        per_word = self.segment_words([w for t in texts for w in t.split(" ") if w])
        it = iter(per_word)
        out = []
        for text in texts:
            segments: list[str] = []
            for k, _word in enumerate(w for w in text.split(" ") if w):
                if k:
                    segments.append(" ")
                segments += next(it)
            out.append(segments)
        return out

    def segment_utterances(self, utterances: Sequence[str]) -> list[list[str]]:
        """Word discovery: each utterance with its spaces removed, segmented whole (as a word):
        its segments are the words found (``"yu want it"`` and ``"yuwantit"`` alike give
        ``["yu", "want", "it"]`` from a segmenter that finds those words)."""
        return self.segment_words(["".join(u.split()) for u in utterances])


def _cut_like(original: str, segments: list[str]) -> list[str]:
    """``segments`` of ``original.lower()`` cut from ``original`` itself, position by position. A
    character whose lower case is longer (``İ`` -> ``i̇``) goes whole into the segment where its
    lower case begins. Segments that do not spell ``original.lower()`` are returned as they are."""
    if "".join(segments) != original.lower():
        return segments  # segmented as it is (a cased segmenter), or not spelling it
    # where each character's lower case begins in original.lower()
    starts = list(itertools.accumulate((len(c.lower()) for c in original[:-1]), initial=0))
    out, at = [], 0
    for cut in itertools.accumulate(len(s) for s in segments):
        end = bisect.bisect_left(starts, cut)
        if end > at:
            out.append(original[at:end])
            at = end
    return out


def load_segmenter(source: str | Path, device: str = "cpu") -> LoadedSegmenter:
    """The segmenter at ``source`` (see the module docstring), ready to segment. An MLflow URI is
    downloaded into a temporary folder that goes when the segmenter does."""
    if not is_model_uri(source) and _is_file(source):
        return _load_model_file(Path(source))
    download = tempfile.TemporaryDirectory(prefix="segrl-model-") if is_model_uri(source) else None
    folder = resolve_source(source, Path(download.name) if download else None)
    kind, folder = segmenter_folder(folder)
    loaded = _LOADERS[kind](folder, device)
    loaded._download = download
    return loaded


def resolve_source(source: str | Path, download_into: Path | None = None) -> Path:
    """A local folder for ``source``: the folder itself, or the MLflow artifact downloaded (into
    ``download_into`` where given, else into the system's temporary folder)."""
    if is_model_uri(source):
        from segrl.tracking.store import download_model

        return download_model(str(source), download_into)
    folder = Path(source)
    try:
        is_dir = stat.S_ISDIR(folder.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        raise ModelError(
            f"{source}: no such folder; give a folder a segrl job wrote, or an MLflow URI "
            "(runs:/RUN_ID/model, models:/NAME/VERSION)"
        ) from None
    except OSError as e:
        raise ModelError(f"{source}: cannot open it ({e.strerror}); give another path") from None
    if not is_dir:
        raise ModelError(f"{folder}: a file, not a segmenter folder")
    return folder


def _is_file(source: str | Path) -> bool:
    """Whether ``source`` is a file (another tool's model); False where it cannot be looked at,
    which ``resolve_source`` then explains."""
    try:
        return stat.S_ISREG(Path(source).stat().st_mode)
    except OSError:
        return False


def segmenter_folder(folder: Path) -> tuple[str, Path]:
    """(kind, the folder holding its files) of a saved segmenter, a run folder or an MLflow model."""
    folder = logged_segmenter_folder(folder)
    for inner in (SEGMENTER_ARTIFACT, "best"):  # an agent's or `segrl lm train`'s run folder
        if (folder / inner).is_dir() and _kind_of(folder / inner) is not None:
            folder = folder / inner
            break
    kind = _kind_of(folder)
    if kind is None:
        raise ModelError(
            f"{folder}: not a saved segmenter (no segmenter.json, agent_segmenter.json or model.pt); "
            "give a run folder of a finished job or its saved segmenter"
        )
    return kind, folder


def _kind_of(folder: Path) -> str | None:
    if (folder / AGENT_META_FILE).exists():
        return "agent"
    if (folder / CLASSIC_META_FILE).exists():
        return "classic"
    if (folder / "model.pt").exists():
        return "units" if (folder / "config.toml").exists() else "slm"
    return None


def _load_classic(folder: Path, device: str) -> LoadedSegmenter:
    from segrl.baselines.base import Segmenter

    return _classic(Segmenter.load(folder), folder)


def _load_model_file(path: Path) -> LoadedSegmenter:
    """Another tool's model file, told by its content: a SentencePiece model, a youtokentome model,
    a Morfessor segmentation file or a FlatCat tarball; Morfessor's and FlatCat's binary models (pickles),
    a FlatCat analysis without its parameters and anything else are refused."""
    from segrl.baselines import flatcat
    from segrl.baselines.morfessor import MorfessorSegmenter, refuse_binary_model
    from segrl.baselines.sentencepiece import (
        SentencePieceSegmenter,
        is_cut_sentencepiece_model,
        model_proto_problem,
    )
    from segrl.baselines.yttm import YttmBPE, has_numbers_only, is_yttm_model

    flatcat.refuse_binary_model(path)
    refuse_binary_model(path)
    if flatcat.is_tarball(path):
        return _classic(flatcat.FlatCatSegmenter.from_tarball(path), path)
    if flatcat.is_analysis_file(path):
        raise ModelError(
            f"{path}: a FlatCat analysis file without its parameters, which FlatCat needs as well "
            "to segment (flatcat-segment --load-parameters FILE); give FlatCat's tarball "
            "(flatcat-train -s model.tar.gz) or the folder segrl baseline --method flatcat --out wrote"
        )
    if is_yttm_model(path):
        return _classic(YttmBPE.from_model_file(path), path)
    if has_numbers_only(path):  # a Morfessor file would read it as counts of numbers
        raise ModelError(
            f"{path}: lines of numbers only, as a youtokentome model has, but not laid out as one "
            f"(damaged or cut short?); give {MODEL_FILE_KINDS}, or a folder a segrl job wrote"
        )
    if is_cut_sentencepiece_model(path):  # SentencePiece's loader would take what is left
        raise ModelError(
            f"{path}: a SentencePiece model cut short ({model_proto_problem(path.read_bytes())}); "
            "give the whole file spm_train wrote, or train the model again"
        )
    try:
        return _classic(SentencePieceSegmenter.from_model_file(path), path)
    except ModelError:
        pass  # not a SentencePiece model: a Morfessor file, or none
    try:
        return _classic(MorfessorSegmenter.from_segmentation_file(path), path)
    except ModelError as e:
        reason = str(e).removeprefix(f"{path}: ")
        raise ModelError(
            f"{path}: not a model file segrl reads (as a Morfessor segmentation file: {reason}); "
            f"give {MODEL_FILE_KINDS}, or a folder a segrl job wrote"
        ) from None


def _classic(segmenter: Segmenter, source: Path) -> LoadedSegmenter:
    """A classic segmenter (``segrl.baselines.Segmenter``) as a loaded one."""
    sample = getattr(segmenter, "sample", None)
    characters = frozenset(segmenter.characters())
    return LoadedSegmenter(
        "classic",
        source,
        segmenter.segment_words,
        _sample=sample,
        cased=_has_upper(characters),
        characters=characters,
    )


def _has_upper(characters) -> bool:
    """Whether a segmenter's characters include upper case (it was trained on cased text)."""
    return any(c != c.lower() for c in characters)


def _vocab_characters(vocab) -> frozenset[str]:
    """The characters of a ``CharVocab`` (not its special symbols, nor its placeholder)."""
    from segrl.data.vocab import SPECIALS

    return frozenset(vocab.symbols) - {*SPECIALS, vocab.placeholder}


def _load_agent(folder: Path, device: str) -> LoadedSegmenter:
    from segrl.agents.segmenter import AgentSegmenter

    agent = AgentSegmenter.load(folder, device)
    characters = _vocab_characters(agent.vocab)
    return LoadedSegmenter(
        "agent",
        folder,
        agent.segment_sentences,
        agent.segment_sentences,
        cased=_has_upper(characters),
        characters=characters,
    )


def _load_slm(folder: Path, device: str) -> LoadedSegmenter:
    from segrl.lm.decoding import LMSegmenter
    from segrl.lm.models import load_lm

    model = load_lm(folder, device)
    characters = _vocab_characters(model.vocab)
    return LoadedSegmenter(
        "slm",
        folder,
        LMSegmenter(model).segment_words,
        cased=_has_upper(characters),
        characters=characters,
    )


def _load_units(folder: Path, device: str) -> LoadedSegmenter:
    from segrl.segmentation import segment_in_pieces
    from segrl.units.evaluation import segment_texts
    from segrl.units.saving import load_unit_model

    model, vocab, config = load_unit_model(folder, device)

    def segment_pieces(pieces: list[str]) -> list[list[str]]:
        return segment_texts(model, vocab, pieces, config.eval.batch_size, config.train.precision)

    def segment(texts: list[str]) -> list[list[str]]:  # no more than its positions at a time
        limit = getattr(config.arch, "max_len", None)
        return segment_in_pieces(segment_pieces, texts, limit, f"{folder}: a unit model")

    return LoadedSegmenter("units", folder, segment, segment, characters=_vocab_characters(vocab))


_LOADERS: dict[str, Callable[[Path, str], LoadedSegmenter]] = {
    "classic": _load_classic,
    "agent": _load_agent,
    "slm": _load_slm,
    "units": _load_units,
}
