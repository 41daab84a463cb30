"""An LSTM over many short character sequences of different lengths (segments, runs of characters).

The sequences are sorted by length and the batch shrinks as they end, so only the steps each sequence
has are computed. The input projection is looked up per character from a ``[V, 4H]`` table instead of
computed per step. (PyTorch's packed sequences compute the same, but on CPU their backward pass
materialises a full-size gradient per time step, which dominated the cost of the segmental LMs.)
"""

from __future__ import annotations

import torch
from torch import nn


class RaggedLSTM(nn.Module):
    """One LSTM layer reading character ids through ``embedding``.

    ``forward`` returns its outputs time-major, one row per used (sequence, step) pair, as a
    ``PackedSequence`` lays them out.
    """

    def __init__(self, embedding: nn.Embedding, hidden_dim: int):
        super().__init__()
        self.embedding = embedding
        self.hidden_dim = hidden_dim
        self.cell = nn.LSTMCell(embedding.embedding_dim, hidden_dim)

    def forward(
        self,
        inputs: torch.Tensor,
        lengths: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run over ``inputs``.

        Args:
            inputs: [N, T] long character ids (padded; only the first ``lengths[n]`` are read).
            lengths: [N] long, at least 1.
            state: initial ``(h, c)``, each [N, H]; zeros when None.
        Returns:
            ``output [S, H]``, its ``row [S]`` and ``step [S]``, and the last output of each
            sequence ``[N, H]``.
        """
        n_rows, device = inputs.shape[0], inputs.device
        order = torch.argsort(lengths, descending=True, stable=True)  # [N]
        sizes = torch.bincount(lengths, minlength=int(lengths.max()) + 1 if n_rows else 1)
        active = (n_rows - torch.cumsum(sizes, 0)[:-1]).tolist()  # rows still running at each step
        ids = inputs[order]
        if state is None:
            h = inputs.new_zeros(n_rows, self.hidden_dim, dtype=torch.float)
            c = torch.zeros_like(h)
        else:
            h, c = state[0][order], state[1][order]
        table, recurrent = self.input_table()
        # every step's inputs in one lookup, split (not sliced: cheap backward) by step
        time_major = torch.cat([ids[:n, t] for t, n in enumerate(active)])  # [S]
        projections = nn.functional.embedding(time_major, table).split(active)  # [n_t, 4H] each
        outputs, finals = [], []
        for n, projection in zip(active, projections, strict=True):
            if n < h.shape[0]:
                finals.append(h[n:])
                h, c = h[:n], c[:n]
            h, c = self.step(projection, h, c, recurrent)
            outputs.append(h)
        finals.append(h)
        last_sorted = torch.cat(finals[::-1], dim=0)  # sorted order: longest first
        last = torch.empty_like(last_sorted).index_copy(0, order, last_sorted)
        step = torch.repeat_interleave(
            torch.arange(len(active), device=device), torch.tensor(active, device=device)
        )
        row = torch.cat([order[:n] for n in active])
        return torch.cat(outputs, dim=0), row, step, last

    def input_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The cell's input projection of every character, bias included (``[V, 4H]``: a step
        looks its inputs up instead of multiplying them), and its recurrent weights ``[H, 4H]``;
        both with the cell-input gate's block doubled, for ``step``."""
        cell = self.cell
        scale = torch.ones(4, 1, device=cell.weight_ih.device)
        scale[2] = 2.0
        scale = scale.expand(4, self.hidden_dim).reshape(-1)  # [4H]
        table = nn.functional.linear(
            self.embedding.weight,
            cell.weight_ih * scale.unsqueeze(1),
            (cell.bias_ih + cell.bias_hh) * scale,
        )
        return table, (cell.weight_hh * scale.unsqueeze(1)).t()

    def step(
        self, projected: torch.Tensor, h: torch.Tensor, c: torch.Tensor, recurrent: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One LSTM step from state ``(h, c)`` (each ``[n, H]``) given the inputs' rows of
        ``input_table`` (``projected [n, 4H]``) and its recurrent weights; the new ``(h, c)``.

        ``tanh(x)`` is computed as ``2 sigmoid(2x) - 1`` (the cell-input gate arrives doubled from
        ``input_table``): the same function, and on CPU a sigmoid costs a fraction of a tanh."""
        hidden = self.hidden_dim
        squashed = torch.sigmoid(torch.addmm(projected, h, recurrent))  # i, f, g, o
        cell_input = squashed[:, 2 * hidden : 3 * hidden] * 2.0 - 1.0
        c = torch.addcmul(squashed[:, hidden : 2 * hidden] * c, squashed[:, :hidden], cell_input)
        return squashed[:, 3 * hidden :] * (torch.sigmoid(c * 2.0) * 2.0 - 1.0), c
