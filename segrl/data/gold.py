"""Gold segmentations: the Morpho Challenge and SIGMORPHON 2022 formats, surface segmentations only.

Morpho Challenge: ``word<TAB>analysis, alternative, ...``; an analysis is space-separated morphs, each
optionally labelled ``morph:label`` (``abandoned<TAB>abandon:abandon_V ed:+PAST``).

SIGMORPHON 2022: ``word<TAB>morphs joined by " @@"[<TAB>category]`` (``players<TAB>play @@er @@s<TAB>110``);
the sentence-level files (``sentence<TAB>morphs``, ``@@`` marking a word-internal morph) give one entry
per word. Its segmentations are canonical (``subsidised -> subside @@y @@ise @@ed``): only analyses whose
morphs concatenate back to the word are kept, since boundaries are only defined on the surface string.
"""

from __future__ import annotations

import gzip
import hashlib
import random
import re
import warnings
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from segrl.config import limit
from segrl.data.corpus import Corpus, read_lines
from segrl.data.languages import check_gold_language
from segrl.data.synthetic import is_synthetic, synthetic_gold_entries
from segrl.errors import ConfigError, DataError, DataWarning

BUNDLED_GOLD = "sigmorphon2022_eng_word_dev_surface.tsv.gz"
BUNDLED_GOLD_SOURCE = f"bundled:{BUNDLED_GOLD}"
"""The bundled gold set's name: what an unset ``gold.path`` resolves to (and reads)."""
_CATEGORY = re.compile(r"^[01]{3}$")
SURFACE_SHARE_WARNING = 0.5
"""A gold file whose rows are surface segmentations less often than this is a ``DataWarning``: its
scores are of a sample of its words (those whose morphs keep their form), not of the file."""


@dataclass(frozen=True)
class GoldWord:
    """A word and its gold analyses (at least one; each a tuple of morphs concatenating to the word)."""

    word: str
    analyses: tuple[tuple[str, ...], ...]


def read_gold(path: str | Path, lowercase: bool = True) -> list[GoldWord]:
    """Read a gold file in either format (detected from its content); surface analyses only.
    ``synthetic:SEED[,...]`` is the lexicon of that synthetic corpus with its pieces."""
    if is_synthetic(str(path)):
        return [GoldWord(word, (pieces,)) for word, pieces in synthetic_gold_entries(str(path))]
    lines = list(read_lines(path))
    return _parse(lines, str(path), lowercase)


def bundled_gold(lowercase: bool = True) -> list[GoldWord]:
    """The bundled gold set: SIGMORPHON 2022 English word dev, surface rows (CC BY-SA 3.0)."""
    data = resources.files("segrl.data").joinpath("bundled", BUNDLED_GOLD).read_bytes()
    lines = [
        (BUNDLED_GOLD_SOURCE, n, raw.decode("utf-8"))
        for n, raw in enumerate(gzip.decompress(data).splitlines(), start=1)
    ]
    return _parse(lines, BUNDLED_GOLD_SOURCE, lowercase)


def gold_fingerprint(gold: Sequence[GoldWord]) -> str:
    """A hash of the gold words and their analyses: equal gold sets have equal fingerprints."""
    h = hashlib.sha256()
    for g in sorted(gold, key=lambda g: g.word):
        h.update(f"{g.word}\t{'|'.join(' '.join(a) for a in g.analyses)}\n".encode())
    return h.hexdigest()[:16]


def load_gold(path: str | Path | None = None, max_words: int | None = None) -> list[GoldWord]:
    """The gold set at ``path`` (the bundled one when None, "" or ``BUNDLED_GOLD_SOURCE``),
    optionally a deterministic sample of ``max_words`` (None or ``NO_LIMIT``: all)."""
    gold = read_gold(path) if path and str(path) != BUNDLED_GOLD_SOURCE else bundled_gold()
    max_words = limit(max_words)
    if max_words is not None and max_words < len(gold):
        gold = random.Random(0).sample(gold, max_words)
    return gold


def detect_format(lines: Sequence[tuple[str, int, str]]) -> str:
    """``"sigmorphon"`` if any analysis uses ``@@`` or a 3-bit category column, else ``"morpho"``."""
    for _file, _number, line in lines:
        columns = line.rstrip("\r\n").split("\t")
        if len(columns) >= 2 and "@@" in columns[1]:
            return "sigmorphon"
        if len(columns) == 3 and _CATEGORY.match(columns[2].strip()):
            return "sigmorphon"
    return "morpho"


