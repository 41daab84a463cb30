"""Training checkpoints that resume exactly: model and optimiser state, step, and every RNG's state.

Checkpoints are written atomically (to a temporary file in the same folder, then renamed), so a run
interrupted while saving keeps its previous checkpoint intact.

    save_checkpoint(folder / "last.pt", policy=policy.state_dict(), optimizer=opt.state_dict(), step=step)
    state = load_checkpoint(folder / "last.pt")   # restores the RNG states unless restore_rng=False
"""

from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segrl.errors import ModelError
from segrl.version import __version__

RNG_KEY = "_rng"
VERSION_KEY = "_segrl_version"


def rng_state() -> dict[str, Any]:
    """The state of Python's, NumPy's and PyTorch's (CPU and CUDA) random generators."""
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, **state: Any) -> Path:
    """Save ``state`` (state dicts, counters, configs as dicts) plus the RNG states, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save({**state, RNG_KEY: rng_state(), VERSION_KEY: __version__}, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load_checkpoint(
    path: str | Path, map_location: str | torch.device = "cpu", restore_rng: bool = True
) -> dict[str, Any]:
    """Load a checkpoint written by ``save_checkpoint`` and (by default) restore its RNG states.

    Checkpoints hold NumPy RNG state, so they are loaded with ``weights_only=False``: load only
    checkpoints you wrote yourself.
    """
    path = Path(path)
    if not path.exists():
        raise ModelError(f"{path}: no checkpoint here")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, OSError) as e:
        raise ModelError(f"{path}: damaged or not a segrl checkpoint ({e})") from None
    if not isinstance(state, dict) or RNG_KEY not in state:
        raise ModelError(f"{path}: not a segrl checkpoint")
    if restore_rng:
        set_rng_state(state[RNG_KEY])
    return state
