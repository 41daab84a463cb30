"""The language of a corpus and of a gold set, as ISO 639-3 codes (SIGMORPHON 2022's file names):
``eng`` for the bundled corpus and gold set, the code of ``LANG`` for ``wordfreq:LANG``, the code in a
gold file's name (also for ``goldwords:PATH``, the words of one) (``hun.word.dev.tsv``, ``goldstd_develset.segmentation.fin``), else ``unknown``."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from segrl.data.wordlists import GOLDWORDS_PREFIX, WORDFREQ_PREFIX
from segrl.errors import DataError, DataWarning

UNKNOWN = "unknown"
BUNDLED_LANGUAGE = "eng"
"""The language of the bundled corpus (WikiText-2) and gold set (SIGMORPHON 2022 English)."""

ISO_639_3 = {
    "ar": "ara", "bg": "bul", "bn": "ben", "bs": "bos", "ca": "cat", "cs": "ces", "da": "dan",
    "de": "deu", "el": "ell", "en": "eng", "es": "spa", "et": "est", "fa": "fas", "fi": "fin",
    "fr": "fra", "he": "heb", "hi": "hin", "hr": "hrv", "hu": "hun", "id": "ind", "is": "isl",
    "it": "ita", "ja": "jpn", "ko": "kor", "la": "lat", "lt": "lit", "lv": "lav", "mk": "mkd",
    "mn": "mon", "ms": "msa", "nb": "nob", "nl": "nld", "pl": "pol", "pt": "por", "ro": "ron",
    "ru": "rus", "sk": "slk", "sl": "slv", "sr": "srp", "sv": "swe", "ta": "tam", "tr": "tur",
    "uk": "ukr", "ur": "urd", "vi": "vie", "zh": "zho",
}  # fmt: skip
"""ISO 639-1 codes (``wordfreq:LANG``) to ISO 639-3 codes (gold file names)."""


def corpus_language(source: str | None) -> str:
    """The language of a corpus source (``Corpus.settings["source"]``; None: the bundled corpus)."""
    if source is None or source.startswith("bundled:"):
        return BUNDLED_LANGUAGE
    if source.startswith(WORDFREQ_PREFIX):
        code = source.removeprefix(WORDFREQ_PREFIX).lower()
        return ISO_639_3.get(code.split("-")[0], UNKNOWN)
    if source.startswith(GOLDWORDS_PREFIX):
        return gold_language(source.removeprefix(GOLDWORDS_PREFIX))
    return UNKNOWN


def gold_language(path: str | None) -> str:
    """The language of a gold file (None: the bundled set): the one ISO 639-3 code among the parts
    of its name, ``unknown`` where there is none or more than one."""
    if path is None or path.startswith("bundled:"):
        return BUNDLED_LANGUAGE
    codes = set(ISO_639_3.values())
    found = {part for part in re.split(r"[^a-z]+", Path(path).name.lower()) if part in codes}
    return found.pop() if len(found) == 1 else UNKNOWN


def check_gold_language(corpus_source: str | None, gold_path: str | None) -> None:
    """Refuse to score a corpus of a known language other than English against the bundled English
    gold set (None, or its name ``bundled:...``), and say so in a ``DataWarning`` where the corpus's
    language is not known (a file: segrl does not guess it); a gold file given explicitly is taken
    as chosen."""
    language = corpus_language(corpus_source)
    bundled = gold_path is None or gold_path.startswith("bundled:")
    if bundled and language == UNKNOWN:
        warnings.warn(
            DataWarning(
                f"{corpus_source}: language unknown: scoring on {BUNDLED_LANGUAGE} gold (the "
                "bundled set); give a gold set in the corpus's language with --gold FILE"
            ),
            stacklevel=2,
        )
    if bundled and language not in (UNKNOWN, BUNDLED_LANGUAGE):
        raise DataError(
            f"{corpus_source}: the corpus is in {language} but the bundled gold set is in "
            f"{BUNDLED_LANGUAGE}; give a gold set in {language} with --gold FILE (e.g. SIGMORPHON "
            f"2022's {language}.word.dev.tsv)"
        )
