"""The segmental LMs give proper probabilities, checked exactly by enumeration on tiny models.

"Sums to 1", made exact: the generative process emits one symbol at a time (a character, ``<eos>``, or
the space as a terminator). We walk its whole tree up to texts of N characters: every complete
derivation (X, S) with |X| <= N is scored by the batched scoring code, every branch that goes past N
characters adds its probability to the "not ended by N" mass. The scores and that mass must sum to 1;
a wrong mask (a space allowed to start a segment, a character after ``max_segment_length``), a wrong
terminator, or a scoring path that disagrees with the process breaks it. The batched score of each
derivation must also equal the product of the process's conditionals along its path.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from segrl.config import NO_LIMIT, validate_config
from segrl.data.vocab import CharVocab
from segrl.lm import LMConfig, SegmentedBatch, build_lm
from segrl.lm.lexicon import DirectLexicon

VOCAB = CharVocab(["a", "b", " "], "?")
N = 4
LEXICON = ["a", "ab", "ba", "bab"]


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(
    model: str,
    max_segment_length=None,
    lexicon=None,
    seed=0,
    context="lstm",
    lexicon_logits="projected",
    speller="lstm",
    categories="none",
    vocab=VOCAB,
):
    torch.manual_seed(seed)
    config = LMConfig(
        model=model,
        context=context,
        lexicon_logits=lexicon_logits,
        speller=speller,
        categories=categories,
        char_dim=6,
        embedding_dim=6,
        hidden_dim=6,
        speller_dim=6,
        max_segment_length=NO_LIMIT if max_segment_length is None else max_segment_length,
        dropout=0.0,
    )
    lm = build_lm(config, vocab, lexicon).eval()
    with (
        torch.no_grad()
    ):  # larger weights than the default init: sharper, less uniform conditionals
        for p in lm.parameters():
            p.mul_(3.0)
    return lm


def walk(lm, max_chars: int):
    """Complete derivations ``(segments, log p)`` of texts up to ``max_chars`` characters, the empty
    text's log-probability, and the mass of the branches that pass ``max_chars``."""
    eos, space = lm.vocab.eos_id, lm.space_id
    complete, cut, empty = [], 0.0, None

    def expand(prefix, spelled, logp, length):
        nonlocal cut, empty
        probs = lm.next_symbol_log_probs(prefix, spelled)
        assert probs[VOCAB.pad_id] == -math.inf and probs[VOCAB.bos_id] == -math.inf
        for symbol, value in enumerate(probs.tolist()):
            if value == -math.inf or symbol in (VOCAB.pad_id, VOCAB.bos_id):
                continue
            total = logp + value
            if symbol == eos and not spelled:
                if prefix:
                    complete.append((prefix, total))
                else:
                    empty = total
            elif symbol == eos:
                expand([*prefix, spelled], "", total, length)
            elif length + 1 > max_chars:
                cut += math.exp(total)
            elif symbol == space:
                expand([*prefix, spelled + " "], "", total, length + 1)
            else:
                expand(prefix, spelled + lm.vocab.symbols[symbol], total, length + 1)

    expand([], "", 0.0, 0)
    return complete, empty, cut


@pytest.mark.parametrize(
    "model,max_segment_length,context,speller",
    [
        ("slm", None, "lstm", "lstm"),
        ("slm", 2, "lstm", "lstm"),
        ("slm", None, "words", "lstm"),
        ("slm", None, "segment", "lstm"),
        ("slm", 2, "segment", "lstm"),
        ("slm", None, "none", "lstm"),
        ("slm", None, "none", "unigram"),
        ("slm", 2, "none", "unigram"),
        ("slm", 2, "none", "bigram"),
        ("slm", None, "none", "trigram"),
        ("segment-lstm", None, "lstm", "lstm"),
        ("segment-lstm", 2, "lstm", "lstm"),
    ],
)
def test_probabilities_of_all_segmented_texts_sum_to_one(
    model, max_segment_length, context, speller
):
    vocab = UNSPACED if context == "segment" else VOCAB  # a bigram over segments: no spaces
    lm = tiny(model, max_segment_length, context=context, speller=speller, vocab=vocab)
    complete, empty, cut = walk(lm, N)
    assert len(complete) > 100
    batch = SegmentedBatch.from_segments(vocab, [segments for segments, _ in complete])
    scores = lm.score(batch)
    path = torch.tensor([logp for _, logp in complete])
    assert torch.allclose(scores.total, path, atol=1e-5)
    assert torch.allclose(scores.per_position.sum(1), scores.total, atol=1e-5)
    total = scores.total.exp().sum().item() + math.exp(empty) + cut
    assert total == pytest.approx(1.0, abs=1e-5)
    assert 0.01 < cut < 0.99  # the check is not carried by one term alone
    if max_segment_length:
        longest = max(len(s.strip()) for segments, _ in complete for s in segments)
        assert longest == max_segment_length


def test_a_space_cannot_start_a_segment_or_follow_another():
    lm = tiny("slm")
    space = VOCAB.encode(" ")[0]
    assert lm.next_symbol_log_probs([], "")[space] == -math.inf
    assert lm.next_symbol_log_probs(["ab "], "")[space] == -math.inf
    assert lm.next_symbol_log_probs(["ab "], "a")[space] > -math.inf


def segmentations(text: str) -> list[list[int]]:
    """Every decision vector of ``text`` (spaces are forced boundaries)."""
    n = len(text)
    free = [i for i in range(n - 1) if text[i] != " " and text[i + 1] != " "]
    out = []
    for bits in itertools.product([0, 1], repeat=len(free)):
        decisions = [0] * max(n - 1, 1)
        for i, bit in zip(free, bits, strict=True):
            decisions[i] = bit
        out.append(decisions)
    return out


TEXTS = ["abab", "ab ba", "b", "aab ab a", "?ab"]


