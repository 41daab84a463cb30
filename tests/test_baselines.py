import pytest

from segrl.baselines import (
    CharacterSegmenter,
    MorfessorSegmenter,
    Segmenter,
    SentencePieceBPE,
    WordSegmenter,
    available_methods,
    segmenter_class,
)
from segrl.baselines.yttm import yttm_available
from segrl.errors import ConfigError, ModelError

WORDS = ["walked", "jumping", "talks", "kicker", "zëbra", "a"]


def make(method):
    cls = segmenter_class(method)
    if cls is MorfessorSegmenter:
        return cls(cache_dir="")
    if method in ("bpe", "unigram", "yttm-bpe"):
        return cls(vocab_size=60)
    return cls()


@pytest.mark.parametrize("method", available_methods())
def test_segments_spell_the_word_and_survive_save_load(method, corpus, tmp_path):
    segmenter = make(method).train(corpus)
    segmented = segmenter.segment_words(WORDS)
    for word, segments in zip(WORDS, segmented, strict=True):
        assert "".join(segments) == word, (method, segments)
        assert all(segments)
    loaded = Segmenter.load(segmenter.save(tmp_path / method))
    assert type(loaded) is type(segmenter)
    assert loaded.segment_words(WORDS) == segmented


def test_morfessor_finds_the_suffixes(corpus):
    segmenter = MorfessorSegmenter(cache_dir="").train(corpus)
    assert segmenter.segment("walked") == ["walk", "ed"]
    assert segmenter.segment("jumping") == ["jump", "ing"]
    assert segmenter.segment("talks") == ["talk", "s"]


def test_morfessor_max_epochs_stops_training_early(corpus):
    from segrl.config import BaselineConfig
    from segrl.experiments.baseline import segmenter_name

    # uncapped, Morfessor trains at least two epochs; one epoch leaves its cost higher
    capped = MorfessorSegmenter(cache_dir="", max_epochs=1).train(corpus)
    full = MorfessorSegmenter(cache_dir="").train(corpus)
    assert capped.model.get_cost() > full.model.get_cost()
    with pytest.raises(ValueError, match="max_epochs must be at least 1"):
        MorfessorSegmenter(max_epochs=0)
    assert segmenter_name(BaselineConfig(morfessor_max_epochs=3)) == "morfessor-e3"
    assert segmenter_name(BaselineConfig(morfessor_viterbi_smoothing=1)) == "morfessor-vs1"


def test_morfessor_cache_is_reused_and_repaired(corpus, tmp_path):
    first = MorfessorSegmenter(cache_dir=str(tmp_path)).train(corpus)
    assert not first.from_cache
    cached = list(tmp_path.glob("morfessor-*.txt"))
    assert len(cached) == 1
    second = MorfessorSegmenter(cache_dir=str(tmp_path)).train(corpus)
    assert second.from_cache
    assert second.segment_words(WORDS) == first.segment_words(WORDS)
    cached[0].write_text("garbage that is not a segmentation file\n\x00")
    third = MorfessorSegmenter(cache_dir=str(tmp_path)).train(corpus)
    assert third.segment_words(WORDS) == first.segment_words(WORDS)


def test_reading_the_morfessor_cache_closes_its_file(corpus, tmp_path):
    import gc
    import warnings

    MorfessorSegmenter(cache_dir=str(tmp_path)).train(corpus)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert MorfessorSegmenter(cache_dir=str(tmp_path)).train(corpus).from_cache
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_trivial_segmenters(corpus):
    assert CharacterSegmenter().train(corpus).segment("cat") == ["c", "a", "t"]
    assert WordSegmenter().train(corpus).segment("cat") == ["cat"]
    assert WordSegmenter().train(corpus).segment_sentence("the cats") == [["the"], ["cats"]]


def test_errors(corpus, tmp_path):
    with pytest.raises(ModelError, match="not trained"):
        SentencePieceBPE().segment("cat")
    with pytest.raises(ModelError, match="no saved segmenter"):
        Segmenter.load(tmp_path / "nothing")
    with pytest.raises(ConfigError, match="unknown segmenter 'bogus'"):
        segmenter_class("bogus")
    saved = CharacterSegmenter().train(corpus).save(tmp_path / "chars")
    with pytest.raises(ModelError, match="not a bpe one"):
        SentencePieceBPE.load(saved)
    bpe = SentencePieceBPE(vocab_size=60).train(corpus).save(tmp_path / "bpe")
    (bpe / "sentencepiece.model").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="sentencepiece.model: not the file this segmenter was"):
        Segmenter.load(bpe)


def test_save_replaces_atomically(corpus, tmp_path):
    path = tmp_path / "model"
    CharacterSegmenter().train(corpus).save(path)
    WordSegmenter().train(corpus).save(path)
    assert Segmenter.load(path).method == "words"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


@pytest.mark.skipif(not yttm_available(), reason="youtokentome is not installed (optional backend)")
def test_yttm_is_available_as_a_method():
    assert "yttm-bpe" in available_methods()
