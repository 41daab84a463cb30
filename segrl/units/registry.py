"""Unit models by name: what ``segrl units train --model NAME`` can build.

Adding a model is one line here, ``"name": "module.path:ClassName"``, plus the module that defines
the class (a ``segrl.units.base.UnitModel`` with its ``config_class``). Classes are imported only
when asked for, so a model's module may import anything without slowing down the others.
"""

from __future__ import annotations

import importlib

from segrl.errors import ConfigError
from segrl.units.base import UnitModel

UNIT_MODELS: dict[str, str] = {
    "transformer": "segrl.units.transformer:TransformerAutoencoder",
    "nvib": "segrl.units.nvib_model:NVIBAutoencoder",
    "dcsa": "segrl.units.dcsa:DCSAAutoencoder",
    "stride": "segrl.units.dcsa:StrideAutoencoder",
    "seqreduce": "segrl.units.seqreduce:SeqReduceAutoencoder",
}


def available_models() -> list[str]:
    return list(UNIT_MODELS)


def model_class(name: str) -> type[UnitModel]:
    """The ``UnitModel`` subclass registered as ``name`` (``ConfigError`` when there is none)."""
    try:
        target = UNIT_MODELS[name]
    except KeyError:
        raise ConfigError(
            f"unknown unit model {name!r}; choose one of: {', '.join(UNIT_MODELS)}"
        ) from None
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, UnitModel)):
        raise TypeError(f"{target} is not a UnitModel subclass")
    return cls
