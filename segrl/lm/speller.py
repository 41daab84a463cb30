"""The speller: the probability of a segment spelled character by character from a context vector.

Given a conditioning vector ``h`` (what the model knows before the segment), the speller is an LSTM
that emits the segment's characters one at a time and then one terminator:

- ``<eos>``: the segment ends and the next one starts right after it (inside a word);
- the space character: the segment ends and a space follows (the end of a word);
- ``<eos>`` as the very first symbol: the empty segment, which ends the text (not right after a
  space: a text never ends with one).

So ``log p(segment, terminator | h) = sum_j log p(c_j | h, c_<j) + log p(terminator | h, c)``, and the
probabilities of all (segment, terminator) pairs plus the end of the text sum to 1 for every ``h``.
A space is never spelled inside a segment (it is always a terminator) and never starts one; with
``max_length = K`` the K-th character must be followed by a terminator, so segments have at most K
characters (the dynamic programs over segmentations are then exact).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from segrl.lm.lattice import NEG_INF
from segrl.lm.rnn import RaggedLSTM
from segrl.lm.segmented import space_at


class Speller(nn.Module):
    """A conditional character LSTM over one segment.

    Args:
        embedding: the character embedding it reads (shared with the model that owns it).
        cond_dim: size of the conditioning vectors.
        hidden_dim: LSTM size.
        eos_id / space_id / pad_id / bos_id: vocabulary ids (``space_id`` None: no space character).
        max_length: most characters in a segment (None: unbounded).
        dropout: on the LSTM outputs.
    """

    def __init__(
        self,
        embedding: nn.Embedding,
        cond_dim: int,
        hidden_dim: int,
        eos_id: int,
        space_id: int | None,
        pad_id: int = 0,
        bos_id: int = 1,
        max_length: int | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.embedding = embedding
        self.vocab_size = embedding.num_embeddings
        self.eos_id, self.space_id, self.pad_id, self.bos_id = eos_id, space_id, pad_id, bos_id
        self.max_length = max_length
        self.hidden_dim = hidden_dim
        self.init = nn.Linear(cond_dim, 2 * hidden_dim)
        self.rnn = RaggedLSTM(embedding, hidden_dim)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_dim, self.vocab_size)

    def initial_state(self, cond: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The LSTM's state ``(h, c)`` before ``<bos>``, each ``[N, H]``, from ``cond [N, cond_dim]``."""
        h0, c0 = self.init(cond).chunk(2, dim=-1)
        return torch.tanh(h0), c0

    def step_mask(self, steps: int, device: torch.device) -> torch.Tensor:
        """[steps, V] additive mask of the symbols allowed after j = 0..steps-1 characters."""
        mask = torch.zeros(steps, self.vocab_size, device=device)
        mask[:, [self.pad_id, self.bos_id]] = NEG_INF
        if self.space_id is not None:
            mask[0, self.space_id] = NEG_INF  # no segment starts with a space
        if self.max_length is not None and steps > self.max_length:
            terminators = [self.eos_id] + ([self.space_id] if self.space_id is not None else [])
            keep = mask[self.max_length, terminators].clone()
            mask[self.max_length :] = NEG_INF  # after K characters only a terminator may follow
            mask[self.max_length :, terminators] = keep
        return mask

    def ragged_log_probs(
        self,
        cond: torch.Tensor,
        inputs: torch.Tensor,
        lengths: torch.Tensor,
        after_space: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Next-symbol log-probabilities after each prefix, for the used steps only.

        Args:
            cond: [N, cond_dim] conditioning vectors.
            inputs: [N, T] long, ``<bos>`` then the segment's characters (padded).
            lengths: [N] long, inputs used per row (1 to T).
            after_space: [N] bool, True where the segment follows a space (the text cannot end
                there); None: nowhere.
        Returns:
            ``logp [S, V]`` for the S used (row, step) pairs, and their ``row [S]`` and ``step [S]``.
        """
        output, row, step, _ = self.rnn(inputs, lengths, self.initial_state(cond))  # [S, H]
        logits = self.out(self.dropout(output))  # [S, V]
        logits = logits + self.step_mask(inputs.shape[1], logits.device)[step]
        return self.no_end_after_space(logits, row, step, after_space), row, step

    def no_end_after_space(
        self,
        logits: torch.Tensor,
        row: torch.Tensor,
        step: torch.Tensor,
        after_space: torch.Tensor | None,
    ) -> torch.Tensor:
        """Log-softmax of ``logits [S, V]`` at the used (``row``, ``step``) pairs, where a segment
        that follows a space (``after_space [N]``, None: nowhere) may not end before its first
        character."""
        if after_space is not None:
            no_end = (step == 0) & after_space[row]
            eos = torch.where(no_end, NEG_INF, logits[:, self.eos_id])
            logits = torch.cat(
                [logits[:, : self.eos_id], eos[:, None], logits[:, self.eos_id + 1 :]], 1
            )
        return torch.log_softmax(logits, dim=-1)

    def log_probs(
        self,
        cond: torch.Tensor,
        inputs: torch.Tensor,
        lengths: torch.Tensor,
        after_space: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``ragged_log_probs`` as a padded ``[N, T, V]`` tensor (0 at unused steps)."""
        logp, row, step = self.ragged_log_probs(cond, inputs, lengths, after_space)
        out = logp.new_zeros(inputs.shape[0], inputs.shape[1], self.vocab_size)
        return out.index_put((row, step), logp)

    def span_scores(
        self,
        cond: torch.Tensor,
        ids: torch.Tensor,
        space: torch.Tensor,
        row: torch.Tensor,
        start: torch.Tensor,
        run_length: torch.Tensor,
    ) -> torch.Tensor:
        """Log-probabilities of every prefix of a run of characters as a segment with its terminator.

        One speller pass per run gives all its prefixes: ``out[n, l]`` is ``log p(x[s : s + l],
        terminator | cond[n])`` for ``s = start[n]`` of text ``row[n]``, ``1 <= l <= run_length[n]``;
        the terminator is the space when ``x[s + l]`` is one, else ``<eos>`` (also at the end of the
        text; the end-of-text symbol itself is ``end_scores``). ``out[n, 0]`` and ``l > run_length``
        are -inf. Runs must not contain spaces.

        Args:
            cond: [N, cond_dim]; ids: [B, L] character ids; space: [B, L] bool, True at spaces;
            row, start, run_length: [N] long.
        Returns: [N, R + 1] with R the longest run.
        """
        n_runs = row.shape[0]
        longest = int(run_length.max()) if n_runs else 0
        width = ids.shape[1]
        offsets = torch.arange(longest + 1, device=ids.device)  # [R + 1]
        positions = start.unsqueeze(1) + offsets  # [N, R + 1], position of the symbol after j chars
        inside = offsets.unsqueeze(0) < run_length.unsqueeze(1)  # [N, R + 1], j < run length
        clamped = positions.clamp(max=width - 1)
        chars = torch.where(inside, ids[row.unsqueeze(1), clamped], self.pad_id)  # [N, R + 1]
        inputs = torch.cat(
            [torch.full((n_runs, 1), self.bos_id, device=ids.device), chars[:, :-1]], dim=1
        )
        at_space = space_at(space, row.unsqueeze(1), positions)
        terminator = torch.full_like(positions, self.eos_id)
        if self.space_id is not None:
            terminator = torch.where(at_space, self.space_id, terminator)
        after_space = space_at(space, row, start - 1)
        logp, run, step = self.ragged_log_probs(cond, inputs, run_length + 1, after_space)
        # the character read next, and the terminator that would end the segment here
        char_lp = logp.gather(1, chars[run, step].unsqueeze(1)).squeeze(1)  # [S]
        term_lp = logp.gather(1, terminator[run, step].unsqueeze(1)).squeeze(1)  # [S]
        grid = logp.new_zeros(n_runs, longest + 1)
        char_grid = grid.index_put((run, step), torch.where(inside[run, step], char_lp, 0.0))
        term_grid = grid.index_put((run, step), term_lp)
        prefix = torch.cat([grid[:, :1], char_grid[:, :-1].cumsum(1)], dim=1)
        valid = (offsets.unsqueeze(0) >= 1) & (offsets.unsqueeze(0) <= run_length.unsqueeze(1))
        return torch.where(valid, prefix + term_grid, NEG_INF)

    def shared_span_scores(
        self,
        cond: torch.Tensor,
        runs: Sequence[str],
        after_space: torch.Tensor,
        space_after: torch.Tensor,
    ) -> torch.Tensor:
        """``span_scores`` of runs that share one conditioning vector, computed once per distinct
        substring.

        With one ``cond`` for every run, the speller's state after a prefix depends on the prefix
        alone, so the runs' prefixes form a trie whose nodes (every distinct substring that starts a
        run) each take one LSTM step and one softmax, level by level, however often they occur; in a
        batch of sentences or word types that is about a third of the steps of one pass per run. The
        result equals ``span_scores`` with ``cond`` repeated for every run.

        Args:
            cond: [cond_dim], the conditioning vector of every run.
            runs: N runs, each a string of ``chr(character id)`` (no spaces).
            after_space: [N] bool, True where the run follows a space (the text cannot end there).
            space_after: [N] bool, True where a space follows the whole run (its terminator there).
        Returns: [N, R + 1] as ``span_scores``.
        """
        device = cond.device
        trie = _Trie(runs, self.bos_id)
        longest = len(trie.level_sizes) - 1
        parents = torch.tensor(trie.parent, device=device)
        last_char = torch.tensor(trie.last_char, device=device)
        table, recurrent = self.rnn.input_table()
        projected = nn.functional.embedding(last_char, table).split(trie.level_sizes)  # [n, 4H]
        h, c = self.rnn.step(projected[0], *self.initial_state(cond.unsqueeze(0)), recurrent)
        outputs = [h]
        for level in range(1, longest + 1):  # the nodes of one length, from their parents' states
            first = trie.level_starts[level]
            local = parents[first : first + trie.level_sizes[level]] - trie.level_starts[level - 1]
            h, c = self.rnn.step(projected[level], h[local], c[local], recurrent)
            outputs.append(h)
        logits = self.out(self.dropout(torch.cat(outputs)))  # [nodes, V]
        levels = torch.repeat_interleave(
            torch.arange(longest + 1, device=device), torch.tensor(trie.level_sizes, device=device)
        )
        logits = logits + self.step_mask(longest + 1, device)[levels]
        logp = torch.log_softmax(logits, dim=-1)
        char_lp = logp[parents, last_char].index_fill(0, parents.new_zeros(1), 0.0)  # root: none
        # after a space the first symbol cannot be <eos>: the root's softmax without it
        root = logits[0]
        no_eos = root.index_fill(0, torch.tensor([self.eos_id], device=device), NEG_INF)
        after_space_shift = torch.logsumexp(root, 0) - torch.logsumexp(no_eos, 0)

        # each run's prefixes as trie nodes, [N, R], from its whole string's node up (0 past it)
        node = torch.tensor(trie.run_node, device=device)
        lengths = levels[node]
        grid = node.new_zeros(len(runs), longest)
        for depth in range(longest, 0, -1):
            reached = lengths >= depth
            grid[:, depth - 1] = torch.where(reached, node, 0)
            node = torch.where(reached, parents[node], node)
        offsets = torch.arange(1, longest + 1, device=device)
        term_id = torch.full_like(grid, self.eos_id)
        if self.space_id is not None:
            at_end = (offsets == lengths.unsqueeze(1)) & space_after.unsqueeze(1)
            term_id = torch.where(at_end, self.space_id, term_id)
        scores = char_lp[grid].cumsum(1) + logp[grid, term_id]
        scores = scores + torch.where(after_space, after_space_shift, 0.0).unsqueeze(1)
        scores = torch.where(offsets <= lengths.unsqueeze(1), scores, NEG_INF)
        return torch.cat([scores.new_full((len(runs), 1), NEG_INF), scores], dim=1)

    def end_scores(self, cond: torch.Tensor) -> torch.Tensor:
        """[N] ``log p(end of text | cond)``: the empty segment, ``<eos>`` before any character."""
        inputs = torch.full((cond.shape[0], 1), self.bos_id, device=cond.device)
        lengths = torch.ones(cond.shape[0], dtype=torch.long, device=cond.device)
        logp = self.log_probs(cond, inputs, lengths)
        return logp[:, 0, self.eos_id]


class MarkovSpeller(Speller):
    """A speller with at most ``order`` characters of memory: each symbol of a segment (a character
    or its end) is drawn from a learnt distribution given nothing (``order = 0``, a unigram: a
    geometric length), the character before it (``order = 1``, a bigram) or the two before it
    (``order = 2``, a trigram; ``<bos>`` stands before the first). The unigram is the base
    distribution of the Dirichlet-process segmenters of Goldwater, Griffiths and Johnson (2009) and
    the spelling code of Morfessor's lexicon; the bigram and trigram add what a language allows
    after a character or two, and still no memory of the word. One end probability for
    every length, not one per length: a length distribution free to peak at two characters cuts
    the stems it spells into pairs.

    A character LSTM spells a whole word better than it spells its pieces, since it predicts a
    word's last characters from its first ones; under the marginal likelihood a model with one then
    keeps words whole the longer it trains (the transfer study, docs/studies). Spelled with little
    memory, a piece costs about the same wherever it stands, so spelling a suffix again in every
    word costs what it costs, and a lexicon entry that many words share is what saves it. It reads
    no context: it is for an ``slm`` without one (``context = "none"``).
    """

    def __init__(
        self,
        embedding: nn.Embedding,
        eos_id: int,
        space_id: int | None,
        pad_id: int = 0,
        bos_id: int = 1,
        max_length: int | None = None,
        order: int = 0,
    ):
        nn.Module.__init__(self)
        if order not in (0, 1, 2):
            raise ValueError(f"a Markov speller has order 0, 1 or 2, got {order}")
        self.vocab_size = embedding.num_embeddings
        self.eos_id, self.space_id, self.pad_id, self.bos_id = eos_id, space_id, pad_id, bos_id
        self.max_length = max_length
        self.order = order
        rows = self.vocab_size**order
        self.char_logits = nn.Parameter(torch.zeros(rows, self.vocab_size))  # [V ** order, V]

    def step_logits(self, steps: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        """[S, V] logits of the symbol after ``steps`` ([S] long) characters, given the ``order``
        symbols before it (``history`` [S, order] ids, the nearest last; ``<bos>`` before the
        first character), masked as ``step_mask`` (which characters may start a segment, the
        longest segment)."""
        width = int(steps.max()) + 1 if steps.numel() else 1
        row = torch.zeros_like(steps)
        for k in range(self.order):
            row = row * self.vocab_size + history[:, k]
        logits = self.char_logits[row]
        return logits + self.step_mask(width, logits.device)[steps]

    def _histories(self, inputs: torch.Tensor) -> torch.Tensor:
        """``[N, T, order]``: before each step of ``inputs`` (``<bos>`` then the characters), the
        ``order`` symbols before it, ``<bos>`` where the segment has fewer."""
        if not self.order:
            return inputs.new_zeros(*inputs.shape, 0)
        padded = torch.cat(
            [
                torch.full_like(inputs[:, :1], self.bos_id).expand(-1, max(self.order - 1, 0)),
                inputs,
            ],
            dim=1,
        )  # [N, order - 1 + T]
        steps = inputs.shape[1]
        return torch.stack([padded[:, k : k + steps] for k in range(self.order)], dim=2)

    def ragged_log_probs(
        self,
        cond: torch.Tensor,
        inputs: torch.Tensor,
        lengths: torch.Tensor,
        after_space: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        rows = torch.arange(inputs.shape[0], device=inputs.device)
        row = torch.repeat_interleave(rows, lengths)  # [S]
        firsts = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
        step = torch.arange(row.shape[0], device=inputs.device) - firsts  # [S]
        logits = self.step_logits(step, self._histories(inputs)[row, step])
        return self.no_end_after_space(logits, row, step, after_space), row, step

    def shared_span_scores(
        self,
        cond: torch.Tensor,
        runs: Sequence[str],
        after_space: torch.Tensor,
        space_after: torch.Tensor,
    ) -> torch.Tensor:
        device = self.char_logits.device
        longest = max(map(len, runs), default=0)
        lengths = torch.tensor([len(run) for run in runs], device=device)
        ids = torch.full((len(runs), longest), self.pad_id, dtype=torch.long, device=device)
        for n, run in enumerate(runs):
            ids[n, : len(run)] = torch.tensor([ord(c) for c in run], dtype=torch.long)
        bos = torch.full((len(runs), 1), self.bos_id, dtype=torch.long, device=device)
        history = self._histories(torch.cat([bos, ids], dim=1))  # [N, R + 1, order]
        steps = torch.arange(longest + 1, device=device).expand(len(runs), -1)
        logp = torch.log_softmax(
            self.step_logits(steps.flatten(), history.flatten(0, 1)), dim=-1
        ).view(len(runs), longest + 1, -1)  # [N, R + 1, V]
        offsets = torch.arange(1, longest + 1, device=device)
        inside = offsets <= lengths.unsqueeze(1)  # [N, R]: the l-th character is in the run
        char_lp = logp[:, :-1].gather(2, ids.unsqueeze(2)).squeeze(2)  # [N, R]
        char_lp = torch.where(inside, char_lp, 0.0)
        term_id = torch.full_like(ids, self.eos_id)
        if self.space_id is not None:
            at_end = (offsets == lengths.unsqueeze(1)) & space_after.unsqueeze(1)
            term_id = torch.where(at_end, self.space_id, term_id)
        term_lp = logp[:, 1:].gather(2, term_id.unsqueeze(2)).squeeze(2)  # after l characters
        scores = char_lp.cumsum(1) + term_lp
        # after a space the first symbol cannot be <eos>: the first softmax without it
        root = self.step_logits(steps[:1, 0], history[:1, 0])[0]
        no_eos = root.index_fill(0, torch.tensor([self.eos_id], device=device), NEG_INF)
        after_space_shift = torch.logsumexp(root, 0) - torch.logsumexp(no_eos, 0)
        scores = scores + torch.where(after_space, after_space_shift, 0.0).unsqueeze(1)
        scores = torch.where(inside, scores, NEG_INF)
        return torch.cat([scores.new_full((len(runs), 1), NEG_INF), scores], dim=1)


class _Trie:
    """Every prefix of a set of strings once, numbered level by level (the empty prefix, the root,
    is 0; a node's parent is on the level before it)."""

    def __init__(self, runs: Sequence[str], root_char: int):
        distinct = dict.fromkeys(runs)
        node_of: dict[str, int] = {}
        for run in distinct:
            for end in range(1, len(run) + 1):
                node_of.setdefault(run[:end], 0)
        nodes = sorted(node_of, key=len)
        node_of.update((node, i) for i, node in enumerate(nodes, start=1))
        node_of[""] = 0
        depth = max(map(len, distinct), default=0)
        self.level_sizes = [1] + [0] * depth
        for node in nodes:
            self.level_sizes[len(node)] += 1
        self.level_starts = [0]
        for size in self.level_sizes[:-1]:
            self.level_starts.append(self.level_starts[-1] + size)
        self.parent = [0] + [node_of[node[:-1]] for node in nodes]
        self.last_char = [root_char] + [ord(node[-1]) for node in nodes]
        self.run_node = [node_of[run] for run in runs]
