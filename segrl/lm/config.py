"""The configuration of a segmental language model (architecture only; training configs sit beside
the code that trains)."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Literal

from segrl.config import NO_LIMIT
from segrl.errors import ConfigError

LMModel = Literal["slm", "segment-lstm"]
LMContext = Literal["lstm", "words", "segment", "none"]
LMCategories = Literal["none", "prefix-stem-suffix", "free"]
LMSpeller = Literal["lstm", "unigram", "bigram", "trigram"]
MARKOV_ORDERS = {"unigram": 0, "bigram": 1, "trigram": 2}
"""The spellers without an LSTM, by the characters each symbol is drawn given."""
LMLexiconLogits = Literal["projected", "direct"]
LMLexiconInit = Literal["uniform", "counts"]
LMTexts = Literal["word-types", "sentences"]
"""What an LM trained on a corpus reads: each distinct word once, as a text of its own, or sentences."""
MODELS: tuple[str, ...] = typing.get_args(LMModel)
WORD_LIST_LENGTH_PENALTY = 0.05
"""The length penalty on word lists (nats per character past the first of a segment): without one
the marginal likelihood keeps every word whole. Chosen on the four SIGMORPHON word lists together
(docs/studies/2026-11-24-word-lists.md)."""
PRICED_LEXICON_LENGTH_PENALTY = 0.02
"""The length penalty on word lists for an ``slm`` whose lexicon entries pay for their spelling
(``lexicon_cost`` above 0): the description length already moves mass from long entries to their
parts, and more on top over-splits (docs/studies/2026-11-26-teacher.md)."""
LEXICON_COST = 1.0
"""``segrl lm train``'s ``lexicon_cost`` (and the LM evaluator's on a word list): nats per
character of an entry's spelling, the price its uses must gain to keep it in a pruned lexicon
(``lexicon_prune``) and the expected price of the lexicon's description length. A lower price
keeps longer entries, a higher one only short pieces. Chosen on the seven corpora of the transfer
suite together, by the worst one (docs/studies/2026-11-28-transfer.md)."""
SPELLER_ENTRIES = 1.0
"""``segrl lm train``'s ``speller_entries`` where its lexicon is pruned (and the LM evaluator's on a
word list): the speller learns to spell the lexicon's kept entries beside the marginal, at the
weight of the texts' own characters. Learnt by the marginal alone, the bigram speller spelled worse
than a uniform draw and cut the words no entry covers into lexicon pieces (English gold words
over-cut 1.8 times the gold's density); with it, a new word costs what a new morph costs, and the
bundled corpus's teacher no longer falls after its peak (docs/studies/2026-11-28-speller-entries.md)."""
LEXICON_INIT: LMLexiconInit = "counts"
"""``segrl lm train``'s ``lexicon_init`` where its lexicon is direct (and the LM evaluator's on a
word list): the entries start from the log of the number of training word types that hold them, as
a unigram LM's seed vocabulary does. From a flat start the first pruning, an epoch in, dropped the
frequent short morphs (Mongolian's case endings) and kept whole words
(docs/studies/2026-11-29-lexicon-init.md)."""
WORD_LIST_SPELLER: LMSpeller = "bigram"
"""``segrl lm train``'s speller on a word list and on running text, and the LM evaluator's on a word
list: a character bigram without context, with the lexicon pruned (``lexicon_prune``). With the
LSTM speller the marginal likelihood kept words whole the longer it trained, most in agglutinative
languages; with this one the segmentation holds to the stopping point
(docs/studies/2026-11-28-transfer.md)."""
SLM_LEXICON_SIZE = 100_000
"""The lexicon of an ``slm`` without context on a word list unless one is given (``segrl lm
train``): the 100,000 substrings found in the most training word types, before any pruning.
Running text gets one only when its entries are priced (``lexicon_cost`` above 0;
docs/studies/2026-11-25-lexicon.md)."""

WORD_MAX_SEGMENT_LENGTH = 12
"""The maximum segment length of an LM on text without spaces (word discovery) unless one is given:
it covers 99.9% of the word tokens of Brent's br-text (all of br-phono's) and 99.3% of the Penn
Treebank's."""
WORD_DISCOVERY_CONTEXT: LMContext = "none"
"""``segrl lm train``'s context on text without spaces (word discovery) unless one is given: none,
the teacher of word lists (a lexicon of the substrings found in the most training utterances,
priced and pruned, started from their counts, a character-bigram speller that learns to spell the
kept entries) with the length penalty ``WORD_DISCOVERY_LENGTH_PENALTY``: a unigram model of words
whose entries pay for their spelling, as the Dirichlet-process unigram segmenter of Goldwater,
Griffiths & Johnson (2009). Chosen on br-phono, br-text and PTB together by the worst of the three
over three seeds: 0.692 ± 0.002, 0.772 ± 0.003 and 0.672 ± 0.001 word F1 at 1,000 updates,
where the LSTM over the characters before each segment (``lstm``, the default before, the kind of
model of the recurrent segmental LMs of Kawakami et al. (2019) and Downey et al. (2022)) scores
0.454 ± 0.030, 0.610 ± 0.026 and 0.802 ± 0.012: it keeps the child-directed utterances' frequent
phrases whole and wins PTB alone (docs/studies/2026-12-06-words-lexicon.md)."""
WORD_DISCOVERY_EVALUATOR_CONTEXT: LMContext = "lstm"
"""The LM evaluator's context with hidden spaces (``segrl train --hide-spaces``) where it has no
lexicon (a policy that cannot read its teacher, a corpus whose spaces are not its gold, or
``lexicon_size`` 0): an LSTM over the characters before each segment; without a lexicon the
evaluator with no context is the weaker teacher (the agent's word F1 on br-text 0.382 against
0.496; docs/studies/2026-11-26-word-discovery.md). With a lexicon its context is none, as
``segrl lm train``'s (``LM_DEFAULTS``)."""
WORD_DISCOVERY_LENGTH_PENALTY = 0.15
"""``segrl lm train``'s length penalty on text without spaces (word discovery) for an ``slm`` without
context (the default there, ``WORD_DISCOVERY_CONTEXT``) unless one is given; with context the
default is none. It sets the density: at 0.02 (a word list's) the lexicon keeps frequent word
sequences as one entry (br-phono 0.547, 0.271 units per character against the gold's 0.353), at
0.2 br-phono and br-text reach 0.773 and 0.779 but PTB is over-cut (0.607); 0.15 has the best
worst corpus of the three (docs/studies/2026-12-06-words-lexicon.md; first chosen for the model
without a priced lexicon, docs/studies/2026-11-26-word-discovery.md). Running text with its
spaces keeps none."""


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
    independent given the words before it), ``segment`` (text without spaces only: the same LSTM,
    read over the segment before it alone, from ``<bos>``: a bigram over segments, as the bigram
    model of Goldwater, Griffiths & Johnson (2009) is over words; exact marginal by
    ``lattice.bigram_forward``) or ``none`` (nothing: a unigram segment model with a neural
    speller). None (``segrl lm train``'s and the LM evaluator's default): from
    ``LM_DEFAULTS``: ``none``, also on text without spaces (word discovery,
    ``WORD_DISCOVERY_CONTEXT``), except for the LM evaluator with hidden spaces
    (``WORD_DISCOVERY_EVALUATOR_CONTEXT``, ``lstm``)."""
    speller_dim: int = 256
    """The speller LSTM (and the segment composer of ``segment-lstm``)."""
    speller: LMSpeller | None = "lstm"
    """How a segment is spelled: ``lstm``, a character LSTM from the segment's context
    (``segrl.lm.speller.Speller``), or without an LSTM and without condition (``slm`` without
    context only; ``MarkovSpeller``): ``unigram``, each character (and the segment's end) drawn
    from one distribution, the base distribution of the Bayesian segmenters and Morfessor's
    spelling code, ``bigram``, each drawn given the character before it, or ``trigram``, given
    the two before it. None (``segrl lm train``'s and the LM evaluator's default): from
    ``LM_DEFAULTS`` (``WORD_LIST_SPELLER`` without context on a word list, ...), ``lstm`` with
    context."""
    max_segment_length: int | None = NO_LIMIT
    """Most characters per segment; longer segments get probability 0. ``NO_LIMIT`` (-1):
    unbounded (with known word boundaries the dynamic programs then span whole words). Set it for
    text without spaces, where the dynamic programs would otherwise consider segments as long as
    the text. None (``segrl lm train``'s and the LM evaluator's default): from ``LM_DEFAULTS``:
    unbounded, except on text without spaces: ``WORD_MAX_SEGMENT_LENGTH``."""
    lexicon_size: int | None = 0
    """Entries of a lexicon whose softmax is mixed with the speller (``segrl.lm.lexicon``; 0: no
    lexicon, every segment is spelled): for ``segment-lstm`` the most frequent segments of the
    training segmentations, for ``slm`` (``context = "none"`` only) the substrings found in the most
    training word types. None: from ``LM_DEFAULTS`` (``SLM_LEXICON_SIZE`` for an ``slm`` without
    context on a word list, else 0; ``resolve_lm_config``)."""
    lexicon_cost: float | None = 0.0
    """``slm`` with a lexicon: nats per character that an entry's spelling costs once, when the
    training corpus uses it (``segrl.lm.lexicon``: the lexicon's part of a two-part code, as in
    Morfessor); 0: no cost, the plain marginal likelihood. None: ``LEXICON_COST`` where a lexicon
    is asked for (``lexicon_size`` above 0, or by ``LM_DEFAULTS``), else 0
    (``resolve_lm_config``)."""
    categories: LMCategories = "none"
    """``slm`` with a lexicon: ``prefix-stem-suffix`` gives every segment a hidden category with
    learnt transitions under Morfessor Categories' morphotactics (``segrl.lm.morphotactics``), each
    category with its own lexicon softmax; ``free``, ``free_categories`` hidden classes with every
    transition learnt and none forbidden (a class bigram over segments, as a class-based HMM over
    morphs); ``none``: one distribution for every segment."""
    free_categories: int = 4
    """How many hidden classes ``categories = "free"`` has (at least 1; one class is the model
    without classes taken given that the text is not empty: its end comes after a segment, never
    before the first)."""
    lexicon_pairs: int = 0
    """``slm`` without context, with a direct lexicon and no categories, on text without spaces: a
    bigram over the lexicon's entries (``segrl.lm.lexicon.EntryPairs``) of at most this many pairs
    of entries, those found next to each other in the most training word types (at least 2): after
    an entry with pairs, the next segment comes from its pairs with a learnt probability, else from
    the model without pairs, so that a frequent sequence of morphs need not become an entry of its
    own (Goldwater, Griffiths and Johnson's bigram). 0: none. Left unset, ``lexicon_prune``
    resolves to off with it: the pruning weighs an entry by what it gains alone; given, it needs a
    fixed ``lexicon_pairs_gate``."""
    lexicon_pairs_gate: float = 0.0
    """With ``lexicon_pairs``: the probability ``rho`` that the segment after an entry with pairs
    comes from its pairs, fixed for every entry (above 0, below 1), as the back-off weight of a
    hierarchical bigram; 0: learnt, one gate an entry."""
    lexicon_prior: float = 0.0
    """``slm`` with a direct lexicon and no categories: the weight of a Dirichlet prior on the
    lexicon's entry probabilities, in pseudo-uses per training text, whose mean ``pi`` is each kept
    entry's share of the training word types that hold it (``slm_lexicon_counts``). The training
    loss adds ``lexicon_prior * texts * CE(pi, q) / characters`` (``q`` the lexicon's softmax), so
    that at its optimum an entry's probability is its expected uses plus ``lexicon_prior * texts *
    pi``, over the total: how many words hold an entry keeps a part of its weight, not only the uses
    the posterior gives it (``segrl.lm.lexicon.DirectLexicon.prior_cross_entropy``). 0: none, the
    maximum-likelihood weights. Only a model built from its training words has the prior
    (``segrl.lm.models.build_word_lm``, a resumed run's included); one loaded from its file
    (``load_lm``, to segment with) has none: its training words are not saved."""
    lexicon_logits: LMLexiconLogits | None = "projected"
    """``slm`` without context, with a lexicon: how the lexicon's logits (its gate, one per entry and
    one per entry's terminator) are learnt: ``projected``, as linear maps of the learnt context
    vector (``segrl.lm.lexicon.Lexicon``: about ``hidden_dim`` parameters an entry; with
    ``categories``, of one learnt vector per category), or ``direct``, as the logits themselves
    (``DirectLexicon``: two an entry; with ``categories``, two an entry per category,
    ``CategoryDirectLexicon``), at ``lexicon_lr``. None: ``direct`` (``LM_DEFAULTS``,
    ``resolve_lm_config``; ``segrl lm train``'s default)."""
    lexicon_lr: float = 0.1
    """The learning rate of a ``direct`` lexicon's logits (the rest of the model keeps the trainer's),
    chosen on five corpora together (docs/studies/2026-11-26-teacher.md)."""
    lexicon_prune: bool | None = False
    """``slm`` with a direct lexicon and a ``lexicon_cost``: after every epoch, entries whose
    counted uses gain the corpus less likelihood than their spelling costs (``lexicon_cost`` nats a
    character) leave the lexicon for good, as in Morfessor's search (``segrl.lm.lexicon.
    LexiconUsage``); without it the expected price lets entries that a word or two use (whole
    words, most of all) keep their words. None (``segrl lm train``'s and the LM evaluator's
    default): from ``LM_DEFAULTS`` where the lexicon is direct and priced, else off."""
    lexicon_prune_fraction: float = 1.0
    """The largest share of the lexicon's entries one pruning removes (those that gain least for
    their price first), so that entries whose uses the first epochs' model undercounts stay for the
    next count."""
    lexicon_init: LMLexiconInit | None = "uniform"
    """``slm`` with a direct lexicon: its entries' first logits, ``uniform`` (all 0) or ``counts``,
    the log of the number of training word types that hold each entry (``segrl.lm.lexicon.
    seed_lexicon``), as a unigram LM's seed vocabulary starts from its substrings' frequencies.
    From a flat start the first pruning weighs a frequent short morph against 100,000 equal
    entries and drops it, while rare whole words, which the speller spells at a high price, stay.
    None (``segrl lm train``'s and the LM evaluator's default): from ``LM_DEFAULTS`` where the
    lexicon is direct (``LEXICON_INIT``), else ``uniform``."""
    speller_words: float = 0.0
    """``slm`` without context: the weight of a second term of the training loss, the speller's
    own negative log-likelihood of the batch's texts each spelled whole (per character). Learnt by
    the marginal likelihood alone, the speller learns only what the lexicon leaves it and can end
    up spelling worse than a uniform draw, so that unseen stems are cut into lexicon pieces; with
    it, the speller is the corpus's spelling model, the base distribution from which a Bayesian
    segmenter draws a new morph. 0: the marginal alone."""
    speller_entries: float | None = 0.0
    """``slm`` without context, with a direct lexicon: the weight of a term of the training loss,
    the speller's own negative log-likelihood (per character) of the lexicon's entries still kept,
    each spelled whole, a sample of them (as many as the batch's texts) every update. The speller
    is then the distribution the lexicon's entries are drawn from, the base distribution of a
    Dirichlet-process segmenter and the spelling code of Morfessor's lexicon, not the leftovers of
    the marginal likelihood; a word no entry covers costs what spelling a new morph costs. 0: the
    marginal alone. None (``segrl lm train``'s and the LM evaluator's default): from
    ``LM_DEFAULTS`` where the lexicon is pruned (``SPELLER_ENTRIES``), else 0."""
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
    length_penalty: float | None = 0.0
    """``slm``'s marginal objective with a prior against long segments: it minimises
    ``-log sum_S p(X, S) exp(-length_penalty * sum_k |m_k|^2)`` (0: the plain marginal ``-log p(X)``).
    A plain marginal likelihood is highest with whole words (a speller that continues a word predicts
    its next character better than one that starts a new segment); the penalty makes the model put
    its mass on segmentations into shorter units. Scoring and posteriors stay those of ``p(X, S)``.
    None (``segrl lm train``'s and the LM evaluator's default): from ``LM_DEFAULTS``: on a word list
    ``WORD_LIST_LENGTH_PENALTY``, or ``PRICED_LEXICON_LENGTH_PENALTY`` for an ``slm`` with a lexicon
    whose entries pay for their spelling; 0 on running text, except where ``segrl lm train`` reads
    it without its spaces (word discovery) without context: ``WORD_DISCOVERY_LENGTH_PENALTY``
    (``resolve_lm_config``)."""

    expected_length_weight: float = 0.0
    """``slm``'s expected-length regulariser (Kawakami, Dyer & Blunsom 2019), the weight ``lambda``
    of its training loss ``-log p(X) + lambda * E_{p(S | X)}[sum_k |m_k| ** expected_length_power]``
    (per character, as the loss): unlike ``length_penalty``, which changes which segmentations the
    marginal sums, it charges the model for the lengths its own posterior expects, so that it
    learns to put its mass on shorter segments. 0: none. Scores, posteriors, held-out bits per
    character and decoding stay those of ``p(X, S)``. Not with ``lexicon_prune`` (the pruning
    counts uses from the loss's gradient)."""
    expected_length_power: float = 2.0
    """``beta`` of ``expected_length_weight``'s regulariser, above 1 (at 1 the sum is the text's
    length, whatever the segmentation): the larger, the more a long segment costs against two
    short ones."""

    def check(self, prefix: str) -> None:
        """Ranges (``segrl.config.validate_config`` checks the choices and calls this)."""
        if self.max_segment_length not in (None, NO_LIMIT) and self.max_segment_length < 1:
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
        for name in ("speller_words", "speller_entries"):
            if (getattr(self, name) or 0.0) < 0:
                raise ConfigError(f"{prefix}{name} must be at least 0, got {getattr(self, name)}")
        if self.speller_entries and self.lexicon_prune is False:
            raise ConfigError(
                f"{prefix}speller_entries learns to spell the kept entries of a pruned lexicon: it "
                f"needs {prefix}lexicon_prune = true (or {prefix}speller_entries = 0)"
            )
        if not 0.0 < self.lexicon_prune_fraction <= 1.0 or self.speller_price < 0:
            raise ConfigError(
                f"{prefix}lexicon_prune_fraction must be in (0, 1] and {prefix}speller_price at "
                f"least 0; got {self.lexicon_prune_fraction} and {self.speller_price}"
            )
        if self.expected_length_weight < 0 or self.expected_length_power <= 1:
            raise ConfigError(
                f"{prefix}expected_length_weight must be at least 0 and "
                f"{prefix}expected_length_power above 1 (at 1 the sum is the text's length "
                f"whatever the segmentation); got {self.expected_length_weight} and "
                f"{self.expected_length_power}"
            )
        if self.expected_length_weight and (self.model != "slm" or self.categories != "none"):
            raise ConfigError(
                f"{prefix}expected_length_weight reads the posterior over segmentations: it needs "
                f"{prefix}model = 'slm' without categories (got {self.model!r}, "
                f"{self.categories!r})"
            )
        if self.expected_length_weight and self.lexicon_prune:
            raise ConfigError(
                f"{prefix}expected_length_weight cannot go with {prefix}lexicon_prune: the pruning "
                "counts an entry's uses from the loss's gradient, which the regulariser would add "
                f"to; give {prefix}lexicon_prune = false or {prefix}expected_length_weight = 0"
            )
        if self.free_categories < 1:
            raise ConfigError(
                f"{prefix}free_categories must be at least 1, got {self.free_categories}"
            )
        if self.lexicon_size is not None and self.lexicon_size < 0:
            raise ConfigError(f"{prefix}lexicon_size must be at least 0, got {self.lexicon_size}")
        if self.lexicon_pairs < 0:
            raise ConfigError(f"{prefix}lexicon_pairs must be at least 0, got {self.lexicon_pairs}")
        no_direct_lexicon = (
            self.model != "slm"
            or self.context not in (None, "none")
            or self.categories != "none"
            or self.lexicon_logits == "projected"
            or self.lexicon_size == 0
        )
        direct_lexicon = (  # what lexicon_pairs and lexicon_prior need
            f"{prefix}model = 'slm', context = 'none', a lexicon (lexicon_size above 0) with "
            f"lexicon_logits = 'direct' and no categories (got {self.model!r}, "
            f"{self.context!r}, {self.lexicon_size}, {self.lexicon_logits!r}, "
            f"{self.categories!r})"
        )
        if self.lexicon_pairs and no_direct_lexicon:
            raise ConfigError(
                f"{prefix}lexicon_pairs is a bigram over a direct lexicon's entries: it needs "
                f"{direct_lexicon}; or {prefix}lexicon_pairs = 0"
            )
        if not 0.0 <= self.lexicon_pairs_gate < 1.0:
            raise ConfigError(
                f"{prefix}lexicon_pairs_gate is a probability below 1 (0: learnt), got "
                f"{self.lexicon_pairs_gate}"
            )
        if self.lexicon_pairs_gate and not self.lexicon_pairs:
            raise ConfigError(
                f"{prefix}lexicon_pairs_gate weighs the bigram over the lexicon's entries: give "
                f"{prefix}lexicon_pairs above 0 with it, or {prefix}lexicon_pairs_gate = 0"
            )
        if self.lexicon_prior < 0:
            raise ConfigError(f"{prefix}lexicon_prior must be at least 0, got {self.lexicon_prior}")
        if self.lexicon_prior and no_direct_lexicon:
            raise ConfigError(
                f"{prefix}lexicon_prior weighs a direct lexicon's entries: it needs "
                f"{direct_lexicon}; or {prefix}lexicon_prior = 0"
            )
        if self.lexicon_pairs and not self.lexicon_pairs_gate and self.lexicon_prune:
            raise ConfigError(
                f"{prefix}lexicon_pairs with a learnt gate cannot go with {prefix}lexicon_prune: "
                "the pruning weighs an entry by what it gains alone, not after the entries it "
                f"pairs with, and takes the entries that pairs use; give {prefix}lexicon_prune = "
                f"false (leave it unset: it then resolves so), or fix {prefix}lexicon_pairs_gate"
            )


LMUser = Literal["lm-train", "evaluator"]
"""Who an LM's defaults are for: ``segrl lm train``'s model, or the agent's LM evaluator."""
LMText = Literal["words", "text", "unspaced"]
"""What an LM reads: a word list, running text, or text without its spaces (word discovery: a
segmented corpus in ``segrl lm train``, hidden spaces in ``segrl train``)."""


@dataclass(frozen=True)
class LMDefaults:
    """What the options an LM's config leaves unset (None) resolve to, for one user on one kind of
    text: a row of ``LM_DEFAULTS``, read by ``resolve_lm_config``."""

    context: LMContext
    max_segment_length: int
    """``NO_LIMIT``: unbounded."""
    lexicon_size: int
    """Of an ``slm`` without context, the one model that mixes a lexicon (any other: 0); on running
    text only while its entries are priced (``lexicon_cost`` above 0)."""
    lexicon_cost: float
    """Where a lexicon is asked for (``lexicon_size`` above 0, given or by this row); else 0."""
    lexicon_logits: LMLexiconLogits
    """With ``categories``, ``direct`` is one set of logits per category
    (``segrl.lm.lexicon.CategoryDirectLexicon``)."""
    length_penalty: float
    """Of an LM without context and without a priced lexicon."""
    context_length_penalty: float
    """Of an LM with context (``lstm`` or ``words``)."""
    priced_length_penalty: float
    """Of an ``slm`` with a lexicon whose entries are priced (``lexicon_cost`` above 0)."""
    speller: LMSpeller
    """Of an ``slm`` without context (with context: ``lstm``)."""
    lexicon_prune: bool
    """Where the lexicon is direct and priced (else off)."""
    speller_entries: float
    """Where the lexicon is pruned (else 0)."""
    lexicon_init: LMLexiconInit
    """Where the lexicon is direct (else ``uniform``)."""


LM_DEFAULTS: dict[tuple[LMUser, LMText], LMDefaults] = {
    ("lm-train", "words"): LMDefaults(
        "none", NO_LIMIT, SLM_LEXICON_SIZE, LEXICON_COST, "direct",
        WORD_LIST_LENGTH_PENALTY, WORD_LIST_LENGTH_PENALTY, PRICED_LEXICON_LENGTH_PENALTY,
        WORD_LIST_SPELLER, True, SPELLER_ENTRIES, LEXICON_INIT,
    ),
    ("lm-train", "text"): LMDefaults(
        "none", NO_LIMIT, SLM_LEXICON_SIZE, LEXICON_COST, "direct", 0.0, 0.0, 0.0,
        WORD_LIST_SPELLER, True, SPELLER_ENTRIES, LEXICON_INIT,
    ),
    ("lm-train", "unspaced"): LMDefaults(
        WORD_DISCOVERY_CONTEXT, WORD_MAX_SEGMENT_LENGTH, SLM_LEXICON_SIZE, LEXICON_COST, "direct",
        WORD_DISCOVERY_LENGTH_PENALTY, 0.0, WORD_DISCOVERY_LENGTH_PENALTY,
        WORD_LIST_SPELLER, True, SPELLER_ENTRIES, LEXICON_INIT,
    ),
    ("evaluator", "words"): LMDefaults(
        "none", NO_LIMIT, SLM_LEXICON_SIZE, LEXICON_COST, "direct",
        WORD_LIST_LENGTH_PENALTY, WORD_LIST_LENGTH_PENALTY, PRICED_LEXICON_LENGTH_PENALTY,
        WORD_LIST_SPELLER, True, SPELLER_ENTRIES, LEXICON_INIT,
    ),
    ("evaluator", "text"): LMDefaults(
        "none", NO_LIMIT, 0, LEXICON_COST, "direct", 0.0, 0.0, 0.0, "lstm", False, 0.0,
        "uniform",
    ),
    ("evaluator", "unspaced"): LMDefaults(
        WORD_DISCOVERY_CONTEXT, WORD_MAX_SEGMENT_LENGTH, SLM_LEXICON_SIZE, LEXICON_COST, "direct",
        WORD_DISCOVERY_LENGTH_PENALTY, 0.0, WORD_DISCOVERY_LENGTH_PENALTY,
        WORD_LIST_SPELLER, True, SPELLER_ENTRIES, LEXICON_INIT,
    ),
}  # fmt: skip
"""The LM's defaults, in one place: by who uses it (``segrl lm train``'s model, the agent's LM
evaluator) and on what text (a word list, running text, text without spaces). The constants
above say why each value was chosen. ``segrl lm train`` prices its lexicon by default
(``LMTrainConfig.lm``), so an ``slm`` without context gets one on any text; the evaluator gets
one on a word list only, where its student reads it (``segrl.agents.config``)."""


TABLE_OPTIONS = (
    "context",
    "max_segment_length",
    "lexicon_size",
    "lexicon_cost",
    "lexicon_logits",
    "length_penalty",
    "speller",
    "lexicon_prune",
    "speller_entries",
    "lexicon_init",
)
"""The options of an ``LMConfig`` that ``LM_DEFAULTS`` gives values."""


def table_lm(**options: Any) -> LMConfig:
    """An ``LMConfig`` with ``options`` given and the other ``TABLE_OPTIONS`` left unset (None),
    for ``resolve_lm_config`` to read from ``LM_DEFAULTS``: a user's default model."""
    return LMConfig(**{**dict.fromkeys(TABLE_OPTIONS), **options})


def resolve_lm_config(config: LMConfig, text: LMText, user: LMUser = "lm-train") -> LMConfig:
    """``config`` with every option it leaves unset (None) given its value for ``user`` on
    ``text`` (``LM_DEFAULTS``); the options given are kept, so that a resolved config resolves to
    itself. Pure: ``config`` is not changed. ``text`` may be a corpus's kind (``words`` or
    ``text``)."""
    row = LM_DEFAULTS[user, text]
    context = row.context if config.context is None else config.context
    if context == "segment" and text != "unspaced":
        raise ConfigError(
            "context = 'segment' (a bigram over segments) reads text without spaces only: word "
            "discovery, a segmented corpus in segrl lm train or --hide-spaces in segrl train; on "
            f"{text} give context lstm, words or none"
        )
    priced = (config.lexicon_cost or 0.0) > 0  # a cost left unset prices nothing yet
    asked = config.lexicon_size
    if asked is None:  # on running text a lexicon only while its entries pay for their spelling
        asked = row.lexicon_size if text in ("words", "unspaced") or priced else 0
    lexicon_cost = config.lexicon_cost
    if lexicon_cost is None:
        lexicon_cost = row.lexicon_cost if asked else 0.0
    lexicon_size = config.lexicon_size
    if lexicon_size is None:  # only an slm without context mixes a lexicon
        lexicon_size = asked if config.model == "slm" and context == "none" else 0
    length_penalty = config.length_penalty
    if length_penalty is None:
        if config.model == "slm" and lexicon_size and lexicon_cost > 0:
            length_penalty = row.priced_length_penalty
        elif context == "none":
            length_penalty = row.length_penalty
        else:
            length_penalty = row.context_length_penalty
    lexicon_logits = config.lexicon_logits
    if lexicon_logits is None:
        lexicon_logits = row.lexicon_logits
    max_segment_length = config.max_segment_length
    if max_segment_length is None:
        max_segment_length = row.max_segment_length
    speller = config.speller
    if speller is None:  # a Markov speller reads no context
        speller = row.speller if config.model == "slm" and context == "none" else "lstm"
    lexicon_prune = config.lexicon_prune
    if lexicon_prune is None:
        direct = lexicon_logits == "direct"
        lexicon_prune = row.lexicon_prune and bool(lexicon_size) and lexicon_cost > 0 and direct
        lexicon_prune = lexicon_prune and not config.lexicon_pairs  # its gains know no pairs
    speller_entries = config.speller_entries
    if speller_entries is None:
        speller_entries = row.speller_entries if lexicon_prune else 0.0
    lexicon_init = config.lexicon_init
    if lexicon_init is None:
        lexicon_init = (
            row.lexicon_init if lexicon_size and lexicon_logits == "direct" else "uniform"
        )
    return dataclasses.replace(
        config,
        context=context,
        max_segment_length=max_segment_length,
        lexicon_size=lexicon_size,
        lexicon_cost=lexicon_cost,
        lexicon_logits=lexicon_logits,
        length_penalty=length_penalty,
        speller=speller,
        lexicon_prune=lexicon_prune,
        speller_entries=speller_entries,
        lexicon_init=lexicon_init,
    )


def word_discovery_lm(config: LMConfig) -> LMConfig:
    """``config`` resolved for ``segrl lm train`` on text without spaces (word discovery):
    ``resolve_lm_config(config, "unspaced")``."""
    return resolve_lm_config(config, "unspaced")
