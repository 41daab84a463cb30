"""Corpus loading and normalisation as in the study: sentences of at most ``max_len`` characters,
lower-cased, rare characters mapped to one placeholder, split deterministically into train/valid/test.

    >>> corpus = load_corpus(DataConfig())          # the bundled WikiText-2 slice
    >>> corpus.train[0]                              # doctest: +SKIP
    'he had a guest role in the television series judge john deed in 2002 .'
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import warnings
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import BinaryIO

from segrl.config import CorpusFormat, DataConfig, limit, validate_config
from segrl.data.segmented import (
    BUNDLED_UTTERANCES,
    SEGMENTED_PREFIX,
    is_segmented,
    segmented_location,
    split_files,
)
from segrl.data.synthetic import is_synthetic, synthetic_lines
from segrl.data.vocab import CharVocab
from segrl.data.wordlists import (
    GOLDWORDS_PREFIX,
    WORDFREQ_PREFIX,
    dampen,
    detect_format,
    gold_file_words,
    merge_counts,
    read_word_counts,
    wordfreq_counts,
)
from segrl.errors import DataError, DataWarning

PLACEHOLDER = "\ufffd"
"""Stands for every character seen fewer than ``min_char_count`` times (and for unseen ones later)."""
MAX_LINE_CHARS = 1_000_000
"""A line longer than this is not text split into lines; the loader refuses it."""
BUNDLED_CORPUS = "wikitext2_test.txt.gz"
BUNDLED_SOURCE = f"bundled:{BUNDLED_CORPUS}"
"""The bundled corpus's name: its ``source``, and what an unset ``data.corpus`` resolves to."""
HF_PREFIX = "hf:"

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_WIKITEXT_ESCAPES = ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."))
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class NormalizationSettings:
    """Everything that decides how raw lines become sentences; saved with every run."""

    lowercase: bool = True
    min_char_count: int = 25
    placeholder: str = PLACEHOLDER
    max_len: int = 128
    unescape_wikitext: bool = True
    """Undo WikiText's ``@-@``, ``@,@``, ``@.@`` escapes (``guest @-@ star`` -> ``guest-star``)."""
    drop_headings: bool = True
    """Drop WikiText headings (lines of the form ``= Title =``)."""


@dataclass
class Corpus:
    """Normalised sentences split into train/valid/test, with the character vocabulary of the corpus."""

    train: list[str]
    valid: list[str]
    test: list[str]
    vocab: CharVocab
    settings: dict = field(default_factory=dict)
    """Normalisation and split settings, the source, and counts; logged with every run."""
    counts: dict[str, int] | None = None
    """A word list's count of every word type (of every split); None for running text, whose
    ``train``/``valid``/``test`` are sentences. For a word list they are its word types."""

    @property
    def kind(self) -> str:
        """``text`` (sentences) or ``words`` (a word list: word types with counts)."""
        return "text" if self.counts is None else "words"

    @property
    def gold_from_spaces(self) -> bool:
        """Whether this is a segmented corpus (``segmented:PATH``): utterances whose spaces are the
        gold word boundaries, for word discovery (segmenters read them with the spaces removed)."""
        return self.settings.get("format") == "segmented"

    @property
    def sentences(self) -> list[str]:
        return [*self.train, *self.valid, *self.test]

    @property
    def fingerprint(self) -> str:
        """A hash of the sentences and settings: equal corpora have equal fingerprints."""
        h = hashlib.sha256(json.dumps(self.settings, sort_keys=True, default=str).encode())
        for split in (self.train, self.valid, self.test):
            h.update(b"\x00split\x00")
            for sentence in split:
                h.update(sentence.encode("utf-8"))
                if self.counts is not None:
                    h.update(b"\t%d" % self.counts[sentence])
                h.update(b"\n")
        return h.hexdigest()[:16]

    def split(self, name: str) -> list[str]:
        if name not in ("train", "valid", "test"):
            raise ValueError(f"unknown split {name!r}: use train, valid or test")
        return getattr(self, name)

    def word_counts(self, split: str = "train") -> Counter[str]:
        """How often each space-separated word occurs in a split (what Morfessor is trained on); for
        a word list, the list's counts of the split's word types."""
        if self.counts is not None:
            return Counter({word: self.counts[word] for word in self.split(split)})
        counts: Counter[str] = Counter()
        for sentence in self.split(split):
            counts.update(sentence.split())
        return counts

    def weights(self, texts: list[str], dampening: str | None = None) -> list[int] | None:
        """How often to draw each of ``texts`` relative to the others: a word list's counts under
        ``dampening`` (``none``, ``log``, ``ones``; None: the corpus's setting, ``--dampening``);
        None for running text (every sentence once)."""
        if self.counts is None:
            return None
        dampening = dampening or self.settings.get("dampening", "log")
        return [dampen(self.counts.get(text, 1), dampening) for text in texts]


