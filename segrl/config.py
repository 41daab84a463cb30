"""Dataclass configs: defaults that work, a TOML file on top, command-line overrides on top of that.

Each job has one top-level config dataclass (``BaselineConfig`` here, the others beside their code) whose
fields are scalars or nested config dataclasses. ``build_config`` applies a TOML file and then dotted
overrides (``{"data.max_len": 96}``); ``config_to_dict``/``flatten_config`` give what every run saves.

    >>> cfg = build_config(BaselineConfig, overrides={"method": "bpe", "data.max_len": 96})
    >>> cfg.data.max_len
    96
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from segrl.errors import ConfigError

C = TypeVar("C")

NO_LIMIT = -1
"""The value of an option that sets a limit (``max_minutes``, ``data.max_words``,
``data.max_sentences``, ``gold.max_words``, an LM's ``max_segment_length``) when there is none: what
such an option left unset (None) resolves to in a job's resolved config. Not 0, which an LM's
``max_segment_length`` refuses as a length. A budget of work that is not a limit resolves to the
budget itself (``segrl lm train``'s ``steps``, the LM evaluator's ``pretrain_steps``)."""

CorpusFormat = Literal["auto", "text", "counts", "words"]
Dampening = Literal["none", "log", "ones"]


@dataclass
class DataConfig:
    """Where the corpus comes from and how it is normalised and split (as in the study)."""

    corpus: str | None = None
    """A UTF-8 text file or folder (``.gz`` files are read too), a word-count list, or
    ``wordfreq:LANG``; None uses the bundled WikiText-2 slice (resolved to its name,
    ``bundled:wikitext2_test.txt.gz``, which reads it too)."""
    corpus_format: CorpusFormat = "auto"
    """``text`` (running text), ``counts`` (``count word`` or ``word<TAB>count`` lines), ``words`` (one
    word per line) or ``auto`` (told apart by the first lines)."""
    max_len: int = 128
    """Sentences (or words) longer than this many characters (after normalisation) are left out."""
    min_char_count: int = 25
    """Characters seen fewer than this many times are mapped to one placeholder character (in a
    word list, characters are counted over word tokens: a word seen 40 times counts 40 times)."""
    max_words: int | None = None
    """A word list keeps only its this many most frequent words; None (resolved: ``NO_LIMIT``)
    keeps all (``wordfreq:LANG`` keeps its 60,000 most frequent alphabetic words)."""
    dampening: Dampening = "log"
    """How a word list's counts weight its words where episodes and the LM's training words are drawn:
    ``none`` (token counts), ``log`` (``round(log2(count + 1))``) or ``ones`` (types)."""
    lowercase: bool = True
    valid_fraction: float = 0.1
    test_fraction: float = 0.1
    seed: int = 0
    """Seed of the deterministic train/valid/test split."""
    max_sentences: int | None = None
    """Keep at most this many sentences (the first ones, before splitting); None (resolved:
    ``NO_LIMIT``) keeps all."""


@dataclass
class GoldConfig:
    """The gold segmentation every segmenter is scored against."""

    path: str | None = None
    """A Morpho Challenge or SIGMORPHON 2022 file; None uses the bundled SIGMORPHON English surface
    set (resolved to its name, ``bundled:sigmorphon2022_eng_word_dev_surface.tsv.gz``, which reads
    it too; to "" where a segmented corpus's spaces are the gold)."""
    max_words: int | None = None
    """Score on at most this many gold words (a deterministic sample); None (resolved:
    ``NO_LIMIT``) scores on all."""


@dataclass
class TrackingConfig:
    """Where results go in MLflow (the store itself comes from ``MLFLOW_TRACKING_URI``)."""

    experiment: str = "segrl"
    """The MLflow experiment the run is logged in."""
    run_name: str | None = None
    """The MLflow run's name; None: the job's own (the segmenter's name, ``slm``, ...)."""
    register: str | None = None
    """Also add the trained segmenter to the MLflow model registry under this name (a new version);
    None (resolved: "") or "": not registered."""


@dataclass
class RunOptions:
    """The options every training job has (``segrl train``, ``segrl lm train``, ``segrl units
    train``), each under one name: the run folder, the seed, where and on how many threads it runs.
    Each job's config is a ``RunOptions`` (a subclass: the options sit at the top of its config,
    ``--set seed=1`` in every job), with its own tables beside them."""

    out: str | None = None
    """The run folder (config, checkpoint, the trained model); running the same command with the
    same folder resumes an interrupted run. None: the job's folder under ``runs/`` (resolved to the
    folder chosen where the job starts)."""
    seed: int = 0
    """Seed of the model's initialisation, of its sampling and noise, and of the order of its
    texts."""
    device: str = "auto"
    """Where the job's models train: ``auto`` (a GPU where there is one), ``cpu``, ``cuda`` or
    ``cuda:N``."""
    threads: int | None = None
    """PyTorch CPU threads (None: PyTorch's default, resolved to its count where the job starts)."""

    RESUMABLE: ClassVar[frozenset[str]] = frozenset(
        {"out", "device", "threads", "tracking.run_name", "tracking.experiment"}
    )
    """The run options that may change when a run resumes (they do not change what is trained);
    each job's ``RESUMABLE_CHANGES`` adds its own (its budget, say)."""

    def check_run_options(self) -> None:
        check_threads(self.threads)


@dataclass
class CadenceOptions:
    """How often a job that takes its cadences as options (``segrl train``, ``segrl units train``)
    logs, evaluates and checkpoints (``segrl.jobs.Cadence``); a subclass, as ``RunOptions``."""

    log_every: int = 10
    """Steps between logs of the training stats (their means since the last log)."""
    eval_every: int = 250
    """Steps between evaluations on held-out text (the end evaluates after the last step)."""
    checkpoint_every: int = 50
    """Steps between checkpoints of the run folder (a resumed run starts from the last one)."""

    RESUMABLE: ClassVar[frozenset[str]] = frozenset({"log_every", "eval_every", "checkpoint_every"})
    """Cadences may change when a run resumes."""

    def check_cadences(self, prefix: str) -> None:
        if min(self.log_every, self.eval_every, self.checkpoint_every) < 1:
            raise ConfigError(
                f"{prefix}log_every, {prefix}eval_every and {prefix}checkpoint_every must be at "
                "least 1"
            )


@dataclass
class BaselineConfig:
    """``segrl baseline``: train one classic segmenter, score it, log it."""

    method: str = "morfessor"
    """The classic segmenter: ``morfessor``, ``flatcat``, ``bpe``, ``unigram``, ``yttm-bpe``,
    ``characters`` or ``words`` (``segrl.baselines.registry``)."""
    vocab_size: int = 5000
    """Vocabulary size of the BPE and unigram segmenters (5000: the study's BPE vocabulary)."""
    cache_dir: str | None = None
    """Where trained Morfessor and FlatCat models are cached by corpus hash; None uses
    ``$SEGRL_CACHE_DIR`` or ``~/.cache/segrl``."""
    morfessor_dampening: Dampening = "ones"
    """How Morfessor weights the training words' counts: ``ones`` (types), ``log`` or ``none``."""
    morfessor_corpus_weight: float = 1.0
    """Morfessor Baseline's corpus weight (alpha): above 1 gives fewer, longer morphs; below 1 more,
    shorter ones."""
    morfessor_max_epochs: int | None = None
    """Morfessor's training epochs at most (``train_batch``'s ``max_epochs``); None: until its
    cost stops improving, Morfessor's own stopping rule. A cap makes a corpus of long "words"
    trainable in a set budget: an unspaced Penn Treebank sentence (about 100 characters) is one."""
    morfessor_viterbi_smoothing: float = 0.0
    """Morfessor's additive smoothing when it segments a word (``morfessor --viterbi-smoothing``;
    0, the command's default: a word splits into known morphs and single characters only)."""
    morfessor_annotations: str | None = None
    """A Morfessor annotation file (``word morph morph, morph morph`` lines) for semi-supervised
    training, as ``morfessor -A``; None: unsupervised."""
    morfessor_annotation_weight: float | None = None
    """The annotated words' corpus weight (``morfessor -W``); None: Morfessor balances the
    annotated and unannotated tokens."""
    flatcat_perplexity_threshold: float = 10.0
    """Morfessor FlatCat's perplexity threshold (``flatcat -p``): the perplexity of a morph's
    neighbours at which it is as likely an affix as a stem. FlatCat's advice: 10 for a small corpus
    and little morphology, up to 400 for a large corpus and rich morphology. FlatCat starts from
    the Morfessor Baseline that the ``morfessor_*`` options (other than its Viterbi smoothing)
    and ``seed`` describe."""
    flatcat_corpus_weight: float = 1.0
    """Morfessor FlatCat's own corpus weight (``flatcat -w``; its alpha, as Morfessor's)."""
    flatcat_max_epochs: int = 4
    """Morfessor FlatCat's training epochs at most (``flatcat --max-epochs``; 4, its default)."""
    character_coverage: float = 1.0
    """SentencePiece's ``character_coverage`` (bpe, unigram): the fraction of the training
    characters that get pieces; the rarest others are ``<unk>``."""
    seed: int | None = None
    """Seed of training (Morfessor's random order); None uses the split seed ``data.seed``."""
    out: str | None = None
    """A folder to save the trained segmenter in (its tool's own model file, beside
    ``segmenter.json``); with ``--method all``, a folder per method inside it. None: only MLflow."""
    data: DataConfig = field(default_factory=DataConfig)
    gold: GoldConfig = field(default_factory=GoldConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)


def limit(value: int | float | None) -> int | float | None:
    """The limit an option sets: its value, or None where it sets none (None or ``NO_LIMIT``)."""
    return None if value is None or value == NO_LIMIT else value


def unset_options(cfg: Any) -> list[str]:
    """The dotted options of ``cfg`` that are None: none in a job's resolved config."""
    return sorted(key for key, value in flatten_config(cfg).items() if value is None)


def choices(cls: type, name: str) -> tuple[str, ...]:
    """The values the ``Literal`` field ``name`` of the config class ``cls`` allows."""
    return _literal_values(typing.get_type_hints(cls)[name])


def validate_config(cfg: Any, prefix: str = "") -> None:
    """The one check of a config, made where a job (or a library function that takes a config
    from its caller) starts: every ``Literal`` option of ``cfg`` and of the configs nested in it
    (``check_choices``), then each config's own ``check(prefix)`` (ranges, options that must go
    together), nested configs before the config that holds them. ``prefix`` is where ``cfg`` sits
    in its job's config (``"evaluator.lm."``); every error is a ``ConfigError`` naming the dotted
    option, what it is and what it may be."""
    check_choices(cfg, prefix)
    _check_tree(cfg, prefix)


def _check_tree(cfg: Any, prefix: str) -> None:
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            _check_tree(value, f"{prefix}{f.name}.")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{prefix}{f.name} must be a finite number, got {value}")
    check = getattr(cfg, "check", None)
    if check is not None:
        check(prefix)


def check_choices(cfg: Any, prefix: str = "") -> None:
    """A ``ConfigError`` for the first field of ``cfg`` (or of a config nested in it) whose value is
    not one its ``Literal`` type allows: the one place choices are checked, whether the config came
    from a file, from flags or from Python."""
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            check_choices(value, f"{prefix}{f.name}.")
            continue
        hint = hints[f.name]
        if typing.get_origin(hint) in (list, tuple) and isinstance(value, list | tuple):
            allowed = _literal_values(typing.get_args(hint)[0])
            values = value  # a list of choices: each must be allowed
        else:
            allowed, values = _literal_values(hint), [value]
        for item in values:
            if allowed and item not in allowed and not (item is None and _allows_none(hint)):
                raise _choice_error(f"{prefix}{f.name}", item, allowed)


def _literal_values(hint: Any) -> tuple[str, ...]:
    """The values of a ``Literal`` (or optional ``Literal``) type; () for any other type."""
    options = typing.get_args(hint) if _is_union(hint) else (hint,)
    return tuple(
        value
        for option in options
        if typing.get_origin(option) is Literal
        for value in typing.get_args(option)
    )


def _allows_none(hint: Any) -> bool:
    return _is_union(hint) and type(None) in typing.get_args(hint)


def _choice_error(what: str, value: Any, allowed: tuple[str, ...]) -> ConfigError:
    return ConfigError(f"{what} must be one of: {', '.join(allowed)}; got {value!r}")


def check_threads(threads: int | None, option: str = "--threads") -> None:
    """A ``ConfigError`` unless ``threads`` is None (PyTorch's default) or a positive count."""
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(
            f"{option} must be a positive number of CPU threads, got {threads!r}; leave it out for "
            "PyTorch's default"
        )
    cpus = os.cpu_count() or 1
    if threads > cpus:
        raise ConfigError(
            f"{option} {threads} is more threads than this machine's {cpus} CPUs; give at most "
            f"{cpus}, or leave it out for PyTorch's default"
        )


def build_config(
    cls: type[C],
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    overrides_from: str = "overrides",
) -> C:
    """Defaults of ``cls``, then the TOML file at ``path``, then ``overrides`` (dotted keys).

    Overrides whose value is None are skipped, so unset command-line flags keep the file's value. An
    error names the file, or ``overrides_from`` for a value that came from ``overrides``. An option
    that a config class's ``OLD_NAMES`` maps to its new name (``{"segmenter": "policy"}``,
    ``{"hidden_dim": "lm.hidden_dim"}`` for an option that moved into a nested table, or
    ``{"train.seed": "seed"}`` for one that moved out of one) is read as
    the new one, at any depth, in the file and in ``overrides`` (see ``current_key``), so that old
    configs and run folders load. A nested config's defaults are those of its parent's field.
    """
    flat: dict[str, Any] = {}
    if path is not None:
        values = read_toml(path)
        unset = values.pop(UNSET_KEY, [])
        if not isinstance(unset, list) or not all(isinstance(k, str) for k in unset):
            raise ConfigError(f"{path}: {UNSET_KEY} must be a list of dotted option names")
        given = _flat_items(values) + [(key, None) for key in unset]  # None: saved as None
        renames = set()
        for key, value in given:
            old, new, current = _renamed(cls, key)
            if current != key:
                renames.add((old, new))
            flat[current] = value
        for old, new in sorted(renames):
            if any(key == new or key.startswith(f"{new}.") for key, _ in given):
                raise ConfigError(f"{path}: '{old}' is the old name of '{new}'; give one")
    overridden = set()
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        for item, item_value in _flat_items({key: value}):
            current = current_key(cls, item)
            overridden.add(current)
            flat[current] = item_value
    source = str(path) if path else overrides_from

    def where(key: str) -> str:
        return overrides_from if key in overridden else source

    return _from_dict(cls, _unflatten(flat, where), where)


def current_key(cls: type, key: str) -> str:
    """The dotted option ``key`` of the config class ``cls`` under its current name: each part that
    a config class's ``OLD_NAMES`` maps to a new name (a dotted one for an option that moved into a
    nested table) is replaced, at every depth; unknown options are left as they are."""
    return _renamed(cls, key)[2]


def _renamed(cls: type, key: str) -> tuple[str, str, str]:
    """``(old, new, current)``: the first renamed prefix of ``key`` (old and new dotted names; both
    ``key`` where nothing is renamed) and ``key`` under its current names."""
    parts = key.split(".")
    done: list[str] = []
    old = new = ""
    while parts:
        old_names: dict[str, str] = getattr(cls, "OLD_NAMES", {})
        for n in range(len(parts), 0, -1):  # the longest old name first (``train.seed``)
            prefix = ".".join(parts[:n])
            if prefix in old_names:
                if not old:
                    old = ".".join([*done, prefix])
                    new = ".".join([*done, old_names[prefix]])
                parts = [*old_names[prefix].split("."), *parts[n:]]
                break
        name, parts = parts[0], parts[1:]
        done.append(name)
        fields = (
            {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
        )
        hint = typing.get_type_hints(cls).get(name) if name in fields else None
        if not dataclasses.is_dataclass(hint):
            done.extend(parts)
            break
        cls = hint
    current = ".".join(done)
    return (old or key, new or key, current)


def _flat_items(node: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """The leaves of nested tables as (dotted key, value); an empty table is a leaf of its own."""
    out: list[tuple[str, Any]] = []
    for key, value in node.items():
        if isinstance(value, dict) and value:
            out += _flat_items(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _unflatten(flat: dict[str, Any], where: typing.Callable[[str], str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in flat.items():
        node = values
        *parents, leaf = key.split(".")
        for i, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                table = ".".join(parents[: i + 1])
                raise ConfigError(f"{where(table)}: {table} must be a table of options")
        if isinstance(value, dict) and isinstance(node.get(leaf), dict):
            continue  # an empty table where options of it are given
        if isinstance(node.get(leaf), dict):
            raise ConfigError(f"{where(key)}: {key} must be a table of options")
        node[leaf] = value
    return values


def read_config_keys(path: str | Path) -> set[str]:
    """The dotted options a TOML config file sets (errors as ``build_config``'s)."""
    values = read_toml(path)
    values.pop(UNSET_KEY, None)
    return set(_flatten(values))


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The config as nested plain dicts (what ``save_config`` writes)."""
    return dataclasses.asdict(cfg)


def flatten_config(cfg: Any) -> dict[str, Any]:
    """The config as one level of dotted keys, for MLflow params."""
    return _flatten(config_to_dict(cfg))


UNSET_KEY = "_unset"
"""The top-level list of a saved config that names the options whose value is None (TOML has no
null; leaving them out would reload an option whose default is not None with its default)."""


def save_config(cfg: Any, path: str | Path) -> Path:
    """Write the config as TOML; options that are None are listed in ``_unset``, so that
    ``load_config`` gives back the same config."""
    path = Path(path)
    values = config_to_dict(cfg)
    unset = sorted(k for k, v in _flatten(values).items() if v is None)
    text = _to_toml(values)
    if unset:
        text = f"{UNSET_KEY} = {_toml_value(unset)}\n" + text
    path.write_text(text, encoding="utf-8")
    return path


def _flatten(node: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def load_config(cls: type[C], path: str | Path) -> C:
    """Read a config saved by ``save_config`` (or written by hand)."""
    return build_config(cls, path)


BUNDLED_CONFIGS = Path(__file__).resolve().parent / "configs"
"""The configs segrl ships (``configs/`` of the repository), readable by name from anywhere."""


def bundled_config_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_CONFIGS.glob("*.toml"))


def config_file(path: str | Path) -> Path:
    """``path`` when it is there or names a folder; otherwise a bare name (``nvib_cpu`` or
    ``nvib_cpu.toml``) is the config of that name that segrl ships, so that a benchmark suite or a
    script can name one from any working directory."""
    path = Path(path)
    if path.exists() or path.parent != Path("."):
        return path
    bundled = BUNDLED_CONFIGS / f"{path.name.removesuffix('.toml')}.toml"
    return bundled if bundled.is_file() else path


def read_toml(path: str | Path) -> dict[str, Any]:
    """The TOML config file at ``path`` (see ``config_file``) as a dict; a ``ConfigError`` naming
    the file otherwise."""
    path = config_file(path)
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        names = ", ".join(bundled_config_names())
        raise ConfigError(
            f"{path}: config file not found (segrl's own configs, by name: {names})"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path}: not a UTF-8 text file (byte {e.start + 1} is 0x{e.object[e.start]:02x}); a "
            "config file is TOML in UTF-8"
        ) from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: a folder, not a config file") from None


def _from_dict(
    cls: type[C],
    values: dict[str, Any],
    where: typing.Callable[[str], str],
    prefix: str = "",
    default: C | None = None,
) -> C:
    """``default`` (else ``cls()``'s defaults) with the options in ``values`` set."""
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            choices = ", ".join(prefix + k for k in known)
            raise ConfigError(
                f"{where(prefix + key)}: unknown option '{prefix}{key}'; known options: {choices}"
            )
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{where(prefix + key)}: {prefix}{key} must be a table of options"
                )
            nested = getattr(default, key) if default is not None else _field_default(known[key])
            kwargs[key] = _from_dict(hint, value, where, f"{prefix}{key}.", nested)
        else:
            kwargs[key] = _coerce(value, hint, f"{where(prefix + key)}: {prefix}{key}")
    return dataclasses.replace(default, **kwargs) if default is not None else cls(**kwargs)


def _field_default(f: dataclasses.Field) -> Any:
    """The default of a nested config field (None where it has none: the class's defaults)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _coerce(value: Any, hint: Any, what: str) -> Any:
    """Check (and where lossless, convert) a value against a field's type hint."""
    options = typing.get_args(hint) if _is_union(hint) else (hint,)
    if value is None and type(None) in options:
        return None
    allowed = _literal_values(hint)
    if allowed:
        if value in allowed:
            return value
        raise _choice_error(what, value, allowed)
    for option in options:
        if option is type(None):
            continue
        origin = typing.get_origin(option)
        if origin in (list, tuple) and isinstance(value, list | tuple):
            allowed = _literal_values(typing.get_args(option)[0])
            for item in value:
                if allowed and item not in allowed:
                    raise _choice_error(what, item, allowed)
            return origin(value)
        if option is bool and isinstance(value, bool):
            return value
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if option is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if option is str and isinstance(value, str):
            return value
    names = " or ".join(getattr(o, "__name__", str(o)) for o in options)
    raise ConfigError(f"{what} must be {names}, got {value!r}")


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _to_toml(node: dict[str, Any], prefix: str = "") -> str:
    scalars = [(k, v) for k, v in node.items() if not isinstance(v, dict) and v is not None]
    tables = [(k, v) for k, v in node.items() if isinstance(v, dict)]
    lines = [f"{k} = {_toml_value(v)}" for k, v in scalars]
    for key, table in tables:
        lines.append("")
        lines.append(f"[{prefix}{key}]")
        body = _to_toml(table, prefix=f"{prefix}{key}.")
        lines.append(body)
    return "\n".join(lines).strip() + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ConfigError(f"cannot write {value!r} to TOML")
