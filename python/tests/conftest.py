import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="module")
def expected() -> dict:
    """The Rust library's numbers on the fixtures (written by tests/fixture.rs)."""
    return json.loads((DATA / "expected.json").read_text())
