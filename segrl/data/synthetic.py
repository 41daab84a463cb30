"""A synthetic corpus whose units are known: pseudo-words built from morph-like pieces.

``synthetic:SEED`` (as ``--corpus`` and as ``--gold``) names a corpus made here, deterministically
from its seed, without any file:

- pieces: ``stems`` stems of one to three syllables (``CV`` or ``CVC``), ``prefixes`` one-syllable
  prefixes and ``suffixes`` suffixes of the forms ``VC`` or ``CV``, all distinct;
- a lexicon of ``words`` pseudo-words, each a stem with a prefix (probability ``p_prefix``), one suffix
  (``p_suffix``) and a second suffix (``p_second_suffix``, after a first), distinct as strings;
- Zipfian frequencies: the word of rank ``r`` (ranks shuffled) is drawn with probability
  ``r^-zipf / sum``;
- ``sentences`` sentences of ``min_words`` to ``max_words`` words (uniform), separated by spaces;
  with ``noise`` > 0 each letter is replaced by a random letter with that probability (the same
  words are drawn as without noise; the gold set stays the clean lexicon).

Its gold set (``synthetic_gold_entries``) is every word of the lexicon with its pieces: word
boundaries are the spaces, morph boundaries the pieces'. Options are given after the seed,
``synthetic:SEED,key=value,...`` (e.g. ``synthetic:0,noise=0.05,words=500``).
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from segrl.errors import DataError

SYNTHETIC_PREFIX = "synthetic:"
GENERATOR_VERSION = 1
"""Changes whenever the same spec would give other sentences (a benchmark's source hash uses it)."""
CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"


@dataclass(frozen=True)
class SyntheticSpec:
    """How a synthetic corpus is made (see the module docstring)."""

    seed: int = 0
    words: int = 300
    sentences: int = 4000
    min_words: int = 3
    max_words: int = 8
    zipf: float = 1.0
    noise: float = 0.0
    stems: int = 150
    prefixes: int = 6
    suffixes: int = 10
    p_prefix: float = 0.3
    p_suffix: float = 0.6
    p_second_suffix: float = 0.25

    def validate(self, spec: str) -> None:
        if min(self.words, self.sentences, self.stems, self.min_words) < 1:
            raise DataError(f"{spec}: words, sentences, stems and min_words must be at least 1")
        if self.max_words < self.min_words:
            raise DataError(f"{spec}: max_words must be at least min_words")
        if self.prefixes < 1 or self.suffixes < 1:
            raise DataError(f"{spec}: prefixes and suffixes must be at least 1")
        probabilities = (self.noise, self.p_prefix, self.p_suffix, self.p_second_suffix)
        if not all(0.0 <= p <= 1.0 for p in probabilities):
            raise DataError(f"{spec}: noise and p_* are probabilities, in [0, 1]")
        if self.zipf < 0:
            raise DataError(f"{spec}: zipf must be >= 0")


@dataclass(frozen=True)
class SyntheticWord:
    word: str
    pieces: tuple[str, ...]
    probability: float


def is_synthetic(source: str | None) -> bool:
    return source is not None and source.startswith(SYNTHETIC_PREFIX)


def parse_synthetic(source: str) -> SyntheticSpec:
    """``synthetic:SEED[,key=value...]`` as a ``SyntheticSpec``; a clear error for anything else."""
    if not is_synthetic(source):
        raise DataError(f"{source}: not a synthetic corpus (synthetic:SEED[,key=value...])")
    head, *options = source[len(SYNTHETIC_PREFIX) :].split(",")
    fields = {f.name: f.type for f in dataclasses.fields(SyntheticSpec)}
    values: dict[str, int | float] = {}
    try:
        values["seed"] = int(head)
        for option in options:
            key, _, value = option.partition("=")
            key = key.strip()
            if key not in fields or key == "seed":
                known = ", ".join(k for k in fields if k != "seed")
                raise DataError(f"{source}: unknown option {key!r}; known: {known}")
            values[key] = float(value) if fields[key] == "float" else int(value)
    except ValueError:
        raise DataError(
            f"{source}: write synthetic:SEED[,key=value...] with an integer seed and numbers"
        ) from None
    spec = SyntheticSpec(**values)
    spec.validate(source)
    return spec


def _syllables(rng: random.Random, shape: str) -> str:
    return "".join(rng.choice(CONSONANTS if c == "C" else VOWELS) for c in shape)


def _distinct(rng: random.Random, count: int, make, taken: set[str], what: str) -> list[str]:
    """``count`` distinct strings from ``make(rng)``, none of them in ``taken``."""
    out: list[str] = []
    for _ in range(200 * count):
        if len(out) == count:
            return out
        piece = make(rng)
        if piece not in taken:
            taken.add(piece)
            out.append(piece)
    raise DataError(f"could not draw {count} distinct {what}: ask for fewer")


def synthetic_lexicon(spec: SyntheticSpec) -> list[SyntheticWord]:
    """The lexicon of ``spec``, most probable word first."""
    rng = random.Random(f"synthetic-lexicon:{spec.seed}")
    taken: set[str] = set()
    prefixes = _distinct(rng, spec.prefixes, lambda r: _syllables(r, "CV"), taken, "prefixes")
    suffixes = _distinct(
        rng, spec.suffixes, lambda r: _syllables(r, r.choice(("VC", "CV"))), taken, "suffixes"
    )

    def stem(r: random.Random) -> str:
        return "".join(_syllables(r, r.choice(("CV", "CVC"))) for _ in range(r.randint(1, 3)))

    stems = _distinct(rng, spec.stems, stem, taken, "stems")
    words: dict[str, tuple[str, ...]] = {}
    for _ in range(200 * spec.words):
        if len(words) == spec.words:
            break
        pieces = [rng.choice(stems)]
        if rng.random() < spec.p_prefix:
            pieces.insert(0, rng.choice(prefixes))
        if rng.random() < spec.p_suffix:
            pieces.append(rng.choice(suffixes))
            if rng.random() < spec.p_second_suffix:
                pieces.append(rng.choice(suffixes))
        words.setdefault("".join(pieces), tuple(pieces))
    if len(words) < spec.words:
        raise DataError(f"could not build {spec.words} distinct words: ask for fewer or more stems")
    ranked = list(words.items())
    rng.shuffle(ranked)
    weights = [1.0 / (rank**spec.zipf) for rank in range(1, len(ranked) + 1)]
    total = sum(weights)
    return [
        SyntheticWord(word, pieces, weight / total)
        for (word, pieces), weight in zip(ranked, weights, strict=True)
    ]


def synthetic_sentences(spec: SyntheticSpec) -> list[str]:
    """The sentences of ``spec``: lexicon words drawn by frequency, then the optional letter noise."""
    lexicon = synthetic_lexicon(spec)
    rng = random.Random(f"synthetic-sentences:{spec.seed}")
    noise_rng = random.Random(f"synthetic-noise:{spec.seed}")  # noise leaves the words drawn alone
    cumulative = list(itertools.accumulate(w.probability for w in lexicon))
    letters = CONSONANTS + VOWELS
    out = []
    for _ in range(spec.sentences):
        n = rng.randint(spec.min_words, spec.max_words)
        chosen = rng.choices(lexicon, cum_weights=cumulative, k=n)
        sentence = " ".join(w.word for w in chosen)
        if spec.noise > 0:
            sentence = "".join(
                noise_rng.choice(letters) if c != " " and noise_rng.random() < spec.noise else c
                for c in sentence
            )
        out.append(sentence)
    return out


def synthetic_lines(source: str) -> Iterator[tuple[str, int, str]]:
    """``(source, line number, sentence)``, as the corpus loader reads files."""
    for number, sentence in enumerate(synthetic_sentences(parse_synthetic(source)), start=1):
        yield source, number, sentence


def synthetic_gold_entries(source: str) -> list[tuple[str, tuple[str, ...]]]:
    """Every word of the lexicon with its pieces (the gold segmentation), most probable first."""
    return [(w.word, w.pieces) for w in synthetic_lexicon(parse_synthetic(source))]
