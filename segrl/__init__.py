"""segrl: a workbench for discovering meaning-bearing units (morphemes, words) in raw character text.

Importing the package is cheap: heavy dependencies (torch, mlflow, gymnasium environments) load when
the module that needs them is imported.
"""

from segrl.errors import ConfigError, DataError, ModelError, SegrlError, TrackingError

__version__ = "0.1.0"

__all__ = ["ConfigError", "DataError", "ModelError", "SegrlError", "TrackingError", "__version__"]