def without_spaces(corpus: Corpus) -> Corpus:
    """A segmented corpus's utterances with their spaces removed, each one text (a "word" to a
    segmenter of words): what word discovery's segmenters train on and segment, so that no
    segmenter ever sees a gold boundary (its word counts are counts of whole utterances)."""
    if not corpus.gold_from_spaces:
        raise DataError(
            f"{corpus.settings.get('source')}: not a segmented corpus (segmented:PATH); only there "
            "are the spaces the gold that word discovery removes"
        )
    train, valid, test = (
        [s.replace(" ", "") for s in split] for split in (corpus.train, corpus.valid, corpus.test)
    )
    settings = {**corpus.settings, "format": "unspaced"}
    return Corpus(train, valid, test, corpus.vocab, settings)


def evaluator_corpus(corpus: Corpus, hide_spaces: bool) -> Corpus:
    """The corpus a model that rewards a segmenter (an evaluator) learns from: ``corpus``, or where
    its spaces are the gold and hidden from the segmenter (word discovery: a segmented corpus with
    ``hide_spaces``), its utterances without them (``without_spaces``), so that no evaluator's
    words, lexicon or Morfessor model is drawn from the boundaries the segmenter is to find."""
    return without_spaces(corpus) if hide_spaces and corpus.gold_from_spaces else corpus


def gold_utterances(source: str) -> list[str]:
    """The gold utterances a segmented source (``segmented:PATH``) is scored on, as written: its
    test split where it has split files, else every line of its file (``segmented:bundled``: the
    test split of the bundled corpus's default split)."""
    location = segmented_location(source)
    if location == BUNDLED_UTTERANCES:
        return load_corpus(DataConfig(corpus=source)).test
    files = split_files(location)
    path = files["test"] if files is not None else Path(location)
    utterances = [" ".join(line.split()) for _f, _n, line in read_lines(path) if line.strip()]
    if not utterances:
        raise DataError(f"{path}: no utterances in it")
    return utterances


def _texts_name(form: str) -> str:
    """What a corpus of ``form`` holds, as its messages name it: sentences (running text),
    utterances (segmented text) or words (word lists)."""
    return {"text": "sentences", "segmented": "utterances"}.get(form, "words")


