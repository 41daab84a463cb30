"""Long input: every kind of segmenter takes words and sentences far longer than any it was trained
on, in memory that grows linearly with their length, and says so in one warning line where it
segments them in pieces."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import warnings

import pytest
import torch

from segrl.errors import DataWarning
from tests.conftest import CHECKOUT

pytestmark = pytest.mark.usefixtures("one_thread")


def trained_slm(corpus, steps: int = 30, **options):
    """An ``slm`` as ``segrl lm train`` builds it on a word list (its defaults, small sizes),
    trained for a few updates on the corpus's word types."""
    from segrl.lm import build_lm
    from segrl.lm.config import resolve_lm_config, table_lm
    from segrl.lm.lexicon import slm_lexicon
    from segrl.lm.training import LMTrainer

    torch.manual_seed(0)
    sizes = {"char_dim": 8, "hidden_dim": 16, "speller_dim": 16}
    config = resolve_lm_config(table_lm(**{**sizes, **options}), "words")
    model = build_lm(config, corpus.vocab, slm_lexicon(config, corpus.word_counts("train")))
    words = sorted(corpus.word_counts("train"))
    trainer = LMTrainer(model, 2e-2, 1.0, 0.0, corpus=words)
    for step in range(steps):
        trainer.marginal_step(words[step % 4 :: 4])
    return model.eval()


SLM_KINDS = {
    "default": {},
    "lstm speller": {"speller": "lstm", "lexicon_size": 0},
    "context": {"context": "lstm", "speller": "lstm"},
}
"""An ``slm`` as ``segrl lm train`` trains it on a word list, one whose speller is an LSTM, and one
whose segments are conditioned on the characters before them."""


def letters(rng: random.Random, n: int, alphabet: str = "walkedtsinguph") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


@pytest.mark.parametrize("kind", SLM_KINDS)
def test_slm_segments_ordinary_words_as_without_a_limit(corpus, kind):
    from segrl.lm.decoding import LMSegmenter
    from segrl.lm.slm import DECODING_MAX_SEGMENT_LENGTH

    model = trained_slm(corpus, **SLM_KINDS[kind])
    rng = random.Random(0)
    words = sorted(corpus.word_counts("train")) + [""]
    words += [letters(rng, rng.randint(10, DECODING_MAX_SEGMENT_LENGTH)) for _ in range(40)]
    for decoding in ("viterbi", "posterior"):
        found = LMSegmenter(model, decoding=decoding).segment_words(words)
        unbounded = LMSegmenter(model, decoding=decoding, longest=None).segment_words(words)
        assert found == unbounded
        assert {len(segments) for segments in found} > {0, 1}  # not all whole: a real check
    # a word longer than the limit: Viterbi's segments have at most that many characters (the
    # posterior decoding's are where the posteriors put them)
    long = letters(rng, 3 * DECODING_MAX_SEGMENT_LENGTH)
    (segments,) = LMSegmenter(model).segment_words([long])
    assert "".join(segments) == long and max(map(len, segments)) <= DECODING_MAX_SEGMENT_LENGTH
    assert "".join(LMSegmenter(model, decoding="posterior").segment_words([long])[0]) == long


@pytest.mark.parametrize("kind", SLM_KINDS)
def test_slm_spans_scored_in_passes_are_the_spans_scored_at_once(corpus, kind):
    model = trained_slm(corpus, steps=2, **SLM_KINDS[kind])
    chars = model.encode(["walked", "jumping", "x", "talkers" * 3])
    with torch.no_grad():
        whole = model.span_table(chars)  # [B, L, R + 1]
        for per_pass in (1, 10, 100):  # the same spans (an LSTM's products may round otherwise)
            table = model.span_table(chars, per_pass=per_pass)
            assert torch.equal(torch.isfinite(table), torch.isfinite(whole))
            assert torch.allclose(table, whole, atol=1e-5)
        # segments of at most 4 characters: the longer ones impossible, the others as they were
        bounded = model.span_table(chars, longest=4, per_pass=10)
    assert bounded.shape[2] == 5
    assert torch.allclose(bounded, torch.where(torch.isfinite(bounded), whole[:, :, :5], bounded))
    assert torch.isfinite(whole[:, :, 5:]).any() and torch.isfinite(bounded).sum() > 0
    assert torch.equal(torch.isfinite(bounded), torch.isfinite(whole[:, :, :5]))


