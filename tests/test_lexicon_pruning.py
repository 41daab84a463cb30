"""The lexicon that must earn its entries: posterior use counts, the gain of an entry, its pruning,
and the speller's price in the training objective, checked by hand and by enumeration on tiny
models."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from segrl.config import validate_config
from segrl.errors import ConfigError
from segrl.lm import LMConfig, SegmentedBatch
from segrl.lm.lexicon import PRUNED_LOGIT, LexiconUsage
from segrl.lm.segmented import space_mask
from segrl.lm.training import LMTrainer
from tests.test_lm_probability import LEXICON, VOCAB, segmentations, tiny

pytestmark = pytest.mark.usefixtures("one_thread")


def direct_lm(speller: str = "lstm", prune: bool = True, **changes):
    lm = tiny("slm", context="none", lexicon=LEXICON, lexicon_logits="direct", speller=speller)
    lm.config = replace(lm.config, lexicon_prune=prune, lexicon_cost=2.0, **changes)
    with torch.no_grad():
        lm.lexicon.logits.copy_(torch.tensor([0.5, 1.0, -0.5, 0.2]))
        lm.lexicon.gate_bias.fill_(1.0)
    return lm


@pytest.mark.parametrize("speller", ["lstm", "unigram"])
def test_counted_uses_are_the_posterior_expected_uses_of_each_entry(speller):
    """With the gate near 1 every segment comes from the lexicon (a segment outside it is nearly
    impossible), so an entry's expected uses are its expected occurrences over the texts'
    segmentations, weighted by their posterior: by enumeration."""
    lm = direct_lm(speller)
    with torch.no_grad():
        lm.lexicon.gate_bias.fill_(30.0)
    texts = ["abab", "aba", "bab", "ab"]
    expected = torch.zeros(len(LEXICON), dtype=torch.float64)
    for text in texts:
        batch = SegmentedBatch.from_decisions(
            VOCAB, [text] * len(segmentations(text)), segmentations(text)
        )
        weights = torch.softmax(lm.score(batch).total.double(), 0)
        for weight, segments in zip(weights, batch.segments(), strict=True):
            for segment in segments:
                if segment in LEXICON:
                    expected[LEXICON.index(segment)] += weight
    trainer = LMTrainer(lm, lr=1e-3)
    trainer.marginal_step(texts)  # counted before its update moves the model
    assert torch.allclose(trainer.usage.counts, expected, atol=1e-4)
    assert expected[LEXICON.index("ab")] > 1.0  # the check is not carried by zeros
    assert lm.lexicon.count_probe is None  # the probe is taken off after the update


def test_counting_uses_over_texts_is_an_epochs_count_without_an_update():
    """``count_uses``: the uses of an epoch of updates on the same texts (those counted before
    each update moves the model), without moving it, the counts so far dropped."""
    texts = ["abab", "aba", "bab", "ab", "aab"]
    lm = direct_lm()
    trainer = LMTrainer(lm, lr=1e-3)
    trainer.marginal_step(["bab"] * 3)  # counts the next call drops
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    trainer.count_uses(texts, batch_size=2)
    for key, value in lm.state_dict().items():
        assert torch.equal(value, before[key]), key  # no update
    assert trainer.usage.updates == 3  # three batches of at most two texts
    assert lm.lexicon.count_probe is None
    epoch = torch.zeros(len(LEXICON), dtype=torch.float64)
    for start in range(0, len(texts), 2):  # each batch's update counted on the model as it is
        fresh = LMTrainer(copy.deepcopy(lm), lr=1e-3)
        fresh.marginal_step(texts[start : start + 2])
        epoch += fresh.usage.counts
    assert torch.allclose(trainer.usage.counts, epoch, atol=1e-6)
    assert trainer.usage.counts[LEXICON.index("ab")] > 2.0  # not carried by zeros
    plain = LMTrainer(direct_lm(prune=False), lr=1e-3)
    plain.count_uses(texts, batch_size=2)  # a model that does not prune counts nothing
    assert plain.usage is None


def test_an_entrys_gain_is_what_the_marginal_loses_without_its_own_path():
    """``entry_gains``: ``log p(m) - log(p(m) - p(m from the lexicon, whole))``, the whole-span
    lexical path worked out by hand from the direct lexicon's logits."""
    lm = direct_lm()
    gains = lm.entry_gains(LEXICON)
    chars = lm.encode(LEXICON)
    marginal = lm.log_marginal(chars).detach()
    lexicon = lm.lexicon
    entry = torch.log_softmax(lexicon.logits.detach(), 0)
    at_end = F.logsigmoid(-lexicon.gate_bias) + lm.speller.end_scores(lm.no_context.unsqueeze(0))
    for i in range(len(LEXICON)):
        lexical = (
            F.logsigmoid(lexicon.gate_bias)
            + entry[i]
            + F.logsigmoid(-lexicon.terminator_bias[i])
            + at_end[0]
        ).item()
        without = math.log(math.exp(marginal[i].item()) - math.exp(lexical))
        assert gains[i].item() == pytest.approx(marginal[i].item() - without, abs=1e-4)
    assert (gains > 0).all()


