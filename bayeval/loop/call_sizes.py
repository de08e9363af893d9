"""How many documents each call of a run asks: a batch, small first calls that grow, and
last calls cut to what the stop is predicted to need.

A batch of k documents is drawn from one prediction and used whole: the scores of its
documents reach the predictor only after the call, and a stop that fires inside a call
still pays for the rest of it (about k/2 documents on average, docs/methods.md §9
"Batches"). A :class:`CallRule` sizes each call from the documents drawn so far, n, and
the run's interval width w before the call:

    k(n, w) = min(B, g(n), t(n, w)),
    g(n) = max(k₀, ⌈r · n⌉)                    (growth: ``first`` k₀, ``rate`` r),
    t(n, w) = max(k_min, ⌈c · (D(w, n) − n)⌉)   (taper: ``taper`` c, ``smallest`` k_min),

B the batch (the largest call). D(w, n) is the documents at which the width reaches ε
as an interval's squared width goes for a sample of n of N documents, w² ≈ k (1/n − 1/N):
D = 1 / (ε²/k + 1/N) (:func:`documents_for_width`, which the plan's revision reads too).
With c = 1 the call asks for about the documents still needed, so that the stop falls
near the call's end rather than anywhere inside a call of B; c < 1 asks for less, trading
calls for documents. A rule with ``first`` = 0 does not grow; with ``taper`` = 0 it does
not taper.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # (no JAX at import: the command line's quick errors come before it)
    from bayeval.types import Array

__all__ = ["CALL_RULES", "CallRule", "ahead_allowed", "call_size", "calls_for",
           "documents_for_width", "parse_call_rule"]

# the named rules: ``fixed`` every call the batch; ``taper`` the last calls cut to the
# documents predicted left; ``grow`` small first calls that double, and the taper;
# ``fine`` grow's first calls and a taper that asks half the documents predicted left,
# down to calls of 2 (more calls for fewer documents: where a call costs little more
# than its documents, docs/results/call_sizes.md)
CALL_RULES = {"fixed": None, "taper": {"taper": 1.0},
              "grow": {"first": 8, "rate": 1.0, "taper": 1.0},
              "fine": {"first": 8, "rate": 1.0, "taper": 0.5, "smallest": 2}}


def documents_for_width(width, scored, n_items: int, epsilon: float):
    """D = 1 / (ε²/k + 1/N), k = w² / (1/n − 1/N): the documents at which an interval
    ``width`` wide after n = ``scored`` of N = ``n_items`` documents is predicted to reach
    ``epsilon`` (module docstring); numbers or arrays (NumPy or JAX) alike, 0 < n < N."""
    k = width**2 / (1.0 / scored - 1.0 / n_items)
    return 1.0 / (epsilon**2 / k + 1.0 / n_items)


class CallRule(NamedTuple):
    """k(n, w) of the module docstring."""

    first: int = 0
    rate: float = 0.5
    taper: float = 0.0
    epsilon: float = 0.05
    smallest: int = 8

    def check(self) -> CallRule:
        """This rule, or ValueError naming the bad field."""
        for name in ("first", "smallest"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= (name == "smallest")):
                raise ValueError(f"a call rule's {name} must be a whole number "
                                 f"≥ {int(name == 'smallest')}, got {value!r}")
        for name in ("rate", "taper", "epsilon"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"a call rule's {name} must be a finite number ≥ 0, got "
                                 f"{value!r}")
        if self.taper > 0 and not self.epsilon > 0:
            raise ValueError("a tapering call rule needs the run's ε > 0")
        return self


def call_size(drawn: int | Array, batch: int, rule: CallRule | None,
              width: float | Array | None = None, n_items: int | None = None
              ) -> int | Array:
    """The size of the call made after ``drawn`` of ``n_items`` documents with the
    interval ``width`` wide (module docstring): ``batch`` without a rule. Numbers in,
    an int out; arrays in (the simulator's runs), an int32 array out."""
    if rule is None:
        return batch
    import jax.numpy as jnp  # (the simulator's traced runs; numbers need no JAX)

    exact = isinstance(drawn, int) and (width is None or isinstance(width, float | int))
    ceil, top, low = ((math.ceil, min, max) if exact else
                      (lambda x: jnp.ceil(x).astype(jnp.int32), jnp.minimum, jnp.maximum))
    size = batch
    if rule.first > 0:
        size = top(size, low(rule.first, ceil(rule.rate * drawn)))
    if rule.taper > 0 and width is not None and n_items is not None:
        if exact:
            if 0 < drawn < n_items and math.isfinite(width) and width > 0:
                left = documents_for_width(width, drawn, n_items, rule.epsilon) - drawn
                size = top(size, low(rule.smallest, ceil(rule.taper * max(left, 0.0))))
        else:
            known = (drawn > 0) & (drawn < n_items) & jnp.isfinite(width) & (width > 0)
            at = jnp.where(known, drawn, 1)
            left = documents_for_width(jnp.where(known, width, 1.0), at, n_items,
                                       rule.epsilon) - at
            left = jnp.where(known, jnp.clip(rule.taper * left, 0.0, 1e9), 1e9)
            size = top(size, low(rule.smallest, ceil(left)))
    return size


def parse_call_rule(text: str, epsilon: float) -> CallRule | None:
    """A call rule from its name in :data:`CALL_RULES` or from ``key=value`` pairs of
    :class:`CallRule`'s fields separated by commas (e.g. ``taper=0.5,smallest=4``), for a
    run stopping at ``epsilon``; ``fixed`` is None. ValueError names what is wrong."""
    name = text.strip()
    if name in CALL_RULES:
        fields = CALL_RULES[name]
        return None if fields is None else CallRule(epsilon=epsilon, **fields).check()
    fields: dict = {}
    for part in filter(None, (p.strip() for p in name.split(","))):
        key, eq, raw = part.partition("=")
        key = key.strip()
        if not eq or key not in CallRule._fields or key == "epsilon":
            raise ValueError(f"call rule {text!r}: give {', '.join(CALL_RULES)} or "
                             f"key=value pairs of {', '.join(CallRule._fields[:-2])}, "
                             f"smallest")
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"call rule {text!r}: {key} = {raw.strip()!r} is not a "
                             "number") from None
        fields[key] = int(value) if key in ("first", "smallest") and value.is_integer() \
            else value
    return CallRule(epsilon=epsilon, **fields).check()


