"""Training checkpoints that resume exactly: model and optimiser state, step, and every RNG's state.

Checkpoints are written atomically (to a temporary file in the same folder, then renamed), so a run
interrupted while saving keeps its previous checkpoint intact.

    save_checkpoint(folder / "last.pt", policy=policy.state_dict(), optimizer=opt.state_dict(), step=step)
    state = load_checkpoint(folder / "last.pt")   # restores the RNG states unless restore_rng=False

Every file segrl reads with torch (checkpoints, unit models, language models, agent policies) is
read by ``load_tensor_file``: ``torch.load(weights_only=True)``, which builds tensors, numbers,
strings and plain containers and nothing else, so that loading a model never runs code from it. A
checkpoint holds only such values: NumPy arrays (the RNG's key, an env's arrays) are stored as
tensors with their dtype and read back as arrays, NumPy scalars as Python numbers. A file that holds
any other pickled object (as the checkpoints and unit models of earlier versions of segrl do,
with NumPy's RNG state pickled; or a hostile file) is refused with a ``ModelError``, never unpickled.
Every such file is written by ``save_tensor_file``, so that a full disk or a read-only folder is an
``OSError`` that says so.
"""

from __future__ import annotations

import os
import pickle
import random
import re
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segrl.errors import ModelError
from segrl.files import naming
from segrl.version import __version__

RNG_KEY = "_rng"
VERSION_KEY = "_segrl_version"
NDARRAY_KEY = "__ndarray__"
"""How a NumPy array is stored: ``{NDARRAY_KEY: tensor or nested list, "dtype": str, "shape": list}``."""

