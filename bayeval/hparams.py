"""Hyperparameters as values (docs/architecture.md: hyperparameters are values).

A method's numeric settings (ε, ε1, τ, temperature, p_min, …) enter its compiled
programs as traced arguments, not as constants baked into them: two configurations that
differ only in such values share every compiled program. The parts that read them
(stopping rules, acquisition rules, estimators) are therefore built from numbers that may
be tracers: they check a value only when it is known (:func:`known`) and name it with
:func:`shown`. Which settings are values and which are structure (a shape, a choice of
part, a count of steps) is declared by the method's factory
(:func:`bayeval.methods.base.method_factory`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp


def known(value: Any) -> bool:
    """Whether ``value`` is a concrete number (not a tracer inside a compiled program), so
    that a check of its range can run now."""
    return not isinstance(value, jax.core.Tracer)


def shown(value: Any, spec: str = "g") -> str:
    """``value`` formatted with ``spec`` where it is known, else the word ``traced``."""
    return format(value, spec) if known(value) else "traced"


@dataclass(frozen=True)
class Program:
    """What a method's compiled programs are keyed by: ``key`` (its name and structural
    settings; equal keys share programs) and ``rebuild(values)``, the method built from
    its traced settings ``values`` (a dict of scalars) and the structural ones."""

    key: Hashable
    rebuild: Callable[[dict[str, Any]], Any] = field(compare=False, hash=False)


def as_values(values: dict[str, float]) -> dict[str, jax.Array]:
    """The traced settings as float64 scalars: the same abstract values whatever the
    numbers, so that programs traced with one set run with any other."""
    return {name: jnp.asarray(value, jnp.float64) for name, value in values.items()}


__all__ = ["Program", "as_values", "known", "shown"]
