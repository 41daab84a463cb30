"""A segmenter policy used as a segmenter: texts in, segmentations out (argmax, or sampled).

``AgentSegmenter`` wraps a ``SegmenterPolicy`` with its vocabulary and word-boundary mode, segments
batches of sentences for the metrics of ``segrl.metrics``, and saves/loads itself as a folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from segrl.agents.policies import PolicyConfig, SegmenterPolicy, TransformerEncoder
from segrl.checkpoint import load_tensor_file, load_weights, save_tensor_file
from segrl.config import build_config
from segrl.data import CharVocab
from segrl.envs.episodes import clip_teacher
from segrl.errors import ConfigError, ModelError
from segrl.evaluators import SegmentationBatch, encode_segmentation_batch, with_spaces
from segrl.evaluators.base import Teacher
from segrl.evaluators.registry import load_teacher
from segrl.files import atomic_folder
from segrl.model_files import AGENT_META_FILE
from segrl.runtime import eval_mode
from segrl.segmentation import segment_in_pieces

POLICY_FILE = "policy.pt"
META_FILE = AGENT_META_FILE
VOCAB_FILE = "vocab.json"
TEACHER_DIR = "teacher"
"""The folder of a saved agent that holds the teacher its policy reads (a saved ``slm``)."""
EVAL_BATCH = 256
EVAL_CHARACTERS = 1 << 16
"""The most characters (padded) that ``segment_sentences`` gives the policy at once, besides at most
``EVAL_BATCH`` texts: long texts go in smaller batches (one alone, if need be), so that memory grows
linearly with their length."""


def trim(ids: np.ndarray, lengths: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Character ids cut to the longest text of the batch: ``(ids [B, W], lengths [B], W)``."""
    width = max(int(lengths.max()), 2)
    return torch.from_numpy(ids[:, :width]), torch.from_numpy(lengths), width


def pad_positions(values: torch.Tensor, positions: int) -> torch.Tensor:
    """[B, W - 1, ...] -> [B, positions, ...], zero-padded on the right."""
    missing = positions - values.shape[1]
    if missing <= 0:
        return values
    shape = (values.shape[0], missing, *values.shape[2:])
    return torch.cat([values, values.new_zeros(shape)], dim=1)


def teacher_input(observation: dict[str, np.ndarray], device: torch.device) -> torch.Tensor | None:
    """The observation's ``teacher`` log-odds (``[B, P]``; the policy reads the positions it has),
    or None without teacher features."""
    if "teacher" not in observation:
        return None
    return torch.from_numpy(observation["teacher"]).to(device)


def separator_id(vocab: CharVocab) -> int | None:
    """The id of the space (the word separator) in ``vocab``, or None."""
    return vocab.encode(" ")[0] if " " in vocab else None


