"""The ``segrl`` command. Thin: parses arguments, builds a config, calls library functions.

Each subcommand group lives in its own module with a ``register(subparsers)`` function; a user error
(``SegrlError``, or a path longer than the file system allows, or standard output on a
full disk) is printed as one line on stderr with a non-zero exit code, never as a traceback. SIGTERM stops a command as Ctrl-C does (a
training job at its next step, checkpointed): one line, exit code 128 + the signal (130, 143).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import io
import os
import signal
import sys
import warnings

from segrl import __version__
from segrl.errors import DataWarning, SegrlError
from segrl.files import STANDARD_OUTPUT, length_problem, naming, write_remedy
from segrl.processes import handling, raise_interrupt
from segrl.tracking.tags import set_command

COMMAND_MODULES = (
    "segrl.cli.data",
    "segrl.cli.baseline",
    "segrl.cli.tracking",
    "segrl.cli.lm",
    "segrl.cli.units",
    "segrl.cli.train",
    "segrl.cli.bench",
    "segrl.cli.segment",
)
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
"""Ctrl-C's exit code, 128 + SIGINT; a SIGTERM's is 128 + SIGTERM, 143."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="segrl",
        description="Discover meaning-bearing units (morphemes, words) in raw character text.",
    )
    parser.add_argument("--version", action="version", version=f"segrl {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    words = _command_words(parser, sys.argv[1:] if argv is None else argv)
    set_command(" ".join(["segrl", *words]))
    stdout = sys.stdout
    try:
        with warnings.catch_warnings(), handling(raise_interrupt, [signal.SIGTERM]):
            warnings.showwarning = _show_warning
            sys.stdout = _NamedOutput(stdout)
            code = args.func(args) or 0
            sys.stdout.flush()  # here, not at exit, where a failure could only be a traceback
            return code
    except SegrlError as e:
        print(f"segrl: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        print(f"segrl: interrupted{by}" + (f": {e}" if str(e) else ""), file=sys.stderr)
        return 128 + signum  # as the shell gives a command a signal ended
    except BrokenPipeError:  # the reader stopped reading (`segrl segment ... | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the exit's flush of stdout fails no more
        return 0
    except OSError as e:
        if e.filename == STANDARD_OUTPUT:  # a full disk under `segrl ... > out.txt`
            _discard_output(stdout)
            print(
                f"segrl: error: cannot write standard output ({e.strerror}); "
                f"{write_remedy(e, STANDARD_OUTPUT)}",
                file=sys.stderr,
            )
            return EXIT_USER_ERROR
        if e.errno != errno.ENAMETOOLONG:
            raise
        too_long = length_problem(e.filename) if e.filename else None
        print(
            f"segrl: error: {e.filename}: {too_long or 'too long for the system'}; give a shorter path",
            file=sys.stderr,
        )
        return EXIT_USER_ERROR
    finally:
        sys.stdout = stdout


class _NamedOutput:
    """Standard output, whose failed writes (a full disk) name it (``STANDARD_OUTPUT``), so that
    they end in one line, and a training job's in a resumable run, as a failed file write does."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        with naming(STANDARD_OUTPUT):
            return self._stream.write(text)

    def flush(self) -> None:
        with naming(STANDARD_OUTPUT):
            self._stream.flush()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _discard_output(stdout) -> None:
    """Send what is left in ``stdout``'s buffer, and anything written later, nowhere: the exit's
    flush of it would fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    with contextlib.suppress(io.UnsupportedOperation):  # no file descriptor: a captured stdout
        os.dup2(devnull, stdout.fileno())
    os.close(devnull)


def _command_words(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """The subcommand words that start ``argv`` (``["units", "train"]``), as the parser knows them."""
    words = []
    for word in argv:
        found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not found or word not in found[0].choices:
            break
        words.append(word)
        parser = found[0].choices[word]
    return words


_show_other_warning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """segrl's own warnings as one line on stderr; any other as Python shows it."""
    if issubclass(category, DataWarning):
        print(f"segrl: warning: {message}", file=sys.stderr)
    else:
        _show_other_warning(message, category, filename, lineno, file, line)


if __name__ == "__main__":
    sys.exit(main())