@pytest.mark.parametrize(
    "max_segment_length,context,lexicon,speller",
    [
        (None, "lstm", None, "lstm"),
        (2, "lstm", None, "lstm"),
        (None, "words", None, "lstm"),
        (3, "none", None, "lstm"),
        (None, "none", LEXICON, "lstm"),
        (2, "none", LEXICON, "lstm"),
        (None, "none", "direct", "lstm"),
        (3, "none", None, "unigram"),
        (None, "none", "direct", "unigram"),
        (None, "none", "direct", "bigram"),
        (None, "none", "direct", "trigram"),
    ],
)
def test_dp_marginal_posteriors_and_viterbi_match_enumeration(
    max_segment_length, context, lexicon, speller
):
    logits = "projected"
    if lexicon == "direct":  # the lexicon's logits learnt as themselves (DirectLexicon)
        lexicon, logits = LEXICON, "direct"
    lm = tiny(
        "slm",
        max_segment_length,
        context=context,
        lexicon=lexicon,
        lexicon_logits=logits,
        speller=speller,
    )
    marginal = lm.log_marginal(lm.encode(TEXTS))
    posteriors = lm.boundary_posteriors(lm.encode(TEXTS))
    best, best_score = lm.viterbi(lm.encode(TEXTS))
    for row, text in enumerate(TEXTS):
        batch = SegmentedBatch.from_decisions(
            VOCAB, [text] * len(segmentations(text)), segmentations(text)
        )
        scores = lm.score(batch).total
        assert marginal[row].item() == pytest.approx(torch.logsumexp(scores, 0).item(), abs=1e-5)
        weights = torch.softmax(scores, 0)
        assert weights.sum().item() == pytest.approx(1.0, abs=1e-6)
        expected = (weights.unsqueeze(1) * batch.ends.float()).sum(0)
        assert torch.allclose(posteriors[row, : len(text)], expected, atol=1e-5)
        winner = int(scores.argmax())
        assert best.ends[row, : len(text)].tolist() == batch.ends[winner].tolist()
        assert best_score[row].item() == pytest.approx(scores[winner].item(), abs=1e-5)
    space_at = TEXTS[1].index(" ")
    assert posteriors[1, space_at].item() == 0.0
    assert posteriors[1, space_at - 1].item() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "model,max_segment_length,context,lexicon",
    [
        ("slm", None, "lstm", None),
        ("slm", 2, "lstm", None),
        ("slm", None, "words", None),
        ("slm", 2, "none", LEXICON),
        ("segment-lstm", None, "lstm", None),
        ("segment-lstm", 2, "lstm", None),
    ],
)
def test_flip_scores_equal_brute_force_rescoring(model, max_segment_length, context, lexicon):
    lm = tiny(model, max_segment_length, seed=3, context=context, lexicon=lexicon)
    pairs = [(text, d) for text in TEXTS for d in segmentations(text)]
    if max_segment_length:  # segmentations the model can produce (flips may leave them: +inf)
        pairs = [
            (t, d)
            for t, d in pairs
            if max(map(len, SegmentedBatch.from_decisions(VOCAB, [t], [d]).segments()[0])) <= 2
        ]
    texts, decisions = [t for t, _ in pairs], [d for _, d in pairs]
    width = max(len(t) for t in texts)
    decisions = [d + [0] * (width - 1 - len(d)) for d in decisions]
    batch = SegmentedBatch.from_decisions(VOCAB, texts, decisions)
    local = lm.flip_scores(batch)
    brute = lm.brute_force_flip_scores(batch, chunk=7)
    finite = torch.isfinite(brute)
    assert torch.equal(finite, torch.isfinite(local))
    assert torch.allclose(local[finite], brute[finite], atol=1e-5)
    assert (local[~batch.flippable] == 0).all()
    total = lm.score(batch).total
    # one position by hand: flip the decision after the first character of the first text
    ends = batch.ends.clone()
    ends[0, 0] = ~ends[0, 0]
    other = lm.score(batch.with_ends(ends)).total
    assert local[0, 0].item() == pytest.approx((total[0] - other[0]).item(), abs=1e-5)
    if max_segment_length == 2:  # merging "ab" and "ab" in "abab" makes a 4-character segment
        assert (torch.isinf(local) & (local > 0)).any()


def test_flip_sign_favours_the_better_decision():
    """A model that has learnt "ab" as a unit: keeping "ab" whole scores higher, so the flip score of
    the decision not to split inside "ab" is positive, and of a split inside it negative."""
    lm = tiny("slm")
    texts = ["ab ab ab ab"] * 32
    batch = lm.segmented(texts, [[0] * 10] * 32)
    optimizer = torch.optim.Adam(lm.parameters(), lr=0.05)
    lm.train()
    for _ in range(60):
        loss, _ = lm.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    lm.eval()
    kept = lm.flip_scores(lm.segmented(["ab ab"], [[0, 0, 0, 0]]))
    split = lm.flip_scores(lm.segmented(["ab ab"], [[1, 0, 0, 0]]))
    assert kept[0, 0] > 0 and split[0, 0] < 0
    assert kept[0, 0].item() == pytest.approx(-split[0, 0].item(), abs=1e-5)
    assert kept[0, 1] == 0 and kept[0, 2] == 0  # forced positions around the space
    # the incremental rewards agree: "ab" scores more than "a" then "b"
    whole = lm.score(lm.segmented(segments=[["ab", " ", "ab"]])).per_position
    parts = lm.score(lm.segmented(segments=[["a", "b", " ", "ab"]])).per_position
    assert whole[0, 1] > parts[0, 0] + parts[0, 1]
    assert torch.allclose(whole[0, 3:], parts[0, 3:])  # the second word's segment is the same
    # and so do the posterior and Viterbi: no boundary inside "ab"
    chars = lm.encode(["ab ab"])
    assert lm.boundary_posteriors(chars)[0, 0] < 0.5
    assert lm.viterbi(chars)[0].segments() == [["ab", "ab"]]


def set_gate(lexicon, logit: float) -> None:
    """Open (large ``logit``) or shut (very negative) the lexicon's gate, whatever its form."""
    with torch.no_grad():
        if isinstance(lexicon, DirectLexicon):
            lexicon.gate_bias.fill_(logit)
        else:
            lexicon.gate.weight.zero_()
            lexicon.gate.bias.fill_(logit)


