"""Dynamic Capacity Slot Attention (Behjati & Henderson, TMLR 2023) and its stride baseline: character
autoencoders whose units are a small set of vectors, each meant to hold one meaning-bearing unit.

DCSA::

    chars -> embedding + sinusoidal positions -> Transformer encoder (2 layers, 4 heads, 256 wide)
          -> X' [N, 256] -> Slot Attention (K = 64 slots of 128) -> M [K, 128]
          -> L0Drop gates g [K] -> M' = g * M -> 1-layer decoder (1 causal self-attention head,
             1 cross-attention head over the open slots, slots projected 128 -> 256) -> p(X | M')

Loss: reconstruction cross-entropy (nats per character) plus ``lambda(t) sum_b max(L0_b, N_b / r) /
sum_b (N_b + 1)``: the paper's per-sentence targeted-sparsity penalty, divided by the characters the
reconstruction is averaged over, so that ``lambda`` has the paper's meaning (weight per sentence
against the sentence's summed cross-entropy). ``N_b`` is the sentence's length (``sparsity_length``
sets a constant instead, e.g. 128, the paper's maximum length); ``lambda(t)`` grows exponentially
(``segrl.units.l0drop.lambda_schedule``); with ``gate_warmup`` every gate stays open and the
penalty off for that first fraction of training. Gates are sampled in training and deterministic at test
time; slots whose gate is 0 are masked out of the decoder's cross-attention (they are zero vectors).

Stride: the same encoder and decoder, but the units are every ``stride``-th encoder output
(``x'_1, x'_{k+1}, ...``) projected 256 -> 128; reconstruction loss only.

Segments of both are read off the decoder's cross-attention (rows: the characters it predicts,
columns: the units), computed teacher-forced on the input in eval mode; the slot attention map
(characters over slots) is drawn beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import torch
from torch import nn

from segrl.data.vocab import CharVocab
from segrl.errors import ConfigError
from segrl.units.base import AutoencoderBatch, Encoding, LossOutput, UnitModel
from segrl.units.l0drop import (
    BETA,
    EPS,
    L0Drop,
    expected_open_gates,
    lambda_schedule,
    targeted_sparsity,
)
from segrl.units.layers import CharDecoder
from segrl.units.slot_attention import SlotAttention, SlotInit, SlotInitialiser
from segrl.units.transformer import TransformerAutoencoder, TransformerConfig

GateInput = Literal["slots", "normalized"]
SPARSITY = "sparsity"
"""Name of the (weighted) targeted-sparsity loss term."""
DECODER_MAP = "decoder"
SLOT_MAP = "slot attention"


@dataclass
class UnitVectorConfig(TransformerConfig):
    """The encoder and decoder DCSA and stride share (the paper's sizes)."""

    dim: int = 256
    feed_forward: int = 1024
    heads: int = 4
    """Encoder self-attention heads."""
    encoder_layers: int = 2
    decoder_layers: int = 1
    decoder_heads: int = 1
    unit_dim: int = 128
    """Width of the unit vectors (slots, or the down-projected stride outputs)."""


class UnitVectorAutoencoder(TransformerAutoencoder):
    """A Transformer character encoder whose outputs are turned into unit vectors by ``units``, and a
    decoder that reads them; segments come from the decoder's cross-attention."""

    config_class = UnitVectorConfig
    unit_key_maps = (DECODER_MAP, SLOT_MAP)
    train_defaults = {
        "lr": 1e-4,
        "optimizer": "adam",
        "batch_size": 16,
        "schedule": "constant",
        "grad_clip": 1.0,
        "deletion_prob": 0.0,
    }

    def __init__(self, config: UnitVectorConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        c = config
        self.decoder = CharDecoder(
            vocab_size, c.dim, c.decoder_heads, c.feed_forward, c.decoder_layers, c.max_len + 1,
            c.dropout, memory_dim=c.unit_dim, attention_dropout=c.attention_dropout,
            attention_init=c.attention_init, fused=c.fused_attention,
        )  # fmt: skip

    def units(self, chars: Encoding, mask: torch.Tensor) -> Encoding:
        """The unit vectors (``memory [B, K, unit_dim]``) of the encoded characters."""
        raise NotImplementedError

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> Encoding:
        chars = super().encode(ids, mask)  # memory [B, L, D]
        encoding = self.units(chars, mask)
        if not self.training:
            attention = self.decoder_attention(encoding, ids, mask)  # [B, L, K]
            encoding.attention = attention
            encoding.layer_attention[DECODER_MAP] = attention
        return encoding

    def decoder_attention(
        self, encoding: Encoding, ids: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """The top decoder layer's cross-attention ``[B, L, K]`` (mean over heads) while it rebuilds
        ``ids`` teacher-forced: row ``t`` is where it looks to predict character ``t``."""
        b, length = ids.shape
        inputs = torch.cat([ids.new_full((b, 1), CharVocab.bos_id), ids], dim=1)  # [B, L + 1]
        input_mask = torch.cat([mask.new_ones(b, 1), mask], dim=1)  # [B, L + 1]
        _, cross = self.decoder(
            inputs, input_mask, encoding.memory, encoding.memory_mask, return_attention=True
        )
        return cross[-1].mean(dim=1)[:, :length] * mask.unsqueeze(-1)  # [B, L, K]


@dataclass
class DCSAConfig(UnitVectorConfig):
    """DCSA: the shared encoder/decoder plus slot attention and L0Drop (paper values)."""

    slots: int = 64
    iterations: int = 1
    slot_init: SlotInit = "per_slot"
    """per_slot (learned mean per slot, fixed sigma; the paper's), shared or positional."""
    slot_sigma: float = 0.1
    """sigma of the slot initialisation (fixed for per_slot, the starting value otherwise)."""
    slot_scale: float = 1.0
    """Multiplies slot attention's logits (``1 / sqrt(D)`` at 1, the papers'). At initialisation
    every character then spreads its mass almost evenly over the slots, so every slot is nearly the
    sentence's mean and the decoder has nothing to tell them apart by; a larger scale starts with
    sharper, distinct assignments."""
    sample_slots_at_test: bool = False
    """Draw initial slots at test time too (otherwise their means: deterministic segments)."""
    beta: float = BETA
    eps: float = EPS
    gate_input: GateInput = "slots"
    """What the L0Drop gates read: ``slots`` (``log alpha = m . w``, the paper's) or ``normalized``
    (``LayerNorm(m) . w + b``). Once a decoder reads the slots their norms grow and ``log alpha``
    saturates (6-12 on trained CPU models), where the sparsity penalty has no gradient; on
    normalised slots it has one at any scale, and with a large enough ``lambda`` the gates close
    to the target (docs/results.md)."""
    sparsity_ratio: float | None = 6.0
    """r of targeted sparsity ``max(L0, N / r)``; 0 (or None): the plain ``L0`` penalty."""
    sparsity_length: int | None = None
    """N of ``N / r``: 0 (or None, resolved to 0) for each sentence's length, or a constant (the
    paper's 128)."""
    lambda_start: float = 2e-5
    lambda_ratio: float = 2.0
    lambda_limit: float = 6.4e-4
    lambda_every: float = 0.05
    """Fraction of training between two increases of lambda (10 of 200 epochs)."""
    gate_warmup: float = 0.0
    """Fraction of training during which every gate is open (1) and the sparsity penalty is off, so
    that the decoder learns to read slots before they can close (0: the paper's training). In a short
    run without it, the decoder is still a character language model when gates start to close; slots
    are then noise to it, the reconstruction closes them, and closed slots get no gradient back.
    Evaluation always uses the test-time gates, during the warm-up too."""

    def check(self, prefix: str) -> None:
        super().check(prefix)
        if self.slots < 1 or self.iterations < 1:
            raise ConfigError(f"{prefix}slots and {prefix}iterations must be at least 1")
        if self.slot_scale <= 0:
            raise ConfigError(f"{prefix}slot_scale must be positive, got {self.slot_scale}")
        if self.slot_sigma <= 0:
            raise ConfigError(f"{prefix}slot_sigma must be positive, got {self.slot_sigma}")
        if self.sparsity_ratio is not None and self.sparsity_ratio < 0:
            raise ConfigError(
                f"{prefix}sparsity_ratio must be positive (0: the plain L0 penalty), got "
                f"{self.sparsity_ratio}"
            )
        if self.sparsity_length is not None and self.sparsity_length < 0:
            raise ConfigError(
                f"{prefix}sparsity_length must be positive (0: each sentence's length), got "
                f"{self.sparsity_length}"
            )
        if not (self.beta > 0 and self.eps > 0):
            raise ConfigError(f"{prefix}beta and {prefix}eps must be positive")
        if not 0 <= self.gate_warmup < 1:
            raise ConfigError(f"{prefix}gate_warmup must be in [0, 1), got {self.gate_warmup}")
        if min(self.lambda_start, self.lambda_limit) < 0 or self.lambda_ratio <= 0:
            raise ConfigError(
                f"{prefix}lambda_start and lambda_limit must be >= 0, lambda_ratio > 0"
            )


class DCSAAutoencoder(UnitVectorAutoencoder):
    """Dynamic Capacity Slot Attention (see the module docstring)."""

    config_class = DCSAConfig

    @classmethod
    def resolve_arch(cls, arch: DCSAConfig) -> DCSAConfig:
        """``sparsity_ratio`` None: 0, the plain L0 penalty; ``sparsity_length`` None: 0, each
        sentence's length."""
        ratio, length = arch.sparsity_ratio, arch.sparsity_length
        return replace(
            arch,
            sparsity_ratio=0.0 if ratio is None else ratio,
            sparsity_length=0 if length is None else length,
        )

    def __init__(self, config: DCSAConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        c = config
        self.slot_init = SlotInitialiser(
            c.slots, c.unit_dim, c.slot_init, c.slot_sigma, c.max_len, c.sample_slots_at_test
        )
        self.slot_attention = SlotAttention(c.dim, c.unit_dim, c.iterations, scale=c.slot_scale)
        self.l0drop = L0Drop(c.unit_dim, c.beta, c.eps, normalize=c.gate_input == "normalized")
        self.progress = 1.0
        """Fraction of training done at the current step (set by ``loss``)."""

    def init_from_pretrained(self, source: UnitModel) -> None:
        """Start from a trained stride model of the same shape (an encoder and decoder warm-up,
        ``segrl units finetune --from STRIDE --model dcsa``): its encoder and decoder are copied,
        its down-projection is left out, and the slot attention and gates keep their own
        initialisation."""
        if type(source) is not StrideAutoencoder:
            super().init_from_pretrained(source)
            return
        self.copy_weights_of(
            source,
            UnitVectorConfig,
            new=["slot_init.", "slot_attention.", "l0drop."],
            dropped=["down."],
        )

    def warming_up(self) -> bool:
        return self.training and self.progress < self.config.gate_warmup

    def loss(self, batch: AutoencoderBatch, progress: float = 1.0) -> LossOutput:
        self.progress = progress
        return super().loss(batch, progress)

    def units(self, chars: Encoding, mask: torch.Tensor) -> Encoding:
        c = self.config
        slots = self.slot_init(mask.shape[0])  # [B, K, Ds]
        slots, slot_map = self.slot_attention(chars.memory, mask, slots)  # [B, K, Ds], [B, L, K]
        all_slots = torch.ones(slots.shape[:2], dtype=torch.bool, device=slots.device)
        gated, gates, log_alpha = self.l0drop(slots, all_slots)  # [B, K, Ds], [B, K], [B, K]
        if self.warming_up():
            gated, gates = slots, torch.ones_like(gates)
        is_open = gates > 0  # [B, K]
        l0 = expected_open_gates(log_alpha, None, c.beta, c.eps)  # [B]
        kept = is_open.sum(1).float()  # [B]
        maps = {**chars.layer_attention, SLOT_MAP: slot_map}
        return Encoding(
            memory=gated,
            memory_mask=is_open,
            attention=slot_map,
            kept=kept,
            layer_attention=maps,
            stats={"open_slots": kept.mean(), "expected_open_slots": l0.detach().mean()},
            extras={"l0": l0, "lengths": mask.sum(1)},
        )

    def sparsity_weight(self, progress: float) -> float:
        c = self.config
        return lambda_schedule(
            progress, c.lambda_start, c.lambda_ratio, c.lambda_limit, c.lambda_every
        )

    def penalty(self, encoding: Encoding, progress: float) -> dict[str, torch.Tensor]:
        c = self.config
        l0, lengths = encoding.extras["l0"], encoding.extras["lengths"]  # [B], [B]
        if not c.sparsity_ratio:  # 0 or None: no target
            per_sentence = l0
        else:
            n = (
                lengths
                if not c.sparsity_length  # 0 or None: each sentence's own
                else torch.full_like(lengths, c.sparsity_length)
            )
            per_sentence = targeted_sparsity(l0, n, c.sparsity_ratio)  # [B]
        weight = 0.0 if self.warming_up() else self.sparsity_weight(progress)
        encoding.stats["lambda"] = torch.tensor(weight, device=l0.device)
        return {SPARSITY: weight * per_sentence.sum() / (lengths + 1).sum().to(l0.dtype)}


@dataclass
class StrideConfig(UnitVectorConfig):
    """The stride baseline: the shared encoder/decoder, every ``stride``-th encoder output kept."""

    stride: int = 6

    def check(self, prefix: str) -> None:
        super().check(prefix)
        if self.stride < 1:
            raise ConfigError(f"{prefix}stride must be at least 1, got {self.stride}")


class StrideAutoencoder(UnitVectorAutoencoder):
    """Keeps ``x'_1, x'_{k+1}, x'_{2k+1}, ...`` of the encoder, projected down to ``unit_dim``."""

    config_class = StrideConfig

    def __init__(self, config: StrideConfig, vocab_size: int):
        super().__init__(config, vocab_size)
        self.down = nn.Linear(config.dim, config.unit_dim)

    def units(self, chars: Encoding, mask: torch.Tensor) -> Encoding:
        k = self.config.stride
        memory = self.down(chars.memory[:, ::k])  # [B, ceil(L / k), Du]
        kept_mask = mask[:, ::k]  # [B, ceil(L / k)]
        kept = kept_mask.sum(1).float()
        return Encoding(
            memory=memory,
            memory_mask=kept_mask,
            attention=chars.attention,
            kept=kept,
            layer_attention=dict(chars.layer_attention),
            stats={"open_slots": kept.mean()},
        )