class AgentSegmenter:
    """A trained segmenter policy as a segmenter of sentences (greedy decisions by default).

    ``teacher``: for a policy that reads its teacher (``SegmenterPolicy.reads_teacher``), the
    teacher whose log-odds it reads (the evaluator's ``Teacher``); saved beside the policy.
    """

    def __init__(
        self,
        policy: SegmenterPolicy,
        vocab: CharVocab,
        hide_spaces: bool = False,
        device: torch.device | str = "cpu",
        teacher: Teacher | None = None,
    ):
        if policy.reads_teacher and teacher is None:
            raise ModelError("this policy reads its teacher, and no teacher was given")
        self.policy = policy
        self.vocab = vocab
        self.hide_spaces = hide_spaces
        self.device = torch.device(device)
        self.teacher = teacher if policy.reads_teacher else None

    def teacher_log_odds(self, batch: SegmentationBatch) -> torch.Tensor | None:
        """[B, P] the teacher's log-odds of ``batch``, as the environments observe them, for a
        policy that reads them; else None."""
        if self.teacher is None:
            return None
        return torch.from_numpy(clip_teacher(self.teacher.log_odds(batch))).to(self.device)

    @torch.no_grad()
    def decide(
        self,
        batch: SegmentationBatch,
        sample: bool = False,
        generator: torch.Generator | None = None,
    ) -> SegmentationBatch:
        """``batch`` with the policy's decisions at its free positions (argmax, or sampled)."""
        with eval_mode(self.policy):
            ids, lengths, _width = trim(batch.ids, batch.lengths)
            teacher = self.teacher_log_odds(batch)
            logits = self.policy(ids.to(self.device), lengths.to(self.device), teacher)
            if sample:
                probs = torch.softmax(logits.float(), dim=-1).flatten(0, 1).cpu()  # CPU generator
                actions = torch.multinomial(probs, 1, generator=generator).view(logits.shape[:2])
            else:
                actions = logits.argmax(dim=-1)
            actions = pad_positions(actions.cpu(), batch.positions)
        return batch.with_decisions(actions.numpy())

    def decide_sentences(self, sentences: Sequence[str]) -> SegmentationBatch:
        """Greedy decisions for ``sentences`` (one batch; see ``segment_sentences`` for many)."""
        batch = encode_segmentation_batch(self.vocab, sentences, hide_spaces=self.hide_spaces)
        return self.decide(batch)

    def segment_sentences(self, sentences: Sequence[str]) -> list[list[str]]:
        """Segmentations of ``sentences`` (each a list of non-empty segments that spell the
        sentence, spaces included; none for an empty sentence), decided greedily in length-sorted
        batches. A Transformer policy takes texts of up to ``max_len`` characters: a longer
        sentence is segmented in pieces cut at spaces (a longer word, every ``max_len``)."""
        limit = self.policy.max_len if isinstance(self.policy.encoder, TransformerEncoder) else None
        return segment_in_pieces(self._segment_texts, sentences, limit, "a Transformer policy")

    def _segment_texts(self, texts: Sequence[str]) -> list[list[str]]:
        out: list[list[str]] = [[] for _ in texts]
        for rows in _batches(texts):
            batch = self.decide_sentences([texts[i] for i in rows])
            for k, i in enumerate(rows):
                segments = batch.segments(k)
                if self.hide_spaces:
                    segments = with_spaces(texts[i], segments)
                out[i] = [s for s in segments if s]
        return out

    def save(self, path: str | Path) -> Path:
        """Save to the folder ``path`` (atomically: a complete folder or the previous one)."""
        with atomic_folder(path) as tmp:
            save_tensor_file(self.policy.state_dict(), tmp / POLICY_FILE)
            self.vocab.save(tmp / VOCAB_FILE)
            if self.teacher is not None:
                self.teacher.save(tmp / TEACHER_DIR)
            meta = {
                "policy": vars(self.policy.config),
                "n_actions": self.policy.n_actions,
                "max_len": self.policy.max_len,
                "separator_id": self.policy.separator_id,
                "hide_spaces": self.hide_spaces,
                "reads_teacher": self.policy.reads_teacher,
            }
            (tmp / META_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        return Path(path)

    @classmethod
    def load(cls, path: str | Path, device: torch.device | str = "cpu") -> AgentSegmenter:
        """Load a segmenter saved by ``save``."""
        path = Path(path)
        meta = _read_meta(path)
        vocab = CharVocab.load(path / VOCAB_FILE)
        meta_file = path / META_FILE
        if meta.separator_id is not None and not 0 <= meta.separator_id < len(vocab):
            raise ModelError(
                f"{meta_file}: separator_id {meta.separator_id} is not an id of {VOCAB_FILE} "
                f"(0 to {len(vocab) - 1})"
            )
        try:
            policy = SegmenterPolicy(
                len(vocab),
                meta.n_actions,
                meta.max_len,
                meta.policy,
                meta.separator_id,
                meta.reads_teacher,
            )
        except (ConfigError, ValueError, TypeError, RuntimeError) as e:  # options edited by hand
            raise ModelError(f"{meta_file}: options that build no policy ({e})") from None
        state = load_tensor_file(path / POLICY_FILE, device, what="segmenter policy")
        load_weights(policy, state, path / POLICY_FILE, f"the policy {META_FILE} describes")
        teacher = load_teacher(path / TEACHER_DIR, device) if meta.reads_teacher else None
        return cls(policy.to(device), vocab, meta.hide_spaces, device, teacher)


def _batches(texts: Sequence[str]) -> Iterator[list[int]]:
    """Indices of ``texts``, shortest first, in batches of at most ``EVAL_BATCH`` texts and (but for
    a longer text alone) ``EVAL_CHARACTERS`` padded characters."""
    batch: list[int] = []
    for i in sorted(range(len(texts)), key=lambda i: len(texts[i])):
        full = len(batch) == EVAL_BATCH or (len(batch) + 1) * len(texts[i]) > EVAL_CHARACTERS
        if batch and full:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


@dataclass
class SavedAgent:
    """What ``agent_segmenter.json`` holds beside the weights: the policy's shape and how it reads
    spaces."""

    policy: PolicyConfig
    """The policy's architecture (``segmenter`` in folders saved before it was named so)."""
    n_actions: int
    max_len: int
    hide_spaces: bool
    separator_id: int | None = None
    reads_teacher: bool = False
    """Whether the policy reads its teacher (saved in ``teacher/``); absent in older folders."""


def _read_meta(path: Path) -> SavedAgent:
    """The ``agent_segmenter.json`` of the saved segmenter at ``path``, each value of its type; a
    ``ModelError`` naming the file and the value otherwise."""
    meta_file = path / META_FILE
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        if isinstance(meta, dict) and "policy" not in meta and "segmenter" in meta:
            meta["policy"] = meta.pop("segmenter")  # the policy's old name
        optional = {"reads_teacher"}
        values = {f.name: meta[f.name] for f in fields(SavedAgent) if f.name not in optional}
        values.update({name: meta[name] for name in optional if name in meta})
    except FileNotFoundError:
        raise ModelError(f"{path}: no saved agent segmenter here ({META_FILE} missing)") from None
    except KeyError as e:
        raise ModelError(f"{meta_file}: no {e} in it; was it written by segrl?") from None
    except (ValueError, TypeError) as e:  # ValueError: not UTF-8, or not JSON
        raise ModelError(
            f"{meta_file}: damaged or not a segrl agent segmenter description ({e})"
        ) from None
    try:
        saved = build_config(SavedAgent, overrides=values, overrides_from=str(meta_file))
    except ConfigError as e:
        raise ModelError(str(e)) from None
    if saved.n_actions < 2 or saved.max_len < 1:
        raise ModelError(
            f"{meta_file}: n_actions must be at least 2 and max_len at least 1, got "
            f"{saved.n_actions} and {saved.max_len}"
        )
    return saved
