"""Continuous-unit models (units learned inside a network) and segments read off their attention.

- ``base``: the ``UnitModel`` interface (a character autoencoder exposing the attention map that
  segments are read from), ``AutoencoderBatch``, ``Encoding``;
- ``layers``: pre-LN Transformer blocks with attention that returns its weights;
- ``transformer``: the plain Transformer autoencoder (the baseline);
- ``nvib`` and ``nvib_model``: NVIB (the layer, sampling, denoising attention, KL terms) and the
  stacked-NVIB denoising autoencoder;
- ``registry``: models by name; ``config``: run configs; ``stepping``: one training step;
  ``evaluation``, ``robustness``, ``plots``: metrics, noise curves, figures; ``probing``: probes of
  the unit vectors; ``saving``: trained model folders; ``noise``: character noise; ``segments``:
  attention -> segments.

The jobs that train, evaluate, probe and fine-tune them, and log to MLflow, are
``segrl.experiments``' ``units_train``, ``units_eval``, ``units_probe`` and ``units_finetune``.
"""
