import dataclasses
import typing

import pytest

from segrl.config import (
    BaselineConfig,
    build_config,
    flatten_config,
    load_config,
    save_config,
)
from segrl.errors import ConfigError


def test_overrides_apply_over_defaults_and_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('method = "bpe"\n[data]\nmax_len = 64\nseed = 3\n')
    cfg = build_config(BaselineConfig, path, {"data.seed": 7, "vocab_size": None})
    assert cfg.method == "bpe"
    assert cfg.data.max_len == 64
    assert cfg.data.seed == 7  # the override wins
    assert cfg.vocab_size == 5000  # None overrides are skipped


def test_unknown_and_mistyped_options_are_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown option 'data.maxlen'"):
        build_config(BaselineConfig, overrides={"data.maxlen": 3})
    with pytest.raises(ConfigError, match="data.max_len must be int"):
        build_config(BaselineConfig, overrides={"data.max_len": "long"})
    bad = tmp_path / "bad.toml"
    bad.write_text("method = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        build_config(BaselineConfig, bad)
    with pytest.raises(ConfigError, match="not found"):
        build_config(BaselineConfig, tmp_path / "missing.toml")


def test_config_round_trips_through_toml(tmp_path):
    cfg = build_config(
        BaselineConfig,
        overrides={"method": "unigram", "data.corpus": 'a "q" \\ b', "gold.max_words": 10},
    )
    again = load_config(BaselineConfig, save_config(cfg, tmp_path / "saved.toml"))
    assert again == cfg


def test_flatten_config_uses_dotted_keys():
    flat = flatten_config(BaselineConfig())
    assert flat["data.max_len"] == 128
    assert flat["tracking.experiment"] == "segrl"
    assert flat["method"] == "morfessor"


def _unset_every_optional(cfg) -> None:
    """Set to None every option that may be None but is not by default (recursively)."""
    import types
    import typing

    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            _unset_every_optional(value)
            continue
        hint = hints[f.name]
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        if union and type(None) in typing.get_args(hint) and value is not None:
            setattr(cfg, f.name, None)


def _every_config():
    from segrl.agents import TrainConfig
    from segrl.config import BaselineConfig
    from segrl.experiments.lm_levels import LevelsConfig
    from segrl.experiments.lm_train import LMTrainConfig
    from segrl.units.config import units_config_class
    from segrl.units.probing import ProbeConfig

    units = [units_config_class(m)() for m in ("transformer", "nvib", "dcsa", "stride")]
    return [TrainConfig(), BaselineConfig(), LMTrainConfig(), LevelsConfig(), ProbeConfig(), *units]


@pytest.mark.parametrize("unset", [False, True], ids=["defaults", "optionals-unset"])
def test_every_config_round_trips_through_save_and_load(tmp_path, unset):
    """A saved config reloads as it was: None too, where the option's default is not None."""
    for cfg in _every_config():
        if unset:
            _unset_every_optional(cfg)
        path = save_config(cfg, tmp_path / f"{type(cfg).__name__}.toml")
        assert load_config(type(cfg), path) == cfg, type(cfg).__name__


def _choice_fields(cfg, prefix=""):
    """(dotted name, allowed values) of every Literal option of ``cfg`` (recursively)."""
    import typing

    from segrl.config import choices

    out = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out += _choice_fields(value, f"{prefix}{f.name}.")
        elif allowed := choices(type(cfg), f.name):
            out.append((f"{prefix}{f.name}", allowed))
        elif typing.get_origin(typing.get_type_hints(type(cfg))[f.name]) is list:
            inner = typing.get_args(typing.get_type_hints(type(cfg))[f.name])[0]
            if typing.get_args(inner):
                out.append((f"{prefix}{f.name}[]", typing.get_args(inner)))
    return out


def test_every_choice_is_checked_in_one_place(tmp_path):
    """Every Literal option of every config is refused with the same message, from a file, from
    overrides and from Python, and every allowed value is accepted."""
    from segrl.config import check_choices

    checked = 0
    for cfg in _every_config():
        cls = type(cfg)
        for name, allowed in _choice_fields(cfg):
            listed = name.endswith("[]")
            key = name.removesuffix("[]")
            bad = ["bogus"] if listed else "bogus"
            message = f"{key} must be one of: {', '.join(allowed)}; got 'bogus'"
            with pytest.raises(ConfigError, match=f"^overrides: {message}"):
                build_config(cls, overrides={key: bad})
            path = tmp_path / "c.toml"
            *tables, leaf = key.split(".")
            header = f"[{'.'.join(tables)}]\n" if tables else ""
            toml_value = '["bogus"]' if listed else '"bogus"'
            path.write_text(f"{header}{leaf} = {toml_value}\n")
            with pytest.raises(ConfigError, match=f"^{path}: {message}"):
                build_config(cls, path)
            with pytest.raises(ConfigError, match=f"^{path}: {message}"):  # the file is named
                build_config(cls, path, {"seed": None})
            node = direct = cls()
            for part in tables:
                node = getattr(node, part)
            setattr(node, leaf, bad)
            with pytest.raises(ConfigError, match=f"^{message}"):
                check_choices(direct)
            for value in allowed:
                ok = build_config(cls, overrides={key: [value] if listed else value})
                check_choices(ok)
            checked += 1
    assert checked >= 15  # reward, rules, policy kind and context, LM model/context/reward/...


def test_a_train_config_with_the_old_segmenter_table_loads_into_policy(tmp_path):
    """Configs and run folders saved when the policy's table was ``[segmenter]`` still load, and
    ``--set segmenter.kind=...`` still reaches the policy; a file with both tables is refused."""
    from segrl.agents import TrainConfig
    from segrl.jobs import RunDir

    saved = save_config(TrainConfig(), tmp_path / "new.toml").read_text(encoding="utf-8")
    assert "[policy]" in saved and "[segmenter]" not in saved
    old = tmp_path / "config.toml"
    old.write_text(saved.replace("[policy]", "[segmenter]").replace('"bilstm"', '"transformer"'))
    cfg = load_config(TrainConfig, old)
    assert cfg.policy.kind == "transformer"
    assert cfg.name.startswith("reinforce-transformer-")
    assert RunDir(tmp_path).config_differences(cfg) == []  # an old run folder resumes
    assert RunDir(tmp_path).config_differences(TrainConfig()) == [
        "policy.kind: 'transformer' -> 'bilstm'"
    ]
    assert build_config(TrainConfig, old, {"policy.hidden_dim": 32}).policy.hidden_dim == 32
    assert build_config(TrainConfig, overrides={"segmenter.dropout": 0.2}).policy.dropout == 0.2
    both = tmp_path / "both.toml"
    both.write_text('[segmenter]\nkind = "bilstm"\n[policy]\nkind = "transformer"\n')
    with pytest.raises(ConfigError, match="'segmenter' is the old name of 'policy'"):
        build_config(TrainConfig, both)


def test_the_units_run_options_under_their_old_train_names_load_at_the_top(tmp_path):
    """``segrl units train``'s run options were ``train.seed``, ``train.device``, ...: config files
    and run folders that name them so still load into every job's names (``RunOptions``,
    ``CadenceOptions``), a run folder saved so resumes, ``--set train.seed=...`` still reaches the
    seed, and a file that gives both names is refused."""
    from segrl.jobs import RunDir
    from segrl.units.config import build_units_config, units_config_class

    cls = units_config_class("transformer")
    saved = save_config(cls(seed=3, device="cpu", threads=1, log_every=7), tmp_path / "new.toml")
    text = saved.read_text(encoding="utf-8")
    assert "\nseed = 3\n" in text and "[train]" in text
    old = tmp_path / "config.toml"
    moved = "".join(
        f"{name} = {value}\n"
        for name, value in (("seed", 3), ("device", '"cpu"'), ("threads", 1), ("log_every", 7))
    )
    top = "\n".join(
        line
        for line in text.splitlines()
        if not line.startswith(("seed =", "device =", "threads =", "log_every ="))
    )
    old.write_text(top.replace("[train]\n", f"[train]\n{moved}") + "\n")
    config = load_config(cls, old)
    assert (config.seed, config.device, config.threads, config.log_every) == (3, "cpu", 1, 7)
    assert (
        RunDir(tmp_path).config_differences(cls(seed=3, device="cpu", threads=1, log_every=7)) == []
    )
    assert build_config(cls, overrides={"train.seed": 5}).seed == 5
    assert build_units_config("transformer", old, {"train.eval_every": 9}).eval_every == 9
    both = tmp_path / "both.toml"
    both.write_text("seed = 1\n[train]\nseed = 2\n")
    with pytest.raises(ConfigError, match="'train.seed' is the old name of 'seed'"):
        build_config(cls, both)


def test_a_bad_value_names_where_it_came_from(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[data]\ndampening = "log"\n')
    with pytest.raises(ConfigError, match="^command line: data.corpus_format must be one of"):
        build_config(
            BaselineConfig, path, {"data.corpus_format": "csv"}, overrides_from="command line"
        )


def test_segrls_own_configs_are_read_by_name_from_anywhere(tmp_path, monkeypatch):
    from segrl.config import bundled_config_names
    from segrl.units.config import build_units_config

    monkeypatch.chdir(tmp_path)  # no configs/ folder here
    assert {"nvib_cpu", "dcsa_cpu", "stride_cpu", "transformer_paper"} <= set(
        bundled_config_names()
    )
    for name in ("dcsa_cpu", "dcsa_cpu.toml"):
        config = build_units_config(path=name)
        assert (config.model, config.arch.slots, config.arch.dim) == ("dcsa", 32, 128)
    (tmp_path / "dcsa_cpu.toml").write_text('model = "stride"\n')  # a file of the name wins
    assert build_units_config(path="dcsa_cpu.toml").model == "stride"
    with pytest.raises(ConfigError, match=r"nvib_cpux: config file not found \(.*nvib_cpu, "):
        build_units_config(path="nvib_cpux")
    with pytest.raises(ConfigError, match="elsewhere/nvib_cpu.toml: config file not found"):
        build_config(BaselineConfig, "elsewhere/nvib_cpu.toml")  # a path is never a name


@pytest.mark.parametrize("name", ["nvib_cpu", "dcsa_paper", "transformer_cpu", "stride_cpu"])
def test_a_bundled_configs_run_folder_follows_its_run_name(name):
    """A bundled config names its run, not its folder: ``--run-name`` gives a run its own folder
    (``runs/units/<run name>``) instead of resuming the config's previous run there."""
    from segrl.units.config import build_units_config

    config = build_units_config(path=name)
    assert str(config.run_folder) == f"runs/units/{name.replace('_', '-')}"
    config = build_units_config(path=name, overrides={"tracking.run_name": "seed-1"})
    assert str(config.run_folder) == "runs/units/seed-1"
    config = build_units_config(path=name, overrides={"out": "elsewhere"})
    assert str(config.run_folder) == "elsewhere"


def test_a_nested_table_given_in_part_keeps_its_parents_defaults(tmp_path):
    """A table that sets some of its options keeps the defaults its parent gives the others (a
    unit model's own training defaults, here DCSA's learning rate and optimiser), from a file and
    from overrides alike."""
    from segrl.units.config import build_units_config

    default = build_units_config("dcsa").train
    assert (default.lr, default.optimizer) == (1e-4, "adam")  # not UnitsTrainConfig's own
    path = tmp_path / "c.toml"
    path.write_text('model = "dcsa"\n[train]\nsteps = 10\n')
    for config in (
        build_units_config("dcsa", None, {"train.steps": 10}),
        build_units_config(path=path),
    ):
        assert config.train.steps == 10
        assert (config.train.lr, config.train.optimizer) == (1e-4, "adam")


def test_validate_config_checks_choices_then_each_tables_own_checks():
    """One function checks a whole config: a bad choice anywhere in the tree and a value out of
    range in a nested table are refused with the dotted key where they sit, and the nested tables'
    checks run before their parent's (which may rely on them)."""
    from segrl.agents import TrainConfig
    from segrl.config import validate_config
    from segrl.lm.config import LMConfig

    validate_config(TrainConfig())  # the defaults work
    config = TrainConfig()
    config.evaluator.lm.lm.context = "window"
    with pytest.raises(
        ConfigError,
        match="^evaluator.lm.lm.context must be one of: lstm, words, segment, none; got 'window'$",
    ):
        validate_config(config)
    config = TrainConfig()
    config.evaluator.lm.lm.lexicon_size = -1
    with pytest.raises(
        ConfigError, match="^evaluator.lm.lm.lexicon_size must be at least 0, got -1$"
    ):
        validate_config(config)
    with pytest.raises(ConfigError, match="^lm.max_segment_length must be at least 1, got 0$"):
        validate_config(LMConfig(max_segment_length=0), "lm.")
    config = TrainConfig(agent="a2c")  # a choice of the top table, not only of nested ones
    with pytest.raises(
        ConfigError, match="^agent must be one of: reinforce, ppo, ppo-batched; got 'a2c'$"
    ):
        validate_config(config)


def test_a_saved_train_config_with_the_lms_options_flat_loads_into_its_table(tmp_path):
    """The LM evaluator's model options sat beside its reward (``[evaluator.lm] hidden_dim``);
    they are now its ``lm`` table. A config or run folder saved before still loads, to the same
    config, and still resumes; ``--set evaluator.lm.hidden_dim=...`` still reaches the LM; a file
    that gives an option by both names is refused."""
    from segrl.agents import TrainConfig
    from segrl.jobs import RunDir

    config = build_config(
        TrainConfig, overrides={"evaluator.name": "lm", "evaluator.lm.lm.hidden_dim": 96}
    )
    saved = save_config(config, tmp_path / "new.toml").read_text(encoding="utf-8")
    assert "[evaluator.lm.lm]" in saved and "hidden_dim = 96" in saved
    # as it was saved before: the LM's options in [evaluator.lm], None ones by their flat names
    old_lines = []
    for line in saved.splitlines():
        if line == "[evaluator.lm.lm]":
            continue
        old_lines.append(line.replace("evaluator.lm.lm.", "evaluator.lm."))
    old = tmp_path / "config.toml"
    old.write_text("\n".join(old_lines) + "\n", encoding="utf-8")
    assert (
        "[evaluator.lm.lm]" not in old.read_text()
        and "evaluator.lm.lexicon_cost" in old.read_text()
    )
    assert load_config(TrainConfig, old) == config
    assert RunDir(tmp_path).config_differences(config) == []  # an old run folder resumes
    assert (
        build_config(
            TrainConfig, overrides={"evaluator.lm.context": "lstm"}
        ).evaluator.lm.lm.context
        == "lstm"
    )
    # a nested table given in part keeps the evaluator's own LM defaults (not LMConfig's)
    lm = build_config(TrainConfig, overrides={"evaluator.lm.hidden_dim": 32}).evaluator.lm.lm
    assert (lm.hidden_dim, lm.context, lm.speller_dim, lm.lexicon_cost) == (
        32,
        None,  # the evaluator's: by the corpus (LMConfig's own is lstm)
        128,
        None,
    )
    both = tmp_path / "both.toml"
    both.write_text("[evaluator.lm]\nhidden_dim = 32\n[evaluator.lm.lm]\nhidden_dim = 64\n")
    with pytest.raises(
        ConfigError,
        match="'evaluator.lm.hidden_dim' is the old name of 'evaluator.lm.lm.hidden_dim'; give one",
    ):
        build_config(TrainConfig, both)


def test_the_lms_old_table_and_reward_names_load_as_their_new_ones(tmp_path):
    """The LM evaluator's model was its ``arch`` table (``segrl lm train`` and ``segrl lm levels``
    call it ``lm``) and its reward variant ``reward`` (the word that names the reward mode,
    ``env.reward``). A config file and a run folder saved under those names load to the same
    config and resume; ``--set`` takes them; the saved config and the MLflow params carry the new
    names only; a file that gives one option by both names is refused."""
    from segrl.agents import TrainConfig
    from segrl.jobs import RunDir

    overrides = {
        "evaluator.name": "lm",
        "env.reward": "per-action",
        "evaluator.lm.lm.hidden_dim": 96,
        "evaluator.lm.reward_variant": "flip",
    }
    config = build_config(TrainConfig, overrides=overrides)
    saved = save_config(config, tmp_path / "new.toml").read_text(encoding="utf-8")
    assert "[evaluator.lm.lm]" in saved and 'reward_variant = "flip"' in saved
    assert "arch" not in saved and "\nreward = " not in saved.split("[evaluator.lm]")[1]
    params = flatten_config(config)
    assert params["evaluator.lm.lm.hidden_dim"] == 96
    assert params["evaluator.lm.reward_variant"] == "flip" and params["env.reward"] == "per-action"
    assert not any(".arch." in key or key == "evaluator.lm.reward" for key in params)

    old_text = (
        saved.replace("[evaluator.lm.lm]", "[evaluator.lm.arch]")
        .replace("evaluator.lm.lm.", "evaluator.lm.arch.")
        .replace('reward_variant = "flip"', 'reward = "flip"')
    )
    assert "[evaluator.lm.arch]" in old_text and 'reward = "flip"' in old_text
    old = tmp_path / "config.toml"
    old.write_text(old_text, encoding="utf-8")
    loaded = load_config(TrainConfig, old)
    assert loaded == config
    assert (loaded.evaluator.lm.lm.hidden_dim, loaded.evaluator.lm.reward_variant) == (96, "flip")
    assert RunDir(tmp_path).config_differences(config) == []  # an old run folder resumes

    by_old_names = build_config(
        TrainConfig,
        overrides={"evaluator.lm.arch.context": "lstm", "evaluator.lm.reward": "posterior"},
    )
    assert by_old_names.evaluator.lm.lm.context == "lstm"
    assert by_old_names.evaluator.lm.reward_variant == "posterior"
    assert by_old_names.env.reward == TrainConfig().env.reward  # the mode is not the variant

    for text, old_name, new_name in [
        (
            '[evaluator.lm]\nreward = "flip"\nreward_variant = "posterior"\n',
            "reward",
            "reward_variant",
        ),
        (
            "[evaluator.lm.arch]\nhidden_dim = 32\n[evaluator.lm.lm]\nhidden_dim = 64\n",
            "arch",
            "lm",
        ),
    ]:
        both = tmp_path / "both.toml"
        both.write_text(text, encoding="utf-8")
        with pytest.raises(
            ConfigError,
            match=f"'evaluator.lm.{old_name}' is the old name of 'evaluator.lm.{new_name}'",
        ):
            build_config(TrainConfig, both)


def test_the_renamed_lm_options_each_have_one_name():
    """One word, one meaning, over every job's config: ``reward`` names the reward mode only
    (``env.reward``), the LM's reward variant is ``reward_variant``; every config that holds the
    LM's options (``segrl.lm.LMConfig``) holds them as ``lm``, and ``arch`` is a unit model's
    table only."""
    from segrl.agents import TrainConfig
    from segrl.evaluators.registry import LMEvaluatorConfig
    from segrl.experiments.lm_levels import LevelsConfig
    from segrl.experiments.lm_train import LMTrainConfig
    from segrl.lm.config import LMConfig
    from segrl.units.config import units_config_class
    from segrl.units.registry import UNIT_MODELS, model_class

    def tables(cls, prefix=""):
        """``(dotted name, config class)`` of every nested table of ``cls``."""
        for f in dataclasses.fields(cls):
            hint = typing.get_type_hints(cls)[f.name]
            if dataclasses.is_dataclass(hint):
                yield f"{prefix}{f.name}", hint
                yield from tables(hint, f"{prefix}{f.name}.")

    lm_tables = {
        cls.__name__: [name for name, table in tables(cls) if table is LMConfig]
        for cls in (TrainConfig, LMTrainConfig, LevelsConfig, BaselineConfig)
    }
    assert lm_tables == {
        "TrainConfig": ["evaluator.lm.lm"],
        "LMTrainConfig": ["lm"],
        "LevelsConfig": ["lm"],
        "BaselineConfig": [],
    }
    jobs = [TrainConfig, LMTrainConfig, LevelsConfig, BaselineConfig]
    jobs += [units_config_class(model) for model in UNIT_MODELS]
    for job in jobs:
        for name, table in tables(job):
            if name.rsplit(".", 1)[-1] == "arch":  # a unit model's options, named by its class
                assert name == "arch" and table is model_class(job().model).config_class
        params = flatten_config(job())
        reward = [key for key in params if key.rsplit(".", 1)[-1] == "reward"]
        assert reward == (["env.reward"] if job is TrainConfig else []), job.__name__
    assert "evaluator.lm.reward_variant" in flatten_config(TrainConfig())
    assert LMEvaluatorConfig.OLD_NAMES["arch"] == "lm"
    assert LMEvaluatorConfig.OLD_NAMES["reward"] == "reward_variant"
