"""A lexicon of frequent segments, mixed with the speller.

With a lexicon, a segment and its terminator come from one of two paths, chosen by a gate
``lambda(h)`` on the context vector ``h``:

    p(m, t | h) = lambda(h) p_lex(m | h) p_lex(t | h, m)  +  (1 - lambda(h)) p_spell(m, t | h)

``p_lex`` is a softmax over the lexicon's entries (non-empty strings), ``p_lex(t | h, m)`` a binary
choice between ``<eos>`` and a following space, and ``p_spell`` the speller (``segrl.lm.speller``),
which alone can end the text. Both paths are normalised, so the mixture is too; a segment outside the
lexicon gets the speller's share only. The lexicon is what lets a word-level or BPE-level model
predict whole units as a closed-vocabulary model does while staying an open-vocabulary model of
characters.

``segment-lstm`` takes its entries from training segmentations (``build_lexicon``); ``slm``, trained
on unsegmented text, from the substrings found in most word types (``substring_lexicon``), and learns
by its marginal likelihood which of them deserve mass: the reuse of a morph across words, which a
speller alone rewards only weakly, as in a unigram model of morphs.

The marginal likelihood alone lets an entry used by three words cost nothing more than its parts,
so it favours long entries. ``description_length`` is the lexicon's part of a two-part code, as in
Morfessor's MAP objective and the Dirichlet-process unigram models of Goldwater, Griffiths and
Johnson (2009): an entry pays for its spelling once, in the lexicon, when the corpus uses it.

The expected price is paid by entries in proportion to how likely the model's own draws are to use
them, so an entry that one word's posterior uses while the model gives it little probability pays
almost nothing, and its gradient vanishes with its probability; under the marginal likelihood such
entries (whole words, most of all) keep their words. ``LexiconUsage`` prices entries as Morfessor
does instead, discretely: it counts each entry's posterior uses in the training texts, and an entry
whose uses gain less than its spelling costs leaves the lexicon (``SLM.entry_gains``).

Without context (one learnt vector conditions every segment) the lexicon's logits can be learnt as
themselves (``DirectLexicon``, ``LMConfig.lexicon_logits = "direct"``): two numbers an entry instead
of about ``cond_dim``, so an update of a 100,000-entry lexicon no longer writes, clips and steps 51
million weights (``bench/lm_step.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from segrl.config import limit
from segrl.lm.config import LMConfig
from segrl.lm.lattice import NEG_INF

FREE_CLASS_INIT_SCALE = 1.0
"""The spread (nats) of the random logits that free classes (``LMConfig.categories = "free"``)
start from, one draw per class and entry: the only thing that tells classes apart at the start."""


def build_lexicon(
    segmentations: Iterable[Sequence[str]], size: int, min_count: int = 2
) -> list[str]:
    """The ``size`` most frequent segments seen at least ``min_count`` times (ties by the string)."""
    counts: Counter[str] = Counter()
    for segments in segmentations:
        counts.update(s for s in segments if s and " " not in s)
    frequent = [s for s, n in counts.items() if n >= min_count]
    frequent.sort(key=lambda s: (-counts[s], s))
    return frequent[:size]


LEXICON_MAX_LENGTH = 12
"""Longest entry of an ``slm`` lexicon without ``max_segment_length``."""


def slm_lexicon(config: LMConfig, words: Iterable[str]) -> list[str] | None:
    """The lexicon of an ``slm`` of ``config`` (its ``lexicon_size`` resolved) trained on ``words``
    (its training word types): their ``substring_lexicon``; None without one."""
    held = slm_lexicon_counts(config, words)
    return None if held is None else list(held)


def slm_lexicon_counts(config: LMConfig, words: Iterable[str]) -> dict[str, int] | None:
    """``slm_lexicon``'s entries, in its order, each with the number of ``words`` that hold it (what
    ``seed_lexicon`` starts them from); None without a lexicon."""
    if config.model != "slm" or not config.lexicon_size:
        return None
    max_length = limit(config.max_segment_length) or LEXICON_MAX_LENGTH
    return _most_held(type_substring_counts(words, max_length), config.lexicon_size)


def substring_lexicon(words: Iterable[str], size: int, max_length: int = 12) -> list[str]:
    """The ``size`` substrings (at most ``max_length`` characters, no spaces) found in the most of
    ``words`` (each word counts once per substring; ties by the string)."""
    return list(_most_held(type_substring_counts(words, max_length), size))


def type_substring_counts(words: Iterable[str], max_length: int) -> Counter[str]:
    """For each substring of at most ``max_length`` characters (no spaces), the number of distinct
    ``words`` that hold it."""
    counts: Counter[str] = Counter()
    for word in set(words):
        n = len(word)
        counts.update(
            {word[i:j] for i in range(n) for j in range(i + 1, min(n, i + max_length) + 1)}
        )
    return Counter({s: c for s, c in counts.items() if " " not in s})


def _most_held(counts: Counter[str], size: int) -> dict[str, int]:
    """The ``size`` most held of ``counts`` (ties by the string), most held first."""
    return dict(sorted(counts.items(), key=lambda x: (-x[1], x[0]))[:size])


def set_lexicon_prior(model: nn.Module, held: Mapping[str, int]) -> None:
    """Gives a new model's direct lexicon the mean of its entries' prior, the number of training
    word types that hold each (``held``, as ``slm_lexicon_counts`` counts them; at least 1), where
    its config asks for one (``LMConfig.lexicon_prior`` above 0); nothing otherwise."""
    lexicon = getattr(model, "lexicon", None)
    if not model.config.lexicon_prior or not isinstance(lexicon, DirectLexicon):
        return
    lexicon.prior_held = _held_counts(lexicon, held)


def _held_counts(lexicon: DirectLexicon, held: Mapping[str, int]) -> torch.Tensor:
    """[M] float, on the logits' device: each entry's number of training word types in ``held``,
    at least 1 (an entry missing or held by none counts as held once)."""
    counts = torch.tensor([held.get(e, 0) for e in lexicon.entries], dtype=torch.float)
    return counts.clamp(min=1).to(lexicon.logits.device)


def seed_lexicon(model: nn.Module, held: Mapping[str, int]) -> None:
    """Sets a new model's direct lexicon's logits to the log of the number of training word types
    that hold each entry (``held``, as ``slm_lexicon_counts`` counts them; an entry missing or
    held by none starts at log 1), where its config asks for it (``LMConfig.lexicon_init``
    ``counts``); nothing otherwise."""
    lexicon = getattr(model, "lexicon", None)
    if model.config.lexicon_init != "counts" or not isinstance(lexicon, DirectLexicon):
        return
    seeded = _held_counts(lexicon, held).log()
    with torch.no_grad():
        if model.config.categories == "free":  # the classes' random start tells them apart
            lexicon.logits.add_(seeded)
        else:
            lexicon.logits[...] = seeded


class Lexicon(nn.Module):
    """The lexicon path of the mixture; ``entries`` are its segments, ``cond_dim`` the context size."""

    def __init__(self, entries: Sequence[str], cond_dim: int):
        super().__init__()
        self._hold_entries(entries)
        self.gate = nn.Linear(cond_dim, 1)
        self.out = nn.Linear(cond_dim, len(self.entries))
        self.terminator = nn.Embedding(len(self.entries), cond_dim + 1)

    def _hold_entries(self, entries: Sequence[str]) -> None:
        """The entries, their index and their spelled lengths, whatever the logits' form."""
        if not entries:
            raise ValueError("a lexicon needs at least one entry")
        self.entries = list(entries)
        self.index = {s: i for i, s in enumerate(self.entries)}
        self.count_probe: torch.Tensor | None = None
        """[M] zeros that ``mix`` adds to every entry's log-probability while set (``[K, M]``, a row
        per category, for ``CategoryDirectLexicon``): the gradient of a log-likelihood with respect
        to it is each entry's expected number of uses (``LexiconUsage``)."""
        chars = torch.tensor([len(s) + 1 for s in self.entries], dtype=torch.float)
        self.register_buffer("spelled_chars", chars, persistent=False)  # [M], terminator counted

    def __len__(self) -> int:
        return len(self.entries)

    def ids(self, segments: Sequence[str], device: torch.device) -> torch.Tensor:
        """[N] lexicon ids of ``segments``, -1 for segments not in the lexicon."""
        get = self.index.get
        return torch.tensor([get(s, -1) for s in segments], dtype=torch.long, device=device)

    def mix(
        self,
        cond: torch.Tensor,
        ids: torch.Tensor,
        spelled: torch.Tensor,
        space_follows: torch.Tensor,
    ) -> torch.Tensor:
        """[N] mixture log-probabilities of segments with their terminators.

        Args:
            cond: [N, cond_dim] context vectors, or [cond_dim], one context for all (one softmax);
            ids: [N] lexicon ids (-1: not in the lexicon);
            spelled: [N] the speller's ``log p(m, t | h)``; space_follows: [N] bool, t is a space.
        """
        known = ids >= 0
        safe = ids.clamp(min=0)
        if cond.dim() == 1:  # one context for every segment: one softmax over the entries
            gate = self.gate_logit(cond).expand(ids.shape[0])  # [N]
            entry = torch.log_softmax(self.entry_logits(cond), dim=0)[safe]
        else:
            gate = self.gate_logit(cond)  # [N]
            logits = self.entry_logits(cond)  # [N, M]
            entry = logits.gather(1, safe.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=1)
        if self.count_probe is not None:
            entry = entry + self.probe_row(cond, safe)
        term_logit = self.terminator_logits(cond, safe)
        spell_share = F.logsigmoid(-gate) + spelled
        term = F.logsigmoid(torch.where(space_follows, term_logit, -term_logit))
        lexical = F.logsigmoid(gate) + entry + term
        return torch.where(known, torch.logaddexp(lexical, spell_share), spell_share)

    def probe_row(self, cond: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """[N] the ``count_probe``'s entries ``ids`` under the context ``cond``: one probe for
        every context (a category's lexicon has one row of it per category)."""
        return self.count_probe[ids]

    def gate_logit(self, cond: torch.Tensor) -> torch.Tensor:
        """``logit lambda(h)``: [] for ``cond`` [H], [N] for [N, H]."""
        return self.gate(cond).squeeze(-1)

    def entry_logits(self, cond: torch.Tensor) -> torch.Tensor:
        """The lexicon softmax's logits: [M] for ``cond`` [H], [N, M] for [N, H]."""
        return self.out(cond)

    def terminator_logits(self, cond: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """[N] logits of "a space follows" for the entries ``ids`` (>= 0) in the context ``cond``
        ([H], shared, or [N, H])."""
        weights = self.terminator(ids)  # [N, cond_dim + 1]
        return (weights[:, :-1] * cond).sum(-1) + weights[:, -1]

    def description_length(
        self, cond: torch.Tensor, uses: float, nats_per_char: float
    ) -> torch.Tensor:
        """Differentiable scalar: the nats it takes to spell the entries that ``uses`` draws of a
        segment (of context ``cond``, ``[cond_dim]``) use, in expectation.

        An entry of probability ``q = lambda(h) p_lex(m | h)`` is used at least once in ``uses``
        draws with probability ``1 - exp(-uses q)`` (with several contexts, ``[C, cond_dim]``, ``q``
        is summed over them); if it is, it pays ``nats_per_char`` for each of
        its characters and its terminator. An entry that many segments use pays its spelling once
        (no gradient: the probability of use is 1); one that a few use pays in proportion, so mass
        moves from long entries that a few words share to the parts that many share.
        """
        gate = torch.sigmoid(self.gate_logit(cond)).unsqueeze(-1)
        share = gate * torch.softmax(self.entry_logits(cond), dim=-1)
        if share.dim() > 1:  # one context per category: an entry is used if any category uses it
            share = share.sum(0)  # [M]
        used = -torch.expm1(-uses * share)
        return nats_per_char * (used * self.spelled_chars).sum()

    def end(self, cond: torch.Tensor, spelled_end: torch.Tensor) -> torch.Tensor:
        """[B] ``log p(end of text | h)``: only the speller ends a text."""
        return F.logsigmoid(-self.gate_logit(cond)) + spelled_end


class DirectLexicon(Lexicon):
    """A lexicon for one context only (an ``slm`` without context): its gate, its entries' logits and
    their terminators' logits are learnt directly, three tensors of 1, ``M`` and ``M`` numbers,
    instead of through linear maps of the context (``cond_dim`` times as many parameters, which
    express nothing more when the context is one learnt vector).

    The model is the same family as ``Lexicon``'s under ``no_context``; its training differs: Adam
    moves each logit by about its learning rate an update, where through a linear map of a learnt
    vector every logit moves by up to ``cond_dim`` times that, so these logits train at their own
    learning rate (``LMConfig.lexicon_lr``, ``parameter_groups``).
    """

    def __init__(self, entries: Sequence[str], pairs: int = 0, pairs_gate: float = 0.0):
        nn.Module.__init__(self)  # not Lexicon's: none of its linear maps
        self._hold_entries(entries)
        self.gate_bias = nn.Parameter(torch.zeros(()))
        self.logits = nn.Parameter(torch.zeros(len(self.entries)))
        self.terminator_bias = nn.Parameter(torch.zeros(len(self.entries)))
        self.pairs = EntryPairs(len(self.entries), pairs, pairs_gate) if pairs else None
        """The bigram over the entries (``LMConfig.lexicon_pairs``), or None."""
        self.register_buffer("prior_held", None, persistent=False)
        """[M] the number of training word types that hold each entry, the mean of the prior on the
        entries' probabilities (``LMConfig.lexicon_prior``, ``set_lexicon_prior``), or None. Not
        saved: a model is built from its training words again before it resumes."""

    def kept(self) -> torch.Tensor:
        """[M] bool: the entries not pruned (``LexiconUsage.prune``), on the logits' device."""
        return (self.logits.detach() > PRUNED_LOGIT / 2).reshape(-1, len(self)).any(0)

    def prior_cross_entropy(self) -> torch.Tensor:
        """Differentiable scalar: ``-sum_m pi_m log q_m`` in nats, ``q`` the lexicon's softmax over
        its entries and ``pi`` the kept entries' shares of ``prior_held`` (pruned entries none);
        its minimum is at ``q = pi``. 0 without ``prior_held``."""
        if self.prior_held is None:
            return self.logits.new_zeros(())
        held = torch.where(self.kept(), self.prior_held, 0.0)
        share = held / held.sum()
        return -(share * torch.log_softmax(self.logits, dim=-1)).sum()

    def gate_logit(self, cond: torch.Tensor) -> torch.Tensor:
        return self.gate_bias.expand(cond.shape[:-1])

    def entry_logits(self, cond: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(*cond.shape[:-1], -1)

    def terminator_logits(self, cond: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.terminator_bias[ids]


class CategoryDirectLexicon(DirectLexicon):
    """A direct lexicon with one distribution per hidden category (``LMConfig.categories`` on an
    ``slm`` without context): a gate, the entries' logits and their terminators' logits for each of
    ``categories``, ``[K]``, ``[K, M]`` and ``[K, M]`` numbers. The condition of category ``k`` is
    the ``k``-th row of the identity (``conditions``), so that every ``Lexicon`` method reads it as
    a context vector: ``cond @ logits`` is that category's row. Its entries' logits start from
    small random values (``init_scale``): the categories are told apart by the morphotactics and by
    what the texts' posteriors give each of them from there. Free classes (``categories =
    "free"``), which no morphotactics tell apart, start from ``FREE_CLASS_INIT_SCALE``, added to
    their counts where the lexicon starts from them (``seed_lexicon``): classes that start alike
    stay alike."""

    def __init__(self, entries: Sequence[str], categories: int, init_scale: float = 0.1):
        nn.Module.__init__(self)
        self._hold_entries(entries)
        m = len(self.entries)
        self.gate_bias = nn.Parameter(torch.zeros(categories))
        self.logits = nn.Parameter(init_scale * torch.randn(categories, m))
        self.terminator_bias = nn.Parameter(torch.zeros(categories, m))
        self.register_buffer("conditions", torch.eye(categories), persistent=False)

    def gate_logit(self, cond: torch.Tensor) -> torch.Tensor:
        return cond @ self.gate_bias

    def entry_logits(self, cond: torch.Tensor) -> torch.Tensor:
        return cond @ self.logits

    def probe_row(self, cond: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The probe's row of ``cond``'s category (``count_probe`` is ``[K, M]``): each entry's
        uses are counted in each category apart, as its gain is (``SLM.entry_gains``)."""
        return _entries_of(cond @ self.count_probe, ids)

    def terminator_logits(self, cond: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return _entries_of(cond @ self.terminator_bias, ids)


class EntryPairs(nn.Module):
    """A bigram over a direct lexicon's entries (``LMConfig.lexicon_pairs``): up to ``size`` pairs
    ``(q, m)`` of entries, each with a learnt logit, and for every entry ``q`` a learnt gate
    ``rho_q``. After a segment that is the entry ``q``, the next event (a segment ``m`` with its
    terminator ``t``, or the end of the text) is drawn as

        p(e | q) = (1 - rho_q) p(e)  +  rho_q pi(m | q) p_lex(t | m)

    ``p`` the model without pairs (the lexicon and the speller mixed, ``Lexicon.mix``), ``pi(. |
    q)`` a softmax over ``q``'s pairs whose two entries are both still in the lexicon, and
    ``p_lex(t | m)`` the entry's own terminator. Both parts are normalised, so the mixture is. An
    entry with no such pair has ``rho_q = 0``, and after the start of a text or a segment that is
    no entry the model without pairs draws alone. So a frequent sequence of two morphs is
    explained by the pair instead of by an entry of its own, as in Goldwater, Griffiths and
    Johnson's (2009) bigram model, where a unigram model takes collocations for words.

    With ``fixed_gate`` above 0 (``LMConfig.lexicon_pairs_gate``) every ``rho_q`` is that number,
    not learnt, as the back-off weight of a hierarchical bigram.

    The pairs are fixed when the model is built (``set_pairs``; ``entry_pairs`` finds them); the
    rows past those found hold no pair (key -1)."""

    def __init__(self, entries: int, size: int, fixed_gate: float = 0.0):
        super().__init__()
        self.entries = entries
        self.fixed_gate = fixed_gate
        self.register_buffer("keys", torch.full((size,), -1, dtype=torch.long))
        """[P] ``q * M + m`` of each pair, ascending (-1: no pair)."""
        self.logits = nn.Parameter(torch.zeros(size))
        self.gate = nn.Parameter(torch.zeros(entries), requires_grad=not fixed_gate)

    @torch.no_grad()
    def set_pairs(self, keys: torch.Tensor, counts: torch.Tensor | None = None) -> None:
        """Holds the pairs ``keys`` ([P'] ``q * M + m``, P' at most the rows), their logits started
        at the log of ``counts`` (None: 0, a uniform ``pi``)."""
        if len(keys) > len(self.keys):
            raise ValueError(f"{len(keys)} pairs for {len(self.keys)} rows")
        order = torch.argsort(keys)
        start = len(self.keys) - len(keys)  # the unused rows (-1) first, so the keys ascend
        self.keys.fill_(-1)
        self.keys[start:] = keys[order].to(self.keys.device)
        self.logits.zero_()
        if counts is not None:
            self.logits[start:] = counts[order].clamp(min=1).float().log().to(self.logits.device)

    def gates(self, kept: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """With ``kept`` [M] the entries still in the lexicon: for every entry ``q``, ``log rho_q``
        and ``log (1 - rho_q)`` [M] (-inf and 0 where ``q`` has no pair left), and for every pair
        ``log pi(m | q)`` [P] (-inf where the pair is gone)."""
        size = self.entries
        first, second = self.keys.clamp(min=0) // size, self.keys.clamp(min=0) % size
        live = (self.keys >= 0) & kept[first] & kept[second]
        logits = torch.where(live, self.logits, NEG_INF)
        peak = logits.new_full((size,), NEG_INF).scatter_reduce(
            0, first, logits.detach(), reduce="amax"
        )
        has = torch.isfinite(peak)  # [M]: q has a pair left
        shift = torch.where(has, peak, 0.0)
        total = logits.new_zeros(size).index_add(0, first, (logits - shift[first]).exp())
        norm = shift + torch.where(has, total, 1.0).log()
        gate = self.gate
        if self.fixed_gate:  # rho = sigmoid(logit(rho))
            gate = torch.full_like(gate, math.log(self.fixed_gate / (1.0 - self.fixed_gate)))
        go = torch.where(has, F.logsigmoid(gate), NEG_INF)
        stay = torch.where(has, F.logsigmoid(-gate), 0.0)
        return go, stay, logits - norm[first]

    def find(self, previous: torch.Tensor, following: torch.Tensor) -> torch.Tensor:
        """The row of the pair ``(q, m)`` for entry ids ``previous`` and ``following`` (>= 0, one
        shape), -1 where it is no pair."""
        key = previous * self.entries + following
        at = torch.searchsorted(self.keys, key).clamp(max=len(self.keys) - 1)
        return torch.where(self.keys[at] == key, at, -1)


def entry_pairs(
    words: Iterable[str], entries: Sequence[str], size: int, min_count: int = 2
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``size`` pairs of ``entries`` found next to each other (``q`` then ``m``, each a
    substring of the word) in the most distinct ``words``, at least ``min_count`` (ties by the
    key): their keys ``q * M + m`` [P] and those counts [P] (``EntryPairs.set_pairs``)."""
    index = {e: i for i, e in enumerate(entries)}
    longest = max(map(len, entries), default=0)
    found: list[np.ndarray] = []
    for word in set(words):
        n = len(word)
        ending: list[list[int]] = [[] for _ in range(n + 1)]
        starting: list[list[int]] = [[] for _ in range(n + 1)]
        for a in range(n):
            for b in range(a + 1, min(n, a + longest) + 1):
                i = index.get(word[a:b])
                if i is not None:
                    ending[b].append(i)
                    starting[a].append(i)
        keys = [
            np.add.outer(np.asarray(ending[s]) * len(entries), np.asarray(starting[s])).ravel()
            for s in range(1, n)
            if ending[s] and starting[s]
        ]
        if keys:
            found.append(np.unique(np.concatenate(keys)))  # each word counts a pair once
    if not found:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    keys, counts = np.unique(np.concatenate(found), return_counts=True)
    frequent = counts >= min_count
    keys, counts = keys[frequent], counts[frequent]
    order = np.lexsort((keys, -counts))[:size]  # the most held first, ties by the key
    return torch.from_numpy(keys[order].astype(np.int64)), torch.from_numpy(counts[order])


def _entries_of(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[N] the entries ``ids`` of a per-entry ``table``: [M], one row for all, or [N, M], a row each."""
    return table[ids] if table.dim() == 1 else table.gather(1, ids.unsqueeze(1)).squeeze(1)


PRUNED_LOGIT = -1e4
"""The logit of an entry pruned from a direct lexicon: probability 0 (``exp(-1e4)`` underflows), no
gradient, and no price in the description length."""


class LexiconUsage:
    """Expected uses of a direct lexicon's entries in the texts its model trains on, and the
    pruning of the entries that do not pay for their spelling.

    Around an update (``probe``), the entries' log-probabilities carry a zero ``count_probe``; the
    gradient of the texts' log-likelihood with respect to it is each entry's expected number of
    uses under the model's posterior, accumulated here until ``prune``. There an entry stays only
    if its uses gain at least its spelling's price: ``uses * (log p(m) - log p(m | without m))``,
    the log-likelihood the corpus loses without it (each use spelled by the rest of the model
    instead; ``SLM.entry_gains``), against ``price * (|m| + 1)`` nats, Morfessor's lexicon code at
    ``price`` nats a character. An entry no draw used gains nothing and goes. A pruned entry's
    logit is ``PRUNED_LOGIT`` for good: its texts then use the parts or the speller.

    With categories (``CategoryDirectLexicon``) uses and gains are counted per category, ``[K,
    M]``, and an entry's gain is the sum over categories of its uses there times its gain per use
    there: a suffix is weighed by what it gains as a suffix, not as a word of its own (alone, the
    morphotactics make an entry a stem).
    """

    def __init__(self, lexicon: DirectLexicon):
        self.lexicon = lexicon
        self.counts = torch.zeros(lexicon.logits.shape, dtype=torch.float64)  # [M], or [K, M]
        self.updates = 0
        """Updates counted since the last pruning: with none, there is nothing to prune on."""

    def reset(self) -> None:
        """Drops the uses counted so far."""
        self.counts.zero_()
        self.updates = 0

    def probe(self) -> torch.Tensor:
        """A fresh zero probe on the lexicon; read it with ``add`` after the backward pass."""
        probe = torch.zeros(self.counts.shape, device=self.lexicon.logits.device)
        self.lexicon.count_probe = probe.requires_grad_()
        return probe

    def add(self, probe: torch.Tensor, scale: float) -> None:
        """Adds the uses the probe's gradient holds (``scale``: what the log-likelihood was
        multiplied by in the loss, e.g. ``-1 / characters``) and takes the probe off."""
        self.lexicon.count_probe = None
        if probe.grad is not None:
            self.counts += (probe.grad.detach().double() / scale).clamp(min=0).cpu()
            self.updates += 1

    def kept(self) -> torch.Tensor:
        """[M] bool: the entries still in the lexicon (of any category)."""
        return self.lexicon.kept().cpu()

    @torch.no_grad()
    def prune(self, gains: torch.Tensor, price: float, fraction: float = 1.0) -> dict[str, float]:
        """Prunes the kept entries whose ``gains`` (nats per use, shaped as ``counts``) times their
        counted uses (summed over categories) are below their spelling's price, at most
        ``fraction`` of the kept entries, those that gain least for their price first; resets the
        counts. Returns the entries kept and pruned, or {} where no update was counted since the
        last pruning (every count would read 0)."""
        if not self.updates:
            return {}
        kept = self.kept()
        cost = price * self.lexicon.spelled_chars.cpu().double()  # |m| + 1 characters
        gained = (self.counts * gains.double().cpu()).reshape(-1, len(self.lexicon)).sum(0)
        drop = kept & (gained < cost)
        limit = int(fraction * int(kept.sum()))
        if int(drop.sum()) > limit:  # the worst ratios of gain to price go first
            ratio = torch.where(drop, gained / cost, torch.inf)
            drop = torch.zeros_like(drop)
            drop[torch.argsort(ratio, stable=True)[:limit]] = True
        self.lexicon.logits[..., drop.to(self.lexicon.logits.device)] = PRUNED_LOGIT
        self.reset()
        return {"lexicon_entries": float((kept & ~drop).sum()), "lexicon_pruned": float(drop.sum())}

    def state_dict(self) -> dict[str, Any]:
        return {"counts": self.counts.clone(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        counts = state["counts"].double()
        if counts.shape != self.counts.shape:  # a category model's [M] uses, before [K, M]
            counts = (counts / self.counts.shape[0]).expand_as(self.counts)
        self.counts = counts.clone()
        self.updates = int(state.get("updates", 1))
