"""Loading a model never runs code from it: every file segrl reads with torch is read with
``weights_only=True``, so a model folder, a run folder's checkpoint or an agent's policy whose pickle
would run a command is refused with a ``ModelError`` naming the file, and the command never runs."""

from __future__ import annotations

import os
import random
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from segrl import load_segmenter
from segrl.agents.policies import PolicyConfig, SegmenterPolicy
from segrl.agents.segmenter import AgentSegmenter
from segrl.checkpoint import load_checkpoint, save_checkpoint
from segrl.cli import EXIT_USER_ERROR, main
from segrl.data.corpus import PLACEHOLDER
from segrl.data.vocab import CharVocab
from segrl.errors import ModelError
from segrl.experiments.agent_train import train_reinforce
from segrl.jobs import RunDir, TrainingInterrupted
from segrl.lm import LMConfig, build_lm, save_lm
from segrl.units.config import build_units_config
from segrl.units.saving import build_model, load_unit_model, save_unit_model

from .test_train import small_config

SMALL_POLICY = {"embedding_dim": 8, "hidden_dim": 8}


class RunsACommand:
    """Unpickled, it runs ``touch MARKER`` in a shell (as a hostile model file's pickle would)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


def _plant(path: Path, marker: Path, **beside) -> None:
    """Replace ``path`` with a torch file whose pickle runs a command when unpickled."""
    path.unlink(missing_ok=True)
    torch.save({"model": RunsACommand(marker), **beside}, path)


def _refused(load, path: Path, marker: Path) -> None:
    with pytest.raises(ModelError) as refused:
        load()
    message = str(refused.value)
    assert str(path) in message and "pickled Python objects (posix.system)" in message
    assert "\n" not in message
    assert not marker.exists(), "the file's command ran"


def test_the_planted_file_would_run_its_command(tmp_path):
    """The payload is real: torch's unsafe loading (which segrl never uses) runs it."""
    marker = tmp_path / "ran"
    _plant(tmp_path / "model.pt", marker)
    torch.load(tmp_path / "model.pt", weights_only=False)
    assert marker.exists()


@pytest.fixture
def vocab() -> CharVocab:
    return CharVocab.from_texts(["the cat sat on the mat"], PLACEHOLDER)