@pytest.mark.parametrize(
    "model,context,logits",
    [
        ("segment-lstm", "lstm", "projected"),
        ("slm", "none", "projected"),
        ("slm", "none", "direct"),
    ],
)
def test_lexicon_mixture_is_normalised(model, context, logits):
    lexicon = LEXICON
    lm = tiny(model, lexicon=lexicon, context=context, lexicon_logits=logits)
    set_gate(lm.lexicon, 40.0)  # all mass on the lexicon path
    segments = []
    for entry in lexicon:
        for follow in ("", " "):
            segments.append([entry + follow, "a"])
    scores = lm.score(SegmentedBatch.from_segments(VOCAB, segments))
    first = torch.stack(
        [scores.per_position[row, len(s[0].strip()) - 1] for row, s in enumerate(segments)]
    )
    assert first.exp().sum().item() == pytest.approx(1.0, abs=1e-6)
    # with the gate shut, the model is its speller: a lexicon-free twin with the same weights agrees
    set_gate(lm.lexicon, -40.0)
    twin = tiny(model, context=context)
    twin.load_state_dict({k: v for k, v in lm.state_dict().items() if not k.startswith("lexicon.")})
    batch = SegmentedBatch.from_segments(VOCAB, [["ab", " ", "ba", "b"], ["bab"]])
    assert torch.allclose(lm.score(batch).total, twin.score(batch).total, atol=1e-5)


@pytest.mark.parametrize("logits", ["projected", "direct"])
def test_slm_lexicon_needs_no_context_and_is_saved_with_the_model(tmp_path, logits):
    from segrl.errors import ConfigError
    from segrl.lm import load_lm, save_lm

    with pytest.raises(ConfigError, match="context = 'none'"):
        tiny("slm", lexicon=LEXICON, context="lstm", lexicon_logits=logits)
    lm = tiny("slm", lexicon=LEXICON, context="none", lexicon_logits=logits)
    loaded = load_lm(save_lm(lm, tmp_path / "lm")).eval()
    assert loaded.lexicon.entries == LEXICON
    assert type(loaded.lexicon) is type(lm.lexicon)
    chars = lm.encode(["abab ba", "bab"])
    assert torch.allclose(loaded.log_marginal(chars), lm.log_marginal(chars), atol=1e-6)


def test_substring_lexicon_counts_each_word_once():
    from segrl.lm.lexicon import substring_lexicon

    words = ["walked", "walks", "talked", "talked"]
    assert substring_lexicon(words, 3, max_length=4) == ["a", "al", "alk"]
    top = substring_lexicon(words, 100, max_length=4)
    assert "alk" in top and "walk" in top and "walke" not in top  # max_length 4
    assert top.index("alk") < top.index("walk")  # in 3 words against 2


def test_length_penalty_matches_enumeration_and_resolves_by_corpus_kind():
    """The penalised marginal is ``-log sum_S p(X, S) exp(-lambda sum_k |m_k|^2)`` per character,
    checked against every segmentation; unset, the penalty is 0.05 on word lists (0.02 with a priced
    lexicon), 0 on text, and an slm without context gets the default lexicon on word lists (on text,
    any other model: none); segrl lm train's teacher prices its lexicon."""
    from dataclasses import replace

    from segrl.errors import ConfigError
    from segrl.lm.config import (
        LEXICON_COST,
        PRICED_LEXICON_LENGTH_PENALTY,
        SLM_LEXICON_SIZE,
        WORD_LIST_LENGTH_PENALTY,
        resolve_lm_config,
    )

    lm = tiny("slm", context="none")
    text = TEXTS[0]
    chars = lm.encode([text])
    plain, _ = lm.marginal_loss(chars)
    lm.config = replace(lm.config, length_penalty=0.3)
    penalised, _ = lm.marginal_loss(chars)
    batch = SegmentedBatch.from_decisions(
        VOCAB, [text] * len(segmentations(text)), segmentations(text)
    )
    scores = lm.score(batch).total
    squares = torch.tensor(
        [sum(len(m) ** 2 for m in seg) for seg in batch.segments()], dtype=scores.dtype
    )
    expected = -torch.logsumexp(scores - 0.3 * squares, 0) / (len(text) + 1)
    assert penalised.item() == pytest.approx(expected.item(), abs=1e-5)
    assert penalised.item() > plain.item()  # an upper bound of -log p(X)
    unset = LMConfig(length_penalty=None, lexicon_size=None)
    assert resolve_lm_config(unset, "words").length_penalty == WORD_LIST_LENGTH_PENALTY
    assert resolve_lm_config(unset, "text").length_penalty == 0.0
    assert resolve_lm_config(LMConfig(length_penalty=0.2), "words").length_penalty == 0.2
    assert resolve_lm_config(unset, "words").lexicon_size == 0  # context lstm: no lexicon
    without_context = replace(unset, context="none")
    assert resolve_lm_config(without_context, "words").lexicon_size == SLM_LEXICON_SIZE
    assert resolve_lm_config(without_context, "text").lexicon_size == 0  # unpriced, on text: none
    assert resolve_lm_config(replace(without_context, lexicon_size=7), "text").lexicon_size == 7
    segment_lstm = replace(without_context, model="segment-lstm")
    assert resolve_lm_config(segment_lstm, "words").lexicon_size == 0
    # a lexicon whose entries pay for their spelling takes the weaker penalty on word lists
    priced = replace(without_context, lexicon_cost=LEXICON_COST)
    assert resolve_lm_config(priced, "words").length_penalty == PRICED_LEXICON_LENGTH_PENALTY
    assert PRICED_LEXICON_LENGTH_PENALTY < WORD_LIST_LENGTH_PENALTY
    assert resolve_lm_config(priced, "text").length_penalty == 0.0
    assert resolve_lm_config(priced, "text").lexicon_size == SLM_LEXICON_SIZE  # priced: on text too
    unpriced_lexicon = replace(priced, lexicon_size=0)  # nothing to price: the usual penalty
    assert resolve_lm_config(unpriced_lexicon, "words").length_penalty == WORD_LIST_LENGTH_PENALTY
    assert resolve_lm_config(replace(priced, context="lstm"), "words").length_penalty == (
        WORD_LIST_LENGTH_PENALTY
    )
    from segrl.experiments.lm_train import segmenter_lm

    teacher = resolve_lm_config(segmenter_lm(), "words")
    assert (teacher.lexicon_size, teacher.lexicon_cost, teacher.length_penalty) == (
        SLM_LEXICON_SIZE,
        LEXICON_COST,
        PRICED_LEXICON_LENGTH_PENALTY,
    )
    # its lexicon's logits are learnt directly, with categories one set per category
    assert teacher.lexicon_logits == "direct"
    categories = replace(segmenter_lm(), categories="prefix-stem-suffix")
    assert resolve_lm_config(categories, "words").lexicon_logits == "direct"  # one set a category
    assert LMConfig().lexicon_logits == "projected"  # a model file saved without the option
    with pytest.raises(ConfigError, match="lexicon_size must be at least 0"):
        validate_config(LMConfig(lexicon_size=-1))