def load_corpus(config: DataConfig | None = None) -> Corpus:
    """Read, normalise and split the corpus that ``config`` names (the bundled one by default)."""
    config = config or DataConfig()
    validate_config(config, "data.")
    if config.max_len < 2:
        raise DataError(f"max_len must be at least 2 characters, got {config.max_len}")
    if not 0 <= config.valid_fraction + config.test_fraction < 1:
        raise DataError(
            "valid_fraction + test_fraction must be in [0, 1): some sentences must train"
        )
    settings = NormalizationSettings(
        lowercase=config.lowercase, min_char_count=config.min_char_count, max_len=config.max_len
    )
    # "" (as MLproject parameters give it) and the bundled corpus's name mean the bundled corpus
    corpus = None if config.corpus in ("", BUNDLED_SOURCE) else config.corpus
    source = corpus or BUNDLED_SOURCE
    config = replace(  # NO_LIMIT: as None, no limit
        config, max_sentences=limit(config.max_sentences), max_words=limit(config.max_words)
    )
    form = corpus_format(corpus, config.corpus_format)
    dampen(1, config.dampening)  # an unknown dampening is refused before anything is read
    if form == "segmented" and segmented_location(corpus) != BUNDLED_UTTERANCES:
        settings = NormalizationSettings(  # utterances are read as written (segrl.data.segmented)
            lowercase=False,
            min_char_count=config.min_char_count,
            max_len=config.max_len,
            unescape_wikitext=False,
            drop_headings=False,
        )
    splits = None
    if form == "segmented":
        sentences, splits, stats = _segmented_utterances(corpus, config, settings)
        counts = None
    elif form == "text":
        sentences, stats = normalize(
            _source_lines(corpus), settings, max_sentences=config.max_sentences
        )
        counts = None
    else:
        if form == "wordfreq":
            pairs = wordfreq_counts(corpus[len(WORDFREQ_PREFIX) :], config.max_words)
        elif form == "goldwords":
            pairs = gold_file_words(read_lines(corpus[len(GOLDWORDS_PREFIX) :]))
        else:
            pairs = read_word_counts(_source_lines(corpus), form)
        counts, too_long = merge_counts(pairs, config.lowercase, config.max_len, config.max_words)
        counts, rare = _map_rare_characters(counts, settings)
        sentences = sorted(counts, key=lambda w: (-counts[w], w))
        stats = {"words": len(sentences), "too_long": too_long, "rare_characters": len(rare)}
    if not sentences:
        what = _texts_name(form)
        if not stats["too_long"]:
            raise DataError(
                f"{source}: no {what} left after normalisation: it is empty, or holds only blank "
                "lines or headings"
            )
        raise DataError(
            f"{source}: no {what} left after normalisation ({what} longer than "
            f"max_len={config.max_len} characters are left out, {stats['too_long']} were). "
            "Give shorter texts, one or more per line, or raise --max-len."
        )
    if splits is not None:
        train, valid, test = splits
    else:
        train, valid, test = split_sentences(
            sentences, config.valid_fraction, config.test_fraction, config.seed
        )
    vocab = CharVocab.from_texts(train, settings.placeholder)
    _check_not_all_placeholder(train, settings, source, form)
    if len(train) < MIN_TRAIN_TEXTS:
        what = _texts_name(form)
        warnings.warn(
            DataWarning(
                f"{source}: only {len(train)} training {what} (and {len(valid)} valid, {len(test)} "
                f"test); a segmenter learns little from so few: give a larger corpus"
            ),
            stacklevel=2,
        )
    return Corpus(
        train=train,
        valid=valid,
        test=test,
        vocab=vocab,
        counts=counts,
        settings={
            "source": source,
            "format": form,
            "dampening": config.dampening,
            "normalization": asdict(settings),
            "split": {
                "valid_fraction": config.valid_fraction,
                "test_fraction": config.test_fraction,
                "seed": config.seed,
                "max_sentences": config.max_sentences,
                "max_words": config.max_words,
                "files": splits is not None,
            },
            "counts": {**stats, "train": len(train), "valid": len(valid), "test": len(test)},
        },
    )


MAX_PLACEHOLDER_FRACTION = 0.5
MIN_TRAIN_TEXTS = 10
"""Fewer training sentences (or words) than this is a ``DataWarning``: likely not what was meant."""


def _check_not_all_placeholder(
    train: list[str], settings: NormalizationSettings, source: str, form: str
) -> None:
    """Refuse a corpus whose training characters are mostly the placeholder: too small for its
    rare-character threshold, every model trained on it would learn nothing but the placeholder."""
    chars = sum(len(t) - t.count(" ") for t in train)
    mapped = sum(t.count(settings.placeholder) for t in train)
    if chars and mapped / chars > MAX_PLACEHOLDER_FRACTION:
        what = _texts_name(form)
        raise DataError(
            f"{source}: {mapped / chars:.0%} of the training characters became the placeholder: the "
            f"corpus is too small ({len(train)} training {what}) for --min-char-count="
            f"{settings.min_char_count}; give a larger corpus or lower --min-char-count"
        )


