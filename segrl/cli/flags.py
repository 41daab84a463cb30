"""Flags as a table: a flag that sets a config option is a row (flag, dotted key, type, metavar), and
its help is the option's own documentation, the attribute docstring under the config field, so the
two cannot diverge.

    TRAIN = FlagTable("segrl.agents.config:TrainConfig", (
        Flag("--steps", "reinforce.steps", int, "N"),
        Flag("--hide-spaces", "env.hide_spaces", bool),
    ))
    TRAIN.add_to(parser, "agent")

The flag's ``dest`` is the dotted key (``segrl.cli.common.config_from_args`` reads it). The config
class is named by import path and imported only when help is shown (``segrl train --help``), so
that parsing a command line does not import PyTorch; its help then reads the field's docstring (the
first sentence, without reST markup) and the default that the config gives the option.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import importlib
import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One row of a flag table."""

    flag: str
    """The flag, ``--steps``."""
    key: str
    """The dotted config option it sets, relative to the table's config class."""
    type: type = str
    """``str``, ``int``, ``float``; ``bool``: the flag takes no value and sets ``const``; ``list``:
    a comma-separated list of strings."""
    metavar: str | None = None
    note: str = ""
    """Said after the docstring's sentence: what the command line adds (a flag's old name, which
    value a choice of this command takes)."""
    const: Any = True
    """The value a ``bool`` flag sets (``--no-robustness`` sets False)."""
    old_names: tuple[str, ...] = ()
    """Earlier names of the flag, still accepted and not shown."""
    required: bool = False


@dataclass(frozen=True)
class FlagTable:
    """The flags of one config class: ``config`` is its import path, ``module:Class``."""

    config: str
    flags: tuple[Flag, ...]
    prefix: str = ""
    """Where the class sits in the command's config (``data.`` for ``DataConfig``)."""
    show_defaults: bool = True
    """Whether the help says the default (not where it depends on what else is chosen, as a unit
    model's training defaults do)."""

    def add_to(self, parser: argparse.ArgumentParser, title: str | None = None) -> None:
        """Add every flag to ``parser`` (in an argument group ``title``, where given)."""
        parser.formatter_class = OptionHelpFormatter
        group = parser.add_argument_group(title) if title else parser
        for row in self.flags:
            options: dict[str, Any] = {"dest": self.prefix + row.key}
            if row.required:
                options["required"] = True
            if row.type is bool:
                options.update(action="store_const", const=row.const)
            else:
                options.update(metavar=row.metavar, type=VALUE_PARSERS.get(row.type))
            help = OptionHelp(self.config, row, self.show_defaults)
            group.add_argument(row.flag, help=help, **options)
            for old in row.old_names:
                group.add_argument(old, help=argparse.SUPPRESS, **options)


def comma_list(text: str) -> list[str]:
    return [value.strip() for value in text.split(",") if value.strip()]


VALUE_PARSERS: dict[type, Any] = {str: None, int: int, float: float, list: comma_list}


class OptionHelp(str):
    """A flag's help as argparse holds it until it is shown: the key (argparse needs a string),
    with what ``OptionHelpFormatter`` needs to write the real one."""

    def __new__(cls, config: str, row: Flag, show_default: bool = True) -> OptionHelp:
        help = super().__new__(cls, row.key)
        help.config, help.row, help.show_default = config, row, show_default
        return help

    def text(self) -> str:
        doc, default = option_doc(self.config, self.row.key)
        parts = [first_sentence(doc)] if doc else []
        if parts and self.row.type is bool and self.row.const is False:
            parts[0] = f"turns off: {parts[0]}"
        if self.row.note:
            parts.append(self.row.note)
        text = "; ".join(parts)
        shown = self.show_default and self.row.type is not bool
        if shown and default is not None and default != []:
            shown = ",".join(map(str, default)) if isinstance(default, list) else default
            text += f" (default: {shown})"
        return text.replace("%", "%%")


class OptionHelpFormatter(argparse.HelpFormatter):
    """Writes each table flag's help from its config option's docstring (``OptionHelp``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if isinstance(action.help, OptionHelp):
            return action.help.text()
        return action.help


@functools.cache
def option_doc(config: str, key: str) -> tuple[str, Any]:
    """The docstring of the option ``key`` of the config class at import path ``config`` (empty
    where it has none) and the default the config gives it."""
    module, _, name = config.partition(":")
    node: Any = getattr(importlib.import_module(module), name)()
    *parents, leaf = key.split(".")
    for part in parents:
        node = getattr(node, part)
    return field_docs(type(node)).get(leaf, ""), getattr(node, leaf)


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass's fields (the string under each field), its bases'
    too, read from the source of each class."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):  # made by make_dataclass: its fields are its bases'
            continue
        body = ast.parse(source).body[0].body
        for statement, after in zip(body, body[1:], strict=False):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[statement.target.id] = inspect.cleandoc(after.value.value)
    return docs


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring, on one line, without reST's double backquotes."""
    text = " ".join(doc.replace("``", "").split())
    return re.split(r"(?<=\.)\s+(?=[A-Z])", text, maxsplit=1)[0].rstrip(".")