def test_slm_batches_hold_a_bounded_number_of_spans(corpus):
    from segrl.lm.decoding import LMSegmenter
    from segrl.lm.slm import DECODING_MAX_SEGMENT_LENGTH, SPANS_PER_PASS

    segmenter = LMSegmenter(trained_slm(corpus, steps=0))
    long = SPANS_PER_PASS // (DECODING_MAX_SEGMENT_LENGTH + 1)  # one fills a batch
    words = ["a" * long] * 3 + ["ab"] * 300 + ["", "a" * (long // 3)] * 2 + ["abc"] * 2
    batches = list(segmenter._batches(words))
    sizes = [len(batch) for batch in batches]
    # shortest first, empty words left out; words of up to 64 characters in batches of 256 as
    # before, longer ones by their spans
    assert sizes == [256, 46, 2, 1, 1, 1]
    assert sorted(i for b in batches for i in b) == [i for i, w in enumerate(words) if w]
    assert [len(words[i]) for i in batches[2]] == [long // 3] * 2


def test_a_loaded_agents_teacher_reads_ordinary_texts_as_in_training(corpus, tmp_path):
    from segrl.agents.policies import PolicyConfig, SegmenterPolicy
    from segrl.agents.segmenter import AgentSegmenter, separator_id
    from segrl.evaluators import encode_segmentation_batch
    from segrl.evaluators.lm import PosteriorTeacher

    lm = trained_slm(corpus, steps=5, speller="lstm", lexicon_size=0)
    teacher = PosteriorTeacher(lm, False, 1e-6)  # as the LM evaluator trains it: unbounded
    policy = SegmenterPolicy(
        len(corpus.vocab), 2, 128, PolicyConfig(hidden_dim=16), separator_id(corpus.vocab), True
    )
    folder = AgentSegmenter(policy, corpus.vocab, teacher=teacher).save(tmp_path / "agent")
    loaded = AgentSegmenter.load(folder).teacher
    ordinary = encode_segmentation_batch(corpus.vocab, corpus.test)
    assert (loaded.log_odds(ordinary) == teacher.log_odds(ordinary)).all()  # to the bit
    long = encode_segmentation_batch(corpus.vocab, ["the " + "walked" * 50 + " home"])
    log_odds = loaded.log_odds(long)
    assert log_odds.shape == (1, long.positions) and (log_odds != 0).any()


def run_capped(
    code: str, cap_gb: float, stdin: str = "", *args: str
) -> subprocess.CompletedProcess:
    """``code`` run by a Python whose address space is capped at ``cap_gb`` GiB (beyond it an
    allocation fails: a MemoryError, or a message, where the kernel would kill the process)."""
    limit = int(cap_gb * 2**30)
    capped = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n" + code
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", capped, *args], input=stdin, capture_output=True, text=True, env=env
    )


SEGMENT = "import sys; from segrl.cli import main; sys.exit(main(sys.argv[1:]))"
"""``segrl`` itself (``run_capped(SEGMENT, cap, stdin, "segment", ...)``)."""


@pytest.mark.slow
def test_slm_segments_a_5000_letter_word_in_bounded_memory(corpus, tmp_path):
    """Without a bound on its segments, ``slm`` scored every substring of a word: a 5,000-letter
    word needed more than 6 GB. Now it takes the word within a 2 GiB address space (the
    interpreter with PyTorch takes about 1 GiB of it)."""
    from segrl.lm import save_lm

    folder = save_lm(trained_slm(corpus, steps=2), tmp_path / "slm")
    word = "abcdefghij" * 500
    done = run_capped(SEGMENT, 2.0, word + "\n", "segment", "--quiet", "--model", str(folder))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.replace(" ", "").strip() == word
    assert max(map(len, done.stdout.split())) <= 64


def tiny_units_model(corpus, folder, model: str = "transformer", max_len: int = 16):
    """An untrained unit model of ``max_len`` positions, saved in ``folder``."""
    from segrl.units.config import build_units_config
    from segrl.units.saving import build_model, save_unit_model

    overrides = {"arch.dim": 16, "arch.max_len": max_len}
    if model != "seqreduce":
        overrides |= {"arch.feed_forward": 16, "arch.decoder_layers": 1}
    config = build_units_config(model, None, overrides)
    torch.manual_seed(0)
    return save_unit_model(folder, build_model(config, len(corpus.vocab)), corpus.vocab, config)


def test_a_unit_model_segments_texts_longer_than_its_positions_in_pieces(corpus, tmp_path):
    from segrl import load_segmenter

    segmenter = load_segmenter(tiny_units_model(corpus, tmp_path / "units"))
    sentence = "the " + "y" * 30 + " walked home"
    with pytest.warns(DataWarning, match=r"units: a unit model reads at most 16 characters"):
        found = segmenter.segment_sentences([sentence, "short"])
        words = segmenter.segment_words(["x" * 40, "ab"])
    assert "".join(found[0]) == sentence and "" not in found[0]
    # the long sentence is its pieces, segmented on their own, with the spaces between
    pieces = segmenter.segment_sentences(["the", "y" * 16, "y" * 14, "walked home"])
    assert found[0] == [*pieces[0], " ", *pieces[1], *pieces[2], " ", *pieces[3]]
    assert (
        words[0]
        == segmenter.segment_words(["x" * 16])[0] * 2 + segmenter.segment_words(["x" * 8])[0]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing cut, no warning
        assert segmenter.segment_words(["x" * 16]) and segmenter.segment_sentences(["a b"])


def test_long_lines_to_a_unit_model_give_one_warning_line_in_segment_and_evaluate(
    corpus, tmp_path, monkeypatch, capsys
):
    from segrl.cli import main

    folder = str(tiny_units_model(corpus, tmp_path / "units"))
    words = ["walked" * 10, "a", "talking" * 9]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(words).encode())))
    assert main(["segment", "--quiet", "--model", folder, "--input-format", "words"]) == 0
    out, err = capsys.readouterr()
    assert [line.replace(" ", "") for line in out.splitlines()] == words
    assert err.count("segrl: warning:") == 1 and "at most 16 characters" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    text = " ".join(["walked"] * 30)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["segment", "--quiet", "--model", folder, "--input-format", "text"]) == 0
    out, err = capsys.readouterr()
    assert out.split("\t")[0] == text and err.count("segrl: warning:") <= 1
    gold = tmp_path / "gold.tsv"
    gold.write_text(f"{'a' * 268}\t{'a' * 268}\t000\nwalked\twalk @@ed\t010\n", encoding="utf-8")
    assert main(["evaluate", "--model", folder, "--gold", str(gold)]) == 0
    out, err = capsys.readouterr()
    assert "(2 words)" in out and "Traceback" not in err


