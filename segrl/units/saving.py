"""A trained unit model on disk: a folder with ``model.pt`` (weights), ``config.toml`` (the run's full
config) and ``vocab.json`` (the character vocabulary). ``segrl units eval FOLDER`` reads it back.

    folder = save_unit_model("runs/units/nvib", model, vocab, config)
    model, vocab, config = load_unit_model(folder, device="cpu")
"""

from __future__ import annotations

from pathlib import Path

import torch

from segrl.checkpoint import load_checkpoint, load_weights, save_checkpoint
from segrl.config import save_config
from segrl.data.vocab import CharVocab
from segrl.errors import ModelError
from segrl.units.base import UnitModel
from segrl.units.config import UnitsConfig, build_units_config
from segrl.units.registry import model_class

MODEL_FILE = "model.pt"
CONFIG_FILE = "config.toml"
VOCAB_FILE = "vocab.json"


def build_model(config: UnitsConfig, vocab_size: int) -> UnitModel:
    """An untrained model of ``config.model`` with ``config.arch``."""
    return model_class(config.model)(config.arch, vocab_size)


def save_unit_model(
    folder: str | Path, model: UnitModel, vocab: CharVocab, config: UnitsConfig
) -> Path:
    """Write the model folder (the weights file last and atomically, so a folder with ``model.pt``
    is complete)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_config(config, folder / CONFIG_FILE)
    vocab.save(folder / VOCAB_FILE)
    save_checkpoint(folder / MODEL_FILE, model=model.state_dict(), model_name=config.model)
    return folder


def check_model_folder(folder: Path) -> None:
    """A ``ModelError`` unless ``folder`` holds a finished model."""
    if not (folder / MODEL_FILE).exists():
        raise ModelError(
            f"{folder}: no {MODEL_FILE} here; give the folder a finished `segrl units train` wrote "
            "(an interrupted run resumes with the same command)"
        )


def load_unit_model(
    folder: str | Path, device: torch.device | str = "cpu"
) -> tuple[UnitModel, CharVocab, UnitsConfig]:
    """Read a folder written by ``save_unit_model``; the model is in eval mode on ``device``."""
    folder = Path(folder)
    check_model_folder(folder)
    config_file = folder / CONFIG_FILE
    config = build_units_config(path=config_file)
    vocab = CharVocab.load(folder / VOCAB_FILE)
    state = load_checkpoint(folder / MODEL_FILE, map_location=device, restore_rng=False)
    if state.get("model_name") != config.model:
        raise ModelError(
            f"{folder}: weights of model {state.get('model_name')!r} but config of {config.model!r}"
        )
    try:
        model = build_model(config, len(vocab))
    except (ValueError, RuntimeError, ZeroDivisionError) as e:  # sizes edited by hand
        raise ModelError(
            f"{config_file}: options that build no {config.model} model ({e})"
        ) from None
    load_weights(model, state["model"], folder / MODEL_FILE, f"its {CONFIG_FILE}")
    return model.to(device).eval(), vocab, config
