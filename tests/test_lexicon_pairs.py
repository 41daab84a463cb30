"""A bigram over the lexicon's entries (``lexicon_pairs``), checked exactly on a tiny model.

Every segmentation of a few short texts is scored by hand from the model's own parameters (the
model without pairs scores each segment; each entry's gate and its pairs' softmax are read off
its weights), independently of ``EntryPairs.transition``; the batched scores, the marginal, the
posteriors and the Viterbi segmentation must agree with that enumeration.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from segrl.config import NO_LIMIT
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError
from segrl.lm import LMConfig, SegmentedBatch, load_lm, save_lm
from segrl.lm.lexicon import PRUNED_LOGIT, entry_pairs
from segrl.lm.models import build_word_lm

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = CharVocab(["a", "b"], "?")
WORDS = ["abab", "aab", "bab", "abba", "baab", "ab", "abb"]
TEXTS = ["abab", "b", "aab", "baaba", "abb"]


def paired(seed: int = 0, pairs: int = 40, **options) -> torch.nn.Module:
    torch.manual_seed(seed)
    settings = dict(
        model="slm",
        context="none",
        lexicon_logits="direct",
        speller="bigram",
        lexicon_size=20,
        lexicon_pairs=pairs,
        lexicon_init="counts",
        lexicon_cost=0.0,
        lexicon_prune=False,
        speller_entries=0.0,
        length_penalty=0.0,
        char_dim=6,
        embedding_dim=6,
        hidden_dim=6,
        speller_dim=6,
        max_segment_length=NO_LIMIT,
        dropout=0.0,
    )
    config = LMConfig(**{**settings, **options})
    lm = build_word_lm(config, VOCAB, WORDS).eval()
    with torch.no_grad():  # gates and pair logits away from their start, so that both matter
        lm.pairs.gate.normal_()
        lm.pairs.logits.add_(torch.randn(lm.pairs.logits.shape))
    return lm


def segmentations(text: str) -> list[list[str]]:
    out = []
    for cuts in itertools.product([0, 1], repeat=len(text) - 1):
        segments, start = [], 0
        for i, cut in enumerate(cuts, start=1):
            if cut:
                segments.append(text[start:i])
                start = i
        out.append([*segments, text[start:]])
    return out


def gate_of(lm, q: int) -> float:
    """``rho_q``: the fixed gate where the model has one, else the entry's learnt one."""
    fixed = lm.config.lexicon_pairs_gate
    return fixed if fixed else torch.sigmoid(lm.pairs.gate[q]).item()


def by_hand(lm, segments: list[str]) -> float:
    """``log p(X, S)`` from the process: each segment from the model without pairs, or after an
    entry with pairs left from ``(1 - rho_q) p(m) + rho_q pi(m | q) p(no space | m)``; the end of
    the text after the last segment ``m`` at ``(1 - rho_m) p(end)``."""
    lexicon = lm.lexicon
    size = len(lexicon)
    kept = (lexicon.logits > PRUNED_LOGIT / 2).tolist()
    pairs: dict[int, dict[int, float]] = {}
    for key, logit in zip(lm.pairs.keys.tolist(), lm.pairs.logits.tolist(), strict=True):
        q, m = divmod(key, size)
        if key >= 0 and kept[q] and kept[m]:
            pairs.setdefault(q, {})[m] = logit
    pairs_of = lm.lexicon.pairs
    lexicon.pairs = None  # the model without pairs: each segment's and the end's own scores
    try:
        plain = lm.score(SegmentedBatch.from_segments(VOCAB, [segments]))
        end = lexicon.end(lm.no_context, lm.speller.end_scores(lm.no_context.unsqueeze(0)))
    finally:
        lexicon.pairs = pairs_of
    values = plain.per_position[0][plain.per_position[0] != 0].tolist()  # one per segment
    values[-1] -= end.item()
    total, previous = 0.0, None
    for segment, value in zip(segments, values, strict=True):
        q = lexicon.index.get(previous) if previous is not None else None
        m = lexicon.index.get(segment)
        if q is not None and q in pairs:
            rho = gate_of(lm, q)
            norm = math.log(sum(math.exp(v) for v in pairs[q].values()))
            mixed = math.log(1 - rho) + value
            if m is not None and m in pairs[q]:
                term = torch.nn.functional.logsigmoid(-lexicon.terminator_bias[m]).item()
                mixed = float(
                    torch.logaddexp(
                        torch.tensor(mixed), torch.tensor(math.log(rho) + pairs[q][m] - norm + term)
                    )
                )
            value = mixed
        total += value
        previous = segment
    last = lexicon.index.get(previous)
    stay = 1 - gate_of(lm, last) if last in pairs else 1.0
    return total + end.item() + math.log(stay)


