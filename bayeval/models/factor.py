"""The logistic factor model of FAQ (seed 001 §3.1, App. A.1; docs/methods.md §3).

Historical scores H ∈ {0, 1, NA}^{M×N} are modelled as s_ij ~ Bernoulli(σ(u_iᵀ v_j)) with
model factors U ∈ R^{M×k} and item (question) factors V ∈ R^{N×k}.
:func:`logistic_factor_model` is the NumPyro program (N(0, 1) priors on U and V, the
likelihood masked to the observed entries: missing entries are the normal case).

:func:`fit_factors` follows the paper's fit: minimise the mean binary cross-entropy of the
program's likelihood on the observed entries with AdamW (optax; learning rate 1e-2,
decoupled weight decay λ, 2000 full-batch epochs, N(0, 1) initialisation), jitted as one
``lax.scan``, in float32 by default (three times faster than float64 on CPU; the factors
are a working model whose precision PAI's validity does not rest on).
:func:`cross_validate` chooses (k, λ) by 5-fold cross-validation over models (rows): in
each fold a random ``holdout`` share of the held-out rows' observed entries is hidden
(MCAR), the model is fitted on everything else, and the accuracy of the rounded
predictions on the hidden entries is the fold's score; the 1-SE rule (Friedman et al.
2010) then takes the simplest setting (smallest k, then largest λ) whose mean accuracy is
within one standard error of the best.

:func:`factor_prior` turns the fitted model factors into the new model's prior
u ~ N(mean of U's rows, covariance of U's rows) (seed 001 §3.1 "Deploying").
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import optax
from numpyro import handlers

from bayeval.errors import DataError
from bayeval.types import Array

LEARNING_RATE = 1e-2
EPOCHS = 2000


def logistic_factor_model(scores: Array, mask: Array, k: int) -> None:
    """s_ij ~ Bernoulli(σ(u_iᵀ v_j)) on the entries where ``mask`` holds; U, V ~ N(0, 1).

    ``scores``: (M, N) with any value where ``mask`` is False (NaN allowed)."""
    m, n = scores.shape
    u = numpyro.sample("U", dist.Normal(0.0, 1.0).expand([m, k]).to_event(2))
    v = numpyro.sample("V", dist.Normal(0.0, 1.0).expand([n, k]).to_event(2))
    filled = jnp.where(mask, jnp.nan_to_num(scores), 0.0)
    with numpyro.plate("models", m, dim=-2), numpyro.plate("items", n, dim=-1):
        numpyro.sample("s", dist.Bernoulli(logits=u @ v.T).mask(mask), obs=filled)


def masked_nll(u: Array, v: Array, scores: Array, mask: Array) -> Array:
    """Mean binary cross-entropy of the program's likelihood over the observed entries
    (the paper's objective; the priors are not part of it: AdamW's decay regularises)."""
    k = u.shape[1]
    conditioned = handlers.substitute(logistic_factor_model, data={"U": u, "V": v})
    site = handlers.trace(conditioned).get_trace(scores, mask, k)["s"]
    log_lik = site["fn"].log_prob(site["value"])
    return -jnp.sum(jnp.where(mask, log_lik, 0.0)) / jnp.maximum(mask.sum(), 1)


@functools.partial(jax.jit, static_argnames=("k", "epochs"))
def _adamw_fit(scores: Array, mask: Array, weight_decay: Array, key: Array, k: int,
               epochs: int, learning_rate: Array) -> tuple[Array, Array, Array]:
    m, n = scores.shape
    ku, kv = jax.random.split(key)
    params = (jax.random.normal(ku, (m, k), scores.dtype),
              jax.random.normal(kv, (n, k), scores.dtype))
    optimiser = optax.adamw(learning_rate, weight_decay=weight_decay)
    loss = lambda p: masked_nll(p[0], p[1], scores, mask)  # noqa: E731

    def epoch(carry, _):
        params, opt_state = carry
        value, grads = jax.value_and_grad(loss)(params)
        updates, opt_state = optimiser.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), value

    (params, _), losses = jax.lax.scan(epoch, (params, optimiser.init(params)), None,
                                       length=epochs)
    return params[0], params[1], losses[-1]


@dataclass(frozen=True)
class FactorFit:
    """Fitted factors: ``U`` (M, k) of the historical models, ``V`` (N, k) of the items."""

    U: np.ndarray
    V: np.ndarray
    k: int
    weight_decay: float
    loss: float


def _as_history(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, np.float64)
    if scores.ndim != 2:
        raise DataError(f"history must be a models × items matrix, got shape {scores.shape}")
    mask = ~np.isnan(scores)
    values = np.where(mask, scores, 0.0)
    if ((values != 0.0) & (values != 1.0)).any():
        raise DataError("the logistic factor model needs binary (0/1) scores")
    return values, mask


def fit_factors(scores: np.ndarray, k: int, weight_decay: float, seed: int = 0,
                epochs: int = EPOCHS, learning_rate: float = LEARNING_RATE,
                dtype=jnp.float32) -> FactorFit:
    """Fit U, V on the observed (non-NaN) entries of ``scores`` (seed 001 App. A.1); the
    factors are returned in float64."""
    values, mask = _as_history(scores)
    u, v, loss = _adamw_fit(jnp.asarray(values, dtype), jnp.asarray(mask),
                            jnp.asarray(weight_decay, dtype), jax.random.key(seed), k=int(k),
                            epochs=int(epochs), learning_rate=jnp.asarray(learning_rate, dtype))
    return FactorFit(np.asarray(u, np.float64), np.asarray(v, np.float64), int(k),
                     float(weight_decay), float(loss))


@functools.partial(jax.jit, static_argnames=("k", "epochs"))
def _cv_accuracies(values: Array, fit_masks: Array, test_masks: Array, decays: Array,
                   key: Array, k: int, epochs: int) -> Array:
    """(n_decays, n_folds) holdout accuracies: every (λ, fold) fit vmapped."""

    def one(fit_mask, test_mask, decay):
        u, v, _ = _adamw_fit(values, fit_mask, decay, key, k=k, epochs=epochs,
                             learning_rate=jnp.asarray(LEARNING_RATE, values.dtype))
        hit = ((u @ v.T) > 0.0) == (values > 0.5)
        return jnp.sum(hit & test_mask) / jnp.maximum(test_mask.sum(), 1)

    per_fold = jax.vmap(one, in_axes=(0, 0, None))
    return jax.vmap(per_fold, in_axes=(None, None, 0))(fit_masks, test_masks, decays)


@dataclass(frozen=True)
class CrossValidation:
    """Cross-validation table and the 1-SE choice."""

    ks: tuple[int, ...]
    weight_decays: tuple[float, ...]
    accuracy: np.ndarray  # (len(ks), len(weight_decays), folds)
    k: int
    weight_decay: float

    def rows(self) -> list[str]:
        """A Markdown table: mean ± SE accuracy per (k, λ), the choice marked."""
        out = ["| k | λ | accuracy | SE | |", "|---|---|---|---|---|"]
        for a, k in enumerate(self.ks):
            for b, lam in enumerate(self.weight_decays):
                acc = self.accuracy[a, b]
                mark = "chosen" if (k, lam) == (self.k, self.weight_decay) else ""
                out.append(f"| {k} | {lam:g} | {acc.mean():.4f} | "
                           f"{acc.std(ddof=1) / np.sqrt(acc.size):.4f} | {mark} |")
        return out


def one_se_choice(ks: Sequence[int], weight_decays: Sequence[float],
                  accuracy: np.ndarray) -> tuple[int, float]:
    """The 1-SE rule: the smallest k, then the largest λ, whose mean accuracy is at least
    the best mean minus the best setting's standard error over folds."""
    mean = accuracy.mean(-1)
    se = accuracy.std(-1, ddof=1) / np.sqrt(accuracy.shape[-1])
    best = np.unravel_index(np.argmax(mean), mean.shape)
    ok = mean >= mean[best] - se[best]
    for a in np.argsort(ks):
        for b in np.argsort(weight_decays)[::-1]:
            if ok[a, b]:
                return int(ks[a]), float(weight_decays[b])
    raise AssertionError("the best setting always qualifies")


