"""bayeval computes in 64-bit floats, and says so instead of switching JAX behind your back.

Posterior algebra over thousands of rank-1 updates, and the running sums of design-based
estimators, lose precision in float32 (JAX's default). ``import bayeval`` leaves JAX's
settings as they are; the ``bayeval`` command enables 64-bit floats for its own process,
and the library's entry points (a method's first state, hence :class:`Session` and
:func:`simulate`; multi-target, selection and IRT runs) refuse to start in float32 with
a one-line :class:`PrecisionError` that names the fix: :func:`enable_float64` once at the
start of the program (it is ``jax.config.update("jax_enable_x64", True)``).
"""

from __future__ import annotations

import jax

from bayeval.errors import BayevalError


class PrecisionError(BayevalError):
    """bayeval was asked to compute while JAX is in 32-bit mode."""


def enable_float64() -> None:
    """Switch JAX to 64-bit floats for this process (call it before creating arrays)."""
    jax.config.update("jax_enable_x64", True)


def float64_enabled() -> bool:
    """Whether JAX makes 64-bit floats by default in this process."""
    return bool(jax.config.jax_enable_x64)


def require_float64(where: str) -> None:
    """Raise :class:`PrecisionError` naming ``where`` unless 64-bit floats are on."""
    if not float64_enabled():
        raise PrecisionError(
            f"{where} needs 64-bit floats, and JAX is in 32-bit mode: call "
            "bayeval.enable_float64() once at the start of your program")
