"""The interface of a unit model: a character autoencoder whose units are read off attention.

A unit model encodes a (possibly noised) character sequence into a set of vectors, reconstructs the
clean sequence from them with an autoregressive decoder, and exposes the attention map that segments
are read from (``segrl.units.segments.segments_from_attention``). Everything else (training loop,
evaluation, checkpoints, MLflow, the ``segrl units`` command) is shared and works with any model that
implements this interface:

- ``config_class``: the dataclass of the model's own options (the ``[arch]`` table of a run's config);
- ``train_defaults``: dotted training options whose defaults differ for this model
  (e.g. ``{"lr": 1e-4}``), applied below a config file and command-line flags;
- ``encode(ids, mask) -> Encoding``: the vectors the decoder reads, the segment attention map, the
  number of kept vectors per sentence, per-layer maps to draw, diagnostics;
- ``decode(encoding, inputs, mask) -> logits``;
- ``penalty(encoding, progress) -> {name: term}``: regularisers added to the reconstruction loss
  (already weighted); ``progress`` in [0, 1] is the fraction of training done, for annealing.

``loss(batch, progress)`` puts these together; models rarely override it.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from segrl.data.batching import encode_batch
from segrl.data.vocab import CharVocab
from segrl.errors import ModelError
from segrl.units.layers import token_cross_entropy

RECONSTRUCTION = "reconstruction"
"""Name of the reconstruction cross-entropy term (nats per target character, ``<eos>`` included)."""


@dataclass
class AutoencoderBatch:
    """What a character autoencoder trains on: the encoder reads ``source`` (the noised text), the
    decoder is teacher-forced on ``<bos>`` + clean text and predicts clean text + ``<eos>``."""

    source: torch.Tensor  # [B, L] long, noised characters
    source_mask: torch.Tensor  # [B, L] bool, True at characters
    decoder_input: torch.Tensor  # [B, T] long, <bos> + clean text, T = longest clean text + 1
    target: torch.Tensor  # [B, T] long, clean text + <eos>
    target_mask: torch.Tensor  # [B, T] bool, True at target positions
    texts: list[str]
    noisy_texts: list[str]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> AutoencoderBatch:
        """The batch on ``device``; with ``non_blocking`` a CPU batch bound for a GPU is copied
        from pinned memory, without waiting for the work already queued there."""
        pin = non_blocking and torch.device(device).type == "cuda"

        def move(t: torch.Tensor) -> torch.Tensor:
            return (t.pin_memory() if pin and t.device.type == "cpu" else t).to(
                device, non_blocking=non_blocking
            )

        return AutoencoderBatch(
            move(self.source),
            move(self.source_mask),
            move(self.decoder_input),
            move(self.target),
            move(self.target_mask),
            self.texts,
            self.noisy_texts,
        )

    def __len__(self) -> int:
        return len(self.texts)


def make_autoencoder_batch(
    vocab: CharVocab,
    texts: Sequence[str],
    noisy_texts: Sequence[str] | None = None,
    device: torch.device | str | None = None,
) -> AutoencoderBatch:
    """The batch that reconstructs ``texts`` from ``noisy_texts`` (``texts`` themselves when None).

    An empty source text is an error (an encoder needs at least one character to attend to).
    """
    noisy = list(texts if noisy_texts is None else noisy_texts)
    if len(noisy) != len(texts):
        raise ValueError(f"{len(noisy)} noisy texts for {len(texts)} texts")
    if any(not t for t in noisy):
        raise ValueError("an autoencoder source text is empty; drop empty texts before batching")
    source = encode_batch(vocab, noisy)
    clean = encode_batch(vocab, texts)
    b, width = clean.ids.shape
    decoder_input = torch.full((b, width + 1), vocab.pad_id, dtype=torch.long)
    decoder_input[:, 0] = vocab.bos_id
    decoder_input[:, 1:] = clean.ids
    target = torch.cat([clean.ids, torch.full((b, 1), vocab.pad_id, dtype=torch.long)], dim=1)
    target[torch.arange(b), clean.lengths] = vocab.eos_id
    target_mask = torch.arange(width + 1).unsqueeze(0) <= clean.lengths.unsqueeze(1)  # [B, T]
    batch = AutoencoderBatch(
        source.ids,
        source.mask,
        decoder_input,
        target,
        target_mask,
        list(texts),
        noisy,
    )
    return batch.to(device) if device is not None else batch


@dataclass
class Encoding:
    """What an encoder produces for a batch."""

    memory: torch.Tensor  # [B, K, Dm] the vectors (units) the decoder reads
    memory_mask: torch.Tensor  # [B, K] bool, True at vectors the decoder may read (kept)
    attention: torch.Tensor | None
    """``[B, L, S]``: the map segments are read from; rows are the input characters (rows beyond a
    text's length are padding), columns the keys (characters, slots, plus e.g. NVIB's prior). None
    where a model in training does not build its maps (segments are read in eval mode)."""
    kept: torch.Tensor | None = (
        None  # [B] float, vectors/units kept per sentence, where that applies
    )
    layer_attention: dict[str, torch.Tensor] = field(default_factory=dict)
    """Named attention maps ``[B, L, S_l]`` to draw, bottom to top (e.g. ``{"layer 6": ...}``)."""
    stats: dict[str, torch.Tensor] = field(default_factory=dict)
    """Scalar diagnostics to log (e.g. ``kept_fraction/layer_4``); not part of the loss."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Whatever the model's ``penalty`` needs (e.g. the NVIB layers' Dirichlet-process parameters)."""


