"""What a run trained is what it logs: each job resolves its config once, where it starts, by a pure
function (every option a value), trains with it, saves it as the run folder's ``config.toml`` and
logs it as its MLflow params, with the config as asked beside it (``requested.toml``); run folders
saved before configs were resolved still resume."""

import copy
import math
import tomllib

import pytest
from mlflow.tracking import MlflowClient

from segrl.agents import TrainConfig
from segrl.cli import main
from segrl.config import (
    NO_LIMIT,
    UNSET_KEY,
    build_config,
    flatten_config,
    load_config,
    save_config,
    unset_options,
)
from segrl.data import load_corpus
from segrl.data.gold import BUNDLED_GOLD_SOURCE
from segrl.envs.setup import has_decision
from segrl.errors import ConfigError
from segrl.experiments.agent_train import resolve_train_config, train_reinforce
from segrl.experiments.lm_train import LMTrainConfig, resolve_lm_train_config
from segrl.experiments.units_train import resolve_units_config
from segrl.jobs import CONFIG_FILE, REQUESTED_FILE, JobStart, RunDir, TrainingInterrupted
from segrl.lm.config import LM_DEFAULTS, SLM_LEXICON_SIZE, WORD_MAX_SEGMENT_LENGTH
from segrl.units.config import build_units_config

START = JobStart(
    corpus="bundled:wikitext2_test.txt.gz",
    corpus_kind="text",
    spaces_are_gold=False,
    texts=100,
    device="cpu",
    threads=3,
    run_dir="runs/here",
)


def logged(run_id: str, folder, cls):
    """The run's MLflow params and the resolved config its folder saved, checked to name every
    option with a value; the saved config (``config.toml``) loads to the same values as the params."""
    params = MlflowClient().get_run(run_id).data.params
    text = (folder / CONFIG_FILE).read_text(encoding="utf-8")
    assert UNSET_KEY not in tomllib.loads(text)  # nothing saved as unset
    saved = load_config(cls, folder / CONFIG_FILE)
    assert unset_options(saved) == []
    options = {k: str(v) for k, v in flatten_config(saved).items()}
    assert "None" not in params.values()
    assert {k: params.get(k) for k in options} == options  # every option logged, none dropped
    artifacts = {a.path for a in MlflowClient().list_artifacts(run_id)}
    assert {CONFIG_FILE, REQUESTED_FILE} <= artifacts
    return params, saved


@pytest.mark.slow
def test_a_default_lm_rewarded_agent_run_names_every_option(mlflow_store, small_corpus_file):
    """``segrl train --evaluator lm --reward per-action`` (a tiny budget): every option has its
    value in MLflow and in ``config.toml``, each the one the run trained with; ``requested.toml``
    holds the config as asked, its unset options unset."""
    out = mlflow_store / "run"
    args = ["--evaluator", "lm", "--reward", "per-action", "--corpus", str(small_corpus_file)]
    args += ["--min-char-count", "1", "--steps", "2", "--batch-size", "8", "--gold-max-words", "50"]
    args += ["--threads", "1", "--out", str(out)]
    assert main(["train", *args]) == 0
    run_id = RunDir(out).info["mlflow_run_id"]
    params, resolved = logged(run_id, out, TrainConfig)
    corpus = load_corpus(resolved.data)
    episodes = sum(has_decision(s, hide_spaces=False) for s in corpus.train)
    expected = {
        "evaluator.lm.lm.context": "none",  # running text: LM_DEFAULTS' evaluator row
        "evaluator.lm.lm.lexicon_size": "0",
        "evaluator.lm.lm.lexicon_cost": "0.0",
        "evaluator.lm.lm.lexicon_logits": "direct",
        "evaluator.lm.lm.length_penalty": "0.0",
        "evaluator.lm.lm.max_segment_length": str(NO_LIMIT),
        "evaluator.lm.reward_variant": "posterior",
        "evaluator.lm.pretrain_steps": str(math.ceil(episodes / 64)),
        "evaluator.lm.patience": "2",
        "reinforce.per_action_gradient": "forward-kl",
        "reinforce.entropy_coef": "2.0",
        "ppo.ent_coef": "2.0",
        "ppo.gamma": "0.0",
        "ppo.normalize_advantages": "False",
        "env.teacher_features": "False",
        "max_minutes": str(float(NO_LIMIT)),
        "device": "cpu",
        "threads": "1",
        "out": str(out),
        "data.corpus": str(small_corpus_file),
        "data.max_words": str(NO_LIMIT),
        "gold.path": BUNDLED_GOLD_SOURCE,
        "gold.max_words": "50",
        "tracking.run_name": "reinforce-bilstm-lm-per-action-posterior",
        "tracking.register": "",
    }
    assert {k: params[k] for k in expected} == expected
    requested = load_config(TrainConfig, out / REQUESTED_FILE)
    asked = {
        "evaluator.name": "lm",
        "env.reward": "per-action",
        "data.corpus": str(small_corpus_file),
        "data.min_char_count": 1,
        "reinforce.steps": 2,
        "reinforce.batch_size": 8,
        "gold.max_words": 50,
        "threads": 1,
        "out": str(out),
    }
    assert requested == build_config(TrainConfig, overrides=asked)  # only what was asked
    assert {"evaluator.lm.lm.context", "evaluator.lm.reward_variant", "max_minutes"} <= set(
        unset_options(requested)
    )
    assert requested.device == "auto" and resolved.device == "cpu"


