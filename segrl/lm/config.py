"""The configuration of a segmental language model (architecture only; training configs sit beside
the code that trains)."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Literal

from segrl.errors import ConfigError

LMModel = Literal["slm", "segment-lstm"]
LMContext = Literal["lstm", "words", "none"]
LMCategories = Literal["none", "prefix-stem-suffix"]
LMSpeller = Literal["lstm", "unigram", "bigram", "trigram"]
MARKOV_ORDERS = {"unigram": 0, "bigram": 1, "trigram": 2}
"""The spellers without an LSTM, by the characters each symbol is drawn given."""
LMLexiconLogits = Literal["projected", "direct"]
LMTexts = Literal["word-types", "sentences"]
"""What an LM trained on a corpus reads: each distinct word once, as a text of its own, or sentences."""
MODELS: tuple[str, ...] = typing.get_args(LMModel)
WORD_LIST_LENGTH_PENALTY = 0.05
"""The length penalty on word lists: without one the marginal likelihood keeps every word whole
(boundary F1 0 in English, Hungarian, Spanish and Czech); 0.05 and 0.1 did about equally well across
the four, 0.1 over-split English and hurt running text most (docs/results.md)."""
PRICED_LEXICON_LENGTH_PENALTY = 0.02
"""The length penalty on word lists for an ``slm`` whose lexicon entries pay for their spelling
(``lexicon_cost`` above 0): the description length already moves mass from long entries to their
parts, and with 0.05 on top English over-split (boundary F1 0.51 against 0.58 at 0.02; the teacher
study, docs/studies/2026-11-26-teacher.md)."""
LEXICON_COST = 2.0
"""``segrl lm train``'s ``lexicon_cost`` (and the LM evaluator's on a word list): 2 nats per
character of an entry's spelling. Chosen for the direct lexicon (``lexicon_logits = "direct"``) on
English, Hungarian, Spanish, Czech and the bundled corpus together: 1, 2, 3 and 4 at seed 0, then 2
against 3 over three seeds, where 2 raised Czech by 0.02 and moved the others by less than their
seeds' spread (the teacher study, docs/studies/2026-11-26-teacher.md). 3 was the choice for the
projected lexicon, with which it raised boundary F1 over the unpriced lexicon in English, Hungarian
and Spanish; 10 did worse everywhere."""
SLM_LEXICON_SIZE = 100_000
"""The lexicon of an ``slm`` without context on a word list unless one is given (``segrl lm
train``): the 100,000 substrings found in the most training word types. Against no lexicon it raised
``slm``'s boundary F1 in English, Hungarian, Spanish and Czech (30,000 raised it less on average and
lowered it in Spanish). On the bundled running text an unpriced lexicon lowered it (0.318 against
0.353) and a priced one (``lexicon_cost`` above 0) raised it (0.387 against 0.353 and 0.331, seeds 0
and 1), so running text gets one only when its entries are priced (docs/results.md)."""

WORD_MAX_SEGMENT_LENGTH = 12
"""The maximum segment length of an LM on text without spaces (word discovery) unless one is given:
it covers 99.9% of the word tokens of Brent's br-text (all of br-phono's) and 99.3% of the Penn
Treebank's (10 would cover 97.4% there)."""
WORD_DISCOVERY_CONTEXT: LMContext = "lstm"
"""``segrl lm train``'s context on text without spaces (word discovery) unless one is given: an LSTM
over the characters before each segment, with no length penalty, the kind of model behind the
recurrent segmental LMs of Kawakami et al. (2019) and Downey et al. (2022). Chosen on PTB and br-text
together over three seeds (word F1, PTB / br-text: 0.758 ± 0.016 / 0.594 ± 0.022, against 0.670 ±
0.001 / 0.574 ± 0.009 without context at ``WORD_DISCOVERY_LENGTH_PENALTY``; br-phono, not used to
choose: 0.443 ± 0.027 against 0.451 ± 0.045). Any length penalty with it makes every character a
segment (0.94 units per character at 0.1 on br-text): once each segment sees the characters before
it, splitting no longer costs likelihood. The word discovery study,
docs/studies/2026-11-26-word-discovery.md."""
WORD_DISCOVERY_LENGTH_PENALTY = 0.15
"""``segrl lm train``'s length penalty on text without spaces (word discovery) for an ``slm`` without
context (``--context none``) unless one is given; with context the default is none.
With none ``slm`` undersegments, keeping frequent word sequences as one lexicon entry. Screened at
seed 0 on PTB and br-text together (word F1, PTB / br-text: 0 0.545 / 0.416, 0.02 0.586 / 0.426,
0.05 0.624 / 0.457, 0.1 0.675 / 0.470, 0.2 0.613 / 0.605), then over three seeds: the mean of PTB
and br-text is highest at 0.15 (PTB 0.670 ± 0.001, br-text 0.574 ± 0.009; 0.1: 0.675 ± 0.000,
0.477 ± 0.006; 0.2: 0.613 at seed 0, 0.599 ± 0.006; br-phono, not used to choose: 0.451 ± 0.045 at
0.15, 0.435 ± 0.006 at 0.1). br-text's gold is denser than PTB's (0.26 words a character against 0.216),
so a higher penalty helps br-text and, past 0.15, over-segments PTB (the word discovery study,
docs/studies/2026-11-26-word-discovery.md). Running text with its spaces keeps none."""


