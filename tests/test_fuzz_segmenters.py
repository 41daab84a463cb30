"""Every segmenter on random Unicode: empty strings, control characters, emoji, lone surrogates, very
long words, characters whose case mapping changes length. A segmenter segments the text it is given
(unknown characters are mapped to the placeholder only inside the model), so its segments always
spell the input."""

from __future__ import annotations

import io
import random
import sys

import pytest

from segrl.baselines.registry import SEGMENTERS, available_methods
from segrl.errors import DataWarning

ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz",
    "äöüßéèçñøåæœ",
    "αβγδεζηθλμπρστ",
    "абвгдежзийклмн",
    "日本語中文한국어",
    "\x00\x01\x07\x1b\x7f\u200b\u200d\ufeff",
    "😀🎉👍🏽🇫🇮",
    "\ud800\udc80\udfff",  # lone surrogates, as a badly decoded file gives them
    "0123456789-_'.,",
]


CASE_CHANGES_LENGTH = [
    c
    for c in map(chr, range(0x110000))
    if (len(c.lower()) != 1 or len(c.upper()) != 1) and c.isprintable()
]
"""Printable characters whose lower or upper case is longer (``İ`` -> ``i̇``, ``ß`` -> ``SS``)."""


def case_changing_words() -> list[str]:
    """Words with each of ``CASE_CHANGES_LENGTH`` at their start, middle and end, and alone."""
    return ["İzmir", "İİ"] + [w for c in CASE_CHANGES_LENGTH for w in (f"{c}ab", f"a{c}b{c}", c)]


def random_words(seed: int = 0, n: int = 300) -> list[str]:
    rng = random.Random(seed)
    words = ["", "a", "\ud800", "😀" * 3]
    for _ in range(n):
        alphabet = "".join(rng.sample(ALPHABETS, rng.randint(1, 3)))
        words.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 25))))
    words += ["x" * 3000, "".join(rng.choice(ALPHABETS[0] + ALPHABETS[6]) for _ in range(2000))]
    return words


@pytest.mark.parametrize("method", available_methods())
def test_classic_segmenters_spell_random_unicode(corpus, method):
    options = {"cache_dir": ""} if method == "morfessor" else {}
    if method in ("bpe", "unigram", "yttm-bpe"):
        options["vocab_size"] = 60
    segmenter = SEGMENTERS[method](**options).train(corpus)
    for word in random_words():
        assert "".join(segmenter.segment(word)) == word, repr(word)


def test_agent_segmenter_spells_random_unicode(corpus):
    from segrl.agents.policies import PolicyConfig, SegmenterPolicy
    from segrl.agents.segmenter import AgentSegmenter, separator_id

    policy = SegmenterPolicy(len(corpus.vocab), 2, 128, PolicyConfig(), separator_id(corpus.vocab))
    segmenter = AgentSegmenter(policy, corpus.vocab, False, "cpu")
    words = [w for w in random_words() if w and len(w) <= 60]
    sentences = [" ".join(words[i : i + 3]) for i in range(0, len(words), 3)]
    # one batch holds the surrogates together with ordinary sentences: neither fails the other
    for sentence, segments in zip(sentences, segmenter.segment_sentences(sentences), strict=True):
        assert "".join(segments) == sentence, repr(sentence)


def test_a_transformer_agent_segments_sentences_longer_than_its_positions(corpus):
    from segrl.agents.policies import PolicyConfig, SegmenterPolicy
    from segrl.agents.segmenter import AgentSegmenter, separator_id
    from segrl.segmentation import split_long

    assert split_long("ab cd ef", 5) == [("ab cd", True), ("ef", False)]
    assert split_long("abcdefgh", 3) == [("abc", False), ("def", False), ("gh", False)]
    assert split_long("ab", None) == [("ab", False)]
    for context in ("word", "text"):
        config = PolicyConfig(kind="transformer", hidden_dim=16, context=context)
        policy = SegmenterPolicy(len(corpus.vocab), 2, 16, config, separator_id(corpus.vocab))
        segmenter = AgentSegmenter(policy, corpus.vocab)
        sentences = ["walked " * 9, "x" * 40, "the " + "y" * 30 + " end", "short"]
        with pytest.warns(DataWarning, match="a Transformer policy reads at most 16 characters"):
            found = segmenter.segment_sentences(sentences)
        for sentence, segments in zip(sentences, found, strict=True):
            assert "".join(segments) == sentence and "" not in segments, repr(sentence)
        # a long sentence is its pieces, segmented on their own, with the spaces between
        pieces = ["the", "y" * 16, "y" * 14, "end"]
        alone = segmenter.segment_sentences(pieces)
        assert found[2] == [*alone[0], " ", *alone[1], *alone[2], " ", *alone[3]]


def test_lm_segmenter_spells_random_unicode(corpus, one_thread):
    from segrl.lm import LMConfig, build_lm
    from segrl.lm.decoding import LMSegmenter

    model = build_lm(LMConfig(model="slm", context="none", hidden_dim=8, char_dim=8, speller_dim=8,
                              max_segment_length=8), corpus.vocab)  # fmt: skip
    words = [w for w in random_words(n=60) if len(w) <= 40]
    for word, segments in zip(words, LMSegmenter(model).segment_words(words), strict=True):
        assert "".join(segments) == word, repr(word)


def test_segment_on_stdin_spells_characters_whose_case_changes_length(
    corpus, tmp_path, monkeypatch, capsys
):
    from segrl.cli import main

    folder = SEGMENTERS["morfessor"](cache_dir="").train(corpus).save(tmp_path / "morfessor")
    words = case_changing_words()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(words).encode())))
    assert main(["segment", "--model", str(folder), "--input-format", "words", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # its output keeps the word as written: "İ" (two characters lower-cased) is never cut apart
    assert lines[0].replace(" ", "") == "İzmir" and lines[0].split(" ")[0] in ("İ", "İzmir")
    for word, line in zip(words, lines, strict=True):
        assert line.replace(" ", "") == word and "  " not in line, (word, line)


def test_agent_sentences_spell_characters_whose_case_changes_length(corpus, tmp_path):
    from segrl import load_segmenter
    from segrl.agents.policies import PolicyConfig, SegmenterPolicy
    from segrl.agents.segmenter import AgentSegmenter, separator_id

    policy = SegmenterPolicy(len(corpus.vocab), 2, 128, PolicyConfig(), separator_id(corpus.vocab))
    agent = AgentSegmenter(policy, corpus.vocab, False, "cpu")
    assert agent.segment_sentences(["", " ", "  "]) == [[], [" "], [" ", " "]]
    segmenter = load_segmenter(agent.save(tmp_path / "agent"))
    words = case_changing_words()
    sentences = ["", " \t "] + [" ".join(words[i : i + 3]) for i in range(0, len(words), 3)]
    found = segmenter.segment_sentences(sentences)
    assert found[:2] == [[], []]
    for sentence, segments in zip(sentences[2:], found[2:], strict=True):
        assert "".join(segments) == sentence and "" not in segments, repr(sentence)