@pytest.mark.parametrize("context,power", [("lstm", 2.0), ("none", 3.0), ("words", 1.5)])
def test_expected_length_regulariser_matches_enumeration_and_its_gradient(context, power):
    """Kawakami et al.'s regulariser, the posterior's expected ``sum_k |m_k| ** beta``, equals the
    average over every segmentation weighted by ``p(S | X)``; the training loss adds it per
    character at its weight, the stats stay the likelihood's; its gradient is a finite difference
    of it; and a step on it alone moves the posterior to shorter segments."""
    from dataclasses import replace

    from segrl.errors import ConfigError
    from segrl.lm import lattice
    from segrl.lm.slm import space_mask

    lm = tiny("slm", context=context).double()
    chars = lm.encode(TEXTS)
    space = space_mask(VOCAB, chars)
    table = lm.span_table(chars, space)
    expected = lattice.expected_lengths(table, space, chars.lengths, power)
    for row, text in enumerate(TEXTS):
        batch = SegmentedBatch.from_decisions(
            VOCAB, [text] * len(segmentations(text)), segmentations(text)
        )
        weights = torch.softmax(lm.score(batch).total.double(), 0)
        costs = torch.tensor(
            [sum(len(m.strip()) ** power for m in seg) for seg in batch.segments()],
            dtype=torch.float64,
        )
        assert expected[row].item() == pytest.approx((weights * costs).sum().item(), rel=1e-6)
    plain, plain_stats = lm.marginal_loss(chars, regularise=True)  # weight 0: nothing added
    assert "expected_length_cost" not in plain_stats
    lm.config = replace(lm.config, expected_length_weight=0.5, expected_length_power=power)
    loss, stats = lm.marginal_loss(chars, regularise=True)
    per_char = expected.sum().item() / (chars.lengths + 1).sum().item()
    assert stats["expected_length_cost"] == pytest.approx(per_char, rel=1e-6)
    assert stats["nll"] == pytest.approx(plain_stats["nll"], rel=1e-9)
    assert loss.item() == pytest.approx(plain.item() + 0.5 * per_char, rel=1e-6)
    # held-out scoring and use counts read no regulariser
    unregularised, _ = lm.marginal_loss(chars)
    assert unregularised.item() == pytest.approx(plain.item(), rel=1e-9)
    # the gradient with respect to one span's log-probability, against a finite difference
    leaf = table.detach().clone().requires_grad_(True)
    lattice.expected_lengths(leaf, space, chars.lengths, power)[0].backward()
    row, start, length = 0, 1, 2
    bumped = table.detach().clone()
    bumped[row, start, length] += 1e-6
    difference = (
        lattice.expected_lengths(bumped, space, chars.lengths, power)[0] - expected[0]
    ).item() / 1e-6
    assert leaf.grad[row, start, length].item() == pytest.approx(difference, rel=1e-4, abs=1e-7)
    before = expected.sum().item()
    lm.zero_grad()
    lattice.expected_lengths(
        lm.span_table(chars, space), space, chars.lengths, power
    ).sum().backward()
    with torch.no_grad():
        for p in lm.parameters():
            if p.grad is not None:
                p.sub_(0.05 * p.grad)
        after = lattice.expected_lengths(lm.span_table(chars, space), space, chars.lengths, power)
    assert after.sum().item() < before
    with pytest.raises(ConfigError, match="expected_length_weight must be at least 0"):
        validate_config(LMConfig(expected_length_weight=-0.1))
    with pytest.raises(ConfigError, match="expected_length_power above 1"):
        validate_config(LMConfig(expected_length_power=1.0))
    with pytest.raises(ConfigError, match="without categories"):
        validate_config(LMConfig(model="segment-lstm", expected_length_weight=0.1))
    with pytest.raises(ConfigError, match="cannot go with lm.lexicon_prune"):
        pruned = LMConfig(expected_length_weight=0.1, lexicon_prune=True, lexicon_logits="direct")
        validate_config(pruned, "lm.")
    validate_config(LMConfig(expected_length_weight=0.1, lexicon_prune=None))  # resolved later


@pytest.mark.parametrize("lexicon", [None, LEXICON])
def test_word_posteriors_score_each_word_alone(lexicon):
    lm = tiny("slm", context="none", lexicon=lexicon)
    texts = ["abab ba", "ba abab b", "bab"]
    by_word = lm.word_boundary_posteriors(lm.encode(texts))
    for row, text in enumerate(texts):
        offset = 0
        for word in text.split(" "):
            alone = lm.boundary_posteriors(lm.encode([word]))[0, : len(word)]
            assert torch.allclose(by_word[row, offset : offset + len(word)], alone, atol=1e-6)
            assert by_word[row, offset + len(word) - 1].item() == pytest.approx(1.0)
            if offset:
                assert by_word[row, offset - 1].item() == 0.0  # the space
            offset += len(word) + 1
        assert (by_word[row, len(text) :] == 0).all()
    assert 0.05 < by_word[0, 0].item() < 0.95  # a real decision, not a forced one


@pytest.mark.parametrize(
    ("max_segment_length", "speller"),
    [(None, "lstm"), (2, "lstm"), (2, "unigram"), (None, "bigram"), (2, "trigram")],
)
def test_runs_without_context_share_their_substrings_with_the_same_scores_and_gradients(
    max_segment_length, speller
):
    """Without context every run is spelled from one condition, so each distinct substring is
    scored once (a trie; the unigram speller in closed form); the spans and their gradients equal
    one speller pass per run."""
    from segrl.lm.segmented import space_mask
    from segrl.lm.slm import _room

    lm = tiny("slm", max_segment_length, context="none", speller=speller)
    texts = ["ab ab aab", "abab ba", "b", "ba ab"]  # repeated words, shared prefixes, text ends
    chars = lm.encode(texts)
    space = space_mask(VOCAB, chars)
    room = _room(chars, space, max_segment_length)
    rows, starts = (room > 0).nonzero(as_tuple=True)
    lengths = room[rows, starts]
    shared = lm._shared_spans(chars, space, rows, starts, lengths)
    cond = lm.no_context.expand(len(rows), -1)
    single = lm.speller.span_scores(cond, chars.ids, space, rows, starts, lengths)
    finite = torch.isfinite(single)
    assert torch.equal(finite, torch.isfinite(shared))
    assert torch.allclose(shared[finite], single[finite], atol=1e-5)
    gradients = []
    for spans in (shared, single):
        lm.zero_grad()
        spans[finite].sum().backward()
        gradients.append([p.grad.clone() for p in lm.speller.parameters() if p.grad is not None])
    assert len(gradients[0]) == len(gradients[1]) > 0
    for mine, expected in zip(*gradients, strict=True):
        assert torch.allclose(mine, expected, atol=1e-4)


