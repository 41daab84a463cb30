"""Segmentations as the field writes them, and read back: ``segrl segment`` writes them,
``segrl evaluate --predictions`` reads them (any tool's output in these formats).

- ``morfessor``: Morfessor's files, through its own ``morfessor.MorfessorIO``: a word's morphs
  separated by spaces (``un expected ly``), as ``morfessor-segment`` writes them; with word counts,
  Morfessor's segmentation file (``3 un + expected + ly``), as ``morfessor -S`` writes it and
  ``morfessor -L`` loads it.
- ``sigmorphon``: SIGMORPHON 2022's ``word<TAB>morph @@morph`` (``unexpectedly<TAB>un @@expected
  @@ly``); a sentence is ``sentence<TAB>the cat @@s sat`` (``@@`` marks a morph inside a word).
- ``separator``: morphs joined by a separator of the user's choice (``un-expected-ly``); in a
  sentence, words are separated by spaces.
- ``sentencepiece`` (read only): SentencePiece's pieces, ``▁`` starting each word (``▁un expected
  ly``).
- ``bpe`` (read only): subword-nmt's BPE, ``@@`` ending a piece that the next one continues
  (``un@@ expected@@ ly``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from morfessor import MorfessorIO

from segrl.errors import DataError

OUTPUT_FORMATS = ("morfessor", "sigmorphon", "separator")
PREDICTION_FORMATS = ("auto", *OUTPUT_FORMATS, "sentencepiece", "bpe")
_COUNT_FIRST = re.compile(r"^\d+\s+\S")
_MORFESSOR = MorfessorIO()
"""Morfessor's reader and writer of its files (``' + '`` between constructions, ``#`` comments)."""
MIN_COVERAGE = 0.5
"""The smallest fraction of a gold file's words that predictions must segment to be scored by
default: below it, the scores would describe a few words the predictions happen to share with the
gold file, or a format misread."""
WORD_START = "\u2581"
"""SentencePiece's ``▁``, the start of a word."""
BPE_CONTINUES = "@@"
"""subword-nmt's mark at the end of a piece that the next piece continues."""


def format_word(
    word: str, segments: Sequence[str], fmt: str, separator: str = "-", count: int | None = None
) -> str:
    """One output line for a word (``count``: its count, from a word-count input, which SIGMORPHON's
    lines have no column for: their third is the word's morphological category)."""
    if fmt == "sigmorphon":
        return f"{word}\t{' @@'.join(segments)}"
    if fmt == "morfessor":
        if count is None:
            return _MORFESSOR.format_constructions(list(segments), csep=" ")
        return f"{count} {_MORFESSOR.format_constructions(list(segments))}"
    line = separator.join(segments)
    return line if count is None else f"{count}\t{line}"


def format_sentence(sentence: str, segments: Sequence[str], fmt: str, separator: str = "-") -> str:
    """One output line for a sentence whose ``segments`` have each space between words as a
    segment of its own (``segrl.loading.LoadedSegmenter.segment_sentences``)."""
    words = group_into_words(segments)
    if fmt == "sigmorphon":
        return f"{sentence}\t" + " ".join(" @@".join(w) for w in words)
    if fmt == "morfessor":
        raise DataError(
            "Morfessor's format has no word boundaries for sentences; give --format sigmorphon or "
            "--format separator for running text"
        )
    return " ".join(separator.join(w) for w in words)


def group_into_words(segments: Sequence[str]) -> list[list[str]]:
    """The segments of a sentence grouped into words (at the segments that are a single space;
    a segment with a space inside, as a unit model may give, is cut at the space)."""
    words: list[list[str]] = [[]]
    for segment in segments:
        parts = segment.split(" ")
        for k, part in enumerate(parts):
            if k:
                words.append([])
            if part:
                words[-1].append(part)
    return [w for w in words if w]


