"""Word-count lists: the corpus form Morfessor and the Morpho Challenge use, and ``wordfreq`` lists.

Three forms are read, each as ``(word, count)`` pairs:

- ``counts``: one word per line with its count, ``count word`` (Morfessor's format) or ``word<TAB>count``;
- ``words``: one word per line, no counts (each line counts once; repeated lines add up);
- ``wordfreq:LANG``: the ``wordfreq`` package's frequency list of a language (offline, its data ships
  inside the package), the most frequent alphabetic types with integer pseudo-counts;
- ``goldwords:PATH``: the words of a gold file (the first column of a SIGMORPHON 2022 or Morpho
  Challenge file), each once: the corpus of a language that has a gold set and no word list, as in
  the Morpho Challenge, where the words to segment were the corpus.

``detect_format`` tells a word list from running text by its first lines. Dampening turns counts into
the weights segmenters train with (``DAMPENING``).
"""

from __future__ import annotations

import math
import re
import typing
from collections import Counter
from collections.abc import Iterable, Iterator

from segrl.config import CorpusFormat, Dampening
from segrl.errors import DataError

FORMATS: tuple[str, ...] = typing.get_args(CorpusFormat)
DAMPENING: tuple[str, ...] = typing.get_args(Dampening)
"""How counts become weights: ``none`` (token counts), ``log`` (``round(log2(count + 1))``, as
Morfessor's own log dampening), ``ones`` (every type counts once)."""
WORDFREQ_PREFIX = "wordfreq:"
GOLDWORDS_PREFIX = "goldwords:"
WORDFREQ_DEFAULT_WORDS = 60_000
WORDFREQ_SCALE = 1_000_000_000
"""wordfreq gives frequencies; a word's pseudo-count is its expected occurrences per billion words."""
DETECT_LINES = 200

_COUNT_WORD = re.compile(r"^\s*(\d+)\s+(\S+)\s*$")
_WORD_TAB_COUNT = re.compile(r"^(\S+)\t\s*(\d+)\s*$")


def dampen(count: int, dampening: str) -> int:
    """The weight of a word seen ``count`` times under ``dampening`` (one of ``DAMPENING``)."""
    if dampening == "none":
        return count
    if dampening == "log":
        return max(1, int(round(math.log2(count + 1))))
    if dampening == "ones":
        return 1
    raise DataError(f"unknown count dampening {dampening!r}; choose one of: {', '.join(DAMPENING)}")


def detect_format(lines: Iterable[tuple[str, int, str]]) -> str:
    """``counts``, ``words`` or ``text`` from the first ``DETECT_LINES`` non-empty lines: all of the
    form ``count word`` or all ``word<TAB>count`` is ``counts``; all a single token is ``words``."""
    sample = []
    for _file, _number, line in lines:
        if line.strip():
            sample.append(line.rstrip("\r\n"))
        if len(sample) >= DETECT_LINES:
            break
    if not sample:
        return "text"
    if all(_COUNT_WORD.match(s) for s in sample) or all(_WORD_TAB_COUNT.match(s) for s in sample):
        return "counts"
    if all(len(s.split()) == 1 for s in sample):
        return "words"
    return "text"


def read_word_counts(
    lines: Iterable[tuple[str, int, str]], form: str, flag: str = "--corpus-format"
) -> Iterator[tuple[str, int]]:
    """``(word, count)`` for every non-empty line of a ``counts`` or ``words`` list; a line of another
    shape is a ``DataError`` naming its file and line, and ``flag``, the option that names the
    input's form in the command that reads it."""
    for file, number, line in lines:
        text = line.strip()
        if not text:
            continue
        if form == "words":
            if len(text.split()) != 1:
                raise DataError(
                    f"{file}:{number}: a word list has one word per line, got {text[:60]!r}. "
                    f"Give {flag} text for running text, or counts for 'count word' lines."
                )
            yield text, 1
            continue
        match = _COUNT_WORD.match(text) or _WORD_TAB_COUNT.match(line.rstrip("\r\n"))
        if match is None:
            raise DataError(
                f"{file}:{number}: a word-count list has 'count word' or 'word<TAB>count' on every "
                f"line, got {text[:60]!r}. Fix the line, or give {flag} text or words."
            )
        first, second = match.groups()
        word, count = (second, int(first)) if match.re is _COUNT_WORD else (first, int(second))
        yield word, count


def gold_file_words(lines: Iterable[tuple[str, int, str]]) -> Iterator[tuple[str, int]]:
    """``(word, 1)`` for the word (first column) of every non-empty line of a gold file; entries
    of several words (Latin's ``dēlitum esse``) are not words and are left out."""
    for _file, _number, line in lines:
        word = line.rstrip("\r\n").split("\t")[0].strip()
        if word and len(word.split()) == 1:
            yield word, 1


def wordfreq_counts(lang: str, max_words: int | None) -> Iterator[tuple[str, int]]:
    """The ``max_words`` (default 60,000) most frequent alphabetic types of ``wordfreq``'s list for
    ``lang``, lower-cased, with pseudo-counts (occurrences per billion words, at least 1)."""
    try:
        import wordfreq
    except ImportError:
        raise DataError(
            f"{WORDFREQ_PREFIX}{lang}: needs the optional 'wordfreq' package: "
            "pip install 'segrl[wordfreq]'"
        ) from None
    if lang not in wordfreq.available_languages():
        known = ", ".join(sorted(wordfreq.available_languages()))
        raise DataError(
            f"{WORDFREQ_PREFIX}{lang}: wordfreq has no list for {lang!r}; it has: {known}"
        )
    limit = WORDFREQ_DEFAULT_WORDS if max_words is None else max_words
    kept = 0
    # the dictionary is ordered from the most frequent word down
    for word, frequency in wordfreq.get_frequency_dict(lang).items():
        if kept >= limit:
            break
        if not word.isalpha():
            continue
        kept += 1
        yield word, max(1, round(frequency * WORDFREQ_SCALE))


def merge_counts(
    pairs: Iterable[tuple[str, int]], lowercase: bool, max_len: int, max_words: int | None
) -> tuple[Counter[str], int]:
    """Word counts with equal (lower-cased) words added up, words longer than ``max_len`` left out,
    and only the ``max_words`` most frequent kept (ties by word); also how many types were too long."""
    counts: Counter[str] = Counter()
    for word, count in pairs:
        counts[word.lower() if lowercase else word] += count
    too_long = [w for w in counts if len(w) > max_len]
    for word in too_long:
        del counts[word]
    if max_words is not None and len(counts) > max_words:
        kept = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))[:max_words]
        counts = Counter(dict(kept))
    return counts, len(too_long)