def ahead_allowed(applied: int | Array, concurrency: int, rule: CallRule,
                  width: float | Array | None, n_items: int) -> int | Array:
    """With K = ``concurrency`` evaluations in flight: how many rounds may be drawn ahead
    of the ``applied`` ones, the rule's taper alone, t(n, w) with k_min = 1, at most K (a
    stop inside the rounds in flight pays for all of them, as one inside a batch does)."""
    return call_size(applied, concurrency, rule._replace(first=0, smallest=1), width,
                     n_items)


def calls_for(documents: int, batch: int, rule: CallRule | None,
              n_items: int | None = None) -> int:
    """How many calls draw ``documents`` documents (the last call may be cut short). With
    ``n_items`` N and a tapering rule, the taper reads the width the width law gives after
    n documents of a run that reaches ε at ``documents`` = D,
    w(n) = ε sqrt((1/n − 1/N) / (1/D − 1/N)) (module docstring), so its last calls are
    counted; without them the rule's growth alone."""
    law = (rule is not None and rule.taper > 0 and n_items is not None
           and 0 < documents < n_items)
    drawn, calls = 0, 0
    while drawn < documents:
        width = None
        if law and drawn > 0:  # (a hair under the law: D − n is whole, its ceiling too)
            width = rule.epsilon * math.sqrt((1.0 / drawn - 1.0 / n_items)
                                             / (1.0 / documents - 1.0 / n_items))
            width *= 1.0 - 1e-12
        drawn += call_size(drawn, batch, rule, width, n_items)  # no width: no taper
        calls += 1
    return calls