_LEAVES = (type(None), bool, int, float, complex, str, bytes, bytearray, torch.Tensor, torch.Size)
_LEAVES += (torch.dtype, torch.device)
"""What ``torch.load(weights_only=True)`` builds besides dicts, lists, tuples and sets."""
_TENSOR_KINDS = "biufc"  # NumPy kinds a tensor holds exactly: bool, ints, uints, floats, complex


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
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _rebuilt(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """``value`` with ``leaf`` applied to every non-container in it (containers keep their type,
    and are the same objects where nothing inside changed: a state dict keeps its ``_metadata``)."""
    if isinstance(value, dict):
        if NDARRAY_KEY in value:
            return leaf(value)
        items = {k: _rebuilt(v, leaf) for k, v in value.items()}
        if all(items[k] is v for k, v in value.items()):
            return value
        out = type(value)(items)
        if hasattr(value, "_metadata"):
            out._metadata = value._metadata
        return out
    if isinstance(value, list | tuple | set):
        items = [_rebuilt(v, leaf) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if type(value) in (list, tuple, set) else type(value)(*items)
    return leaf(value)


def _storable(value: Any) -> Any:
    """A NumPy array as a dict ``torch.load(weights_only=True)`` reads back, a NumPy scalar as a
    Python number; anything else it cannot read is a ``TypeError`` here, when saving."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in _TENSOR_KINDS:
            native = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("="))
            data: Any = torch.from_numpy(native)
        else:
            data = _rebuilt(value.tolist(), _storable)
        return {NDARRAY_KEY: data, "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, _LEAVES):
        raise TypeError(
            f"a checkpoint holds tensors, NumPy arrays, numbers, strings and containers of them, "
            f"not {type(value).__qualname__}"
        )
    return value


def _restored(value: Any) -> Any:
    """Undo ``_storable``: the dicts that stand for NumPy arrays become arrays again."""
    if isinstance(value, dict) and NDARRAY_KEY in value:
        data = value[NDARRAY_KEY]
        if isinstance(data, torch.Tensor):
            array = data.cpu().numpy()
        else:
            array = np.array(data, dtype=value["dtype"])
        return array.astype(value["dtype"], copy=False).reshape(value["shape"])
    return value


def load_tensor_file(
    path: str | Path, map_location: str | torch.device | None = "cpu", what: str = "segrl file"
) -> Any:
    """``torch.load(path, weights_only=True)``: tensors, numbers, strings and containers of them,
    never code. A missing, damaged or foreign file, or one that holds other pickled objects, is a
    one-line ``ModelError`` naming the file (``what`` says what it should have been)."""
    path = Path(path)
    try:
        with warnings.catch_warnings():  # torch warns about foreign pickle protocols: refused below
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file; expected a {what}") from None
    except pickle.UnpicklingError as e:
        found = pickled_objects(e)
        if found:
            raise ModelError(
                f"{path}: {found}; if an earlier segrl wrote it, train it again with this one"
            ) from None
        raise ModelError(f"{path}: damaged or not a {what} ({first_line(e)})") from None
    except Exception as e:  # bytes from anywhere: torch's reader fails in many ways
        if path.is_file() and path.stat().st_size == 0:
            raise ModelError(f"{path}: an empty file, not a {what}") from None
        raise ModelError(f"{path}: damaged or not a {what} ({first_line(e)})") from None


def pickled_objects(error: Exception) -> str | None:
    """What a weights-only load that refused a pickled Python object says of the file (naming the
    object, e.g. ``posix.system``), or None where ``error`` is no such refusal."""
    found = re.search(r"GLOBAL ([\w.]+)", str(error))
    if not isinstance(error, pickle.UnpicklingError) or not found:
        return None
    return (
        f"holds pickled Python objects ({found.group(1)}), which segrl never loads "
        "(unpickling can run code)"
    )


def first_line(error: Exception) -> str:
    """The gist of one of torch's (often many-line) errors, without its advice to load unsafely."""
    text = str(error).split("WeightsUnpickler error:")[-1]  # torch's advice to load it unsafely: no
    advice = ("Weights only load failed", "Check the")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(advice)]
    return lines[0].split(". ")[0] if lines else type(error).__name__


def load_weights(module: torch.nn.Module, state: Any, path: Path, fits: str) -> None:
    """``module.load_state_dict(state)``, or a one-line ``ModelError`` naming ``path`` and what does
    not fit (``fits``: what the module was built from, e.g. ``"its config.toml"``)."""
    if not isinstance(state, Mapping):
        raise ModelError(f"{path}: holds a {type(state).__name__}, not a model's weights")
    expected = module.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    reshaped = [
        f"{k} is {list(state[k].shape)}, not {list(expected[k].shape)}"
        for k in expected
        if isinstance(state.get(k), torch.Tensor) and state[k].shape != expected[k].shape
    ]
    problems = [f"{len(missing)} missing, as {missing[0]}"] if missing else []
    problems += [f"{len(unexpected)} unexpected, as {unexpected[0]}"] if unexpected else []
    problems += reshaped[:1]
    if problems:
        raise ModelError(f"{path}: weights that do not fit {fits} ({'; '.join(problems)})")
    try:
        module.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as e:
        raise ModelError(f"{path}: weights that do not fit {fits} ({first_line(e)})") from None


def save_tensor_file(value: Any, path: str | Path) -> None:
    """``torch.save(value)`` into the file ``path``, opened here: a write that fails (a full disk, a
    read-only folder) raises an ``OSError`` naming ``path``, with its ``errno`` (given the name,
    torch's writer would raise a ``RuntimeError`` that does not say why)."""
    with naming(path), open(path, "wb") as file:
        torch.save(value, file)


def save_checkpoint(path: str | Path, **state: Any) -> Path:
    """Save ``state`` (state dicts, counters, configs as dicts) plus the RNG states, atomically: a
    write that fails raises as ``save_tensor_file`` does and leaves ``path`` as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        saved = {**state, RNG_KEY: rng_state(), VERSION_KEY: __version__}
        save_tensor_file(_rebuilt(saved, _storable), tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def load_checkpoint(
    path: str | Path, map_location: str | torch.device = "cpu", restore_rng: bool = True
) -> dict[str, Any]:
    """Load a checkpoint written by ``save_checkpoint`` (its NumPy arrays as arrays again) and, by
    default, restore its RNG states. Nothing in the file is run (``load_tensor_file``)."""
    path = Path(path)
    if not path.exists():
        raise ModelError(f"{path}: no checkpoint here")
    state = load_tensor_file(path, map_location, what="segrl checkpoint")
    if not isinstance(state, dict) or RNG_KEY not in state:
        raise ModelError(f"{path}: not a segrl checkpoint")
    state = _rebuilt(state, _restored)
    if restore_rng:
        set_rng_state(state[RNG_KEY])
    return state
