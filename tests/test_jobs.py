"""``segrl.jobs``: the training-job skeleton every trainer uses (run folder, resumption, the loop's
cadences, stop requests, the end), on a toy model."""

import ast
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

import segrl.jobs
from segrl.config import TrackingConfig
from segrl.errors import ConfigError
from segrl.jobs import RUNS_ROOT, Cadence, Job, RunDir, TrainingInterrupted


@dataclass
class ToyConfig:
    steps: int = 12
    lr: float = 0.05
    out: str | None = None
    tracking: TrackingConfig = field(
        default_factory=lambda: TrackingConfig(experiment="toy", run_name="toy")
    )


RESUMABLE = {"steps", "out"}


class Toy:
    """A linear model fitted by SGD on fresh random inputs each step (so resumption must restore
    the RNG), as a job's ``Trainable``."""

    label = "training"
    shown = ()

    def __init__(self, config: ToyConfig):
        torch.manual_seed(0)
        self.model = torch.nn.Linear(3, 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=config.lr)
        self.evaluated: list[int] = []
        self.saved: list[int] = []
        self.job: Job | None = None

    def update(self) -> dict[str, float]:
        x = torch.randn(8, 3)
        loss = (self.model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.item()}

    def state_dict(self) -> dict:
        if self.job is not None:  # the steps saved at (the module's example gives it no job)
            self.saved.append(self.job.step)
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def evaluate(self, step: int, job: Job) -> dict[str, float]:
        self.evaluated.append(step)
        return {"weight": float(self.model.weight.detach().sum())}

    def finish(self, job: Job) -> dict[str, float]:
        return {"weight": float(self.model.weight.detach().sum()), "step": float(job.step)}


def run_toy(
    config: ToyConfig, on_step=None, keep_checkpoint=True, max_minutes=None, toy: type[Toy] = Toy
) -> Toy:
    toy = toy(config)
    run = RunDir.open(config, config.out, Path(RUNS_ROOT) / "toy", RESUMABLE, config.steps)
    cadence = Cadence(
        config.steps, log_every=4, eval_every=3, checkpoint_every=5, max_minutes=max_minutes
    )
    job = toy.job = Job(run, toy, cadence, on_step=on_step)
    with job:
        for step in job.loop():
            job.end_step(step, toy.update())
        toy.result = job.finish(keep_checkpoint=keep_checkpoint)
        toy.metrics = toy.result.metrics
    return toy


def module_example() -> str:
    """The code of ``segrl.jobs``'s docstring example."""
    doc = ast.get_docstring(ast.parse(Path(segrl.jobs.__file__).read_text(encoding="utf-8")))
    code = doc.split("reads::\n")[1].split("\n\n``")[0]
    return textwrap.dedent(code)


def test_the_module_example_is_true(mlflow_store):
    """The docstring's example runs as written, with a trainer's pieces around it."""
    config = ToyConfig(steps=120, out=str(mlflow_store / "run"))
    toy = Toy(config)
    scope = {
        "Path": Path, "RUNS_ROOT": RUNS_ROOT, "RunDir": RunDir, "Job": Job, "Cadence": Cadence,
        "RESUMABLE": RESUMABLE, "config": config, "steps": config.steps, "trainable": toy,
        "update": toy.update,
    }  # fmt: skip
    exec(compile(module_example(), "segrl.jobs example", "exec"), scope)
    toy.job = scope["job"]
    result = scope["result"]
    assert result.metrics["step"] == 120.0 and result.step == 120 and result.resumed_from is None
    assert toy.evaluated == [100]  # every eval_every (100) steps before the last
    run = RunDir(mlflow_store / "run")
    assert run.finished and run.info["step"] == 120 and run.info["steps"] == 120
    history = MlflowClient().get_metric_history(run.info["mlflow_run_id"], "train/loss")
    assert [m.step for m in history] == list(range(10, 121, 10))  # every log_every (10) steps


