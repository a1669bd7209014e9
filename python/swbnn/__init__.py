"""swbnn: stochastic weight sharing for Bayesian neural networks (2DGBNN) from Python.

* ``swbnn.gmm.fit``: the fast full-covariance 2-D Gaussian mixture (millions of points).
* ``swbnn.plan``: the method's stages 1-2 (outliers, GMM, ellipses, merging) on flat
  ``(mu, sigma[, grad])`` arrays, e.g. a PyTorch BNN's weights.
* ``swbnn.load``: a ``.swb`` file, a full-BNN file or a model directory; ``Model.predict``,
  ``Model.evaluate``, ``Model.info``, and temperature scaling: ``Model.fit_temperature``,
  ``Model.temperature``, ``predict(..., calibrated=True)``.
* ``swbnn.train``, ``swbnn.compress``, ``swbnn.calibrate``, ``swbnn.evaluate``: the command
  line's commands, on a data set's name or NumPy arrays.
* ``swbnn.metrics``: ECE/MCE, NLL, Brier, entropy, mutual information, AUROC/AUPR/FPR@95.
* ``swbnn.torch`` (needs PyTorch, imported on its own): compress a PyTorch BNN in PyTorch.

Everything runs on the CPU. An argument of the wrong type raises ``TypeError``, a bad value
``ValueError``, a missing file ``FileNotFoundError``, each with the Rust side's message.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import tempfile
import zipfile
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native, _progress, gmm, metrics

__version__ = _native.__version__

__all__ = [
    "Model",
    "RegressionPrediction",
    "SharingPlan",
    "calibrate",
    "compress",
    "evaluate",
    "gmm",
    "load",
    "metrics",
    "plan",
    "train",
]

PathLike = Union[str, "os.PathLike[str]"]

#: A data set: a preset's name (``"fashion-mnist"``), ``"folder:DIR"``, ``"npz:FILE"``,
#: ``"csv:TRAIN.csv[,test=TEST.csv]"``, or NumPy arrays ``(x, y)`` / ``(x_train, y_train,
#: x_test, y_test)``: integer ``y`` are class labels, floating-point ``y`` regression targets.
DataSet = Union[str, Sequence[np.ndarray]]


@dataclass(frozen=True)
class RegressionPrediction:
    """A regression network's Monte Carlo predictive, each array ``(n, targets)`` in the
    targets' units: the predictive ``mean`` and standard deviation ``std``, and the two parts
    of its variance, ``std**2 == aleatoric_std**2 + epistemic_std**2``: the noise the network
    predicts (the mean of the samples' variances) and its uncertainty about the mean (the
    variance of the samples' means)."""

    mean: np.ndarray
    std: np.ndarray
    aleatoric_std: np.ndarray
    epistemic_std: np.ndarray


def _npz_bytes(arrays: Dict[str, np.ndarray]) -> bytes:
    """A ``.npz`` of ``arrays`` whose bytes depend on the arrays alone (fixed zip times), so
    that the same arrays give the same file and digest on every call."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, a in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            npy = io.BytesIO()
            np.lib.format.write_array(npy, np.ascontiguousarray(a), allow_pickle=False)
            z.writestr(info, npy.getvalue())
    return buf.getvalue()


def _images_for_file(x: Any, name: str) -> np.ndarray:
    """Images as the ``.npz`` reader takes them: uint8 kept, other numbers as float32 (values
    in [0, 1] or [0, 255])."""
    x = np.asarray(x)
    if x.dtype == np.uint8:
        return x
    if x.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold numbers (uint8 or float images), got dtype {x.dtype}")
    return x.astype(np.float32)


def _labels_for_file(y: Any, name: str) -> np.ndarray:
    y = np.asarray(y)
    if y.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer class labels, got dtype {y.dtype}")
    return y.astype(np.int64)


def _targets_for_file(y: Any, name: str) -> np.ndarray:
    y = np.asarray(y)
    if y.dtype.kind != "f":
        raise TypeError(f"{name} must hold floating-point regression targets, got dtype {y.dtype}")
    return y.astype(np.float32)


def _features_for_file(x: Any, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold numbers, got dtype {x.dtype}")
    return x.astype(np.float32)


@contextlib.contextmanager
def _dataset(dataset: DataSet, *, test_only: bool = False) -> Iterator[str]:
    """The data-set argument of the commands: a name as it is, or arrays written once to a
    temporary ``.npz`` named by its digest (removed afterwards). ``test_only``: ``(x, y)`` is
    a test split (for evaluation)."""
    if isinstance(dataset, (str, os.PathLike)):
        yield os.fspath(dataset)
        return
    if not isinstance(dataset, (tuple, list)) or len(dataset) not in (2, 4):
        raise ValueError(
            "dataset must be a name (\"fashion-mnist\", \"folder:DIR\", \"npz:FILE\") or "
            "NumPy arrays (x, y) or (x_train, y_train, x_test, y_test)"
        )
    keys = ["x_train", "y_train", "x_test", "y_test"]
    if test_only and len(dataset) == 2:
        # The reader needs a training split to number the classes: the test split's labels.
        dataset = (dataset[0], dataset[1], dataset[0], dataset[1])
    # Floating-point targets make a regression table (rows of features); integers, labels.
    regression = np.asarray(dataset[1]).dtype.kind == "f"
    x_file, y_file = (
        (_features_for_file, _targets_for_file) if regression else (_images_for_file, _labels_for_file)
    )
    arrays = {k: (x_file if k.startswith("x") else y_file)(a, k) for k, a in zip(keys, dataset)}
    for xk, yk in (("x_train", "y_train"), ("x_test", "y_test")):
        if xk in arrays and len(arrays[xk]) != len(arrays[yk]):
            raise ValueError(
                f"{xk} has {len(arrays[xk])} images and {yk} {len(arrays[yk])} labels: one "
                "label per image"
            )
    data = _npz_bytes(arrays)
    with tempfile.TemporaryDirectory(prefix="swbnn-arrays-") as tmp:
        path = os.path.join(tmp, f"arrays-{hashlib.sha256(data).hexdigest()[:16]}.npz")
        with open(path, "wb") as f:
            f.write(data)
        yield f"npz:{path}"

#: Codes of ``SharingPlan.fates``.
FATE_SHARED, FATE_ELLIPSE, FATE_OUTLIER_MEAN, FATE_OUTLIER_GRADIENT, FATE_OUTLIER_SMALL_CLUSTER = (
    0,
    1,
    2,
    3,
    4,
)


def _config_json(config: Union[None, str, Dict[str, Any]]) -> Optional[str]:
    if config is None or isinstance(config, str):
        return config
    if isinstance(config, dict):
        return json.dumps(config)
    raise TypeError(f"config must be a dict or JSON text, got {type(config).__name__}")


@dataclass(frozen=True)
class SharingPlan:
    """What every weight becomes (stages 1-2 of the method).

    ``fates[i]`` is ``FATE_SHARED`` (weight ``i`` samples codebook entry ``assignment[i]``),
    ``FATE_ELLIPSE`` (a blend, see ``ellipse_*``) or one of the ``FATE_OUTLIER_*`` causes
    (it keeps its own ``(mu, sigma)``); ``assignment[i]`` is -1 unless shared.
    """

    means: np.ndarray
    """Codebook Gaussians' means ``(K, 2)`` in the ``(mu, sigma)`` plane."""
    covariances: np.ndarray
    """Codebook Gaussians' covariances ``(K, 2, 2)``."""
    mixing_weights: np.ndarray
    """Mixing weights ``(K,)``."""
    init_mu: np.ndarray
    """Shared distributions' initial means ``(K,)``."""
    init_sigma: np.ndarray
    """Shared distributions' initial standard deviations ``(K,)``."""
    component_counts: np.ndarray
    """Plain-shared weights per codebook entry ``(K,)``."""
    fates: np.ndarray
    """Fate code per weight ``(n,)``, int8."""
    assignment: np.ndarray
    """Codebook entry per weight ``(n,)``, -1 where not plain-shared."""
    ellipse_weights: np.ndarray
    """Weight index of every ellipse weight ``(m,)``."""
    ellipse_components: np.ndarray
    """Blended codebook entries ``(m, 5)``, -1 in unused slots."""
    ellipse_alphas: np.ndarray
    """Blend coefficients ``(m, 5)``, 0 in unused slots."""
    counts: Dict[str, int]
    """Weights by fate: total, plain_shared, ellipse, outlier_mean, outlier_gradient,
    outlier_small_cluster."""
    report: Dict[str, Any]
    """The compression report (counts, Gaussians before/after merging, timings)."""
    config: Dict[str, Any]
    """The configuration that was used."""

    @property
    def k(self) -> int:
        """Number of codebook entries."""
        return int(self.means.shape[0])


def plan(
    mu: np.ndarray,
    sigma: np.ndarray,
    grad: Optional[np.ndarray] = None,
    config: Union[None, str, Dict[str, Any]] = None,
    *,
    k: Optional[int] = None,
    seed: Optional[int] = None,
    layers: Optional[Sequence[int]] = None,
) -> SharingPlan:
    """Runs stages 1-2 of the method on flat float32 ``mu``, ``sigma`` (> 0) and, optionally,
    ``grad`` (the mean ``d loss / d mu``, for the gradient-outlier criterion).

    ``config`` is a ``SwshareConfig`` as a dict or JSON text (``{"outliers": ...,
    "gmm": ..., "refine": ...}``; missing fields take the paper's defaults, K = 2000);
    ``k`` and ``seed`` override its GMM's. ``layers`` are the sizes of the consecutive layers
    the arrays hold (default: one layer): the outlier threshold's layer-relative part
    (``outliers.tau_sd``) is measured on each layer's own means.
    """
    d = _native.plan(mu, sigma, grad, _config_json(config), k, seed, None if layers is None else [int(n) for n in layers])
    report = json.loads(d.pop("report_json"))
    cfg = json.loads(d.pop("config_json"))
    return SharingPlan(report=report, config=cfg, **d)


class Model:
    """A loaded model on the CPU; see :func:`load`."""

    def __init__(self, native: "_native.Model") -> None:
        self._native = native

    @property
    def classes(self) -> int:
        """Number of classes (0 for a regression network)."""
        return self._native.classes

    @property
    def is_regression(self) -> bool:
        """Whether the model is a regression network (a Gaussian per target), whose
        :meth:`predict` returns a :class:`RegressionPrediction`."""
        return self._native.is_regression

    @property
    def input_shape(self) -> tuple:
        """``(C, H, W)`` of the images the model takes."""
        return self._native.input_shape

    @property
    def normalization(self) -> Optional[Dict[str, List[float]]]:
        """``{"mean": [...], "std": [...]}`` per channel, of pixels scaled to [0, 1]: what
        :meth:`predict` applies to uint8 images. ``None`` for models saved before it was
        recorded."""
        return self.info().get("normalization")

    def _images(self, images: Any) -> np.ndarray:
        """``images`` as the network takes them: uint8 images (``(n, C, H, W)``, ``(n, H, W,
        C)`` or, grey, ``(n, H, W)``) are scaled to [0, 1] and normalised as in training;
        any other array is taken as already normalised ``(n, C, H, W)``, converted to
        float32."""
        images = np.asarray(images)
        if images.dtype != np.uint8:
            return images
        c, h, w = self.input_shape
        if images.ndim == 3 and c == 1 and images.shape[1:] == (h, w):
            images = images[:, None]
        elif images.ndim == 4 and images.shape[1:] != (c, h, w) and images.shape[1:] == (h, w, c):
            images = images.transpose(0, 3, 1, 2)
        if images.ndim != 4 or images.shape[1:] != (c, h, w):
            raise ValueError(
                f"images must be (n, {c}, {h}, {w}), (n, {h}, {w}, {c})"
                + (f" or (n, {h}, {w})" if c == 1 else "")
                + f"; got shape {images.shape}"
            )
        norm = self.normalization
        if norm is None:
            raise ValueError(
                "this model records no input normalisation (it predates the record): pass "
                "float32 images normalised as in its training"
            )
        mean = np.asarray(norm["mean"], np.float32).reshape(1, c, 1, 1)
        std = np.asarray(norm["std"], np.float32).reshape(1, c, 1, 1)
        return np.ascontiguousarray((images.astype(np.float32) / np.float32(255) - mean) / std)

    @property
    def temperature(self) -> Optional[float]:
        """The fitted temperature stored with the model (``swbnn calibrate``, or
        :meth:`fit_temperature` with ``store=True``); ``None`` when none was fitted."""
        return self._native.temperature

    def _temperature(self, temperature: Optional[float], calibrated: bool) -> Optional[float]:
        if calibrated and temperature is not None:
            raise ValueError("give temperature or calibrated=True, not both")
        if not calibrated:
            return temperature
        t = self._native.temperature
        if t is None:
            raise ValueError(
                f"{self!r} holds no fitted temperature; fit one on validation data with "
                "Model.fit_temperature(images, labels, store=True) or `swbnn calibrate`"
            )
        return t

    def predict(
        self,
        images: np.ndarray,
        samples: int = 30,
        seed: int = 0,
        return_samples: bool = False,
        *,
        temperature: Optional[float] = None,
        calibrated: bool = False,
    ) -> np.ndarray:
        """Predictive probabilities of ``images``: raw uint8 images (normalised here as the
        model records, see :attr:`normalization`), or float images ``(n, C, H, W)`` already
        normalised. Returns the mean over ``samples`` Monte Carlo weight samples, ``(n,
        classes)``, or each sample's, ``(samples, n, classes)``. The same seed gives the same
        numbers as ``swbnn eval --seed`` on the same images.

        With ``temperature`` (0.05 to 20), or ``calibrated=True`` for the model's stored
        :attr:`temperature`, each sample's logits are divided by it before the softmax.

        A regression network (:attr:`is_regression`) takes rows of features ``(n, d)`` in
        your units instead (standardised here as in training) and returns a
        :class:`RegressionPrediction` in the targets' units."""
        if self.is_regression:
            if return_samples or temperature is not None or calibrated:
                raise ValueError(
                    "a regression network's predictive is its mean and standard deviation: "
                    "return_samples, temperature and calibrated are a classifier's"
                )
            mean, std, alea, epi = self._native.predict_regression(images, samples, seed)
            return RegressionPrediction(mean, std, alea, epi)  # type: ignore[return-value]
        t = self._temperature(temperature, calibrated)
        return self._native.predict(self._images(images), samples, seed, return_samples, t)

    def evaluate(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        ood_images: Optional[np.ndarray] = None,
        samples: int = 30,
        seed: int = 0,
        *,
        temperature: Optional[float] = None,
        calibrated: bool = False,
    ) -> Dict[str, Any]:
        """Accuracy, NLL, ECE, MCE, Brier, entropy and mutual information on ``(images,
        labels)`` and, with ``ood_images``, OOD detection (AUROC, AUPR, FPR@95);
        ``temperature`` and ``calibrated`` as in :meth:`predict`.

        A regression network takes ``(features, targets)`` in your units and returns RMSE,
        the Gaussian NLL of its Monte Carlo mixture, CRPS, the coverage and width of its
        central 50/90/95 % intervals and the PIT calibration error."""
        if self.is_regression:
            if ood_images is not None or temperature is not None or calibrated:
                raise ValueError(
                    "ood_images, temperature and calibrated are a classifier's; a regression "
                    "network is evaluated on (features, targets)"
                )
            return json.loads(self._native.evaluate_regression_json(images, labels, samples, seed))
        labels = metrics._labels(labels)
        t = self._temperature(temperature, calibrated)
        return json.loads(
            self._native.evaluate_json(
                self._images(images),
                labels,
                None if ood_images is None else self._images(ood_images),
                samples,
                seed,
                t,
            )
        )

    def fit_temperature(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        samples: int = 30,
        seed: int = 0,
        *,
        store: bool = False,
    ) -> Dict[str, Any]:
        """Fits the temperature that minimises the NLL of the Monte Carlo predictive on
        held-out ``(images, labels)`` (validation data, never the test set), as ``swbnn
        calibrate`` does. With ``store=True`` it is written into the model's file (or
        ``calibration.json`` of a model directory) and becomes :attr:`temperature`.

        Returns ``temperature``, ``nll_before`` and ``nll_after`` (on these images),
        ``at_bound`` (the fit sits on an end of the searched range 0.05-20: a sign of a
        broken model or unusual data), ``images`` and ``samples``."""
        labels = metrics._labels(labels)
        return json.loads(
            self._native.fit_temperature_json(self._images(images), labels, samples, seed, store)
        )

    def info(self) -> Dict[str, Any]:
        """Architecture, parameter counts and, for a ``.swb`` file, the sharing statistics."""
        return json.loads(self._native.info_json())

    def __repr__(self) -> str:
        return repr(self._native)


def load(path: PathLike) -> Model:
    """Loads a ``.swb`` file, a full-BNN file, a directory holding ``model.swb``, or a
    directory written by ``swbnn train`` (``model.bpk`` and ``config.json``)."""
    return Model(_native.load(os.fspath(path)))


def train(
    dataset: DataSet,
    arch: str,
    kind: str,
    out: PathLike,
    *,
    epochs: int = 5,
    seed: int = 0,
    data: Optional[PathLike] = None,
    subset: Optional[int] = None,
    estimator: str = "reparam",
    resume: bool = False,
    progress: bool = False,
    validation: Optional[int] = None,
    image_size: Optional[int] = None,
    start: Optional[PathLike] = None,
    targets: Optional[Sequence[str]] = None,
    noise: Optional[str] = None,
    mlp_hidden: Optional[Sequence[int]] = None,
) -> List[Dict[str, Any]]:
    """Trains a ``"deterministic"`` or ``"bayesian"`` model as ``swbnn train`` does, into the
    directory ``out``; returns the per-epoch statistics.

    ``dataset`` is a preset's name, ``"folder:DIR"``, ``"npz:FILE"``, or NumPy arrays ``(x,
    y)`` (uint8 images, or floats in [0, 1] or [0, 255]; ``(n, H, W)``, ``(n, H, W, C)`` or
    ``(n, C, H, W)``; integer labels). ``validation`` images are held out of the training set
    (default 5,000, as the command line; ``subset`` draws from the rest); the model records
    the normalisation measured on the rest. ``start`` is ``--from``: a trained model directory
    a Bayesian run starts from. ``progress=True`` draws a bar per epoch (rate, time left) on
    stderr.

    Regression: a ``"csv:TRAIN.csv[,test=TEST.csv]"`` table with its target columns named by
    ``targets``, a ``.npz`` whose ``y_train`` is floating point, or arrays ``(x, y)`` of
    features ``(n, d)`` and float targets ``(n,)`` or ``(n, t)``; ``arch`` is ``"mlp"``,
    ``noise`` ``"heteroscedastic"`` (default) or ``"homoscedastic"``. Features and targets are
    standardised on the training rows and the statistics stored with the model.
    ``mlp_hidden`` sets the MLP's hidden widths (default ``[400, 400]``)."""
    if isinstance(targets, str):
        raise TypeError("targets must be a list of column names, e.g. [\"price\"]")
    with _dataset(dataset) as name, _bars(progress) as bars:
        return json.loads(
            _native.train_json(
                name,
                arch,
                kind,
                os.fspath(out),
                epochs=epochs,
                seed=seed,
                data=None if data is None else os.fspath(data),
                subset=subset,
                estimator=estimator,
                resume=resume,
                progress=bars,
                validation=validation,
                image_size=image_size,
                from_model=None if start is None else os.fspath(start),
                targets=None if targets is None else [str(t) for t in targets],
                noise=noise,
                mlp_hidden=None if mlp_hidden is None else [int(w) for w in mlp_hidden],
            )
        )


@contextlib.contextmanager
def _bars(on: bool, first_phase: Optional[str] = None) -> Iterator[Optional[_progress.NativeBars]]:
    """The native commands' progress bars when ``on`` (closed when the call ends)."""
    if not on:
        yield None
        return
    bars = _progress.NativeBars(first_phase)
    try:
        yield bars
    finally:
        bars.close()


def _search_defaults() -> Dict[str, Any]:
    """The search defaults of ``swbnn compress --auto`` (``SearchConfig::default()``) and the
    fewest validation images it takes, read from the Rust core."""
    d = json.loads(_native.defaults_json())
    return {"search": d["search"], "min_validation_images": int(d["min_validation_images"])}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _search_settings(
    margins: Optional[Dict[str, float]],
    samples: Optional[int],
    max_retrains: Optional[int],
) -> Dict[str, Any]:
    """The search's settings (a ``SearchConfig`` as a dict): the Rust defaults with
    ``margins`` (keys ``accuracy_points``, ``nll``, ``ece``, ``ood_auroc``; missing keys keep
    their defaults), ``samples`` and ``max_retrains`` applied, each checked by name."""
    cfg = _search_defaults()["search"]
    known = cfg["margins"]
    if margins is not None:
        if not isinstance(margins, dict):
            raise ValueError(
                f"margins must be a dict with keys {sorted(known)}, got {type(margins).__name__}"
            )
        unknown = sorted(str(key) for key in margins if key not in known)
        if unknown:
            raise ValueError(f"margins: unknown key(s) {unknown} (known: {sorted(known)})")
        out = dict(known)
        for key, v in margins.items():
            if not _number(v) or not math.isfinite(float(v)) or float(v) < 0:
                raise ValueError(f"margins[{key!r}] = {v!r}: a margin must be a finite number >= 0")
            out[key] = float(v)
        cfg["margins"] = out
    for name, v, least in (("samples", samples, 1), ("max_retrains", max_retrains, 0)):
        if v is None:
            continue
        if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or int(v) < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {v!r}")
        cfg[name] = int(v)
    return cfg


def compress(
    model: PathLike,
    dataset: DataSet,
    out: PathLike,
    *,
    k: Optional[int] = None,
    config: Union[None, str, Dict[str, Any]] = None,
    epochs: Optional[int] = None,
    data: Optional[PathLike] = None,
    subset: Optional[int] = None,
    force: bool = False,
    progress: bool = False,
    validation: Optional[int] = None,
    auto: bool = False,
    margins: Optional[Dict[str, float]] = None,
    samples: Optional[int] = None,
    max_retrains: Optional[int] = None,
) -> Dict[str, Any]:
    """Runs stages 1-3 on a trained Bayesian model directory and writes the ``.swb`` file
    ``out``, as ``swbnn compress`` does; returns the compression report. ``dataset`` as in
    :func:`train` (the data the model was trained on); ``validation`` images are held out
    of it (default 5,000, as the command line).

    ``auto=True`` is ``swbnn compress --auto``: instead of one K it searches, judging on the
    validation split only, the quantised BNNs, and 2DGBNN and 1-D sharing over a ladder of K
    (the configured K halved down to the search's smallest K), each saved with ``f32`` and
    with int8 outliers, and writes to ``out`` the smallest file whose validation accuracy,
    NLL, ECE (15 bins) and OOD-proxy AUROC (the validation images, tile-shuffled) stay within
    ``margins`` of the source BNN's. ``margins`` is a dict with keys ``accuracy_points``,
    ``nll``, ``ece``, ``ood_auroc`` (missing keys keep the defaults: accuracy -0.3 points, NLL
    +0.01, ECE +0.002, AUROC -0.01); ``samples`` are the Monte Carlo samples of every
    validation pass and ``max_retrains`` the most stage-3 retrainings (defaults:
    ``_native.defaults_json()["search"]``, with the fewest validation images it takes,
    ``min_validation_images``). The whole search is written beside ``out`` (``m.swb`` ->
    ``m.search.json``) and returned: ``config``, ``source`` (the source's validation
    metrics), ``candidates`` (method, K, bytes, validation metrics, seconds, verdict),
    ``written`` (the index of the candidate written) and ``within_margins``. When no
    candidate is within the margins it is a ``ValueError``, unless ``force=True`` (which also
    lets existing files be replaced) writes the one nearest them. ``k`` fixes K, so it is
    refused with ``auto=True``; ``margins``, ``samples`` and ``max_retrains`` are refused
    without it. ``progress=True`` draws bars on stderr: the time of stages 1-2, then each
    stage-3 epoch's steps with their rate and the time left (with ``auto=True``, each
    candidate's verdict too)."""
    if auto:
        if k is not None:
            raise ValueError("auto=True searches K; k fixes it: give one of the two")
        search = _search_settings(margins, samples, max_retrains)
    else:
        given = [n for n, v in (("margins", margins), ("samples", samples), ("max_retrains", max_retrains)) if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} set the search of auto=True; without auto they have no effect")
    with _dataset(dataset) as name, _bars(progress, "stages 1-2 (gradient pass, plan)") as bars:
        common = dict(
            config=_config_json(config),
            epochs=epochs,
            data=None if data is None else os.fspath(data),
            subset=subset,
            force=force,
            progress=bars,
            validation=validation,
        )
        if auto:
            return json.loads(
                _native.compress_auto_json(os.fspath(model), name, os.fspath(out), search=json.dumps(search), **common)
            )
        return json.loads(_native.compress_json(os.fspath(model), name, os.fspath(out), k=k, **common))


def evaluate(
    model: PathLike,
    dataset: DataSet,
    *,
    samples: int = 30,
    seed: int = 0,
    ood: Optional[str] = None,
    ood_dir: Optional[PathLike] = None,
    data: Optional[PathLike] = None,
    subset: Optional[int] = None,
    temperature: Optional[float] = None,
    calibrated: bool = False,
) -> Dict[str, Any]:
    """Evaluates a model on a data set's test split (and an OOD set) as ``swbnn eval``
    does; returns the evaluation (summary, OOD metrics, uncertainty diagnostics).
    ``dataset`` as in :func:`train`; arrays ``(x, y)`` are the test split itself. With
    ``temperature``, or ``calibrated=True`` for the model's stored one, each sample's logits
    are divided by it first. A model calibrated with ``calibrate(..., conformal=LEVEL)`` also
    gets ``conformal``: ``level``, the test split's ``coverage`` and ``mean_set_size``, ``n``,
    and the ``temperature`` and ``calibration_images`` of its fit."""
    with _dataset(dataset, test_only=True) as name:
        return _evaluate(model, name, samples, seed, ood, ood_dir, data, subset, temperature, calibrated)


def calibrate(
    model: PathLike,
    dataset: DataSet,
    *,
    samples: int = 30,
    seed: int = 0,
    data: Optional[PathLike] = None,
    validation: Optional[int] = None,
    validation_seed: Optional[int] = None,
    conformal: Optional[float] = None,
) -> Dict[str, Any]:
    """Fits the model's temperature by NLL on the validation split it held out of
    ``dataset``'s training split (the split it records, unless ``validation`` and
    ``validation_seed`` name it) and stores it with the model, as ``swbnn calibrate`` does;
    returns ``temperature``, ``nll_before``, ``nll_after``, ``at_bound``, ``images`` and
    ``samples``. ``dataset`` as in :func:`train`: the data the model was trained on.

    With ``conformal`` (a level strictly between 0 and 1, e.g. 0.9), split-conformal
    prediction sets (adaptive prediction sets) are fitted after the temperature on the same
    split and stored too; the result then holds ``conformal`` (``method``, ``temperature``,
    ``level``, ``qhat``, ``n``), and :func:`evaluate` reports the sets' ``coverage`` and
    ``mean_set_size`` on the test split under ``conformal``. Without it, a conformal
    calibration the model held is removed."""
    with _dataset(dataset) as name:
        return json.loads(
            _native.calibrate_json(
                os.fspath(model),
                name,
                samples=samples,
                seed=seed,
                data=None if data is None else os.fspath(data),
                validation=validation,
                validation_seed=validation_seed,
                conformal=conformal,
            )
        )


def _evaluate(model, name, samples, seed, ood, ood_dir, data, subset, temperature, calibrated):
    return json.loads(
        _native.evaluate_json(
            os.fspath(model),
            name,
            samples=samples,
            seed=seed,
            ood=ood,
            ood_dir=None if ood_dir is None else os.fspath(ood_dir),
            data=None if data is None else os.fspath(data),
            subset=subset,
            temperature=temperature,
            calibrated=calibrated,
        )
    )