@dataclass
class LossOutput:
    total: torch.Tensor  # scalar: reconstruction + every penalty term
    terms: dict[str, torch.Tensor]  # scalar terms by name, reconstruction first
    stats: dict[str, torch.Tensor]  # scalar diagnostics
    encoding: Encoding
    logits: torch.Tensor  # [B, T, V]


class UnitModel(nn.Module, ABC):
    """A character autoencoder whose units are read off attention (see the module docstring).

    Subclasses set ``config_class`` and take ``(config, vocab_size)`` in ``__init__``.
    """

    config_class: ClassVar[type]
    train_defaults: ClassVar[Mapping[str, Any]] = {}
    unit_key_maps: ClassVar[tuple[str, ...]] = ()
    """Names of ``Encoding.layer_attention`` maps whose keys are unit vectors, not characters."""
    finetune_defaults: ClassVar[Mapping[str, Any]] = {}
    """Dotted options (``arch.*``, ``train.*``) that ``segrl units finetune`` sets for this model
    above the trained model's own, below a config file and command-line flags."""

    @classmethod
    def resolve_arch(cls, arch: Any) -> Any:
        """``arch`` (a ``config_class``) with its options left unset (None) given the values that
        mean the same (``segrl units train`` resolves its config once); a copy. None here."""
        return arch

    @classmethod
    def finetune_options(cls, trained: Any) -> dict[str, Any]:
        """``finetune_defaults`` fitted to the ``trained`` model's config (``UnitsConfig``)."""
        return dict(cls.finetune_defaults)

    def __init__(self, config: Any, vocab_size: int):
        super().__init__()
        self.config = config
        self.vocab_size = vocab_size

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @abstractmethod
    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> Encoding:
        """Encode ``ids [B, L]`` (``mask [B, L]`` True at characters)."""

    @abstractmethod
    def decode(self, encoding: Encoding, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits ``[B, T, V]`` for decoder ``inputs [B, T]``."""

    def init_from_pretrained(self, source: UnitModel) -> None:
        """Take the weights of a trained model (``segrl units finetune --from``): by default only from
        a model of this very class and shape; models that can start from others override this."""
        if type(source) is not type(self):
            raise ModelError(
                f"a {type(self).__name__} cannot start from a trained {type(source).__name__}"
            )
        try:
            self.load_state_dict(source.state_dict())
        except RuntimeError as e:
            raise ModelError(f"the trained model's weights do not fit this one ({e})") from None

    def copy_weights_of(
        self, source: UnitModel, shape: type, new: Sequence[str], dropped: Sequence[str] = ()
    ) -> None:
        """Copy every weight of ``source``, a trained model of another class, into this one. The
        options of the config dataclass ``shape`` (dropout aside) must agree; this model's weights
        whose names contain one of ``new`` keep their own initialisation, and the source's whose
        names contain one of ``dropped`` are left out. Any other weight that does not map is an error."""
        differ = [
            f"{f.name} {getattr(source.config, f.name)} against {getattr(self.config, f.name)}"
            for f in dataclasses.fields(shape)
            if f.name != "dropout"
            and getattr(source.config, f.name) != getattr(self.config, f.name)
        ]
        if differ:
            raise ModelError(
                f"the {type(source).__name__} to start from has another shape ("
                + "; ".join(differ)
                + ")"
            )
        weights = {k: v for k, v in source.state_dict().items() if not any(d in k for d in dropped)}
        missing, unexpected = self.load_state_dict(weights, strict=False)
        if unexpected or any(not any(n in key for n in new) for key in missing):
            raise ModelError(f"weights that do not map: {unexpected or missing}")

    def penalty(self, encoding: Encoding, progress: float) -> dict[str, torch.Tensor]:
        """Named regularisation terms (scalars, already weighted) added to the loss; none here."""
        return {}

    def loss(self, batch: AutoencoderBatch, progress: float = 1.0) -> LossOutput:
        """Reconstruction cross-entropy of the clean text plus the model's penalty terms."""
        encoding = self.encode(batch.source, batch.source_mask)
        logits = self.decode(encoding, batch.decoder_input, batch.target_mask)
        terms = {RECONSTRUCTION: token_cross_entropy(logits, batch.target, batch.target_mask)}
        for name, value in self.penalty(encoding, progress).items():
            if name in terms:
                raise ValueError(f"penalty term {name!r} clashes with another loss term")
            terms[name] = value
        total = torch.stack([t.float() for t in terms.values()]).sum()
        return LossOutput(total, terms, dict(encoding.stats), encoding, logits)