def test_flatcat_segments_a_word_longer_than_its_limit_in_pieces(corpus):
    from segrl.baselines.flatcat import LONGEST_WORD, FlatCatSegmenter

    segmenter = FlatCatSegmenter(cache_dir="").train(corpus)
    word = ("walkingtalkedjumps" * 40)[: 2 * LONGEST_WORD + 30]
    with pytest.warns(DataWarning, match="FlatCat reads at most 256 characters"):
        found = segmenter.segment(word)
    cuts = [word[:LONGEST_WORD], word[LONGEST_WORD : 2 * LONGEST_WORD], word[2 * LONGEST_WORD :]]
    assert found == [segment for piece in cuts for segment in segmenter.segment(piece)]
    assert len(found) > 3  # the pieces are segmented, not only cut


FUZZ_LENGTHS = (1, 7, 60, 300, 2_000, 10_000)
FUZZ_CAP_GB = 2.5
"""The address space the fuzz's segmenters run in (``docs/segmenting.md`` states it): the
interpreter with PyTorch takes about 1 GiB of it."""
FUZZ = """
import json, random, sys, warnings
import torch
from segrl import load_segmenter
ALPHABETS = ["abcdefghijklmnopqrstuvwxyz", "äöüßéèçñøåæœ", "αβγδεζηθλμπρστ", "日本語中文한국어", "😀🎉👍🏽🇫🇮"]
torch.set_num_threads(1)
warnings.simplefilter("ignore")
rng = random.Random(0)
report = {}
for name, folder in json.loads(sys.argv[1]).items():
    segmenter = load_segmenter(folder)
    problems = []
    for n in json.loads(sys.argv[2]):
        alphabet = "".join(rng.sample(ALPHABETS[:5], 2))
        word = "".join(rng.choice(alphabet) for _ in range(n))
        sentence = " ".join(word[i : i + rng.randint(1, 12)] for i in range(0, n, 12))
        (segments,) = segmenter.segment_words([word])
        (in_sentence,) = segmenter.segment_sentences([sentence])
        if "".join(segments) != word or "" in segments:
            problems.append(f"word of {n}")
        if "".join(in_sentence) != " ".join(sentence.split()) or "" in in_sentence:
            problems.append(f"sentence of {n}")
    report[name] = problems
    print(name, "done", file=sys.stderr, flush=True)
print(json.dumps(report))
"""