@pytest.mark.parametrize("fixed", [0.0, 0.2])
@torch.no_grad()
def test_entry_pairs_score_as_the_process_draws_them_with_an_exact_marginal(fixed):
    lm = paired(lexicon_pairs_gate=fixed)
    assert (lm.pairs.keys >= 0).sum() >= 5  # pairs were found, and some rows are empty
    chars = lm.encode(TEXTS)
    marginal = lm.log_marginal(chars)
    posteriors = lm.boundary_posteriors(chars)
    best, best_score = lm.viterbi(chars)
    differs = 0.0
    for row, text in enumerate(TEXTS):
        options = segmentations(text)
        scores = lm.score(SegmentedBatch.from_segments(VOCAB, options)).total
        hand = torch.tensor([by_hand(lm, segments) for segments in options])
        assert torch.allclose(scores, hand.float(), atol=1e-5)
        assert marginal[row].item() == pytest.approx(torch.logsumexp(hand, 0).item(), abs=1e-5)
        weights = torch.softmax(hand, 0)
        ends = SegmentedBatch.from_segments(VOCAB, options).ends.float()
        assert torch.allclose(
            posteriors[row, : len(text)], (weights.unsqueeze(1) * ends).sum(0).float(), atol=1e-5
        )
        winner = int(hand.argmax())
        assert best.segments()[row] == options[winner]
        assert best_score[row].item() == pytest.approx(hand[winner].item(), abs=1e-5)
        lm.lexicon.pairs, pairs = None, lm.lexicon.pairs
        differs += (lm.log_marginal(lm.encode([text]))[0] - marginal[row]).abs().item()
        lm.lexicon.pairs = pairs
    assert differs > 1e-2  # the pairs move the marginal


@torch.no_grad()
def test_a_pruned_entry_loses_its_pairs_and_flip_scores_equal_rescoring():
    lm = paired(seed=1)
    victim = lm.lexicon.index["ab"]
    lm.lexicon.logits[victim] = PRUNED_LOGIT
    for text in TEXTS:
        options = segmentations(text)
        scores = lm.score(SegmentedBatch.from_segments(VOCAB, options)).total
        hand = torch.tensor([by_hand(lm, segments) for segments in options])
        assert torch.allclose(scores, hand.float(), atol=1e-5)
    texts = [t for t in TEXTS for _ in segmentations(t)]
    batch = SegmentedBatch.from_segments(VOCAB, [s for t in TEXTS for s in segmentations(t)])
    assert len(texts) == len(batch.segments())
    local = lm.flip_scores(batch)
    brute = lm.brute_force_flip_scores(batch, chunk=5)
    assert torch.allclose(local, brute, atol=1e-5)
    assert (local[batch.flippable] != 0).any()


def test_pairs_train_save_and_load_and_refuse_spaces_and_categories(tmp_path):
    lm = paired(seed=2).train()
    loss, _ = lm.marginal_loss(lm.encode(TEXTS))
    loss.backward()
    assert torch.isfinite(lm.pairs.logits.grad).all() and lm.pairs.logits.grad.abs().sum() > 0
    assert torch.isfinite(lm.pairs.gate.grad).all() and lm.pairs.gate.grad.abs().sum() > 0
    lm.eval()
    loaded = load_lm(save_lm(lm, tmp_path / "lm")).eval()
    assert torch.equal(loaded.pairs.keys, lm.pairs.keys)
    chars = lm.encode(TEXTS)
    assert torch.allclose(loaded.log_marginal(chars), lm.log_marginal(chars), atol=1e-6)
    spaced = CharVocab(["a", "b", " "], "?")
    with pytest.raises(ConfigError, match="without spaces"):
        lm.vocab = spaced
        lm.log_marginal(lm.encode(["ab ba"]))
    with pytest.raises(ConfigError, match="lexicon_pairs"):
        paired(categories="free")


