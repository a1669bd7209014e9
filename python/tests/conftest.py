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


@pytest.fixture(scope="module", params=["cpu", "cuda"])
def device(request):
    """The torch device a ``swbnn.torch`` test runs on: the CPU, and a CUDA device when torch
    sees one (skipped otherwise)."""
    torch = pytest.importorskip("torch", reason="swbnn.torch needs PyTorch: pip install swbnn[torch]")
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch.device(request.param)
