"""A team's tracking store: a real PostgreSQL (Debian's ``postgresql`` package), segrl pointed at it
with ``MLFLOW_TRACKING_URI``, a run logged and read back through ``segrl compare``."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from segrl.cli import main

from .conftest import write_small_corpus

pytestmark = pytest.mark.slow


def _postgres_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def postgres(tmp_path):
    """A PostgreSQL server on a free local port, stopped at the end; its URI."""
    pytest.importorskip("psycopg2", reason="the server extra (psycopg2-binary) is not installed")
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    port = _free_port()
    home = Path(tempfile.mkdtemp(prefix="segrl-postgres-"))  # not under tmp_path: see below
    data = home / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: run it as its own user
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser to start PostgreSQL as another user")
        as_user = ["runuser", "-u", "postgres", "--"]
        home.chmod(0o755)  # pytest's tmp_path is root's alone; the server's user must reach this
        data.mkdir()
        shutil.chown(data, "postgres")
    run = {"check": True, "capture_output": True, "timeout": 120}
    subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "segrl", "-A", "trust"], **run
    )
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1"
    subprocess.run(
        [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(data / "log"), "-o", options]
        + ["-w", "start"],
        **run,
    )
    try:
        subprocess.run(
            [
                str(bin_dir / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "segrl",
                "mlflow",
            ],
            **run,
        )
        yield f"postgresql+psycopg2://segrl@127.0.0.1:{port}/mlflow"
    finally:
        subprocess.run(
            [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(home, ignore_errors=True)


def test_segrl_logs_to_postgresql_and_compares_from_it(postgres, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", postgres)
    monkeypatch.chdir(tmp_path)
    corpus = write_small_corpus(tmp_path / "small.txt")
    args = ["baseline", "--method", "characters", "--corpus", str(corpus)]
    assert main([*args, "--min-char-count", "1", "--gold-max-words", "50"]) == 0
    capsys.readouterr()
    assert main(["compare"]) == 0
    out = capsys.readouterr().out
    assert "characters" in out and "baseline" in out
    import psycopg2

    with psycopg2.connect(postgres.replace("+psycopg2", "")) as conn, conn.cursor() as cursor:
        cursor.execute("select count(*) from runs where status = 'FINISHED'")
        assert cursor.fetchone() == (1,)