def detect_predictions_format(texts: Iterable[str], separator: str = "-") -> tuple[str, str]:
    """The format of a predictions file's lines that have no tab (those are ``sigmorphon``), and
    the marker that told it: ``▁`` (sentencepiece), a piece ending in ``@@`` (bpe), Morfessor's
    ``' + '``, ``separator`` in words alone on their lines (separator), else ``morfessor`` (a
    space); ``sigmorphon`` (a tab) where every line has a tab. Comments (``#``) are left out."""
    lines = [t.strip() for t in texts if t.strip() and not t.startswith(_MORFESSOR.comment_start)]
    if lines and all("\t" in t for t in lines):
        return "sigmorphon", "\t"
    lines = [t for t in lines if "\t" not in t]
    if any(WORD_START in t for t in lines):
        return "sentencepiece", WORD_START
    if any(t.endswith(BPE_CONTINUES) or f"{BPE_CONTINUES} " in t for t in lines):
        return "bpe", BPE_CONTINUES
    if any(_MORFESSOR.construction_separator in t for t in lines):
        return "morfessor", _MORFESSOR.construction_separator
    words = [_without_count(t, _all_counted(lines)).split() for t in lines]
    if separator and all(len(w) == 1 for w in words) and any(separator in w[0] for w in words):
        return "separator", separator
    return "morfessor", " "


def read_predictions(
    lines: Iterable[tuple[str, int, str]], fmt: str = "auto", separator: str = "-"
) -> Iterator[tuple[str, list[str]]]:
    """``(word, morphs)`` for every line of a predictions file in one of ``PREDICTION_FORMATS``
    (``auto``: ``sigmorphon`` for a line with a tab, the others' format by
    ``detect_predictions_format``); a line of several words gives one entry per word. Outside
    ``sigmorphon`` a number first on the line is a count (Morfessor's segmentation files) only
    where every such line starts with one: a file of words reads ``1990 s`` as the word ``1990s``.
    In any format a line ``word<TAB>analysis`` is a word and its analysis in that format (``paste
    words.txt subword-nmt.out`` read as ``bpe``); one whose morphs do not spell its word is a
    ``DataError``."""
    for _file, _number, word, morphs in _read_rows(lines, fmt, separator):
        yield word, morphs


def predictions_by_word(
    lines: Iterable[tuple[str, int, str]], fmt: str = "auto", separator: str = "-"
) -> tuple[dict[str, list[str]], list[str]]:
    """The segmentation of each word of a predictions file (``read_predictions``), lower-cased as
    gold files are read, the first where a word has several, and a line per word given two
    different segmentations (``'file:2: walked is walk ed here, walked on line 1'``): running text
    segmented in context may give those, a misread file gives them everywhere."""
    first: dict[str, tuple[list[str], int]] = {}
    conflicts: list[str] = []
    for file, number, word, morphs in _read_rows(lines, fmt, separator):
        word, morphs = word.lower(), [m.lower() for m in morphs]
        if word not in first:
            first[word] = (morphs, number)
        elif first[word][0] != morphs:
            conflicts.append(
                f"{file}:{number}: {word} is {' '.join(morphs)!r} here, "
                f"{' '.join(first[word][0])!r} on line {first[word][1]}"
            )
    return {word: morphs for word, (morphs, _) in first.items()}, conflicts


