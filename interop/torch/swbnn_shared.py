"""Moved: this module is now ``swbnn.torch.exported`` (python/swbnn/torch/exported.py).

This file re-exports it, so ``import swbnn_shared`` keeps working from this folder (the
interop examples and fixture script use it): from the installed ``swbnn`` package when there is
one, else straight from the package's source in this repository.
"""

try:
    from swbnn.torch.exported import *  # noqa: F401,F403
    from swbnn.torch.exported import FORMAT, BN_EPS, SharedModel, fixed_noise, load  # noqa: F401
except ImportError:  # swbnn is not installed: load the file from the source tree
    import importlib.util as _util
    from pathlib import Path as _Path

    _path = _Path(__file__).resolve().parents[2] / "python" / "swbnn" / "torch" / "exported.py"
    _spec = _util.spec_from_file_location("_swbnn_torch_exported", _path)
    _mod = _util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
    FORMAT, BN_EPS, SharedModel, fixed_noise, load = (
        _mod.FORMAT, _mod.BN_EPS, _mod.SharedModel, _mod.fixed_noise, _mod.load,
    )
