"""A trained unit model on disk: a folder with ``model.pt`` (weights), ``config.toml`` (the run's full
config, resolved: every option as it trained), ``requested.toml`` (its config as asked: what
``load_unit_model`` gives back, to evaluate or fine-tune it with elsewhere) and ``vocab.json`` (the
character vocabulary). ``segrl units eval FOLDER`` reads it back.

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
REQUESTED_FILE = "requested.toml"
VOCAB_FILE = "vocab.json"


def build_model(config: UnitsConfig, vocab_size: int) -> UnitModel:
    """An untrained model of ``config.model`` with ``config.arch``."""
    return model_class(config.model)(config.arch, vocab_size)


def save_unit_model(
    folder: str | Path,
    model: UnitModel,
    vocab: CharVocab,
    config: UnitsConfig,
    requested: UnitsConfig | None = None,
) -> Path:
    """Write the model folder (the weights file last and atomically, so a folder with ``model.pt``
    is complete); ``requested``, the config as asked where ``config`` is its resolution, beside it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_config(config, folder / CONFIG_FILE)
    if requested is not None:
        save_config(requested, folder / REQUESTED_FILE)
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


def model_config_file(folder: Path) -> Path:
    """The config a model folder is read with: its config as asked (``requested.toml``: portable,
    its device and threads as asked), else ``config.toml`` (folders saved before the run saved it)."""
    requested = folder / REQUESTED_FILE
    return requested if requested.exists() else folder / CONFIG_FILE


def load_unit_model(
    folder: str | Path, device: torch.device | str = "cpu"
) -> tuple[UnitModel, CharVocab, UnitsConfig]:
    """Read a folder written by ``save_unit_model``; the model is in eval mode on ``device``, the
    config the one asked for where the folder has it (``requested.toml``), else ``config.toml``."""
    folder = Path(folder)
    check_model_folder(folder)
    config_file = model_config_file(folder)
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
