"""The project's exception types.

Every error a user can cause (a bad file, a bad option, an unreachable tracking server) is raised as a
``SegrlError`` subclass whose message says what went wrong and what to do. The command line prints the
message and exits non-zero without a traceback; library users catch the type.
"""

import signal


class SegrlError(Exception):
    """A problem the user can fix; the message says how."""


class DataError(SegrlError):
    """A corpus or gold-segmentation file that cannot be used (names the file and, where known, the line)."""


class ConfigError(SegrlError):
    """An unknown option, a bad value, or a config file that cannot be read."""


class TrackingError(SegrlError):
    """The MLflow tracking store cannot be reached or written."""


class ModelError(SegrlError):
    """A saved model that is missing, incomplete or from an incompatible version."""


class WriteError(SegrlError):
    """A file that could not be written mid-run (a full disk, a read-only folder): the message names
    it, the cause and what was kept to resume from."""


class Interrupted(KeyboardInterrupt):
    """A command stopped by a signal: Ctrl-C's SIGINT, or SIGTERM (``segrl.processes``). ``signum``
    is the signal (the command line exits with 128 + it); the message, where there is one, says what
    was kept and how to resume."""

    def __init__(self, message: str = "", signum: int = signal.SIGINT):
        super().__init__(*([message] if message else []))
        self.signum = signum


class DataWarning(UserWarning):
    """An input that can be used but is likely a mistake (a corpus of a handful of sentences); the
    command line prints it as one line."""
