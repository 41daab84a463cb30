"""Segmentations as the field writes them, and read back: ``segrl segment`` writes them,
``segrl evaluate --predictions`` reads them (any tool's output in these formats).

- ``morfessor``: a word's morphs separated by spaces (``un expected ly``), as ``morfessor-segment``
  writes them; with word counts, the count first (``3 un expected ly``), as in Morfessor's own
  segmentation files.
- ``sigmorphon``: SIGMORPHON 2022's ``word<TAB>morph @@morph`` (``unexpectedly<TAB>un @@expected
  @@ly``); a sentence is ``sentence<TAB>the cat @@s sat`` (``@@`` marks a morph inside a word).
- ``separator``: morphs joined by a separator of the user's choice (``un-expected-ly``); in a
  sentence, words are separated by spaces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from segrl.errors import DataError

OUTPUT_FORMATS = ("morfessor", "sigmorphon", "separator")
PREDICTION_FORMATS = ("auto", *OUTPUT_FORMATS)
_COUNT_FIRST = re.compile(r"^\d+\s+\S")


def format_word(
    word: str, segments: Sequence[str], fmt: str, separator: str = "-", count: int | None = None
) -> str:
    """One output line for a word (``count``: its count, from a word-count input)."""
    if fmt == "sigmorphon":
        line = f"{word}\t{' @@'.join(segments)}"
        return line if count is None else f"{line}\t{count}"
    if fmt == "morfessor":
        line = " ".join(segments)
        return line if count is None else f"{count} {line}"
    line = separator.join(segments)
    return line if count is None else f"{count}\t{line}"


def format_sentence(sentence: str, segments: Sequence[str], fmt: str, separator: str = "-") -> str:
    """One output line for a sentence whose ``segments`` have each space between words as a
    segment of its own (``segrl.loading.LoadedSegmenter.segment_sentences``)."""
    words = split_words(segments)
    if fmt == "sigmorphon":
        return f"{sentence}\t" + " ".join(" @@".join(w) for w in words)
    if fmt == "morfessor":
        raise DataError(
            "Morfessor's format has no word boundaries for sentences; give --format sigmorphon or "
            "--format separator for running text"
        )
    return " ".join(separator.join(w) for w in words)


def split_words(segments: Sequence[str]) -> list[list[str]]:
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


def read_predictions(
    lines: Iterable[tuple[str, int, str]], fmt: str = "auto", separator: str = "-"
) -> Iterator[tuple[str, list[str]]]:
    """``(word, morphs)`` for every line of a predictions file in one of ``OUTPUT_FORMATS`` (``auto``:
    ``sigmorphon`` if the lines have a tab, else ``morfessor``); a sentence-level SIGMORPHON line
    gives one entry per word. In the ``morfessor`` format a number first on the line is a count
    (Morfessor's own segmentation files) only where every such line starts with one: a file of
    words reads ``1990 s`` as the word ``1990s``. A line whose morphs do not spell its word is a
    ``DataError``."""
    if fmt not in PREDICTION_FORMATS:
        raise DataError(
            f"unknown predictions format {fmt!r}; choose one of: {', '.join(PREDICTION_FORMATS)}"
        )
    rows = []  # (file, number, text, format)
    for file, number, line in lines:
        text = line.rstrip("\r\n")
        if text.strip() and not text.startswith("#"):
            kind = fmt if fmt != "auto" else ("sigmorphon" if "\t" in text else "morfessor")
            rows.append((file, number, text, kind))
    morfessor_lines = [text for _, _, text, kind in rows if kind == "morfessor"]
    first = 1 if all(_COUNT_FIRST.match(text.strip()) for text in morfessor_lines) else 0
    for file, number, text, kind in rows:
        if kind == "sigmorphon":
            columns = text.split("\t")
            if len(columns) < 2:
                raise DataError(
                    f"{file}:{number}: expected 'word<TAB>morph @@morph' (SIGMORPHON 2022), got "
                    f"{text[:60]!r}"
                )
            yield from _sigmorphon_words(columns[0].strip(), columns[1], file, number)
        elif kind == "morfessor":
            tokens = text.split()
            yield "".join(tokens[first:]), tokens[first:]
        else:
            for word in text.split():
                morphs = [m for m in word.split(separator) if m]
                yield "".join(morphs), morphs


def _sigmorphon_words(
    surface: str, analysis: str, file: str, number: int
) -> Iterator[tuple[str, list[str]]]:
    """The words of a SIGMORPHON line and their morphs: morphs are separated by `` @@`` and by
    spaces (as the shared task's scorer reads them); a morph across a space is cut there."""
    morphs = [m for m in re.split(r" @@| ", analysis) if m.strip()]
    words = surface.split()
    if "".join(morphs) != "".join(words):
        raise DataError(
            f"{file}:{number}: the morphs {' '.join(morphs)[:60]!r} do not spell {surface[:60]!r}"
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