def test_the_trie_holds_each_prefix_once_level_by_level():
    from segrl.lm.speller import _Trie

    trie = _Trie(["ab", "ab", "abc", "b"], root_char=1)
    # nodes: the root, then "a" and "b", then "ab", then "abc"
    assert trie.level_sizes == [1, 2, 1, 1]
    assert trie.level_starts == [0, 1, 3, 4]
    assert trie.parent == [0, 0, 0, 1, 3]
    assert trie.last_char == [1, ord("a"), ord("b"), ord("b"), ord("c")]
    assert trie.run_node == [3, 3, 4, 2]


def test_the_forward_algorithm_word_by_word_equals_the_whole_text():
    """A space is always a boundary: the log-partition summed over words, and its gradient (the
    posteriors), equal the forward algorithm over the whole text."""
    from segrl.lm import lattice

    torch.manual_seed(0)
    space = torch.tensor([[0, 0, 1, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    lengths = torch.tensor([8, 5])
    positions = torch.arange(8)
    room = torch.tensor([[2, 1, 0, 3, 2, 1, 0, 1], [5, 4, 3, 2, 1, 0, 0, 0]])
    table = torch.randn(2, 8, 6)
    valid = (torch.arange(6) >= 1) & (torch.arange(6) <= room.unsqueeze(2))
    table = torch.where(valid & (positions < lengths.unsqueeze(1)).unsqueeze(2), table, -torch.inf)
    words, word_lengths, rows, starts = lattice.words(table, space, lengths)
    assert word_lengths.tolist() == [2, 3, 1, 5] and rows.tolist() == [0, 0, 0, 1]
    assert starts.tolist() == [0, 3, 7, 0] and words.shape == (4, 5, 6)
    leaves = [table.clone().requires_grad_(True) for _ in range(2)]
    whole, _ = lattice.forward(leaves[0], space, lengths)
    by_words = lattice.log_partition(leaves[1], space, lengths)
    assert torch.allclose(whole, by_words, atol=1e-5) and torch.isfinite(whole).all()
    whole.sum().backward()
    by_words.sum().backward()
    assert torch.allclose(leaves[0].grad, leaves[1].grad, atol=1e-5)


def test_lexicon_description_length_is_the_expected_spelling_of_the_entries_used():
    """Each entry pays ``cost * (|m| + 1)`` times the probability that ``uses`` draws use it at least
    once: by hand for shares set through the gate and the entry logits; the gradient moves mass
    from a rare long entry to one that is used for sure."""
    lm = tiny("slm", lexicon=LEXICON, context="none")
    lexicon = lm.lexicon
    with torch.no_grad():
        lexicon.gate.weight.zero_()
        lexicon.gate.bias.fill_(math.log(3.0))  # lambda = 3/4
        lexicon.out.weight.zero_()
        lexicon.out.bias.copy_(torch.log(torch.tensor([0.5, 0.3, 0.19, 0.01])))
    cost, uses = 2.0, 10.0
    shares = [0.75 * q for q in (0.5, 0.3, 0.19, 0.01)]
    spelled = [len(m) + 1 for m in LEXICON]  # 2, 3, 3, 4
    expected = cost * sum(
        (1 - math.exp(-uses * q)) * n for q, n in zip(shares, spelled, strict=True)
    )
    length = lexicon.description_length(lm.no_context, uses, cost)
    assert length.item() == pytest.approx(expected, rel=1e-5)
    # nothing used: nothing to pay; all used for sure: each entry's spelling once
    assert lexicon.description_length(lm.no_context, 0.0, cost).item() == 0.0
    assert lexicon.description_length(lm.no_context, 1e9, cost).item() == pytest.approx(
        cost * sum(spelled)
    )
    (grad,) = torch.autograd.grad(length, lexicon.out.bias)
    assert grad[3] > 0  # 'bab', used by 0.075 of a draw: lowering its logit lowers the cost
    assert grad[0] < 0  # 'a', used for sure: mass moved to it leaves the entries still paying


def test_the_lexicon_cost_is_added_to_the_marginal_update_and_shrinks_rare_entries():
    """``LMTrainer.marginal_step`` adds the description length over the corpus's characters; off
    with ``lexicon_cost = 0``. Trained on texts where 'bab' never occurs whole, its share falls
    faster under the cost than without it."""
    from dataclasses import replace

    from segrl.errors import ConfigError
    from segrl.lm.training import LMTrainer

    texts = ["ab", "a", "ba", "aba", "ab"] * 4
    chars = sum(len(t) + 1 for t in texts)
    shares = {}
    for cost in (0.0, 5.0):
        lm = tiny("slm", lexicon=LEXICON, context="none")
        lm.config = replace(lm.config, lexicon_cost=cost)
        trainer = LMTrainer(lm, lr=0.05, corpus=texts)
        assert (trainer.lexicon_uses, trainer.corpus_chars) == (len(texts), chars)
        first = trainer.marginal_step(texts)
        assert ("lexicon_nats" in first) == (cost > 0)
        for _ in range(30):
            trainer.marginal_step(texts)
        with torch.no_grad():
            shares[cost] = torch.softmax(lm.lexicon.out(lm.no_context), -1)[3].item()
    assert shares[5.0] < shares[0.0]
    with pytest.raises(ConfigError, match="lexicon_cost must be at least 0"):
        validate_config(LMConfig(lexicon_cost=-1.0))


def _categorised_lm(
    max_segment_length=None,
    seed=0,
    lexicon_logits="projected",
    categories="prefix-stem-suffix",
    lexicon_init="uniform",
):
    torch.manual_seed(seed)
    config = LMConfig(
        lexicon_logits=lexicon_logits,
        model="slm",
        context="none",
        char_dim=6,
        hidden_dim=6,
        speller_dim=6,
        max_segment_length=NO_LIMIT if max_segment_length is None else max_segment_length,
        dropout=0.0,
        categories="free" if categories.startswith("free") else categories,
        free_categories=int(categories[4:] or 4) if categories.startswith("free") else 4,
        lexicon_init=lexicon_init,
    )
    lm = build_lm(config, VOCAB, LEXICON).eval()
    with torch.no_grad():
        for p in lm.parameters():
            p.mul_(3.0)
        lm.transitions.logits.normal_()
    return lm


def _segments(text: str, decisions: list[int]) -> list[list[tuple[int, int]]]:
    """The (start, length) of each segment, word by word."""
    words, current, start = [], [], 0
    for i, char in enumerate(text):
        if char == " ":
            words.append(current)
            current, start = [], i + 1
            continue
        last = i == len(text) - 1 or text[i + 1] == " " or decisions[i]
        if last:
            current.append((start, i + 1 - start))
            start = i + 1
    words.append(current)
    return words


@pytest.mark.parametrize(
    ("max_segment_length", "lexicon_logits", "categories"),
    [
        (None, "projected", "prefix-stem-suffix"),
        (2, "projected", "prefix-stem-suffix"),
        (None, "direct", "prefix-stem-suffix"),
        (2, "direct", "prefix-stem-suffix"),
        (None, "direct", "free5"),
        (2, "projected", "free2"),
        (None, "direct", "free1"),
    ],
)
def test_categories_marginal_posteriors_and_viterbi_match_enumeration(
    max_segment_length, lexicon_logits, categories
):
    """With prefix/stem/suffix categories, the forward algorithm sums over every segmentation and
    every category sequence the morphotactics allow, each word a chain from start to end: checked
    against brute-force enumeration of both, with the posteriors and the Viterbi segmentation (the
    lexicon's logits learnt through a context per category, or directly per category). With
    ``free`` classes (5, 2 and 1 here) every class may follow every other, start and end a word."""
    from segrl.lm.morphotactics import CATEGORIES, allowed_transitions

    lm = _categorised_lm(max_segment_length, lexicon_logits=lexicon_logits, categories=categories)
    chars = lm.encode(TEXTS)
    marginal = lm.log_marginal(chars)
    posteriors = lm.boundary_posteriors(chars)
    best, best_score = lm.viterbi(chars)
    start, between, end = (t.detach() for t in lm.transitions())
    table = lm.span_table(chars).detach()  # [B, L, R + 1, K]
    k = int(categories[4:]) if categories.startswith("free") else len(CATEGORIES)
    assert table.shape[-1] == k
    if categories == "prefix-stem-suffix":
        allowed = allowed_transitions()
        assert (
            not allowed[3, 2] and not allowed[0, 3]
        )  # no word starts with a suffix or ends on a prefix
        assert start[2].item() == float("-inf") and end[0].item() == float("-inf")
    else:  # every transition learnt, each a probability
        assert torch.isfinite(start).all() and torch.isfinite(between).all()
        assert torch.isfinite(end).all()
        assert allowed_transitions("free", k).sum().item() == (k + 1) ** 2 - 1
    for row, text in enumerate(TEXTS):
        scores, ends = [], []
        for decisions in segmentations(text):
            words = _segments(text, decisions)
            total = torch.tensor(0.0)
            for word in words:
                options = []
                for cats in itertools.product(range(k), repeat=len(word)):
                    score = start[cats[0]] + end[cats[-1]]
                    for (a, n), c in zip(word, cats, strict=True):
                        top = table.shape[2] - 1
                        score = score + (table[row, a, n, c] if n <= top else float("-inf"))
                    for c_from, c_to in itertools.pairwise(cats):
                        score = score + between[c_from, c_to]
                    options.append(score)
                total = total + torch.logsumexp(torch.stack(options), 0)
            best_of = max(
                (
                    sum(
                        max(
                            float(
                                start[cats[0]]
                                + end[cats[-1]]
                                + sum(
                                    table[row, a, n, c] if n < table.shape[2] else -math.inf
                                    for (a, n), c in zip(word, cats, strict=True)
                                )
                                + sum(between[x, y] for x, y in itertools.pairwise(cats))
                            )
                            for cats in itertools.product(range(k), repeat=len(word))
                        )
                        for word in words
                    ),
                ),
            )
            scores.append((total, best_of))
            position_ends = [0] * len(text)
            for word in words:
                for a, n in word:
                    position_ends[a + n - 1] = 1
            ends.append(position_ends)
        sums = torch.stack([s for s, _ in scores])
        assert marginal[row].item() == pytest.approx(torch.logsumexp(sums, 0).item(), abs=1e-4)
        weights = torch.softmax(sums, 0)
        expected = (weights.unsqueeze(1) * torch.tensor(ends, dtype=torch.float)).sum(0)
        assert torch.allclose(posteriors[row, : len(text)], expected, atol=1e-4)
        maxima = [m for _, m in scores]
        winner = max(range(len(maxima)), key=maxima.__getitem__)
        assert best.ends[row, : len(text)].tolist() == [bool(e) for e in ends[winner]]
        assert best_score[row].item() == pytest.approx(maxima[winner], abs=1e-4)


def test_free_classes_seeded_from_counts_start_apart_and_categories_alike():
    """Seeded from its entries' counts, each free class keeps its own random draw on top of them
    (classes that start alike would stay alike); prefix, stem and suffix, told apart by their
    morphotactics, all start at the counts."""
    from segrl.lm.lexicon import FREE_CLASS_INIT_SCALE, seed_lexicon

    held = {"a": 9, "ab": 4, "ba": 1, "bab": 1}
    counts = torch.tensor([math.log(held[e]) for e in LEXICON])
    for categories in ("free3", "prefix-stem-suffix"):
        lm = _categorised_lm(lexicon_logits="direct", categories=categories, lexicon_init="counts")
        seed_lexicon(lm, held)
        order = [lm.lexicon.entries.index(e) for e in LEXICON]
        drawn = lm.lexicon.logits.detach()[:, order] - counts  # [K, M]
        if categories == "free3":
            assert drawn.shape[0] == 3 and not torch.allclose(drawn[0], drawn[1])
            assert 0.2 * FREE_CLASS_INIT_SCALE < float(drawn.std()) < 5 * FREE_CLASS_INIT_SCALE
        else:
            assert torch.allclose(drawn, torch.zeros_like(drawn))


@pytest.mark.parametrize(("spaced", "count"), [(False, 3), (True, 3), (False, 1)])
def test_classes_alike_divide_the_marginal_by_the_segments_share_alone(spaced, count):
    """A model with free classes is proper: each row of its transitions is a distribution over the
    next class, a word's end is its segments' own (not the chain's too), and the text's end is
    decided after its last segment, that segment taken given that it is not the end. So classes
    whose lexicons are alike give every text the marginal of the same model without classes,
    whatever the transitions, divided by ``1 - E`` (``E`` the end of a text after a segment;
    without classes the end is a slot of its own, as the empty text's is): the same constant for
    texts of one and of many segments. A chain that also learnt an end would charge every extra
    segment and every word's end, and the difference would vary with the text. One class is
    that model taken given that the text is not empty."""
    from dataclasses import replace

    vocab, texts = (VOCAB, TEXTS) if spaced else (UNSPACED, UNSPACED_TEXTS)
    base = tiny("slm", lexicon=LEXICON, context="none", lexicon_logits="direct", vocab=vocab)
    config = replace(base.config, categories="free", free_categories=count)
    classes = build_lm(config, vocab, LEXICON).eval()
    state = classes.state_dict()
    for name, value in base.state_dict().items():
        state[name] = value.expand_as(state[name]).clone()
    classes.load_state_dict(state)
    start, between, end = classes.transitions()
    assert torch.allclose(start.exp().sum(), torch.tensor(1.0))
    assert torch.allclose(between.exp().sum(1), torch.ones(count))
    assert end.tolist() == [0.0] * count
    with torch.no_grad():
        classes.transitions.logits.normal_()
        chars = base.encode(texts)
        difference = classes.log_marginal(chars) - base.log_marginal(chars)
        states = base.context_states(chars)
        spelled = base.speller.end_scores(states[torch.arange(len(texts)), chars.lengths])
        ends = base.lexicon.end(base.no_context, spelled).exp()
    assert len(set(map(len, texts))) > 2
    assert torch.allclose(difference, -torch.log1p(-ends), atol=1e-5)
    assert float(ends.min()) > 0.01  # the end is not negligible: the check has a constant to find


def test_categories_need_a_lexicon_and_have_no_given_segmentation_scores():
    from segrl.errors import ConfigError

    config = LMConfig(model="slm", context="none", hidden_dim=6, categories="prefix-stem-suffix")
    with pytest.raises(ConfigError, match="need a lexicon"):
        build_lm(config, VOCAB, None)
    lm = _categorised_lm()
    batch = SegmentedBatch.from_decisions(VOCAB, ["ab"], [[1]])
    with pytest.raises(ConfigError, match="not available for slm with categories"):
        lm.score(batch)
    with pytest.raises(ConfigError, match="prefix-stem-suffix"):
        validate_config(LMConfig(categories="prefix-suffix"))
    with pytest.raises(ConfigError, match="free_categories must be at least 1"):
        validate_config(LMConfig(categories="free", free_categories=0))


def test_a_direct_lexicon_holds_two_logits_an_entry_and_trains_them_at_their_own_rate():
    """``lexicon_logits = "direct"``: the gate, the entries' and the terminators' logits are the
    parameters themselves (1 + 2M numbers), the description length reads them as the projected
    lexicon reads its maps, and the trainer moves them at ``lexicon_lr``."""
    from dataclasses import replace

    from segrl.errors import ConfigError
    from segrl.lm.training import LMTrainer

    lm = tiny("slm", lexicon=LEXICON, context="none", lexicon_logits="direct")
    assert isinstance(lm.lexicon, DirectLexicon)
    assert sum(p.numel() for p in lm.lexicon.parameters()) == 1 + 2 * len(LEXICON)
    with torch.no_grad():
        lm.lexicon.gate_bias.fill_(math.log(3.0))  # lambda = 3/4
        lm.lexicon.logits.copy_(torch.log(torch.tensor([0.5, 0.3, 0.19, 0.01])))
    shares = [0.75 * q for q in (0.5, 0.3, 0.19, 0.01)]
    expected = 2.0 * sum(
        (1 - math.exp(-10.0 * q)) * (len(m) + 1) for q, m in zip(shares, LEXICON, strict=True)
    )
    length = lm.lexicon.description_length(lm.no_context, 10.0, 2.0)
    assert length.item() == pytest.approx(expected, rel=1e-5)

    lm.config = replace(lm.config, lexicon_lr=0.5)
    trainer = LMTrainer(lm, lr=1e-3)
    rates = {len(g["params"]): g["lr"] for g in trainer.optimizer.param_groups}
    assert rates == {3: 0.5, len(list(lm.parameters())) - 3: 1e-3}
    before = lm.lexicon.logits.detach().clone()
    trainer.marginal_step(["abab", "ba"])
    moved = (lm.lexicon.logits.detach() - before).abs().max().item()
    assert moved == pytest.approx(0.5, rel=1e-3)  # Adam's first step: the learning rate

    with pytest.raises(ConfigError, match="lexicon_lr must be above 0"):
        validate_config(LMConfig(lexicon_lr=0.0))


def test_markov_spellers_remember_at_most_one_character_and_need_no_context():
    """``speller = "unigram"``: one distribution over the characters and the end, so a character
    costs the same wherever it stands; ``bigram``: one per character before it; neither reads a
    context, and any other is refused."""
    from dataclasses import replace

    from segrl.errors import ConfigError
    from segrl.lm.speller import MarkovSpeller

    lm = tiny("slm", context="none", speller="unigram")
    assert isinstance(lm.speller, MarkovSpeller)
    assert sum(p.numel() for p in lm.speller.parameters()) == len(VOCAB)
    with torch.no_grad():
        lm.speller.char_logits.copy_(torch.linspace(-1.0, 2.0, len(VOCAB)))
    after = [lm.next_symbol_log_probs([], prefix) for prefix in ("a", "ab", "ba", "abab")]
    for other in after[1:]:  # after any characters, the same distribution (a geometric length)
        assert torch.allclose(after[0], other)
    first = lm.next_symbol_log_probs([], "")  # a segment's first symbol: not a space
    a, b = VOCAB.encode("a")[0], VOCAB.encode("b")[0]
    assert (first[a] - first[b]).item() == pytest.approx((after[0][a] - after[0][b]).item())
    with pytest.raises(ConfigError, match="speller = 'unigram' reads no context"):
        validate_config(replace(lm.config, context="lstm"))
    bigram = tiny("slm", context="none", speller="bigram")
    assert sum(p.numel() for p in bigram.speller.parameters()) == len(VOCAB) ** 2
    with torch.no_grad():
        bigram.speller.char_logits.copy_(torch.randn(len(VOCAB), len(VOCAB)))
    after_a, after_b = (bigram.next_symbol_log_probs([], prefix) for prefix in ("ba", "ab"))
    assert torch.allclose(after_a, bigram.next_symbol_log_probs([], "bba"))  # one character back
    assert not torch.allclose(after_a, after_b)
    trigram = tiny("slm", context="none", speller="trigram")
    with torch.no_grad():
        trigram.speller.char_logits.copy_(torch.randn(len(VOCAB) ** 2, len(VOCAB)))
    after_ba, after_aa = (trigram.next_symbol_log_probs([], prefix) for prefix in ("ba", "aa"))
    assert torch.allclose(after_ba, trigram.next_symbol_log_probs([], "aba"))  # two back
    assert not torch.allclose(after_ba, after_aa)


UNSPACED = CharVocab(["a", "b"], "?")
"""A vocabulary without the space: the texts of word discovery, which ``context = "segment"`` reads."""
UNSPACED_TEXTS = ["abab", "b", "aab", "baaba", "?ab"]


@pytest.mark.parametrize("max_segment_length", [None, 2])
def test_segment_context_is_a_proper_bigram_over_segments_with_an_exact_marginal(
    max_segment_length,
):
    """``context = "segment"``: each segment spelled from the state of the segment before it alone
    (its scores sum to 1: ``test_probabilities_of_all_segmented_texts_sum_to_one``). The bigram
    forward algorithm's marginal, posteriors, Viterbi segmentation and expected segment lengths
    equal the enumeration's; and the previous segment matters (a context that read only the
    characters before a segment would give "ab|ab" and "a|b|ab" the same last factor)."""
    lm = tiny("slm", max_segment_length, context="segment", vocab=UNSPACED)
    chars = lm.encode(UNSPACED_TEXTS)
    marginal = lm.log_marginal(chars)
    posteriors = lm.boundary_posteriors(chars)
    best, best_score = lm.viterbi(chars)
    for row, text in enumerate(UNSPACED_TEXTS):
        decisions = segmentations(text)
        batch = SegmentedBatch.from_decisions(UNSPACED, [text] * len(decisions), decisions)
        scores = lm.score(batch).total
        assert marginal[row].item() == pytest.approx(torch.logsumexp(scores, 0).item(), abs=1e-5)
        weights = torch.softmax(scores, 0)
        expected = (weights.unsqueeze(1) * batch.ends.float()).sum(0)
        assert torch.allclose(posteriors[row, : len(text)], expected, atol=1e-5)
        winner = int(scores.argmax())
        assert best.ends[row, : len(text)].tolist() == batch.ends[winner].tolist()
        assert best_score[row].item() == pytest.approx(scores[winner].item(), abs=1e-5)
    # the expected-length regulariser over the bigram's posterior, against the enumeration
    from dataclasses import replace

    from segrl.lm import lattice

    table = lm.double().span_table(lm.encode(UNSPACED_TEXTS))
    lengths = lm.encode(UNSPACED_TEXTS).lengths
    _, expected = lattice.bigram_forward(table, lengths, power=2.0)
    for row, text in enumerate(UNSPACED_TEXTS):
        decisions = segmentations(text)
        batch = SegmentedBatch.from_decisions(UNSPACED, [text] * len(decisions), decisions)
        weights = torch.softmax(lm.score(batch).total.double(), 0)
        costs = torch.tensor([sum(len(m) ** 2 for m in seg) for seg in batch.segments()])
        assert expected[row].item() == pytest.approx((weights * costs).sum().item(), rel=1e-6)
    lm.config = replace(lm.config, expected_length_weight=0.5)
    plain, _ = lm.marginal_loss(lm.encode(UNSPACED_TEXTS))
    loss, stats = lm.marginal_loss(lm.encode(UNSPACED_TEXTS), regularise=True)
    per_char = expected.sum().item() / (lengths + 1).sum().item()
    assert stats["expected_length_cost"] == pytest.approx(per_char, rel=1e-6)
    assert loss.item() == pytest.approx(plain.item() + 0.5 * per_char, rel=1e-6)
    lm.float()
    last = lm.score(SegmentedBatch.from_segments(UNSPACED, [["ab", "ab"], ["a", "b", "ab"]]))
    assert abs(last.per_position[0, 3] - last.per_position[1, 3]).item() > 1e-4


def test_segment_context_flip_scores_equal_rescoring_and_it_refuses_spaces():
    from segrl.errors import ConfigError

    lm = tiny("slm", 3, seed=3, context="segment", vocab=UNSPACED)
    pairs = [(text, d) for text in UNSPACED_TEXTS for d in segmentations(text)]
    width = max(len(t) for t, _ in pairs)
    decisions = [d + [0] * (width - 1 - len(d)) for _, d in pairs]
    batch = SegmentedBatch.from_decisions(UNSPACED, [t for t, _ in pairs], decisions)
    local = lm.flip_scores(batch)
    brute = lm.brute_force_flip_scores(batch, chunk=7)
    finite = torch.isfinite(brute)
    assert torch.equal(finite, torch.isfinite(local))
    assert (~finite).any()  # "abab" whole is past 3 characters: its flip is +inf
    assert torch.allclose(local[finite], brute[finite], atol=1e-5)
    assert (local[~batch.flippable] == 0).all()
    spaced = tiny("slm", context="segment")
    with pytest.raises(ConfigError, match="text without spaces"):
        spaced.log_marginal(spaced.encode(["ab ba"]))