def test_pruning_drops_entries_whose_uses_do_not_pay_for_their_spelling():
    """An entry stays if its counted uses times its gain reach ``price * (|m| + 1)``; at most
    ``fraction`` of the entries go at once, the worst ratio first; a pruned entry has probability
    0, no price, and is never counted again."""
    lm = direct_lm()
    usage = LexiconUsage(lm.lexicon)
    assert usage.prune(torch.ones(4), price=2.0) == {}  # nothing counted: nothing to prune on
    assert usage.kept().all()
    usage.counts = torch.tensor([10.0, 0.5, 3.0, 0.01], dtype=torch.float64)
    usage.updates = 1
    gains = torch.tensor([1.0, 2.0, 0.5, 50.0])  # gained: 10, 1, 1.5, 0.5 nats
    # prices at 2 nats a character: 4, 6, 6, 8
    assert usage.prune(gains, price=2.0, fraction=0.5) == {
        "lexicon_entries": 2.0,
        "lexicon_pruned": 2.0,
    }
    assert usage.kept().tolist() == [True, False, True, False]  # 'bab' (1/16), 'ab' (1/6) first
    assert usage.counts.sum() == 0
    q = torch.softmax(lm.lexicon.logits.detach(), 0)
    assert q[1].item() == 0.0 and q[3].item() == 0.0
    assert lm.lexicon.logits[1].item() == PRUNED_LOGIT
    length = lm.lexicon.description_length(lm.no_context, 1e9, 2.0)
    assert length.item() == pytest.approx(2.0 * (2 + 3))  # 'a' and 'ba' pay, the pruned do not
    usage.counts = torch.tensor([10.0, 0.0, 3.0, 0.0], dtype=torch.float64)
    usage.updates = 1
    usage.prune(gains, price=2.0, fraction=1.0)  # 'ba' gains 1.5 < 6 now that nothing caps it
    assert usage.kept().tolist() == [True, False, False, False]
    with pytest.raises(ConfigError, match="lexicon_prune needs a direct lexicon"):
        validate_config(LMConfig(lexicon_prune=True, lexicon_logits="projected"))
    with pytest.raises(ConfigError, match="lexicon_prune_fraction must be in"):
        validate_config(LMConfig(lexicon_prune_fraction=0.0))


def test_the_trainer_prunes_an_entry_no_text_uses_and_keeps_the_one_they_share():
    """Trained on texts made of 'ab' and 'a', 'bab' never occurs: pruned; 'ab' stays. The counts
    are checkpointed with the trainer; a model that does not prune counts nothing."""
    lm = direct_lm()
    texts = ["ab", "aab", "abab", "a", "ab"] * 3
    trainer = LMTrainer(lm, lr=0.01, corpus=texts)
    for _ in range(3):
        trainer.marginal_step(texts)
    assert trainer.prune_lexicon(min_updates=4) == {}  # three updates' uses are not an epoch's
    state = trainer.state_dict()
    copy = LMTrainer(direct_lm(), lr=0.01, corpus=texts)
    copy.load_state_dict(state)
    assert torch.equal(copy.usage.counts, trainer.usage.counts)
    assert trainer.usage.counts[LEXICON.index("ab")] > 10
    pruned = trainer.prune_lexicon()
    kept = dict(zip(LEXICON, trainer.usage.kept().tolist(), strict=True))
    assert not kept["bab"] and kept["ab"]
    assert pruned["lexicon_pruned"] >= 1 and pruned["lexicon_entries"] >= 1
    assert trainer.prune_lexicon() == {}  # no update since: no second pruning on zero counts
    plain = LMTrainer(direct_lm(prune=False), lr=0.01, corpus=texts)
    plain.marginal_step(texts)
    assert plain.usage is None and plain.prune_lexicon() == {}


