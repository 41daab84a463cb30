"""Segmenting with a saved model starts without the training side: ``segrl segment --model`` on an
agent's, an ``slm``'s and a unit model's folder imports neither MLflow nor the job skeleton."""

import subprocess
import sys

import pytest
import torch

from segrl.agents.policies import PolicyConfig, SegmenterPolicy
from segrl.agents.segmenter import AgentSegmenter
from segrl.lm import build_lm
from segrl.lm.config import resolve_lm_config, table_lm
from segrl.lm.lexicon import slm_lexicon
from segrl.lm.models import save_lm
from segrl.units.config import build_units_config
from segrl.units.saving import build_model, save_unit_model

SEGMENT_AND_REPORT = """
import sys
from segrl.cli import main
code = main(["segment", "--model", sys.argv[1], sys.argv[2]])
loaded = [m for m in ("mlflow", "segrl.jobs", "segrl.tracking.runs") if m in sys.modules]
print("LOADED:" + ",".join(loaded))
sys.exit(code)
"""


def _agent(corpus, folder):
    policy = SegmenterPolicy(
        len(corpus.vocab), 2, 32, PolicyConfig(embedding_dim=8, hidden_dim=8), 1
    )
    return AgentSegmenter(policy, corpus.vocab).save(folder / "agent")


def _slm(corpus, folder):
    torch.manual_seed(0)
    sizes = {"char_dim": 8, "hidden_dim": 16, "speller_dim": 16}
    config = resolve_lm_config(table_lm(**sizes), "words")
    model = build_lm(config, corpus.vocab, slm_lexicon(config, corpus.word_counts("train")))
    return save_lm(model, folder / "slm")


def _units(corpus, folder):
    config = build_units_config("transformer", None, {"arch.dim": 16, "arch.feed_forward": 16})
    model = build_model(config, len(corpus.vocab)).eval()
    return save_unit_model(folder / "units", model, corpus.vocab, config)


@pytest.mark.parametrize("make", [_agent, _slm, _units], ids=["agent", "slm", "units"])
def test_segment_with_a_saved_model_imports_no_mlflow(make, corpus, tmp_path):
    folder = make(corpus, tmp_path)
    words = tmp_path / "words.txt"
    words.write_text("the\ncat\nsat\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-P", "-c", SEGMENT_AND_REPORT, str(folder), str(words)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4  # three words segmented, then the report
    assert "".join(lines[0].split()) == "the"
    assert lines[-1] == "LOADED:"
