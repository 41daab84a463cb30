"""The segmented corpus form, ``segmented:PATH``: text whose spaces are the gold word boundaries.

Word discovery segments text without spaces into words. Its standard corpora (the Brent corpus of
child-directed speech, ``br-phono`` and ``br-text``; the Penn Treebank without spaces) come as one
utterance per line with words separated by spaces, so one file gives both the input (the line with its
spaces removed) and its gold (the words). ``PATH`` is

- a file: its utterances, split into train/valid/test by the seeded shuffle every corpus gets;
- a folder holding one file per split, named ``tr``/``va``/``te`` or ``train``/``valid``/``test`` (or
  ``dev``) with ``.txt`` (the Brent splits of the segmental-LM papers): those splits, as given;
- a pattern with ``{split}`` (``ptb/ptb.{split}.txt``), each spelling of each split tried in turn;
- ``bundled``: the sentences of the bundled WikiText-2 slice (normalised as running text), the
  project's own small corpus for trying the code path.

Utterances are read as written: one per line, white space collapsed, nothing lower-cased and nothing
split into sentences (phonemic transcriptions such as ``br-phono`` are case-sensitive: ``D`` and
``d`` are different phonemes). Characters seen fewer than ``min_char_count`` times become the
placeholder and utterances longer than ``max_len`` characters are left out, as in every corpus.
"""

from __future__ import annotations

from pathlib import Path

from segrl.errors import DataError

SEGMENTED_PREFIX = "segmented:"
BUNDLED_UTTERANCES = "bundled"
"""``segmented:bundled``: the bundled WikiText-2 slice, its spaces the gold."""
SPLIT_NAMES: dict[str, tuple[str, ...]] = {
    "train": ("tr", "train"),
    "valid": ("va", "valid", "dev"),
    "test": ("te", "test"),
}
"""The spellings of each split's name in a folder or a ``{split}`` pattern, tried in this order."""


def is_segmented(corpus: str | None) -> bool:
    """Whether ``corpus`` names a segmented corpus (``segmented:PATH``)."""
    return corpus is not None and corpus.startswith(SEGMENTED_PREFIX)


def segmented_location(corpus: str) -> str:
    """The ``PATH`` of ``segmented:PATH``; a ``DataError`` when it is empty."""
    location = corpus[len(SEGMENTED_PREFIX) :]
    if not location:
        raise DataError(
            f"{corpus!r}: give the file, folder or {{split}} pattern after '{SEGMENTED_PREFIX}' "
            f"(e.g. {SEGMENTED_PREFIX}data/brent/br-phono), or '{SEGMENTED_PREFIX}bundled'"
        )
    return location


def split_files(location: str) -> dict[str, Path] | None:
    """The file of each split (train, valid, test) where ``location`` is a folder or a ``{split}``
    pattern; None where it is one file, to be split by the seeded shuffle. A folder or pattern that
    lacks a split is a ``DataError`` naming the names tried."""
    if "{split}" in location:
        pattern = location
    elif Path(location).is_dir():
        pattern = str(Path(location) / "{split}.txt")
    else:
        if not Path(location).is_file():
            raise DataError(
                f"{SEGMENTED_PREFIX}{location}: no such file or folder; give a file of utterances "
                "(words separated by spaces), a folder of tr.txt, va.txt and te.txt, or a pattern "
                "with {split}"
            )
        return None
    files: dict[str, Path] = {}
    for split, names in SPLIT_NAMES.items():
        tried = [Path(pattern.replace("{split}", name)) for name in names]
        found = [path for path in tried if path.is_file()]
        if not found:
            raise DataError(
                f"{SEGMENTED_PREFIX}{location}: no {split} split; looked for "
                f"{', '.join(str(p) for p in tried)}"
            )
        files[split] = found[0]
    return files