def test_the_spellers_price_is_paid_by_spelled_segments_in_the_objective_only():
    """``speller_price``: the objective's span table takes ``price * l`` nats from the speller's
    path of a segment of ``l`` characters, not from the lexicon's; ``span_table`` (scores,
    posteriors, decoding) keeps the model's own probabilities."""
    lm = tiny("slm", context="none", lexicon_logits="direct")
    lm.config = replace(lm.config, speller_price=1.5)
    texts = lm.encode(["abab", "ba"])
    space = space_mask(VOCAB, texts)
    table, objective = lm.span_table(texts, space).detach(), lm.objective_table(texts, space)
    lengths = torch.arange(table.shape[2], dtype=table.dtype)
    finite = torch.isfinite(table)
    assert torch.allclose((table - 1.5 * lengths)[finite], objective.detach()[finite], atol=1e-5)
    with_lexicon = direct_lm(speller_price=1.5)
    with torch.no_grad():
        with_lexicon.lexicon.gate_bias.fill_(30.0)  # every segment from the lexicon
    chars = with_lexicon.encode(["ab"])
    space = space_mask(VOCAB, chars)
    whole = with_lexicon.span_table(chars, space)[0, 0, 2].item()
    assert with_lexicon.objective_table(chars, space)[0, 0, 2].item() == pytest.approx(whole)
    with pytest.raises(ConfigError, match="speller_price at least 0"):
        validate_config(LMConfig(speller_price=-1.0))


@pytest.mark.parametrize("speller", ["lstm", "bigram"])
def test_the_speller_learns_the_words_whole_beside_the_marginal(speller):
    """``speller_words``: ``spelled_whole`` is the speller's probability of each text as one
    segment (without a lexicon, the score of the segmentation that never splits), and the trainer
    adds its negative log-likelihood per character, at that weight, to the marginal's."""
    lm = tiny("slm", context="none", speller=speller)
    texts = ["abab", "ba", "aab"]
    chars = lm.encode(texts)
    whole = SegmentedBatch.from_decisions(VOCAB, texts, [[0] * max(len(t) - 1, 1) for t in texts])
    assert torch.allclose(lm.spelled_whole(chars), lm.score(whole).total, atol=1e-5)
    lm.config = replace(lm.config, speller_words=0.5)
    per_char = -lm.score(whole).total.sum().item() / sum(len(t) + 1 for t in texts)
    stats = LMTrainer(lm, lr=1e-3).marginal_step(texts)  # its loss, before its update
    assert stats["speller_bits_per_char"] == pytest.approx(per_char / math.log(2), rel=1e-3)
    with pytest.raises(ConfigError, match="speller_words must be at least 0"):
        validate_config(LMConfig(speller_words=-1.0))