def cross_validate(scores: np.ndarray, ks: Sequence[int] = (2, 4, 8, 16, 32, 64),
                   weight_decays: Sequence[float] = (0.01, 0.1, 1.0), folds: int = 5,
                   holdout: float = 0.2, seed: int = 0, epochs: int = EPOCHS,
                   log=None, dtype=jnp.float32) -> CrossValidation:
    """Choose (k, λ) by ``folds``-fold cross-validation over rows and the 1-SE rule (seed
    001 §4 "Factor model selection"); see the module docstring."""
    values, mask = _as_history(scores)
    m = values.shape[0]
    if m < folds:
        raise DataError(f"cross-validation needs at least {folds} models, got {m}")
    rng = np.random.default_rng(seed)
    fold_of = rng.permutation(m) % folds
    hide = rng.random(values.shape) < holdout
    test = np.stack([(fold_of == f)[:, None] & hide & mask for f in range(folds)])
    fit = mask[None] & ~test
    acc = np.empty((len(ks), len(weight_decays), folds))
    for a, k in enumerate(ks):
        acc[a] = np.asarray(_cv_accuracies(
            jnp.asarray(values, dtype), jnp.asarray(fit), jnp.asarray(test),
            jnp.asarray(weight_decays, dtype), jax.random.key(seed), k=int(k),
            epochs=int(epochs)))
        if log is not None:
            log(f"cv k={k}: " + ", ".join(f"λ={lam:g} {acc[a, b].mean():.4f}"
                                          for b, lam in enumerate(weight_decays)))
    k, lam = one_se_choice(ks, weight_decays, acc)
    return CrossValidation(tuple(int(k) for k in ks), tuple(float(x) for x in weight_decays),
                           acc, k, lam)


def factor_prior(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(û0, Σ0): the mean and covariance of the historical model factors (rows of U)."""
    u = np.asarray(u, np.float64)
    return u.mean(0), np.atleast_2d(np.cov(u, rowvar=False))