@pytest.mark.slow
def test_every_kind_of_segmenter_takes_words_of_10000_characters_in_bounded_memory(
    corpus, tmp_path
):
    from segrl.agents.policies import PolicyConfig, SegmenterPolicy
    from segrl.agents.segmenter import AgentSegmenter, separator_id
    from segrl.baselines.registry import SEGMENTERS, available_methods
    from segrl.evaluators.lm import PosteriorTeacher
    from segrl.lm import save_lm
    from segrl.units.registry import available_models

    folders = {}
    for method in available_methods():
        options = {"cache_dir": ""} if method in ("morfessor", "flatcat") else {}
        if method in ("bpe", "unigram", "yttm-bpe"):
            options["vocab_size"] = 60
        segmenter = SEGMENTERS[method](**options).train(corpus)
        folders[method] = str(segmenter.save(tmp_path / method))
    teacher = PosteriorTeacher(
        trained_slm(corpus, steps=2, speller="lstm", lexicon_size=0), False, 1e-6
    )
    for kind, reads_teacher in (("bilstm", False), ("transformer", False), ("bilstm", True)):
        config = PolicyConfig(kind=kind, hidden_dim=16)
        policy = SegmenterPolicy(
            len(corpus.vocab), 2, 128, config, separator_id(corpus.vocab), reads_teacher
        )
        agent = AgentSegmenter(policy, corpus.vocab, teacher=teacher)
        name = f"agent {kind}" + (" reading its teacher" if reads_teacher else "")
        folders[name] = str(agent.save(tmp_path / name.replace(" ", "-")))
    for kind, options in SLM_KINDS.items():
        model = trained_slm(corpus, steps=2, **options)
        folders[f"slm {kind}"] = str(save_lm(model, tmp_path / f"slm-{kind}"))
    for model in available_models():
        folder = tiny_units_model(corpus, tmp_path / model, model, max_len=256)
        folders[f"units {model}"] = str(folder)
    done = run_capped(FUZZ, FUZZ_CAP_GB, "", json.dumps(folders), json.dumps(list(FUZZ_LENGTHS)))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert set(report) == set(folders)
    assert {name: problems for name, problems in report.items() if problems} == {}
