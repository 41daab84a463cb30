"""Devices and seeds for the PyTorch parts of segrl."""

from __future__ import annotations

import contextlib
import random

import numpy as np
import torch

from segrl.config import check_threads
from segrl.errors import ConfigError


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` is CUDA when available, else CPU; asking for CUDA without one is a ``ConfigError``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device {name!r} asked for, but this machine has no CUDA GPU; use --device cpu"
        )
    return device


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and PyTorch (all devices): the same seed gives the same result on CPU."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def mixed_precision(device: torch.device, precision: str = "fp32") -> bool:
    """Whether ``precision`` means mixed precision on ``device``: ``bf16``/``fp16`` on CUDA only (on
    a CPU they would be slower than fp32, so a GPU config run there, as in the tests, runs in fp32)."""
    if precision not in ("fp32", "bf16", "fp16"):
        raise ConfigError(f"unknown precision {precision!r}: use fp32, bf16 or fp16")
    return precision != "fp32" and device.type == "cuda"


def autocast(device: torch.device, precision: str = "fp32"):
    """The autocast context for ``precision`` on ``device`` (none for fp32, and on a CPU)."""
    if not mixed_precision(device, precision):
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def set_threads(threads: int | None, option: str = "--threads") -> None:
    """A job's CPU settings: ``threads`` CPU threads in PyTorch (None: PyTorch's default; anything
    below 1 is a ``ConfigError``, ``segrl.config.check_threads``), and denormal floats flushed to
    zero. A trained segmental LM's lexicon drives some probabilities below float32's normal range,
    where the CPU computes slowly: flushed, Czech's first 400 updates took 26 s instead of 68 s on
    one thread, to the same model (held-out bits per character equal to four decimals;
    docs/studies/2026-11-26-teacher.md)."""
    check_threads(threads, option)
    if threads is not None:
        torch.set_num_threads(threads)
    torch.set_flush_denormal(True)


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module):
    """``model`` in eval mode (no dropout), without gradients, inside the block; its mode as it was
    afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)
