import pytest

from segrl.segmentation import (
    boundaries_of,
    decisions_of,
    render,
    segments_at,
    segments_from_decisions,
)


def test_boundaries_of_segments():
    assert boundaries_of(["un", "expect", "ed", "ly"]) == {2, 8, 10}
    assert boundaries_of(["word"]) == frozenset()
    assert boundaries_of([]) == frozenset()
    assert boundaries_of(["a", "", "b"]) == {1}


def test_segments_at_inverts_boundaries():
    assert segments_at("unexpectedly", {2, 8, 10}) == ["un", "expect", "ed", "ly"]
    assert segments_at("word", []) == ["word"]
    with pytest.raises(ValueError):
        segments_at("word", [0])
    with pytest.raises(ValueError):
        segments_at("word", [4])


def test_decisions_round_trip():
    segments = ["walk", "ed"]
    assert decisions_of(segments) == [0, 0, 0, 1, 0]
    assert segments_from_decisions("walked", [0, 0, 0, 1, 0]) == segments
    # decisions past the end of the text (padding) are ignored
    assert segments_from_decisions("ab", [1, 1, 1]) == ["a", "b"]
    assert decisions_of(["a"]) == []


def test_render():
    assert render([["the"], ["cat", "s"]]) == "the cat-s"