@pytest.mark.slow
def test_a_default_lm_train_run_on_a_word_list_names_every_option(mlflow_store):
    """``segrl lm train`` on a word list: the model of ``LM_DEFAULTS``' row (a priced lexicon of
    100,000 entries pruned to what pays at 1 nat a character, spelled by a bigram speller, no
    context, the priced length penalty), its budget in updates, every option
    logged and saved with its value."""
    out = mlflow_store / "lm"
    args = ["--corpus", "wordfreq:en", "--max-words", "300", "--steps", "2", "--hidden-dim", "16"]
    args += ["--speller-dim", "16", "--eval-gold-words", "20", "--gold-max-words", "50"]
    assert main(["lm", "train", *args, "--threads", "1", "--out", str(out)]) == 0
    params, _ = logged(RunDir(out).info["mlflow_run_id"], out, LMTrainConfig)
    expected = {
        "lm.lexicon_size": str(SLM_LEXICON_SIZE),
        "lm.context": "none",
        "lm.length_penalty": "0.02",
        "lm.lexicon_cost": "1.0",
        "lm.lexicon_logits": "direct",
        "lm.speller": "bigram",
        "lm.lexicon_prune": "True",
        "lm.max_segment_length": str(NO_LIMIT),
        "steps": "2",
        "data.corpus": "wordfreq:en",
        "data.max_words": "300",
        "data.max_sentences": str(NO_LIMIT),
        "tracking.run_name": "slm",
    }
    assert {k: params[k] for k in expected} == expected
    requested = load_config(LMTrainConfig, out / REQUESTED_FILE)
    assert requested.lm.lexicon_size is None and requested.steps == 2


@pytest.mark.slow
def test_a_units_train_run_names_every_option(mlflow_store, small_corpus_file):
    from segrl.experiments.units_train import train_unit_model

    config = build_units_config(
        "stride",
        None,
        {
            "data.corpus": str(small_corpus_file),
            "data.min_char_count": 1,
            "train.steps": 2,
            "train.batch_size": 8,
            "gold.max_words": 30,
            "eval.robustness": False,
            "eval.gold_words_during_training": 10,
            "out": str(mlflow_store / "units"),
        },
    )
    assert config.threads is None and config.init_from is None
    result = train_unit_model(config)
    params, resolved = logged(result.run_id, result.run_dir, type(config))
    assert params["device"] == "cpu" and params["init_from"] == ""
    assert int(params["threads"]) >= 1
    assert params["tracking.run_name"] == "stride"
    assert load_config(type(config), result.run_dir / REQUESTED_FILE) == config