@dataclass
class LMConfig:
    """A segmental language model: which one and how big."""

    model: LMModel = "slm"
    """``slm`` (segments conditioned on the character context; exact marginal, posteriors, local
    flips) or ``segment-lstm`` (the study's LSTM over the segment sequence)."""
    char_dim: int = 64
    """Character embeddings (read by the context encoder, the speller and the segment composer)."""
    embedding_dim: int = 256
    """Segment embeddings of ``segment-lstm`` (composed from the segment's characters)."""
    hidden_dim: int = 256
    """The LSTM over segments (``segment-lstm``) or over the character context (``slm``)."""
    context: LMContext | None = "lstm"
    """``slm``: what conditions each segment: ``lstm`` (an LSTM over all characters before it),
    ``words`` (the same LSTM, read up to the start of the segment's word: the segments of a word are
    independent given the words before it) or ``none`` (nothing: a unigram segment model with a
    neural speller). None (``segrl lm train``'s default): ``none``, except on text without spaces
    (word discovery): ``WORD_DISCOVERY_CONTEXT`` (``word_discovery_lm``)."""
    speller_dim: int = 256
    """The speller LSTM (and the segment composer of ``segment-lstm``)."""
    speller: LMSpeller = "lstm"
    """How a segment is spelled: ``lstm``, a character LSTM from the segment's context
    (``segrl.lm.speller.Speller``), or without an LSTM and without condition (``slm`` without
    context only; ``MarkovSpeller``): ``unigram``, each character (and the segment's end) drawn
    from one distribution, the base distribution of the Bayesian segmenters and Morfessor's
    spelling code, ``bigram``, each drawn given the character before it, or ``trigram``, given
    the two before it."""
    max_segment_length: int | None = None
    """Most characters per segment; longer segments get probability 0. None: unbounded (with known
    word boundaries the dynamic programs then span whole words). Set it for text without spaces,
    where the dynamic programs would otherwise consider segments as long as the text."""
    lexicon_size: int | None = 0
    """Entries of a lexicon whose softmax is mixed with the speller (``segrl.lm.lexicon``; 0: no
    lexicon, every segment is spelled): for ``segment-lstm`` the most frequent segments of the
    training segmentations, for ``slm`` (``context = "none"`` only) the substrings found in the most
    training word types. None: ``SLM_LEXICON_SIZE`` for an ``slm`` without context on a word list,
    else 0 (``resolve_lm_config``)."""
    lexicon_cost: float | None = 0.0
    """``slm`` with a lexicon: nats per character that an entry's spelling costs once, when the
    training corpus uses it (``segrl.lm.lexicon``: the lexicon's part of a two-part code, as in
    Morfessor); 0: no cost, the plain marginal likelihood. None: ``LEXICON_COST`` where the
    resolved lexicon has entries, else 0 (``resolve_lm_config``)."""
    categories: LMCategories = "none"
    """``slm`` with a lexicon: ``prefix-stem-suffix`` gives every segment a hidden category with
    learnt transitions under Morfessor Categories' morphotactics (``segrl.lm.morphotactics``), each
    category with its own lexicon softmax; ``none``: one distribution for every segment."""
    lexicon_logits: LMLexiconLogits | None = "projected"
    """``slm`` without context, with a lexicon and no categories: how the lexicon's logits (its gate,
    one per entry and one per entry's terminator) are learnt: ``projected``, as linear maps of the
    learnt context vector (``segrl.lm.lexicon.Lexicon``: about ``hidden_dim`` parameters an entry),
    or ``direct``, as the logits themselves (``DirectLexicon``: two an entry), at ``lexicon_lr``.
    None: ``direct`` unless ``categories`` are set (``resolve_lm_config``; ``segrl lm train``'s
    default)."""
    lexicon_lr: float = 0.1
    """The learning rate of a ``direct`` lexicon's logits (the rest of the model keeps the trainer's):
    0.1, chosen on English, Hungarian, Spanish, Czech and the bundled corpus together (0.03 trained
    too slowly, 0.3 lost in Spanish and Czech; docs/studies/2026-11-26-teacher.md)."""
    lexicon_prune: bool = False
    """``slm`` with a direct lexicon and a ``lexicon_cost``: after every epoch, entries whose
    counted uses gain the corpus less likelihood than their spelling costs (``lexicon_cost`` nats a
    character) leave the lexicon for good, as in Morfessor's search (``segrl.lm.lexicon.
    LexiconUsage``); without it the expected price lets entries that a word or two use (whole
    words, most of all) keep their words."""
    lexicon_prune_fraction: float = 0.5
    """The largest share of the lexicon's entries one pruning removes (those that gain least for
    their price first), so that entries whose uses the first epochs' model undercounts stay for the
    next count."""
    speller_price: float = 0.0
    """``slm``: nats per character that a segment spelled by the speller (not drawn from the
    lexicon) costs in the training objective, as if a segment spelled for one use were an entry
    of the lexicon: a character LSTM spells a word whole more cheaply than its stem and a suffix
    from the lexicon, and the marginal likelihood alone then keeps words whole the longer it
    trains. Scores, posteriors and decoding stay those of ``p(X, S)``, as with
    ``length_penalty``."""
    lexicon_min_count: int = 2
    """Segments seen fewer times than this stay out of the lexicon."""
    dropout: float = 0.1
    """Dropout on the LSTMs' outputs, in training."""
    length_penalty: float | None = None
    """``slm``'s marginal objective with a prior against long segments: it minimises
    ``-log sum_S p(X, S) exp(-length_penalty * sum_k |m_k|^2)`` (0: the plain marginal ``-log p(X)``).
    A plain marginal likelihood is highest with whole words (a speller that continues a word predicts
    its next character better than one that starts a new segment); the penalty makes the model put
    its mass on segmentations into shorter units. Scoring and posteriors stay those of ``p(X, S)``.
    None: on a word list ``WORD_LIST_LENGTH_PENALTY``, or ``PRICED_LEXICON_LENGTH_PENALTY`` for an
    ``slm`` with a lexicon whose entries pay for their spelling; 0 on running text
    (``resolve_lm_config``), except where ``segrl lm train`` reads it without its spaces (word
    discovery): ``WORD_DISCOVERY_LENGTH_PENALTY``."""

    def check(self, prefix: str) -> None:
        """Ranges (``segrl.config.validate_config`` checks the choices and calls this)."""
        if self.max_segment_length is not None and self.max_segment_length < 1:
            raise ConfigError(
                f"{prefix}max_segment_length must be at least 1, got {self.max_segment_length}"
            )
        if self.lexicon_cost is not None and self.lexicon_cost < 0:
            raise ConfigError(f"{prefix}lexicon_cost must be at least 0, got {self.lexicon_cost}")
        if self.lexicon_lr <= 0:
            raise ConfigError(f"{prefix}lexicon_lr must be above 0, got {self.lexicon_lr}")
        markov = self.speller in MARKOV_ORDERS
        if markov and (self.model != "slm" or self.context not in (None, "none")):
            raise ConfigError(
                f"{prefix}speller = {self.speller!r} reads no context: it needs {prefix}model = "
                f"'slm' and {prefix}context = 'none' (got {self.model!r}, {self.context!r})"
            )
        if self.lexicon_prune and self.lexicon_logits == "projected":
            raise ConfigError(
                f"{prefix}lexicon_prune needs a direct lexicon ({prefix}lexicon_logits = 'direct')"
            )
        if not 0.0 < self.lexicon_prune_fraction <= 1.0 or self.speller_price < 0:
            raise ConfigError(
                f"{prefix}lexicon_prune_fraction must be in (0, 1] and {prefix}speller_price at "
                f"least 0; got {self.lexicon_prune_fraction} and {self.speller_price}"
            )
        if self.lexicon_size is not None and self.lexicon_size < 0:
            raise ConfigError(f"{prefix}lexicon_size must be at least 0, got {self.lexicon_size}")