def corpus_path(corpus: str | None) -> Path | None:
    """The file or folder a corpus source names (``goldwords:PATH``: the gold file ``PATH``); None
    for the bundled corpus and for the named sources, ``wordfreq:LANG``, ``hf:NAME``, segmented corpora (``segmented:PATH``) and
    ``synthetic:SEED``."""
    named = (WORDFREQ_PREFIX, HF_PREFIX, SEGMENTED_PREFIX)
    if corpus is None or corpus.startswith(named) or is_synthetic(corpus):
        return None
    return Path(corpus.removeprefix(GOLDWORDS_PREFIX))


def corpus_format(corpus: str | None, declared: CorpusFormat = "auto") -> str:
    """What ``corpus`` is: ``text``, ``counts``, ``words``, ``wordfreq``, ``goldwords`` or
    ``segmented``; ``auto`` reads the first lines of a file (``wordfreq:LANG`` and
    ``goldwords:PATH`` are always word lists, ``segmented:PATH`` always utterances whose spaces are
    the gold; the bundled corpus is text)."""
    if corpus is not None and corpus.startswith(WORDFREQ_PREFIX):
        return "wordfreq"
    if corpus is not None and corpus.startswith(GOLDWORDS_PREFIX):
        if declared not in ("auto", "words"):
            raise DataError(
                f"{corpus}: the words of a gold file are a word list; --corpus-format "
                f"{declared} does not apply to it"
            )
        return "goldwords"
    if is_segmented(corpus):
        if declared not in ("auto", "text"):
            raise DataError(
                f"{corpus}: a segmented corpus is running text (utterances whose spaces are the "
                f"gold); --corpus-format {declared} does not apply to it"
            )
        return "segmented"
    if declared != "auto":
        return declared
    if corpus is None or corpus.startswith(HF_PREFIX) or is_synthetic(corpus):
        return "text"
    return detect_format(_source_lines(corpus))


def _segmented_utterances(
    corpus: str, config: DataConfig, settings: NormalizationSettings
) -> tuple[list[str], tuple[list[str], list[str], list[str]] | None, dict[str, int]]:
    """The utterances of ``segmented:PATH`` (``segrl.data.segmented``), the splits its files give
    (None: one file, split by the seeded shuffle) and counts: read as written, white space
    collapsed, too long ones left out, rare characters mapped to the placeholder (counted over
    every split, as for running text)."""
    location = segmented_location(corpus)
    if location == BUNDLED_UTTERANCES:
        sentences, stats = normalize(_bundled_lines(), settings, config.max_sentences)
        return sentences, None, stats
    files = split_files(location)
    sources = list(files.values()) if files is not None else [Path(location)]
    parts: list[list[str]] = []
    too_long_per_part: list[int] = []
    for source in sources:
        part, too_long = [], 0
        for _file, _number, line in read_lines(source):
            utterance = " ".join(line.split())
            if len(utterance) > settings.max_len:
                too_long += 1
            elif utterance:
                part.append(utterance)
        if config.max_sentences is not None:
            part = part[: config.max_sentences]
        parts.append(part)
        too_long_per_part.append(too_long)
    too_long = sum(too_long_per_part)
    parts, rare = _rare_to_placeholder(parts, settings)
    sentences = [u for part in parts for u in part]
    stats = {"sentences": len(sentences), "too_long": too_long, "rare_characters": len(rare)}
    if files is None:
        return sentences, None, stats
    for split, part, dropped in zip(files, parts, too_long_per_part, strict=True):
        if not part and not dropped:
            raise DataError(
                f"{files[split]}: the {split} split has no utterances (the file is empty or "
                "holds only blank lines); give one utterance per line, its words separated by "
                "spaces"
            )
        if not part:
            raise DataError(
                f"{files[split]}: the {split} split has no utterances of at most "
                f"max_len={settings.max_len} characters; raise --max-len"
            )
    return sentences, (parts[0], parts[1], parts[2]), stats