def test_lm_defaults_by_user_and_text():
    """The one table of the LM's defaults, as ``segrl lm train`` and the agent's LM evaluator read
    it: word discovery (text without spaces) is the word lists' teacher with the words' length
    penalty and a bound on their length, the evaluator there conditions segments on the characters
    before them; the evaluator has a lexicon on word lists only."""
    unspaced = replace_start(spaces_are_gold=True)
    discovery = resolve_lm_train_config(LMTrainConfig(), unspaced)
    assert (discovery.lm.context, discovery.lm.max_segment_length) == ("none", 12)
    assert (discovery.lm.lexicon_size, discovery.lm.speller) == (SLM_LEXICON_SIZE, "bigram")
    assert discovery.lm.length_penalty == 0.15 and discovery.gold.path == ""
    assert WORD_MAX_SEGMENT_LENGTH == 12
    words = resolve_lm_train_config(LMTrainConfig(), replace_start(corpus_kind="words")).lm
    assert (words.context, words.lexicon_size, words.length_penalty) == ("none", 100_000, 0.02)
    assert LM_DEFAULTS["evaluator", "text"].lexicon_size == 0
    agent = TrainConfig()
    agent.evaluator.name = "lm"
    on_words = resolve_train_config(agent, replace_start(corpus_kind="words"))
    assert on_words.evaluator.lm.lm.lexicon_size == SLM_LEXICON_SIZE
    assert on_words.env.teacher_features is True  # the reinforce agent reads its teacher
    agent.agent = "ppo-batched"  # cannot read it: no lexicon
    plain = resolve_train_config(agent, replace_start(corpus_kind="words"))
    assert plain.evaluator.lm.lm.lexicon_size == 0 and plain.env.teacher_features is False
    assert plain.evaluator.lm.lm.length_penalty == 0.05  # unpriced, on a word list
    # the evaluator's early stopping: on spaced text its patience, with hidden spaces none
    assert (on_words.evaluator.lm.patience, on_words.evaluator.lm.prune_uses) == (2, "corpus")
    assert resolve_train_config(agent, START).evaluator.lm.patience == 2
    agent.env.hide_spaces = True
    hidden = resolve_train_config(agent, START).evaluator.lm.lm
    assert (hidden.context, hidden.max_segment_length, hidden.length_penalty) == ("lstm", 12, 0.0)
    assert hidden.lexicon_size == 0  # spaces that are not the gold: no lexicon from the words
    # on a segmented corpus a reading student's teacher is segrl lm train's model there
    agent.agent = "reinforce"
    discovered = resolve_train_config(agent, unspaced)
    found = discovered.evaluator.lm.lm
    assert (found.context, found.lexicon_size, found.speller) == (
        "none",
        SLM_LEXICON_SIZE,
        "bigram",
    )
    assert (found.lexicon_prune, found.lexicon_init, found.length_penalty) == (True, "counts", 0.15)
    assert discovered.env.teacher_features is True
    assert discovered.evaluator.lm.reward_variant == "description-length"
    agent.agent = "ppo-batched"  # cannot read it: the lexicon-free LSTM teacher
    plain_hidden = resolve_train_config(agent, unspaced).evaluator.lm.lm
    assert (plain_hidden.context, plain_hidden.lexicon_size) == ("lstm", 0)
    assert resolve_train_config(agent, START).evaluator.lm.patience == 0
    agent.evaluator.lm.patience = 3  # asked for: kept
    assert resolve_train_config(agent, START).evaluator.lm.patience == 3


def replace_start(**changes) -> JobStart:
    return JobStart(**{**START.__dict__, **changes})


@pytest.mark.parametrize("job", ["train", "lm train", "units train", "units train (dcsa)"])
def test_resolution_is_pure(job):
    """Each job's resolution: the same config and start give the same resolved config, the config
    given is not changed nor shared, a resolved config resolves to itself, and nothing is left
    unset."""
    resolve, config = {
        "train": (resolve_train_config, build_config(TrainConfig, overrides={"agent": "ppo"})),
        "lm train": (resolve_lm_train_config, LMTrainConfig()),
        "units train": (resolve_units_config, build_units_config("stride")),
        "units train (dcsa)": (resolve_units_config, build_units_config("dcsa")),
    }[job]
    given = copy.deepcopy(config)
    first, second = resolve(config, START), resolve(config, START)
    assert first == second and config == given
    assert first != config and unset_options(first) == [] and unset_options(config)
    assert resolve(first, START) == first
    first.data.max_len = 7  # the resolved config shares nothing with the one given
    assert config.data.max_len == given.data.max_len
    assert first.out == START.run_dir and first.data.corpus == START.corpus
    if job == "units train (dcsa)":  # its sentence-length target, unset: 0, each sentence's
        assert (config.arch.sparsity_length, first.arch.sparsity_length) == (None, 0)


def small_agent(corpus_file, out, **overrides) -> TrainConfig:
    values = {
        "data.corpus": str(corpus_file),
        "data.min_char_count": 1,
        "gold.max_words": 50,
        "policy.embedding_dim": 8,
        "policy.hidden_dim": 16,
        "reinforce.steps": 6,
        "reinforce.batch_size": 8,
        "eval_every": 100,
        "eval_gold_words": 20,
        "checkpoint_every": 2,
        "threads": 1,
        "out": str(out),
    }
    return build_config(TrainConfig, overrides={**values, **overrides})


@pytest.mark.slow
def test_a_run_folder_saved_before_configs_were_resolved_resumes(mlflow_store, small_corpus_file):
    """A run folder written before this change saved the config as asked (unset options listed as
    such) and no ``requested.toml``: it resumes, its saved config resolved as the job resolves the
    one given; a changed option is still refused."""
    out = mlflow_store / "run"
    config = small_agent(small_corpus_file, out)
    with pytest.raises(TrainingInterrupted):
        train_reinforce(config, on_step=lambda step, stats: step == 2)
    save_config(config, out / CONFIG_FILE)  # the folder as the code before wrote it
    (out / REQUESTED_FILE).unlink()
    assert "max_minutes" in tomllib.loads((out / CONFIG_FILE).read_text())[UNSET_KEY]
    changed = small_agent(small_corpus_file, out, **{"reinforce.lr": 0.5})
    with pytest.raises(ConfigError, match=r"reinforce.lr: 0.003 -> 0.5"):
        train_reinforce(changed)
    resumed = train_reinforce(config)
    assert resumed.resumed_from == 2 and resumed.step == 6
