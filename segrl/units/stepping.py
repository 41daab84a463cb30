"""One training update of a unit model: what ``segrl units train`` repeats and
``bench/units_throughput.py`` times, without MLflow or a run folder.

``UnitTrainer`` holds the optimizer, the learning-rate schedule and the gradient scaler of
``train`` (a ``UnitsTrainConfig``):

- ``batch(texts, step)`` makes the batch of ``texts`` with the deletion noise of ``step`` and
  starts its copy to the device (pinned memory, no wait);
- ``update(batch, progress)`` makes the update and returns its ``LossOutput`` without waiting for the
  device, so the caller can make the next batch on the CPU while the device computes;
- ``values(out)`` reads the update's numbers back in one transfer (the one wait of a step) and
  raises ``ModelError`` when the loss is not finite.

On a GPU, fp32 matrix products use TensorFloat-32 during an update when ``train.tf32`` is on (the
NVIB layers keep their parameters, sampling and attention logits in fp32 under bf16 autocast).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from segrl.data.vocab import CharVocab
from segrl.errors import ModelError
from segrl.runtime import autocast, mixed_precision
from segrl.units.base import AutoencoderBatch, LossOutput, UnitModel, make_autoencoder_batch
from segrl.units.config import UnitsTrainConfig
from segrl.units.noise import delete_characters


def make_optimizer(model: torch.nn.Module, train: UnitsTrainConfig) -> torch.optim.Optimizer:
    cls = {"radam": torch.optim.RAdam, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    return cls[train.optimizer](model.parameters(), lr=train.lr, weight_decay=train.weight_decay)


def lr_factor(step: int, train: UnitsTrainConfig) -> float:
    """Learning-rate multiplier at ``step``: linear warm-up, then constant or a cosine cool-down to 0
    at the last step."""
    if step < train.warmup_steps:
        return (step + 1) / train.warmup_steps
    if train.schedule == "constant":
        return 1.0
    span = max(train.steps - train.warmup_steps, 1)
    return 0.5 * (1.0 + math.cos(math.pi * min(step - train.warmup_steps, span) / span))


def noised(texts: Sequence[str], prob: float, seed: int, step: int) -> list[str]:
    """``texts`` with deletion noise drawn from (seed, step)."""
    rng = random.Random(f"noise:{seed}:{step}")
    return [delete_characters(t, prob, rng) for t in texts]


@contextlib.contextmanager
def matmul_tf32(device: torch.device, enabled: bool) -> Iterator[None]:
    """fp32 matrix products in TensorFloat-32 inside the block on a CUDA device where ``enabled``;
    the setting as it was afterwards. Nothing changes on a CPU."""
    if device.type != "cuda":
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


class UnitTrainer:
    """The optimizer, schedule and gradient scaler of a unit model's training (see the module
    docstring); ``state_dict``/``load_state_dict`` carry them through a checkpoint."""

    def __init__(
        self,
        model: UnitModel,
        vocab: CharVocab,
        train: UnitsTrainConfig,
        device: torch.device,
        seed: int,
    ):
        self.model = model
        self.vocab = vocab
        self.train = train
        self.device = device
        self.seed = seed
        """The run's seed (``UnitsConfig.seed``): the noise of update ``step`` is drawn from it."""
        self.optimizer = make_optimizer(model, train)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_factor(s, train)
        )
        self.scaler = torch.amp.GradScaler(
            device.type, enabled=train.precision == "fp16" and mixed_precision(device, "fp16")
        )

    def batch(self, texts: Sequence[str], step: int) -> AutoencoderBatch:
        """The batch of update ``step`` (0-based): ``texts`` and their noised copies, on its way to
        the device."""
        t = self.train
        batch = make_autoencoder_batch(
            self.vocab, texts, noised(texts, t.deletion_prob, self.seed, step)
        )
        return batch.to(self.device, non_blocking=True)

    def update(self, batch: AutoencoderBatch, progress: float) -> LossOutput:
        """One update on ``batch`` at ``progress`` (the fraction of training done); does not wait
        for the device."""
        t = self.train
        with matmul_tf32(self.device, t.tf32):
            with autocast(self.device, t.precision):
                out = self.model.loss(batch, progress=progress)
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(out.total).backward()
            if t.grad_clip > 0:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.grad_clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.scheduler.step()
        return out

    @staticmethod
    def values(out: LossOutput, step: int, where: str) -> dict[str, float]:
        """The loss, its terms and the model's diagnostics of an update as numbers (one transfer
        from the device); ``ModelError`` when the loss is not finite (``where``: the last intact
        checkpoint, for the message)."""
        stats = {"loss": out.total, **out.terms, **out.stats}
        numbers = torch.stack([v.detach().float().reshape(()) for v in stats.values()]).tolist()
        values = dict(zip(stats, numbers, strict=True))
        if not math.isfinite(values["loss"]):
            terms = ", ".join(f"{k}={values[k]:.4g}" for k in out.terms)
            raise ModelError(
                f"non-finite loss at step {step} ({terms}); the last checkpoint in {where} is "
                "intact. Lower train.lr or use fp32."
            )
        return values

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
