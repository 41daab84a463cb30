"""Benchmark suites: languages (a corpus and a gold set each), systems (segrl command lines), seeds.

A suite is a TOML file; the built-in ones (``quick``, ``sigmorphon``) ship with the package and are
named by name. Paths may use ``{data_dir}`` (``--data-dir``, default ``../shared/data``)::

    name = "mine"
    seeds = [0, 1, 2]

    [[languages]]
    name = "fi"
    corpus = "wordfreq:fi"                    # any corpus form; omitted: the bundled corpus
    gold = "{data_dir}/fin.word.dev.tsv"      # omitted: the bundled English gold set
    options = "--max-words 30000"             # data flags added to every command of this language

    [[systems]]
    name = "agent"
    command = "train --evaluator lm --reward per-action --steps 500"

Work is given in steps or epochs: a command with ``--max-minutes`` is refused, so that results do not
depend on the machine's load.
"""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from segrl.data.segmented import SEGMENTED_PREFIX
from segrl.data.wordlists import GOLDWORDS_PREFIX
from segrl.errors import ConfigError, DataError

DEFAULT_DATA_DIR = "../shared/data"
COMMANDS: dict[tuple[str, ...], dict[str, str | None]] = {
    ("baseline",): {"seed": "--train-seed", "out": None, "threads": None},
    ("train",): {"seed": "--train-seed", "out": "--out", "threads": "--threads"},
    ("lm", "train"): {"seed": "--train-seed", "out": "--out", "threads": "--threads"},
    ("units", "train"): {"seed": "--train-seed", "out": "--out", "threads": "--threads"},
}
"""The commands a system may run, and the flags by which the bench gives each its seed, run folder
and threads."""
SET_BY_BENCH = (
    "--corpus",
    "--gold",
    "--seed",
    "--train-seed",
    "--experiment",
    "--run-name",
    "--out",
    "--threads",
    "--max-minutes",
)
"""Flags a system's command may not give: the bench sets them (``--max-minutes``: budgets are work)."""


@dataclass(frozen=True)
class Language:
    name: str
    corpus: str | None
    """Any corpus form (``--corpus``); None: the bundled corpus."""
    gold: str | None
    """A gold file (``--gold``); None: the bundled English gold set."""
    options: tuple[str, ...] = ()
    """Data flags added to every command run on this language (e.g. ``--max-words 30000``)."""


@dataclass(frozen=True)
class System:
    name: str
    command: tuple[str, ...]
    """A segrl command line without the program name, e.g. ``("baseline", "--method", "bpe")``."""

    @property
    def flags(self) -> dict[str, str | None]:
        """How the bench passes a seed, a run folder and threads to this system's command."""
        for prefix, flags in COMMANDS.items():
            if self.command[: len(prefix)] == prefix:
                return flags
        raise AssertionError("checked when the suite was read")


@dataclass(frozen=True)
class Suite:
    name: str
    source: str
    """Where the suite was read from (a file, or ``built-in:NAME``)."""
    seeds: tuple[int, ...]
    languages: tuple[Language, ...]
    systems: tuple[System, ...]
    description: str = ""

    def select(
        self,
        languages: list[str] | None = None,
        systems: list[str] | None = None,
        seeds: list[int] | None = None,
    ) -> Suite:
        """The same suite restricted to the named languages, systems and seeds (None: all)."""

        def pick(items, names, what):
            if names is None:
                return items
            known = {i.name for i in items}
            unknown = [n for n in names if n not in known]
            if unknown:
                raise ConfigError(
                    f"{self.source}: no {what} {', '.join(unknown)}; it has: {', '.join(sorted(known))}"
                )
            return tuple(i for i in items if i.name in names)

        return Suite(
            name=self.name,
            source=self.source,
            seeds=tuple(seeds) if seeds is not None else self.seeds,
            languages=pick(self.languages, languages, "language"),
            systems=pick(self.systems, systems, "system"),
            description=self.description,
        )


def builtin_suites() -> list[str]:
    """Names of the suites that ship with segrl."""
    folder = resources.files("segrl.benchmark").joinpath("suites")
    return sorted(
        p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")
    )