def _map_rare_characters(
    counts: Counter[str], settings: NormalizationSettings
) -> tuple[Counter[str], set[str]]:
    """A word list's characters seen fewer than ``min_char_count`` times, counted over word tokens
    (a word seen 40 times counts its characters 40 times), mapped to the placeholder."""
    chars: Counter[str] = Counter()
    for word, count in counts.items():
        for char in word:
            chars[char] += count
    rare = {c for c, n in chars.items() if n < settings.min_char_count}
    if not rare:
        return counts, rare
    table = str.maketrans({c: settings.placeholder for c in rare})
    mapped: Counter[str] = Counter()
    for word, count in counts.items():
        mapped[word.translate(table)] += count
    return mapped, rare


def normalize(
    lines: Iterable[tuple[str, int, str]],
    settings: NormalizationSettings,
    max_sentences: int | None = None,
) -> tuple[list[str], dict[str, int]]:
    """Turn ``(file, line_number, text)`` lines into normalised sentences.

    Steps, in order: drop headings; undo WikiText escapes; split into sentences; lower-case; collapse
    white space; leave out sentences longer than ``max_len``; map characters seen fewer than
    ``min_char_count`` times (in the kept sentences) to the placeholder.
    """
    sentences: list[str] = []
    too_long = 0
    for _source, _number, line in lines:
        text = line.strip()
        if not text:
            continue
        if settings.drop_headings and text.startswith("=") and text.endswith("="):
            continue
        if settings.unescape_wikitext:
            for escaped, plain in _WIKITEXT_ESCAPES:
                text = text.replace(escaped, plain)
        for sentence in split_into_sentences(text):
            sentence = _SPACES.sub(" ", sentence).strip()
            if settings.lowercase:
                sentence = sentence.lower()
            if not sentence:
                continue
            if len(sentence) > settings.max_len:
                too_long += 1
                continue
            sentences.append(sentence)
        if max_sentences is not None and len(sentences) >= max_sentences:
            sentences = sentences[:max_sentences]
            break
    (sentences,), rare = _rare_to_placeholder([sentences], settings)
    stats = {"sentences": len(sentences), "too_long": too_long, "rare_characters": len(rare)}
    return sentences, stats


def _rare_to_placeholder(
    parts: list[list[str]], settings: NormalizationSettings
) -> tuple[list[list[str]], set[str]]:
    """Every part's texts with the characters seen fewer than ``min_char_count`` times (in all the
    parts together; white space never) mapped to the placeholder, and those characters."""
    counts: Counter[str] = Counter()
    for part in parts:
        for text in part:
            counts.update(text)
    rare = {c for c, n in counts.items() if n < settings.min_char_count and not c.isspace()}
    if rare:
        table = str.maketrans({c: settings.placeholder for c in rare})
        parts = [[text.translate(table) for text in part] for part in parts]
    return parts, rare


def split_into_sentences(paragraph: str) -> list[str]:
    """Split after ``.``, ``!`` or ``?`` (and closing quotes/brackets) followed by white space, unless
    the next word starts with a lower-case letter (``e.g. this`` stays one sentence)."""
    sentences: list[str] = []
    for piece in (p for p in _split_keep(paragraph) if p.strip()):
        if sentences and piece[:1].islower():
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return [s.strip() for s in sentences]


def _split_keep(paragraph: str) -> list[str]:
    """Split at sentence ends, keeping the punctuation and closing marks with the sentence."""
    out, start = [], 0
    for match in _SENTENCE_END.finditer(paragraph):
        end = match.end()
        out.append(paragraph[start:end].rstrip())
        start = end
    out.append(paragraph[start:])
    return out


def split_sentences(
    sentences: list[str], valid_fraction: float, test_fraction: float, seed: int
) -> tuple[list[str], list[str], list[str]]:
    """A deterministic shuffle (seeded) cut into train/valid/test; the same seed gives the same split."""
    order = list(range(len(sentences)))
    random.Random(seed).shuffle(order)
    n_valid = round(len(order) * valid_fraction)
    n_test = round(len(order) * test_fraction)
    if len(order) >= 3:
        n_valid = max(n_valid, 1) if valid_fraction > 0 else 0
        n_test = max(n_test, 1) if test_fraction > 0 else 0
    valid = [sentences[i] for i in order[:n_valid]]
    test = [sentences[i] for i in order[n_valid : n_valid + n_test]]
    train = [sentences[i] for i in order[n_valid + n_test :]]
    return train, valid, test


