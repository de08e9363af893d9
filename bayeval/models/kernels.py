"""Kernels over bucket reference vectors φ ∈ R^K (seed 000 §3.1 and §3.2).

Distances are scaled by the number of reference models K, so that β keeps its meaning
when the reference set grows: d²(φ, φ') = ||φ − φ'||² / K.
"""

from __future__ import annotations

import jax.numpy as jnp

from bayeval.types import Array


def scaled_sq_dist(phi: Array) -> Array:
    """(B, B) matrix of ||φ_b − φ_b'||² / K.

    Through the Gram matrix (one B×B×K product instead of a B×B×K difference tensor);
    exact for 0/1 vectors in float64, clamped at 0 and with a zero diagonal otherwise.
    """
    sq = jnp.sum(phi * phi, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (phi @ phi.T)
    d2 = jnp.maximum(d2, 0.0) * (1.0 - jnp.eye(phi.shape[0]))
    return d2 / phi.shape[1]


def squared_exponential(phi: Array, alpha: Array, beta: Array) -> Array:
    """Σ_bb' = α exp(−(β/K) ||φ_b − φ_b'||²)  (docs/methods.md §1)."""
    return alpha * jnp.exp(-beta * scaled_sq_dist(phi))


def matern32(phi: Array, alpha: Array, beta: Array) -> Array:
    """K(r) = α (1 + √3 r) exp(−√3 r),  r = sqrt(β/K) ||φ_b − φ_b'||  (docs/methods.md §2)."""
    r2 = beta * scaled_sq_dist(phi)
    r = jnp.where(r2 > 0, jnp.sqrt(jnp.maximum(r2, 1e-30)), 0.0)
    return alpha * (1.0 + jnp.sqrt(3.0) * r) * jnp.exp(-jnp.sqrt(3.0) * r)