def word_discovery_lm(config: LMConfig) -> LMConfig:
    """``config`` for text without spaces (word discovery), with its unset options given word
    discovery's defaults: ``max_segment_length`` ``WORD_MAX_SEGMENT_LENGTH``, ``context``
    ``WORD_DISCOVERY_CONTEXT`` and ``length_penalty`` ``WORD_DISCOVERY_LENGTH_PENALTY`` for an ``slm``
    without context, else 0. ``resolve_lm_config`` resolves the rest."""
    context = WORD_DISCOVERY_CONTEXT if config.context is None else config.context
    length_penalty = config.length_penalty
    if length_penalty is None:
        length_penalty = WORD_DISCOVERY_LENGTH_PENALTY if context == "none" else 0.0
    max_segment_length = config.max_segment_length
    if max_segment_length is None:
        max_segment_length = WORD_MAX_SEGMENT_LENGTH
    return dataclasses.replace(
        config,
        context=context,
        length_penalty=length_penalty,
        max_segment_length=max_segment_length,
    )


def resolve_lm_config(config: LMConfig, corpus_kind: str) -> LMConfig:
    """``config`` with its unset options resolved for a corpus of ``corpus_kind``: ``lexicon_size``
    (``SLM_LEXICON_SIZE`` for an ``slm`` without context, which alone can mix one, on a word list,
    and on running text where its entries pay for their spelling; else 0) and ``length_penalty``
    (``text``: 0; ``words``: ``PRICED_LEXICON_LENGTH_PENALTY`` for an ``slm`` whose lexicon entries
    pay for their spelling, else ``WORD_LIST_LENGTH_PENALTY``) and ``lexicon_cost`` (None:
    ``LEXICON_COST`` where the resolved lexicon has entries, else 0; a cost left None counts as no
    price where the lexicon's size is decided) and ``lexicon_logits`` (None: ``direct``, or
    ``projected`` with categories, which need one softmax per category)."""
    changes: dict[str, object] = {}
    if config.context is None:
        config = dataclasses.replace(config, context="none")
        changes["context"] = "none"
    lexicon_size, lexicon_cost = config.lexicon_size, config.lexicon_cost
    if lexicon_size is None:
        mixes = config.model == "slm" and config.context == "none"
        lexicon = mixes and (corpus_kind == "words" or (lexicon_cost or 0.0) > 0)
        lexicon_size = changes["lexicon_size"] = SLM_LEXICON_SIZE if lexicon else 0
    if lexicon_cost is None:
        lexicon_cost = changes["lexicon_cost"] = LEXICON_COST if lexicon_size else 0.0
    if config.lexicon_logits is None:
        direct = config.categories == "none"
        changes["lexicon_logits"] = "direct" if direct else "projected"
    if config.length_penalty is None:
        priced = config.model == "slm" and lexicon_size and lexicon_cost > 0
        word_list = PRICED_LEXICON_LENGTH_PENALTY if priced else WORD_LIST_LENGTH_PENALTY
        changes["length_penalty"] = word_list if corpus_kind == "words" else 0.0
    return dataclasses.replace(config, **changes) if changes else config
