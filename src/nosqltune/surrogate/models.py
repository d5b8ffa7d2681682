"""Surrogate models: RAFIKI's neural-net ensemble, and random forest / gradient-boosted trees (the RF/GBDT
tuning paper, Eppinger & Stoerl).

All models learn log(target): throughput and latencies are positive and knobs act on them by factors, so
errors are relative, as the accuracy is reported (MAPE).

- `nn-ensemble` (RAFIKI 3.6): `nets` small feed-forward nets (hidden layers [14, 4], tanh), each from its own
  random start, with a strong L2 penalty on the weights standing in for MATLAB's Bayesian regularization;
  the `drop` share with the highest training error is dropped and the rest averaged. scikit-learn's
  MLPRegressor (L-BFGS) trains them; the fitted weights are then kept as numpy arrays, so predicting (and
  `nosqltune recommend`) needs numpy only.
- `rf` and `gbdt`: scikit-learn's RandomForestRegressor and GradientBoostingRegressor with their
  hyperparameters picked by grouped cross-validation (the RF/GBDT paper saw a large gain from tuning them).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np

KINDS = ("nn-ensemble", "rf", "gbdt")
DEFAULT_KIND = "nn-ensemble"


class _Scaler:
    def __init__(self, X: np.ndarray) -> None:
        self.mean = X.mean(axis=0)
        sd = X.std(axis=0)
        self.sd = np.where(sd > 1e-12, sd, 1.0)

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean) / self.sd


class NNEnsemble:
    kind = "nn-ensemble"

    def __init__(self, nets: int = 20, hidden: tuple[int, ...] = (14, 4), alpha: float = 1.0, drop: float = 0.3,
                 seed: int = 0) -> None:
        if nets < 1 or not 0 <= drop < 1:
            raise ValueError("an ensemble needs at least one net and a drop share in [0, 1)")
        self.nets, self.hidden, self.alpha, self.drop, self.seed = nets, tuple(hidden), alpha, drop, seed
        self.weights: list[list[tuple[np.ndarray, np.ndarray]]] = []
        self.train_errors: list[float] = []   # every net's training RMSE (log scale), kept ones first
        self.params: dict[str, Any] = {}

    def fit(self, X: np.ndarray, y: np.ndarray, groups: Any = None) -> "NNEnsemble":
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.neural_network import MLPRegressor

        X, t = np.asarray(X, float), np.log(np.asarray(y, float))
        self.x_scale = _Scaler(X)
        self.t_mean, self.t_sd = float(t.mean()), float(t.std() or 1.0)
        Z, target = self.x_scale(X), (t - self.t_mean) / self.t_sd
        fitted = []
        for i in range(self.nets):
            net = MLPRegressor(hidden_layer_sizes=self.hidden, activation="tanh", solver="lbfgs", alpha=self.alpha,
                               max_iter=2000, random_state=self.seed * 1009 + i)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                net.fit(Z, target)
            layers = [(np.array(w), np.array(b)) for w, b in zip(net.coefs_, net.intercepts_)]
            error = float(np.sqrt(np.mean((self._forward(layers, Z) - target) ** 2)))
            fitted.append((error, i, layers))
        fitted.sort(key=lambda item: (item[0], item[1]))
        keep = max(1, int(round(len(fitted) * (1 - self.drop))))
        self.weights = [layers for _, _, layers in fitted[:keep]]
        self.train_errors = [e for e, _, _ in fitted]
        self.params = {"nets": self.nets, "kept": keep, "hidden": list(self.hidden), "alpha": self.alpha}
        return self

    @staticmethod
    def _forward(layers: list[tuple[np.ndarray, np.ndarray]], Z: np.ndarray) -> np.ndarray:
        a = Z
        for w, b in layers[:-1]:
            a = np.tanh(a @ w + b)
        w, b = layers[-1]
        return (a @ w + b).ravel()

    def predict(self, X: np.ndarray) -> np.ndarray:
        Z = self.x_scale(np.atleast_2d(np.asarray(X, float)))
        mean = np.mean([self._forward(layers, Z) for layers in self.weights], axis=0)
        return np.exp(mean * self.t_sd + self.t_mean)


class TreeModel:
    """A tree ensemble with hyperparameters chosen by grouped K-fold cross-validation."""

    GRIDS = {
        "rf": {"max_features": [0.33, 0.66, 1.0], "min_samples_leaf": [1, 3]},
        "gbdt": {"learning_rate": [0.03, 0.1], "max_depth": [2, 3, 4]},
    }

    def __init__(self, kind: str, seed: int = 0, tune: bool = True, folds: int = 5, trees: int = 300) -> None:
        if kind not in self.GRIDS:
            raise ValueError(f"unknown tree model {kind!r}")
        self.kind, self.seed, self.tune, self.folds, self.trees = kind, seed, tune, folds, trees
        self.params: dict[str, Any] = {}

    def _estimator(self, **params: Any):
        if self.kind == "rf":
            from sklearn.ensemble import RandomForestRegressor

            return RandomForestRegressor(n_estimators=self.trees, random_state=self.seed, n_jobs=1, **params)
        from sklearn.ensemble import GradientBoostingRegressor

        return GradientBoostingRegressor(n_estimators=self.trees, subsample=0.8, random_state=self.seed, **params)

    def fit(self, X: np.ndarray, y: np.ndarray, groups: Any = None) -> "TreeModel":
        X, t = np.asarray(X, float), np.log(np.asarray(y, float))
        params: dict[str, Any] = {}
        distinct = len(set(groups)) if groups is not None else len(X)
        if self.tune and distinct >= 3 and len(X) >= 10:
            from sklearn.model_selection import GridSearchCV, GroupKFold

            labels = groups if groups is not None else np.arange(len(X))
            search = GridSearchCV(self._estimator(), self.GRIDS[self.kind], cv=GroupKFold(min(self.folds, distinct)),
                                  scoring="neg_root_mean_squared_error", n_jobs=-1)
            search.fit(X, t, groups=labels)
            params = dict(search.best_params_)
        self.model = self._estimator(**params).fit(X, t)
        self.params = params
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, float))
        if self.kind == "rf":
            # the forest's mean, tree by tree at the Cython level: the searches ask for a few dozen rows at a
            # time, thousands of times, and sklearn's own predict spends ~25 ms a call dispatching 100-300 trees
            # through joblib (measured: 90% of a surrogate-sa run), this ~1 ms
            rows = np.ascontiguousarray(X, dtype=np.float32)   # what sklearn's trees compare against
            total = np.zeros(len(rows))
            for tree in self.model.estimators_:
                total += tree.tree_.predict(rows).reshape(len(rows), -1)[:, 0]
            return np.exp(total / len(self.model.estimators_))
        return np.exp(self.model.predict(X))


def make_model(kind: str, seed: int = 0, **options: Any):
    if kind == "nn-ensemble":
        return NNEnsemble(seed=seed, **options)
    if kind in ("rf", "gbdt"):
        return TreeModel(kind, seed=seed, **options)
    raise ValueError(f"unknown model kind {kind!r}: use one of {', '.join(KINDS)}")


# -- a fitted model on disk: model.pkl (the estimator) + model.json (what it was fitted on, and how well)
def save(directory: Path, model: Any, meta: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "model.pkl.tmp", "wb") as fh:
        pickle.dump(model, fh)
    (directory / "model.pkl.tmp").replace(directory / "model.pkl")
    (directory / "model.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")


def load(directory: Path) -> tuple[Any, dict[str, Any]]:
    from ..errors import UsageError

    directory = Path(directory)
    if not (directory / "model.pkl").exists() or not (directory / "model.json").exists():
        raise UsageError(f"no fitted model in {directory} (fit one with `nosqltune model fit`)")
    name = "model.json"
    try:
        meta = json.loads((directory / name).read_text())
        name = "model.pkl"
        with open(directory / name, "rb") as fh:
            model = pickle.load(fh)
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, AttributeError, ImportError) as exc:
        problem = " ".join(str(exc).split()) or type(exc).__name__
        raise UsageError(f"the model in {directory} cannot be read ({name}: {problem}): fit it again with "
                         "`nosqltune model fit`") from None
    return model, meta