def test_a_fixed_pairs_gate_is_not_learnt_and_is_refused_outside_zero_to_one():
    lm = paired(seed=3, lexicon_pairs_gate=0.3).train()
    go, stay, _ = lm.pairs.gates(lm.lexicon.kept())
    has = torch.isfinite(go)
    assert has.any() and not has.all()  # entries with pairs and entries without
    assert torch.allclose(go[has].exp(), torch.tensor(0.3)) and torch.allclose(
        stay[has].exp(), torch.tensor(0.7)
    )
    loss, _ = lm.marginal_loss(lm.encode(TEXTS))
    loss.backward()
    assert lm.pairs.gate.grad is None and lm.pairs.logits.grad.abs().sum() > 0
    for bad in (1.0, -0.1):
        with pytest.raises(ConfigError, match="lexicon_pairs_gate is a probability below 1"):
            paired(lexicon_pairs_gate=bad)
    with pytest.raises(ConfigError, match="give lexicon_pairs above 0"):
        paired(pairs=0, lexicon_pairs_gate=0.3)


def test_entry_pairs_count_each_word_once_and_keep_the_most_held():
    entries = ["a", "b", "ab", "ba"]  # keys q * 4 + m
    words = ["abab", "ab", "ba"]  # "abab" holds a|b twice: counted once
    keys, counts = entry_pairs(words, entries, size=10)
    assert keys.tolist() == [1, 4] and counts.tolist() == [2, 2]  # held by two words at least
    keys, counts = entry_pairs(words, entries, size=3, min_count=1)
    # then those of "abab" alone (a|ba, b|ab, ab|a, ab|ab, ba|b), ties by the key
    assert keys.tolist() == [1, 4, 3] and counts.tolist() == [2, 2, 1]
    assert len(entry_pairs(words, entries, size=100, min_count=1)[0]) == 7


def test_pairs_resolve_without_the_pruning_that_would_weigh_entries_without_them():
    from segrl.config import validate_config
    from segrl.lm.config import resolve_lm_config, table_lm

    plain = resolve_lm_config(table_lm(model="slm"), "words")
    assert plain.lexicon_prune is True and plain.speller_entries > 0
    paired_config = resolve_lm_config(table_lm(model="slm", lexicon_pairs=1000), "words")
    assert paired_config.lexicon_prune is False and paired_config.speller_entries == 0
    validate_config(paired_config)
    with pytest.raises(ConfigError, match="lexicon_prune"):
        validate_config(
            resolve_lm_config(
                table_lm(model="slm", lexicon_pairs=1000, lexicon_prune=True), "words"
            )
        )
    gated = table_lm(model="slm", lexicon_pairs=1000, lexicon_pairs_gate=0.1)
    assert resolve_lm_config(gated, "words").lexicon_prune is False
    # asked for, the pruning goes with a fixed gate, and the speller learns the kept entries
    pruned = resolve_lm_config(
        table_lm(model="slm", lexicon_pairs=1000, lexicon_pairs_gate=0.1, lexicon_prune=True),
        "words",
    )
    assert pruned.lexicon_prune is True and pruned.speller_entries > 0
    validate_config(pruned)


def test_a_fixed_gate_with_the_pruning_counts_uses_through_pairs_and_prunes():
    from segrl.lm.lexicon import LexiconUsage

    lm = paired(seed=4, lexicon_pairs_gate=0.5, lexicon_prune=True)
    with torch.no_grad():  # the speller's share of the model without pairs, about e^-30
        lm.lexicon.gate_bias.fill_(30.0)
    usage = LexiconUsage(lm.lexicon)
    probe = usage.probe()
    chars = lm.encode(TEXTS)
    loss, _ = lm.marginal_loss(chars)
    loss.backward()
    usage.add(probe, scale=-1.0 / sum(len(t) + 1 for t in TEXTS))  # the loss is per character
    # the probe's gradient is the expected uses: each text's posterior over its segmentations
    expected = torch.zeros(len(lm.lexicon), dtype=torch.float64)
    with torch.no_grad():
        for text in TEXTS:
            options = segmentations(text)
            weights = torch.softmax(torch.tensor([by_hand(lm, s) for s in options]), 0)
            for weight, segments in zip(weights.tolist(), options, strict=True):
                for segment in segments:
                    if segment in lm.lexicon.index:
                        expected[lm.lexicon.index[segment]] += weight
    # with the lexicon drawing every entry, its uses (by the entry's own probability or through
    # a pair) are the posterior uses of each entry as a segment
    assert expected.sum() > 1.0
    assert torch.allclose(usage.counts, expected, atol=1e-4)
    before = int(lm.lexicon.kept().sum())
    gains = lm.entry_gains(lm.lexicon.entries)
    pruned = usage.prune(gains, price=1.0)
    assert pruned["lexicon_entries"] + pruned["lexicon_pruned"] == before
    assert int(lm.lexicon.kept().sum()) == pruned["lexicon_entries"]
