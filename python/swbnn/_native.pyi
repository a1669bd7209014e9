"""Types of the Rust extension module (``python/src``). Every function releases the GIL while
it works; bad input raises ``ValueError``, a missing file ``FileNotFoundError``, a wrong
argument type ``TypeError``."""

import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
from typing import final

__all__ = ['Mixture', 'fit', 'plan', 'swb_save', 'swb_load', 'Model', 'load', 'train_json',
           'compress_json', 'compress_auto_json', 'evaluate_json', 'calibrate_json',
           'defaults_json', 'regression_json', 'conformal_intervals', 'ece', 'mce', 'nll', 'brier', 'accuracy', 'entropy',
           'mutual_information', 'auroc', 'aupr', 'fpr_at_tpr', '__version__']

__version__: str

_Path = Union[str, "os.PathLike[str]"]
_Array = npt.ArrayLike
_Progress = Optional[Callable[[str, Dict[str, Any]], None]]

@final
class Mixture:
    """A fitted full-covariance 2-D Gaussian mixture."""

    @property
    def means(self) -> npt.NDArray[np.float64]: ...
    @property
    def covariances(self) -> npt.NDArray[np.float64]: ...
    @property
    def weights(self) -> npt.NDArray[np.float64]: ...
    @property
    def assignments(self) -> Optional[npt.NDArray[np.uint32]]: ...
    @property
    def log_likelihood(self) -> Optional[float]: ...
    @property
    def k(self) -> int: ...
    @property
    def k_requested(self) -> int: ...
    @property
    def iterations(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def objective(self) -> float: ...
    def assign(self, points: _Array) -> npt.NDArray[np.uint32]: ...
    def score_samples(self, points: _Array) -> npt.NDArray[np.float64]: ...
    def score(self, points: _Array) -> float: ...

def fit(
    points: _Array,
    k: int = 2000,
    *,
    seed: int = 0,
    weights: Optional[_Array] = None,
    histogram_resolution: Optional[int] = None,
    minibatch_epochs: Optional[int] = None,
    batch_size: Optional[int] = None,
    max_iterations: Optional[int] = None,
    tolerance: Optional[float] = None,
    cov_floor: Optional[float] = None,
    init: str = "kmeans++",
    assign: bool = True,
    score: bool = True,
) -> Mixture: ...
def plan(
    mu: _Array,
    sigma: _Array,
    grad: Optional[_Array] = None,
    config: Optional[str] = None,
    k: Optional[int] = None,
    seed: Optional[int] = None,
    layers: Optional[Sequence[int]] = None,
) -> Dict[str, Any]: ...
def swb_save(path: _Path, data_json: str, entropy_index: bool = True, int8_outliers: bool = False) -> str: ...
def swb_load(path: _Path) -> str: ...

@final
class Model:
    """A loaded model: a `.swb` file, a full-BNN file or a model directory."""

    @property
    def temperature(self) -> Optional[float]: ...
    @property
    def classes(self) -> int: ...
    @property
    def input_shape(self) -> Tuple[int, int, int]: ...
    @property
    def is_regression(self) -> bool: ...
    def predict_regression(
        self, features: _Array, samples: int = 30, seed: int = 0
    ) -> Tuple[
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
    ]: ...
    def evaluate_regression_json(
        self, features: _Array, targets: _Array, samples: int = 30, seed: int = 0
    ) -> str: ...
    def predict(
        self,
        images: _Array,
        samples: int = 30,
        seed: int = 0,
        return_samples: bool = False,
        temperature: Optional[float] = None,
    ) -> npt.NDArray[np.float32]: ...
    def evaluate_json(
        self,
        images: _Array,
        labels: _Array,
        ood_images: Optional[_Array] = None,
        samples: int = 30,
        seed: int = 0,
        temperature: Optional[float] = None,
    ) -> str: ...
    def fit_temperature_json(
        self, images: _Array, labels: _Array, samples: int = 30, seed: int = 0, store: bool = False
    ) -> str: ...
    def info_json(self) -> str: ...

def load(path: _Path) -> Model: ...
def train_json(
    dataset: str,
    arch: str,
    kind: str,
    out: _Path,
    *,
    epochs: int = 5,
    seed: int = 0,
    data: Optional[_Path] = None,
    subset: Optional[int] = None,
    estimator: str = "reparam",
    resume: bool = False,
    progress: _Progress = None,
    validation: Optional[int] = None,
    image_size: Optional[int] = None,
    from_model: Optional[_Path] = None,
    targets: Optional[List[str]] = None,
    noise: Optional[str] = None,
    mlp_hidden: Optional[List[int]] = None,
) -> str: ...
def compress_json(
    model: _Path,
    dataset: str,
    out: _Path,
    *,
    k: Optional[int] = None,
    config: Optional[str] = None,
    epochs: Optional[int] = None,
    data: Optional[_Path] = None,
    subset: Optional[int] = None,
    force: bool = False,
    progress: _Progress = None,
    validation: Optional[int] = None,
) -> str: ...
def compress_auto_json(
    model: _Path,
    dataset: str,
    out: _Path,
    *,
    search: Optional[str] = None,
    config: Optional[str] = None,
    epochs: Optional[int] = None,
    data: Optional[_Path] = None,
    subset: Optional[int] = None,
    force: bool = False,
    progress: _Progress = None,
    validation: Optional[int] = None,
) -> str: ...
def evaluate_json(
    model: _Path,
    dataset: str,
    *,
    samples: int = 30,
    seed: int = 0,
    ood: Optional[str] = None,
    ood_dir: Optional[_Path] = None,
    data: Optional[_Path] = None,
    subset: Optional[int] = None,
    temperature: Optional[float] = None,
    calibrated: bool = False,
) -> str: ...
def calibrate_json(
    model: _Path,
    dataset: str,
    *,
    samples: int = 30,
    seed: int = 0,
    data: Optional[_Path] = None,
    validation: Optional[int] = None,
    validation_seed: Optional[int] = None,
    conformal: Optional[float] = None,
) -> str: ...
def defaults_json() -> str: ...
def regression_json(
    means: _Array,
    stds: _Array,
    targets: _Array,
    conformal_qhat: Optional[List[float]] = None,
    level: float = 0.9,
) -> str: ...
def conformal_intervals(
    means: _Array, stds: _Array, targets: _Array, level: float = 0.9
) -> List[float]: ...
def ece(probs: _Array, labels: _Array, n_bins: int = 15) -> float: ...
def mce(probs: _Array, labels: _Array, n_bins: int = 15) -> float: ...
def nll(probs: _Array, labels: _Array) -> float: ...
def brier(probs: _Array, labels: _Array) -> float: ...
def accuracy(probs: _Array, labels: _Array) -> float: ...
def entropy(probs: _Array) -> npt.NDArray[np.float64]: ...
def mutual_information(samples: _Array) -> npt.NDArray[np.float64]: ...
def auroc(in_scores: _Array, out_scores: _Array) -> float: ...
def aupr(in_scores: _Array, out_scores: _Array) -> float: ...
def fpr_at_tpr(in_scores: _Array, out_scores: _Array, level: float = 0.95) -> float: ...