def _parse(lines: Sequence[tuple[str, int, str]], name: str, lowercase: bool) -> list[GoldWord]:
    data = [(f, n, line) for f, n, line in lines if line.strip() and not line.startswith("#")]
    if not data:
        raise DataError(f"{name}: the gold file is empty")
    fmt = detect_format(data)
    parse_line = _sigmorphon_entries if fmt == "sigmorphon" else _morpho_entries
    merged: dict[str, list[tuple[str, ...]]] = {}
    kept_rows = 0
    labelled: list[tuple[str, int, str, tuple[str, ...]]] = []
    canonical: tuple[str, int, str, tuple[str, ...]] | None = None  # the first row left out
    for file, number, line in data:
        columns = line.rstrip("\r\n").split("\t")
        if len(columns) < 2 or len(columns) > 3 or not columns[0].strip():
            raise DataError(
                f"{file}:{number}: not a gold segmentation line (expected 'word<TAB>analysis' as in "
                f"Morpho Challenge, or 'word<TAB>morph @@morph<TAB>category' as in SIGMORPHON 2022), "
                f"got {line.strip()[:80]!r}"
            )
        kept, label = False, None
        for word, analysis in parse_line(columns):
            if label is None and _is_labels(word, analysis):
                label = (file, number, word, analysis)
            if lowercase:
                word, analysis = word.lower(), tuple(m.lower() for m in analysis)
            if "".join(analysis) != word or not all(analysis):
                canonical = canonical or (file, number, word, analysis)
                continue  # canonical, not surface: boundaries undefined on the word
            kept = True
            known = merged.setdefault(word, [])
            if analysis not in known:
                known.append(analysis)
        kept_rows += kept
        if not kept and label is not None:
            labelled.append(label)
    if len(labelled) > kept_rows:
        file, number, word, analysis = labelled[0]
        raise DataError(
            f"{file}:{number}: {word!r} is analysed as labels ({' '.join(analysis)!r}), not as "
            f"morphs that spell it, as {len(labelled)} of its {len(data)} rows are ({kept_rows} "
            "are surface segmentations, and only they would be scored). Give a surface "
            "segmentation gold file: 'word<TAB>morph morph' (Morpho Challenge, labels after "
            "'morph:') or 'word<TAB>morph @@morph' (SIGMORPHON 2022)"
        )
    if not merged:
        raise DataError(
            f"{name}: no surface segmentations found (read as {fmt} format): no analysis's morphs "
            "concatenate back to its word. Check the file is a segmentation gold standard, not labels."
        )
    if canonical is not None and kept_rows < SURFACE_SHARE_WARNING * len(data):
        file, number, word, analysis = canonical
        warnings.warn(
            DataWarning(
                f"{name}: {kept_rows:,} of its {len(data):,} rows ({kept_rows / len(data):.0%}) are "
                f"surface segmentations, and only they are scored; the others are canonical, their "
                f"morphs not spelling the word (line {number}: {word!r} as "
                f"{' + '.join(analysis)!r}). Its scores are of the words whose morphs keep their "
                "form, not of the whole file"
            ),
            stacklevel=3,
        )
    return [GoldWord(word, tuple(analyses)) for word, analyses in merged.items()]


def _is_labels(word: str, analysis: tuple[str, ...]) -> bool:
    """Whether ``analysis`` of ``word`` (as written) holds labels rather than morphs: a character
    the word does not have that is upper case or no letter (``walk_V +PAST``). Canonical analyses
    (``subside @@y``) have lower-case letters only, bar a proper noun's rare capital."""
    return any((c.isupper() or not c.isalpha()) and c not in word for m in analysis for c in m)


def _morpho_entries(columns: list[str]) -> Iterator[tuple[str, tuple[str, ...]]]:
    word = columns[0].strip()
    for analysis in columns[1].split(","):
        morphs = tuple(token.split(":", 1)[0] for token in analysis.split())
        if morphs:
            yield word, morphs


def _sigmorphon_entries(columns: list[str]) -> Iterator[tuple[str, tuple[str, ...]]]:
    surface = columns[0].strip()
    if " " not in surface:
        yield surface, tuple(m.strip() for m in columns[1].split(" @@"))
        return
    # sentence level: a token starting with @@ continues the previous word
    words: list[list[str]] = []
    for token in columns[1].split():
        if token.startswith("@@") and words:
            words[-1].append(token[2:])
        else:
            words.append([token])
    surface_words = surface.split()
    if len(surface_words) == len(words):
        for word, morphs in zip(surface_words, words, strict=True):
            yield word, tuple(morphs)


MIN_SHARED_CHARACTERS = 0.5


def check_gold_fits(gold: Sequence[GoldWord], corpus: Corpus, gold_source: str | None) -> None:
    """Refuse a gold set in another language than the corpus (``check_gold_language``), or most of
    whose characters the corpus never has (another script): every segmenter would be scored on
    words it never saw, or on placeholders."""
    source = corpus.settings.get("source")
    if is_synthetic(source) and gold_source != source:
        raise DataError(
            f"{source}: a synthetic corpus is scored against its own lexicon: give --gold {source}"
        )
    check_gold_language(source, gold_source)
    vocab = corpus.vocab
    known = set(vocab.symbols) - {vocab.placeholder}
    check_gold_characters(
        gold,
        known,
        gold_source,
        "the corpus",
        "the corpus's language and script (or the corpus of the gold set's language)",
    )


def check_gold_characters(
    gold: Sequence[GoldWord],
    known: Container[str],
    gold_source: str | None,
    holder: str,
    advice: str,
) -> None:
    """Refuse a gold set most of whose characters are not ``known`` to ``holder`` (a corpus, a
    trained model): a gold set in another script, which would score every segmenter on
    placeholders. ``advice`` ends the error's 'give a gold set in ...'."""
    chars = [c for g in gold for c in g.word if not c.isspace()]
    if not chars:
        return
    share = sum(1 for c in chars if c in known) / len(chars)
    if share < MIN_SHARED_CHARACTERS:
        raise DataError(
            f"{gold_source or 'the bundled gold set'}: only {share:.0%} of its characters occur "
            f"in {holder}; give a gold set in {advice}"
        )


def refuse_gold_file(gold_source: str | None) -> None:
    """A ``ConfigError`` where a gold file is given with a segmented corpus (``segmented:PATH``):
    its spaces are the gold (word discovery), and a second gold set would be silently ignored."""
    if gold_source:
        raise ConfigError(
            f"--gold {gold_source}: a segmented corpus is its own gold (its spaces are the word "
            "boundaries that word discovery is scored against); leave --gold out"
        )
