"""Segmental language models by name; saving and loading them with their vocabulary.

A saved model is a folder: ``model.pt`` (weights, config, lexicon) and ``vocab.json`` (the
``CharVocab``). Saving is atomic: a save interrupted half-way leaves any earlier model intact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from segrl.checkpoint import load_tensor_file, load_weights, save_tensor_file
from segrl.config import NO_LIMIT, unset_options, validate_config
from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError, ModelError
from segrl.files import atomic_folder
from segrl.lm.base import SegmentLM
from segrl.lm.config import LMConfig
from segrl.lm.lexicon import entry_pairs, seed_lexicon, set_lexicon_prior, slm_lexicon_counts
from segrl.lm.segment_lstm import SegmentLSTM
from segrl.lm.slm import SLM

MODEL_FILE = "model.pt"
VOCAB_FILE = "vocab.json"
FORMAT = 1
SAVED_UNSET = {
    "context": "none",
    "max_segment_length": NO_LIMIT,
    "lexicon_size": 0,
    "lexicon_cost": 0.0,
    "lexicon_logits": "projected",
    "length_penalty": 0.0,
    "speller": "lstm",
    "lexicon_prune": False,
    "speller_entries": 0.0,
    "lexicon_init": "uniform",
}
"""What an option left None in a model file saved before configs were resolved meant to the model
(``build_lm`` then took unset options; ``load_lm`` reads them so)."""


def build_lm(config: LMConfig, vocab: CharVocab, lexicon: Sequence[str] | None = None) -> SegmentLM:
    """A new model of the kind ``config.model`` names, with ``lexicon``'s entries mixed with its
    speller (``segrl.lm.lexicon``; slm: only without context). ``config`` is resolved: an option
    left unset (None) is a ``ConfigError`` (``segrl.lm.config.resolve_lm_config`` gives each its
    value for who uses the model on what text)."""
    validate_config(config)
    unset = unset_options(config)
    if unset:
        raise ConfigError(
            f"a language model is built from a resolved config; {', '.join(unset)} unset (None): "
            "resolve it first (segrl.lm.config.resolve_lm_config)"
        )
    if config.model == "slm":
        if lexicon and config.context != "none":
            raise ConfigError(
                "slm's lexicon needs context = 'none' (one lexicon softmax for every segment)"
            )
        return SLM(vocab, config, lexicon)
    return SegmentLSTM(vocab, config, lexicon)


def build_word_lm(config: LMConfig, vocab: CharVocab, words: Iterable[str]) -> SegmentLM:
    """``build_lm`` for a model trained on ``words`` (its training word types): its lexicon, where
    ``config`` has one, is their ``slm_lexicon``, started as ``config.lexicon_init`` says
    (``seed_lexicon``) and given its prior (``set_lexicon_prior``), its substrings counted once for
    all."""
    words = list(words)
    held = slm_lexicon_counts(config, words)
    model = build_lm(config, vocab, None if held is None else list(held))
    seed_lexicon(model, held or {})
    set_lexicon_prior(model, held or {})
    pairs = getattr(getattr(model, "lexicon", None), "pairs", None)
    if pairs is not None:  # the entries found next to each other in the most words
        keys, counts = entry_pairs(words, model.lexicon.entries, config.lexicon_pairs)
        pairs.set_pairs(keys, counts if config.lexicon_init == "counts" else None)
    return model


def lexicon_of(model: SegmentLM) -> list[str]:
    lexicon = getattr(model, "lexicon", None)
    return list(lexicon.entries) if lexicon is not None else []


def save_lm(model: SegmentLM, path: str | Path) -> Path:
    """Save ``model`` to the folder ``path`` (replaced atomically if it exists)."""
    path = Path(path)
    with atomic_folder(path) as tmp:
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        saved = {
            "format": FORMAT,
            "config": dataclasses.asdict(model.config),
            "lexicon": lexicon_of(model),
            "state": state,
        }
        save_tensor_file(saved, tmp / MODEL_FILE)
        model.vocab.save(tmp / VOCAB_FILE)
    return path


def load_lm(path: str | Path, device: str | torch.device = "cpu") -> SegmentLM:
    """Load a model saved by ``save_lm`` onto ``device``."""
    path = Path(path)
    if not (path / MODEL_FILE).exists():
        raise ModelError(f"{path}: no saved language model here ({MODEL_FILE} missing)")
    vocab = CharVocab.load(path / VOCAB_FILE)
    saved = load_tensor_file(path / MODEL_FILE, what="segrl language model")
    if isinstance(saved, dict) and "model_name" in saved and "config" not in saved:
        raise ModelError(
            f"{path}: a unit model's {MODEL_FILE} without the config.toml saved beside it; give "
            "the whole folder `segrl units train` wrote"
        )
    try:
        options = saved["config"]
        config = LMConfig(**{k: SAVED_UNSET.get(k) if v is None else v for k, v in options.items()})
        model = build_lm(config, vocab, saved["lexicon"] or None)
        state = saved["state"]
    except (RuntimeError, KeyError, TypeError, ValueError, IndexError) as e:
        raise ModelError(
            f"{path / MODEL_FILE}: damaged or not a segrl language model ({e})"
        ) from None
    load_weights(model, state, path / MODEL_FILE, "its saved config")
    return model.to(device)
