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


def autocast(device: torch.device, precision: str = "fp32"):
    """The autocast context for ``precision`` (``fp32``: none; ``bf16``/``fp16``: mixed precision on
    ``device``'s type, CPU included)."""
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision not in dtypes:
        raise ConfigError(f"unknown precision {precision!r}: use fp32, bf16 or fp16")
    return torch.autocast(device_type=device.type, dtype=dtypes[precision])


def set_threads(threads: int | None, option: str = "--threads") -> None:
    """Use ``threads`` CPU threads in PyTorch (None: PyTorch's default); anything below 1 is a
    ``ConfigError`` (``segrl.config.check_threads``)."""
    check_threads(threads, option)
    if threads is not None:
        torch.set_num_threads(threads)


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
