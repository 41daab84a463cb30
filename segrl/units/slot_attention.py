"""Slot Attention for text (Locatello et al. 2020, as adapted by DCSA): ``K`` slots compete for the
characters of a sentence and each becomes a weighted mean of the characters it wins.

One iteration (``T = 1`` in DCSA), for inputs ``X' [N, D_in]`` and slots ``S [K, D]``::

    inputs  = LN(X')
    logits  = k(inputs) q(LN(S))^T * scale / sqrt(D)     # [N, K], scale 1 in the papers
    attn    = softmax over the K slots                   # characters distribute their mass
    W       = (attn + delta) / sum over the N characters # each slot's weights sum to 1
    updates = W^T v(inputs)                              # [K, D]
    S       = GRUCell(updates, S);  S = S + MLP(LN(S))   # MLP D -> 2D -> D, ReLU

Padding characters take no part in either normalisation. Slot initialisations (``SLOT_INITS``):

- ``per_slot`` (DCSA's): ``slot_i ~ N(mu_i, sigma)``, a learned mean per slot, a fixed ``sigma``;
- ``shared`` (Locatello et al.'s): ``slot_i ~ N(mu, sigma)`` with one learned ``mu`` and ``sigma``;
- ``positional``: ``slot_i ~ N(mu + PE(p_i), sigma)``, learned ``mu`` and ``sigma``, the sinusoidal
  encoding of position ``p_i = i * max_len / K`` (slots spread evenly over the longest input).

Slots are sampled (reparameterised) in training; in eval mode they are the means unless
``sample_at_test``. The layer is equivariant in the slots: permuting the initial slots permutes the
output slots and the attention columns the same way.
"""

from __future__ import annotations

import math
import typing
from typing import Literal

import torch
from torch import nn

from segrl.units.layers import sinusoidal_positions

SlotInit = Literal["per_slot", "shared", "positional"]
SLOT_INITS: tuple[str, ...] = typing.get_args(SlotInit)


class SlotInitialiser(nn.Module):
    """``forward(batch_size) -> slots [B, K, D]`` as ``init`` says (see the module docstring)."""

    def __init__(
        self,
        slots: int,
        dim: int,
        init: str = "per_slot",
        sigma: float = 0.1,
        max_len: int = 128,
        sample_at_test: bool = False,
    ):
        super().__init__()
        if init not in SLOT_INITS:
            raise ValueError(f"slot init must be one of {SLOT_INITS}, got {init!r}")
        self.slots, self.dim, self.init, self.sample_at_test = slots, dim, init, sample_at_test
        means = slots if init == "per_slot" else 1
        self.mu = nn.Parameter(torch.randn(means, dim))  # [K or 1, D]
        if init == "per_slot":
            self.register_buffer("log_sigma", torch.tensor(math.log(sigma)))  # fixed
        else:
            self.log_sigma = nn.Parameter(torch.full((1, dim), math.log(sigma)))  # learned
        if init == "positional":
            positions = sinusoidal_positions(max_len, dim)  # [max_len, D]
            index = (torch.arange(slots) * max_len // slots).clamp(max=max_len - 1)
            self.register_buffer("offsets", positions[index], persistent=False)  # [K, D]
        else:
            self.register_buffer("offsets", torch.zeros(slots, dim), persistent=False)

    def means(self) -> torch.Tensor:
        return self.mu.expand(self.slots, self.dim) + self.offsets  # [K, D]

    def forward(self, batch_size: int) -> torch.Tensor:
        means = self.means().unsqueeze(0).expand(batch_size, -1, -1)  # [B, K, D]
        if self.training or self.sample_at_test:
            return means + self.log_sigma.exp() * torch.randn_like(means)
        return means


class SlotAttention(nn.Module):
    """``forward(inputs [B, N, D_in], mask [B, N], slots [B, K, D])`` ->
    ``(slots [B, K, D], attention [B, N, K])``; ``attention`` is the last iteration's softmax over
    the slots (each character's row sums to 1; padding rows are 0)."""

    def __init__(
        self, input_dim: int, dim: int, iterations: int = 1, delta: float = 1e-8, scale: float = 1.0
    ):
        super().__init__()
        self.dim, self.iterations, self.delta = dim, iterations, delta
        self.scale = scale / math.sqrt(dim)
        """Of the logits: ``scale / sqrt(D)``, the usual ``1 / sqrt(D)`` at ``scale`` 1."""
        self.input_norm = nn.LayerNorm(input_dim)
        self.slot_norm = nn.LayerNorm(dim)
        self.query = nn.Linear(dim, dim, bias=False)
        self.key = nn.Linear(input_dim, dim, bias=False)
        self.value = nn.Linear(input_dim, dim, bias=False)
        self.gru = nn.GRUCell(dim, dim)
        self.mlp_norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))

    def forward(
        self, inputs: torch.Tensor, mask: torch.Tensor, slots: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, k, d = slots.shape
        inputs = self.input_norm(inputs)
        keys = self.key(inputs)  # [B, N, D]
        values = self.value(inputs)  # [B, N, D]
        real = mask.unsqueeze(-1).to(keys.dtype)  # [B, N, 1]
        attention = keys.new_zeros(b, inputs.shape[1], k)
        for _ in range(self.iterations):
            previous = slots
            queries = self.query(self.slot_norm(slots))  # [B, K, D]
            logits = keys @ queries.transpose(1, 2) * self.scale  # [B, N, K]
            attention = torch.softmax(logits, dim=-1) * real  # [B, N, K], padding rows 0
            weights = (attention + self.delta) * real
            weights = weights / weights.sum(dim=1, keepdim=True)  # [B, N, K] columns sum to 1
            updates = weights.transpose(1, 2) @ values  # [B, K, D]
            slots = self.gru(updates.reshape(b * k, d), previous.reshape(b * k, d)).view(b, k, d)
            slots = slots + self.mlp(self.mlp_norm(slots))
        return slots, attention