def read_lines(path: str | Path) -> Iterator[tuple[str, int, str]]:
    """``(file, line_number, text)`` for every line of a UTF-8 text file or of every file in a folder.

    Folders are read recursively in sorted order, skipping hidden files. ``.gz`` files are decompressed.
    A file that is not UTF-8, or a line longer than ``MAX_LINE_CHARS``, is a ``DataError`` naming the
    file and line.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(
            f"{path}: no such file or folder; give a UTF-8 text file or a folder of them"
        )
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise DataError(f"{path}: the folder has no files to read")
    else:
        files = [path]
    for file in files:
        yield from _read_file_lines(file)


def _read_file_lines(file: Path) -> Iterator[tuple[str, int, str]]:
    opener = gzip.open if file.suffix == ".gz" else open
    try:
        with opener(file, "rb") as f:
            yield from stream_lines(f, str(file))
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(
            f"{file}: cannot read ({e}); if it is a .gz file, it is damaged: compress it again"
        ) from None


def stream_lines(stream: BinaryIO, name: str) -> Iterator[tuple[str, int, str]]:
    """``(name, line number, text)`` for every line of a binary stream (a file, stdin), checked as
    ``read_lines`` checks a file's; no line longer than the limit is read whole into memory."""
    limit = MAX_LINE_CHARS * 4 + 1
    for number, raw in enumerate(iter(lambda: stream.readline(limit), b""), start=1):
        yield name, number, _decode_line(raw, name, number)


def _decode_line(raw: bytes, file: Path | str, number: int) -> str:
    if len(raw) > MAX_LINE_CHARS * 4:
        raise DataError(_long_line(file, number))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if (number == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw:
            raise DataError(
                f"{file}:{number}: UTF-16, not UTF-8 (a byte-order mark or NUL bytes). Convert "
                "the file to UTF-8, e.g. `iconv -f utf-16 -t utf-8 in.txt > out.txt`."
            ) from None
        raise DataError(
            f"{file}:{number}: not valid UTF-8 (byte {e.start + 1} of the line is 0x{raw[e.start]:02x}). "
            "Convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8 in.txt > out.txt`."
        ) from None
    if len(text) > MAX_LINE_CHARS:
        raise DataError(_long_line(file, number))
    return text.removeprefix("\ufeff") if number == 1 else text


def _long_line(file: Path | str, number: int) -> str:
    return (
        f"{file}:{number}: line longer than {MAX_LINE_CHARS:,} characters; this does not look like "
        "text split into lines. Put sentences or paragraphs on separate lines."
    )


def _source_lines(corpus: str | None) -> Iterator[tuple[str, int, str]]:
    if corpus is None:
        return _bundled_lines()
    if corpus.startswith(HF_PREFIX):
        return _hf_lines(corpus[len(HF_PREFIX) :])
    if is_synthetic(corpus):
        return synthetic_lines(corpus)
    return read_lines(corpus)


def _bundled_lines() -> Iterator[tuple[str, int, str]]:
    data = resources.files("segrl.data").joinpath("bundled", BUNDLED_CORPUS).read_bytes()
    for number, raw in enumerate(gzip.decompress(data).splitlines(), start=1):
        yield BUNDLED_SOURCE, number, raw.decode("utf-8")


def _hf_lines(name: str) -> Iterator[tuple[str, int, str]]:
    """Lines of a Hugging Face ``wikitext`` configuration's train split (needs network or a warm cache)."""
    try:
        import datasets
    except ImportError:
        raise DataError(
            f"{HF_PREFIX}{name}: needs the optional 'datasets' package: pip install 'segrl[datasets]'"
        ) from None
    try:
        rows = datasets.load_dataset("wikitext", name, split="train")
    except Exception as e:  # datasets raises many types when offline
        raise DataError(
            f"{HF_PREFIX}{name}: could not load from Hugging Face ({type(e).__name__}: {e}). Offline, "
            "download the raw text once elsewhere and pass the file with --corpus."
        ) from None
    for number, row in enumerate(rows, start=1):
        yield f"{HF_PREFIX}{name}", number, row["text"]