def test_cadences_and_the_end(mlflow_store):
    toy = run_toy(ToyConfig(steps=12, out=str(mlflow_store / "run")))
    assert toy.evaluated == [3, 6, 9]  # not at the last step: the end evaluates
    assert toy.saved == [5, 10, 12]  # every checkpoint_every steps and at the last
    run = RunDir(mlflow_store / "run")
    run_id = run.info["mlflow_run_id"]
    history = MlflowClient().get_metric_history(run_id, "train/loss")
    assert [m.step for m in history] == [4, 8, 12]
    assert run.finished and run.info["metrics"] == toy.metrics and run.has_checkpoint
    assert MlflowClient().get_run(run_id).info.status == "FINISHED"


def test_progress_into_a_log_file_is_a_plain_line_per_log(mlflow_store, capsys):
    run_toy(ToyConfig(steps=8, out=str(mlflow_store / "run")))
    err = capsys.readouterr().err  # not a terminal: no bar redrawn with carriage returns
    assert "\r" not in err
    assert err.splitlines() == [
        "training: step 3/8",  # the evaluation at step 3
        "training: step 4/8",
        "training: step 6/8",
        "training: step 8/8",
    ]


def test_an_interrupted_job_resumes_exactly(mlflow_store):
    straight = run_toy(ToyConfig(out=str(mlflow_store / "a")))
    config = ToyConfig(out=str(mlflow_store / "b"))
    with pytest.raises(TrainingInterrupted, match="stopped at step 7"):
        run_toy(config, on_step=lambda step, stats: step == 7)
    run = RunDir(mlflow_store / "b")
    assert not run.finished and run.info["step"] == 7
    run_id = run.info["mlflow_run_id"]
    assert MlflowClient().get_run(run_id).info.status == "KILLED"
    resumed = run_toy(config)
    assert resumed.job.resumed_from == 7 and resumed.saved == [10, 12]
    assert resumed.evaluated == [9]
    assert resumed.metrics == straight.metrics
    for name, tensor in straight.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name
    history = MlflowClient().get_metric_history(run_id, "train/loss")
    assert [m.step for m in history] == [4, 8, 12]  # one MLflow run across the interruption


def test_a_finished_run_continues_only_with_a_larger_budget(mlflow_store):
    out = str(mlflow_store / "run")
    first = run_toy(ToyConfig(steps=6, out=out))
    with pytest.raises(ConfigError, match="finished run"):
        run_toy(ToyConfig(steps=6, out=out))
    with pytest.raises(ConfigError, match=r"different config \(lr: 0.05 -> 0.1\)"):
        run_toy(ToyConfig(steps=9, lr=0.1, out=out))
    longer = run_toy(ToyConfig(steps=9, out=out))
    assert longer.job.resumed_from == 6 and longer.metrics["step"] == 9.0
    assert longer.metrics != first.metrics
    straight = run_toy(ToyConfig(steps=9, out=str(mlflow_store / "straight")))
    assert longer.metrics == straight.metrics  # as if it had been given 9 steps at first
    dropped = str(mlflow_store / "dropped")
    run_toy(ToyConfig(steps=6, out=dropped), keep_checkpoint=False)
    assert not RunDir(dropped).has_checkpoint
    with pytest.raises(ConfigError, match="finished run"):
        run_toy(ToyConfig(steps=9, out=dropped))


def test_the_time_limit_ends_the_run_as_its_budget_does(mlflow_store):
    toy = run_toy(ToyConfig(steps=12, out=str(mlflow_store / "run")), max_minutes=1e-9)
    assert toy.metrics["step"] == 1.0 and toy.saved == [1]
    run = RunDir(mlflow_store / "run")
    assert run.finished and run.info["step"] == 1


def test_every_progress_bar_is_off_where_stderr_is_no_terminal():
    """A bar drawn into a redirected log is a line of ``\\r`` frames: every ``tqdm`` of segrl
    passes ``disable`` (``None``: off where its stream is not a terminal; ``True`` on request)."""
    import ast
    from pathlib import Path

    import segrl

    missing = []
    for path in sorted(Path(segrl.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            is_bar = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tqdm"
            if is_bar and not any(k.arg == "disable" for k in node.keywords):
                missing.append(f"{path.name}:{node.lineno}")
    assert not missing, missing