def load_suite(name_or_path: str, data_dir: str | Path | None = None) -> Suite:
    """A built-in suite by name, or a suite file; ``{data_dir}`` in its paths is ``data_dir``."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.is_file():
        if not path.is_file():
            raise ConfigError(f"{path}: no such suite file")
        text, source = _read_text(path), str(path)
    elif name_or_path in builtin_suites():
        resource = resources.files("segrl.benchmark").joinpath("suites", f"{name_or_path}.toml")
        text, source = resource.read_text(encoding="utf-8"), f"built-in:{name_or_path}"
    else:
        raise ConfigError(
            f"no suite named {name_or_path!r}: give a suite file (TOML) or one of "
            f"{', '.join(builtin_suites())}"
        )
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: not valid TOML ({e})") from None
    return _parse(raw, source, Path(data_dir or DEFAULT_DATA_DIR))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: a suite file must be UTF-8 TOML") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read ({e.strerror})") from None


def _parse(raw: dict, source: str, data_dir: Path) -> Suite:
    _known(raw, {"name", "description", "seeds", "languages", "systems"}, source)
    seeds = raw.get("seeds", [0])
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ConfigError(f"{source}: seeds must be a non-empty list of integers")
    languages = tuple(
        _language(entry, f"{source}: languages[{i}]", data_dir)
        for i, entry in enumerate(raw.get("languages", []))
    )
    systems = tuple(
        _system(entry, f"{source}: systems[{i}]") for i, entry in enumerate(raw.get("systems", []))
    )
    for what, items in (("languages", languages), ("systems", systems)):
        if not items:
            raise ConfigError(f"{source}: the suite has no {what}")
        names = [i.name for i in items]
        if len(set(names)) != len(names):
            raise ConfigError(f"{source}: two {what} share a name: {names}")
    return Suite(
        name=str(raw.get("name") or Path(source).stem),
        source=source,
        seeds=tuple(seeds),
        languages=languages,
        systems=systems,
        description=str(raw.get("description", "")),
    )


def _language(entry: dict, where: str, data_dir: Path) -> Language:
    _known(entry, {"name", "corpus", "gold", "options"}, where)
    name = _name(entry, where)
    corpus = _resolve(entry.get("corpus"), data_dir, f"{where} ({name}) corpus")
    gold = _resolve(entry.get("gold"), data_dir, f"{where} ({name}) gold")
    options = tuple(shlex.split(str(entry.get("options", ""))))
    _refuse_bench_flags(options, where)
    return Language(name=name, corpus=corpus, gold=gold, options=options)


def _system(entry: dict, where: str) -> System:
    _known(entry, {"name", "command"}, where)
    name = _name(entry, where)
    command = tuple(shlex.split(str(entry.get("command", ""))))
    if not any(command[: len(prefix)] == prefix for prefix in COMMANDS):
        known = ", ".join(" ".join(p) for p in COMMANDS)
        raise ConfigError(f"{where} ({name}): command must start with one of: {known}")
    if "--method" in command and "all" in command:
        raise ConfigError(f"{where} ({name}): one system is one segmenter; list each method")
    _refuse_bench_flags(command, f"{where} ({name})")
    return System(name=name, command=command)


def _refuse_bench_flags(args: tuple[str, ...], where: str) -> None:
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in SET_BY_BENCH:
            reason = (
                "budgets are steps or epochs, never minutes"
                if flag == "--max-minutes"
                else "the bench sets it for every cell"
            )
            raise ConfigError(f"{where}: {flag} is not allowed here ({reason})")


def _name(entry: dict, where: str) -> str:
    name = entry.get("name")
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise ConfigError(f"{where}: needs a name (no '/', not starting with '.')")
    return name


def _resolve(value: object, data_dir: Path, what: str) -> str | None:
    if value is None or value == "":
        return None
    text = str(value)
    if "{data_dir}" not in text:
        return text
    prefix = next((p for p in (SEGMENTED_PREFIX, GOLDWORDS_PREFIX) if text.startswith(p)), "")
    path = Path(text.removeprefix(prefix).replace("{data_dir}", str(data_dir))).resolve()
    found = path.parent if "{split}" in path.name else path  # a segmented corpus's split pattern
    if not found.exists():
        raise DataError(
            f"{what}: {found} not found; give the folder that holds it with --data-dir "
            f"(now {data_dir})"
        )
    return f"{prefix}{path}"


def _known(entry: object, keys: set[str], where: str) -> None:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(entry) - keys)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {', '.join(unknown)}; known keys: {', '.join(sorted(keys))}"
        )
