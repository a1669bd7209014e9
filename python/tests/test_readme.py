"""The README's Python example runs as written (from the repository root)."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_example_runs(capsys):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "plain_shared" in out and "(4, 3)" in out