def test_the_speller_learns_the_kept_entries_beside_the_marginal():
    """``speller_entries``: every update draws as many kept entries as the batch has texts (a
    pruned entry never), adds the speller's negative log-likelihood of them spelled whole per
    character at that weight, and only the speller's parameters feel it; 0 adds nothing."""
    lm = direct_lm("bigram", speller_entries=1.0)
    with torch.no_grad():
        lm.lexicon.logits[LEXICON.index("ab")] = PRUNED_LOGIT
    trainer = LMTrainer(lm, lr=1e-3)
    torch.manual_seed(0)
    sample = trainer._entry_sample(200)
    lengths = sample.lengths.tolist()
    drawn = {VOCAB.decode(ids[:n]) for ids, n in zip(sample.ids.tolist(), lengths, strict=True)}
    assert drawn == set(LEXICON) - {"ab"}
    texts = ["abab", "ba", "aab"]
    torch.manual_seed(1)
    entries = trainer._entry_sample(len(texts))
    per_char = -lm.spelled_whole(entries).sum().item() / (entries.lengths + 1).sum().item()
    torch.manual_seed(1)
    stats = trainer.marginal_step(texts)
    assert stats["speller_entry_bits_per_char"] == pytest.approx(per_char / math.log(2), rel=1e-4)
    other = direct_lm("bigram")
    with torch.no_grad():
        other.lexicon.logits[LEXICON.index("ab")] = PRUNED_LOGIT
    plain = LMTrainer(other, lr=1e-3).marginal_step(texts)
    assert "speller_entry_bits_per_char" not in plain
    assert stats["nll"] == pytest.approx(plain["nll"])  # the same marginal, before the updates
    assert torch.equal(lm.lexicon.logits, other.lexicon.logits)  # the lexicon feels nothing more
    moved = [
        not torch.equal(a, b)
        for a, b in zip(lm.speller.parameters(), other.speller.parameters(), strict=True)
    ]
    assert any(moved)  # the speller does
    with pytest.raises(ConfigError, match="speller_entries must be at least 0"):
        validate_config(LMConfig(speller_entries=-1.0))
    # without a pruned lexicon there are no kept entries to learn: an error, not a term left out
    with pytest.raises(
        ConfigError, match="speller_entries learns .* needs lm.lexicon_prune = true"
    ):
        validate_config(LMConfig(speller_entries=1.0, lexicon_prune=False), "lm.")
    validate_config(LMConfig(speller_entries=1.0, lexicon_prune=None))  # resolved later


def test_the_word_lists_teacher_and_evaluator_learn_the_entries_by_default():
    """``LM_DEFAULTS``: ``speller_entries`` is on where the lexicon is pruned (``segrl lm train``
    on a word list, on running text and on text without spaces, the LM evaluator on a word list),
    off elsewhere."""
    from segrl.experiments.lm_train import segmenter_lm
    from segrl.lm.config import SPELLER_ENTRIES, TABLE_OPTIONS, resolve_lm_config, table_lm
    from segrl.lm.models import SAVED_UNSET

    assert SPELLER_ENTRIES > 0
    for text, user, config, on in [
        ("words", "lm-train", segmenter_lm(), True),
        ("text", "lm-train", segmenter_lm(), True),
        ("unspaced", "lm-train", segmenter_lm(), True),
        ("unspaced", "evaluator", table_lm(), True),
        ("words", "evaluator", table_lm(), True),
        ("text", "evaluator", table_lm(), False),
    ]:
        resolved = resolve_lm_config(config, text, user)
        assert resolved.lexicon_prune is on
        assert resolved.speller_entries == (SPELLER_ENTRIES if on else 0.0)
    given = resolve_lm_config(replace(segmenter_lm(), speller_entries=0.0), "words")
    assert given.speller_entries == 0.0
    # a model file saved before an option was resolved reads it as what it meant then
    assert set(SAVED_UNSET) == set(TABLE_OPTIONS) and SAVED_UNSET["speller_entries"] == 0.0


def category_lm():
    lm = tiny(
        "slm", context="none", lexicon=LEXICON, lexicon_logits="direct", speller="bigram",
        categories="prefix-stem-suffix",
    )  # fmt: skip
    lm.config = replace(lm.config, lexicon_prune=True, lexicon_cost=2.0)
    return lm


