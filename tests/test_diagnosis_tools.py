"""The diagnosis scripts in ``tools/`` say what is wrong with their input in one line, as the CLI
does, instead of a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def test_teacher_density_names_a_folder_that_is_no_run(tmp_path):
    gold = tmp_path / "gold.tsv"
    gold.write_text("walked\twalk ed\n", encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            str(TOOLS / "teacher_density.py"),
            str(tmp_path / "nothing"),
            "--gold",
            str(gold),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("teacher_density: error: ")
    assert str(tmp_path / "nothing") in done.stderr