def _read_rows(
    lines: Iterable[tuple[str, int, str]], fmt: str, separator: str
) -> Iterator[tuple[str, int, str, list[str]]]:
    """``read_predictions`` with each word's place: ``(file, line number, word, morphs)``."""
    if fmt not in PREDICTION_FORMATS:
        raise DataError(
            f"unknown predictions format {fmt!r}; choose one of: {', '.join(PREDICTION_FORMATS)}"
        )
    rows = []  # (file, number, text)
    for file, number, line in lines:
        text = line.rstrip("\r\n")
        if text.strip() and not text.startswith(_MORFESSOR.comment_start):
            rows.append((file, number, text))
    texts = [text for _, _, text in rows]
    other = detect_predictions_format(texts, separator)[0] if fmt == "auto" else fmt
    counted = _all_counted([t for t in texts if fmt != "auto" or "\t" not in t])
    for file, number, text in rows:
        kind = "sigmorphon" if fmt == "auto" and "\t" in text else other
        if kind != "sigmorphon":
            text = _without_count(text, counted)
        if "\t" not in text and kind != "sigmorphon":
            words = _words(text, kind, separator)
        else:
            columns = text.split("\t")
            if len(columns) < 2:
                found, marker = detect_predictions_format([text], separator)
                raise DataError(
                    f"{file}:{number}: expected 'word<TAB>morph @@morph' (SIGMORPHON 2022), got "
                    f"{text[:60]!r}, which looks {found} (saw {marker!r}); give that "
                    "--predictions-format"
                )
            words = _spelled_words(columns[0].strip(), columns[1], kind, separator, file, number)
        for word, morphs in words:
            yield file, number, word, morphs


def _all_counted(texts: Sequence[str]) -> bool:
    """Whether every line starts with a number and then more (a count, as in Morfessor's files)."""
    return bool(texts) and all(_COUNT_FIRST.match(t.strip()) for t in texts)


def _without_count(text: str, counted: bool) -> str:
    return text.strip().split(maxsplit=1)[1] if counted else text.strip()


def _words(text: str, fmt: str, separator: str) -> Iterator[tuple[str, list[str]]]:
    """The ``(word, morphs)`` of a line (its count removed) in a format other than sigmorphon."""
    if fmt == "morfessor":
        csep = _MORFESSOR.construction_separator
        morphs = text.split(csep) if csep in text else text.split()
        morphs = [m.strip() for m in morphs if m.strip()]
        yield "".join(morphs), morphs
        return
    words: list[list[str]] = []
    if fmt == "sentencepiece":
        for piece in text.split():
            if piece.startswith(WORD_START) or not words:
                words.append([])
            if piece.lstrip(WORD_START):
                words[-1].append(piece.lstrip(WORD_START))
    elif fmt == "bpe":
        starts_word = True
        for piece in text.split():
            if starts_word:
                words.append([])
            starts_word = not piece.endswith(BPE_CONTINUES)
            words[-1].append(piece.removesuffix(BPE_CONTINUES))
    else:
        words = [[m for m in word.split(separator) if m] for word in text.split()]
    for morphs in words:
        morphs = [m for m in morphs if m]
        if morphs:
            yield "".join(morphs), morphs


def _spelled_words(
    surface: str, analysis: str, fmt: str, separator: str, file: str, number: int
) -> Iterator[tuple[str, list[str]]]:
    """The words of a ``word<TAB>analysis`` line and their morphs, the analysis in ``fmt``: in
    SIGMORPHON's, morphs are separated by `` @@`` and by spaces (as the shared task's scorer reads
    them); a morph across a space is cut there. Morphs that do not spell the words are a
    ``DataError``, which names the format the analysis looks to be in."""
    if fmt == "sigmorphon":
        morphs = [m for m in re.split(r" @@| ", analysis) if m.strip()]
    else:
        morphs = [m for _, word in _words(analysis.strip(), fmt, separator) for m in word]
    words = surface.split()
    if "".join(morphs) != "".join(words):
        found, marker = detect_predictions_format([analysis], separator)
        looks = (
            f"; it looks {found} (saw {marker!r}): give --predictions-format {found}"
            if found != fmt and marker != " "
            else "; give each word its own segmentation after the tab"
        )
        raise DataError(
            f"{file}:{number}: the morphs {' '.join(morphs)[:60]!r} do not spell "
            f"{surface[:60]!r} (read as {fmt}){looks}"
        )
    pending = iter(morphs)
    rest = ""
    for word in words:
        pieces: list[str] = []
        while len("".join(pieces)) < len(word):
            morph = rest or next(pending)
            need = len(word) - len("".join(pieces))
            pieces.append(morph[:need])
            rest = morph[need:]
        yield word, pieces