def test_a_category_lexicon_counts_uses_per_category_and_prunes_an_entry_from_all():
    """``categories`` with a direct lexicon: one row of logits per category; an entry's uses are
    counted in each category apart, its gain is the sum over categories of uses times gain per
    use there, and a pruning takes it from every category."""
    from segrl.lm.lexicon import CategoryDirectLexicon

    lm = category_lm()
    assert isinstance(lm.lexicon, CategoryDirectLexicon)
    assert lm.lexicon.logits.shape == (3, len(LEXICON))
    trainer = LMTrainer(lm, lr=1e-3)
    trainer.marginal_step(["abab", "aba", "bab"])
    counts = trainer.usage.counts
    assert counts.shape == (3, len(LEXICON))
    assert (counts.sum(1) > 0.1).sum() >= 2  # uses in more than one category
    gains = torch.zeros(3, len(LEXICON))
    for entry, share in (("bab", 0.6), ("ba", 0.4), ("ab", 1e3)):  # of its price, in each of two
        i = LEXICON.index(entry)
        price = 2.0 * (len(entry) + 1)
        assert counts[1:, i].min() > 0.05  # used as a stem and as a suffix
        gains[1:, i] = share * price / counts[1:, i]
    trainer.usage.prune(gains, price=2.0)
    kept = trainer.usage.kept()
    # "bab" pays with its uses in both categories (1.2 times its price), "ba" does not (0.8)
    assert kept.tolist() == [entry in ("ab", "bab") for entry in LEXICON]
    assert (lm.lexicon.logits[:, ~kept] == PRUNED_LOGIT).all()
    assert (lm.lexicon.logits[:, kept] > PRUNED_LOGIT / 2).all()
    loss, _ = lm.marginal_loss(lm.encode(["abab"]))
    assert torch.isfinite(loss)


def test_a_category_entrys_gain_is_what_it_gains_in_each_category_alone():
    """With categories an entry's gain per use in category k is the gain of the same entry in an
    slm without categories whose lexicon is category k's row (its gate, logits, terminators): a
    suffix is weighed as a suffix. Read whole, the morphotactics make a lone entry a stem, and an
    entry only the suffix row holds would gain nothing."""
    from segrl.lm.morphotactics import STEM, SUFFIX

    lm = category_lm()
    with torch.no_grad():
        lm.lexicon.logits.copy_(torch.tensor([[0.2, 0.1, -20, -0.3]] * 3))
        lm.lexicon.logits[SUFFIX, LEXICON.index("ba")] = 3.0  # "ba" only as a suffix
        lm.lexicon.gate_bias.copy_(torch.tensor([0.5, 1.0, 2.0]))
        lm.lexicon.terminator_bias.normal_()
    gains = lm.entry_gains(LEXICON)
    assert gains.shape == (3, len(LEXICON))
    for k in range(3):
        plain = tiny(
            "slm", context="none", lexicon=LEXICON, lexicon_logits="direct", speller="bigram"
        )
        plain.config = replace(plain.config, lexicon_prune=True, lexicon_cost=2.0)
        shared = {
            n: v
            for n, v in lm.state_dict().items()
            if not n.startswith(("lexicon.", "transitions."))
        }
        plain.load_state_dict(shared, strict=False)
        with torch.no_grad():
            plain.lexicon.logits.copy_(lm.lexicon.logits[k])
            plain.lexicon.gate_bias.fill_(lm.lexicon.gate_bias[k].item())
            plain.lexicon.terminator_bias.copy_(lm.lexicon.terminator_bias[k])
        assert torch.allclose(gains[k], plain.entry_gains(LEXICON), atol=1e-5), k
    ba = LEXICON.index("ba")
    assert gains[SUFFIX, ba] > 1.0 > abs(gains[STEM, ba].item())


def test_a_category_models_uses_saved_before_they_were_counted_per_category_load_spread():
    """A checkpoint of a category model whose uses were one row (``[M]``, before they were counted
    per category) resumes with each entry's uses spread evenly over its categories."""
    trainer = LMTrainer(category_lm(), lr=1e-3)
    trainer.usage.load_state_dict({"counts": torch.tensor([3.0, 6.0, 0.0, 9.0]), "updates": 2})
    assert trainer.usage.counts.shape == (3, len(LEXICON))
    assert trainer.usage.counts.sum(0).tolist() == [3.0, 6.0, 0.0, 9.0]
    assert trainer.usage.counts[:, 1].tolist() == [2.0, 2.0, 2.0]
    assert trainer.usage.updates == 2