def test_a_unit_model_folder_never_runs_its_model_file(tmp_path, vocab, mlflow_store, capsys):
    config = build_units_config("transformer")
    folder = save_unit_model(tmp_path / "units", build_model(config, len(vocab)), vocab, config)
    assert load_segmenter(folder).kind == "units"  # a good folder loads
    marker = tmp_path / "ran"
    _plant(folder / "model.pt", marker, model_name="transformer", _rng={})
    _refused(lambda: load_segmenter(folder), folder / "model.pt", marker)
    _refused(lambda: load_unit_model(folder), folder / "model.pt", marker)  # init_from, --from
    assert main(["segment", "--model", str(folder)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "posix.system" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not marker.exists()


def test_an_agent_folder_never_runs_its_policy_file(tmp_path, vocab):
    policy = SegmenterPolicy(len(vocab), 2, 32, PolicyConfig(**SMALL_POLICY), separator_id=1)
    folder = AgentSegmenter(policy, vocab).save(tmp_path / "agent")
    assert load_segmenter(folder).kind == "agent"
    marker = tmp_path / "ran"
    _plant(folder / "policy.pt", marker)
    _refused(lambda: load_segmenter(folder), folder / "policy.pt", marker)


def test_a_language_model_folder_never_runs_its_model_file(tmp_path, vocab):
    folder = save_lm(build_lm(LMConfig(model="slm"), vocab), tmp_path / "slm")
    assert load_segmenter(folder).kind == "slm"
    marker = tmp_path / "ran"
    _plant(folder / "model.pt", marker)
    _refused(lambda: load_segmenter(folder), folder / "model.pt", marker)


def test_resuming_never_runs_the_checkpoint(mlflow_store, small_corpus_file):
    config = small_config(small_corpus_file, mlflow_store, **{"reinforce.steps": 4})
    with pytest.raises(TrainingInterrupted):
        train_reinforce(config, on_step=lambda step, stats: step == 1)
    checkpoint = RunDir(mlflow_store / "run").checkpoint_path
    assert load_checkpoint(checkpoint, restore_rng=False)["step"] == 1
    marker = mlflow_store / "ran"
    _plant(checkpoint, marker, step=1, _rng={})
    _refused(lambda: train_reinforce(config), checkpoint, marker)


def test_resuming_ppo_never_runs_the_checkpoints_sb3_zip(mlflow_store, small_corpus_file):
    """The SB3 model inside a PPO checkpoint (a zip of torch files) whose policy file is a hostile
    pickle: SB3 reads it with ``weights_only``, so nothing runs, and the job says so in one line
    naming the checkpoint instead of torch's traceback."""
    import io
    import zipfile

    from segrl.experiments.sb3_train import train_ppo

    from .test_ppo import small_train_config

    config = small_train_config(small_corpus_file, mlflow_store / "run", "ppo")
    with pytest.raises(TrainingInterrupted):
        train_ppo(config, on_step=lambda step, stats: step == 1)
    checkpoint = RunDir(mlflow_store / "run").checkpoint_path
    state = load_checkpoint(checkpoint, restore_rng=False)
    marker = mlflow_store / "ran"
    hostile = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(state["model"])) as inner,
        zipfile.ZipFile(hostile, "w") as out,
    ):
        for name in inner.namelist():
            data = inner.read(name)
            if name == "policy.pth":
                planted = io.BytesIO()
                torch.save({"model": RunsACommand(marker)}, planted)
                data = planted.getvalue()
            out.writestr(name, data)
    state["model"] = hostile.getvalue()
    save_checkpoint(checkpoint, **{k: v for k, v in state.items() if k != "_rng"})
    with pytest.raises(ModelError) as refused:
        train_ppo(config)
    message = str(refused.value)
    # what the file holds, as the loaders say it, not torch's advice to load it with weights_only=False
    assert message.startswith(f"{checkpoint}: holds pickled Python objects (")
    assert "so this job cannot resume from it" in message and "weights_only" not in message
    assert "\n" not in message and "move the checkpoint aside" in message
    assert not marker.exists(), "the checkpoint's command ran"


def test_a_checkpoint_of_pickled_objects_is_refused_not_loaded(tmp_path):
    """As earlier versions wrote them (NumPy's RNG state pickled): refused, with what to do."""
    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 3, "_rng": {"numpy": np.random.get_state()}}, path)
    with pytest.raises(ModelError, match=r"checkpoint\.pt: holds pickled Python objects .*again"):
        load_checkpoint(path)


def test_a_checkpoint_restores_every_rng_and_numpy_array_exactly(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.normal()  # NumPy's state then holds a cached Gaussian
    arrays = {
        "order": np.arange(6, dtype=np.uint32)[::-1],
        "texts": np.array(["ab", "c"]),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    path = save_checkpoint(tmp_path / "c.pt", arrays=arrays, count=np.int64(5), pair=(1, "a"))
    expected = (random.random(), np.random.normal(), np.random.rand(3), torch.rand(2))
    random.random(), np.random.rand(), torch.rand(1)  # move every generator on
    state = load_checkpoint(path)
    after = (random.random(), np.random.normal(), np.random.rand(3), torch.rand(2))
    assert after[:2] == expected[:2]
    assert np.array_equal(after[2], expected[2]) and torch.equal(after[3], expected[3])
    for name, array in arrays.items():
        assert state["arrays"][name].dtype == array.dtype and np.array_equal(
            state["arrays"][name], array
        ), name
    assert state["arrays"]["empty"].shape == (0, 3)
    assert state["count"] == 5 and state["pair"] == (1, "a")
    with pytest.raises(TypeError, match="not object"):
        save_checkpoint(tmp_path / "d.pt", thing=object())  # refused when saving, not when loading
    assert not (tmp_path / "d.pt").exists()
