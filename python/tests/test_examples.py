"""The examples in python/examples run as a user runs them (a fresh interpreter, from the
repository root) and print what they promise."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(name: str) -> str:
    env = dict(os.environ)
    # The installed package, never the source tree's python/swbnn (it has no extension).
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / name)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_quickstart():
    out = run("quickstart.py")
    assert "plan: k = " in out and "predictive (4, 3)" in out


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("bayesian_torch") is None,
    reason="needs torch and bayesian-torch",
)
def test_torch_compress():
    out = run("torch_compress.py")
    assert "trainable parameters" in out and "reloaded: output (4, 10)" in out
