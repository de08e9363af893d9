"""A full ``lm_eval run`` (the harness's own command line, unchanged) that also records
where its time went, for ``bench/end_to_end.py``:

    python bench/e2e_full_run.py TIMES.json run --model hf --tasks … (lm_eval's options)

TIMES.json gets the seconds from the process's start to the harness's ``evaluate()``
(start-up: imports, task index, model load), in ``evaluate()`` (building every document's
requests, the model's calls, filters, metrics), and in the model's calls
(``loglikelihood`` / ``generate_until`` of the harness's model classes), so that the
bench can compare a document's cost in a full run with its cost in bayeval's loop.
"""

from __future__ import annotations

import functools
import json
import sys
import time

BEGAN = time.perf_counter()


def _time_calls(lm, into: dict) -> None:
    """Time the top-level calls of the model instance the harness evaluates with."""
    for name in ("loglikelihood", "generate_until", "loglikelihood_rolling"):
        original = getattr(lm, name)

        def timed(*args, _original=original, **kwargs):
            began = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                into["model_seconds"] = into.get("model_seconds", 0.0) + (
                    time.perf_counter() - began)
                into["model_calls"] = into.get("model_calls", 0) + 1

        setattr(lm, name, timed)


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    times: dict = {}
    import lm_eval.evaluator as evaluator

    original = evaluator.evaluate

    @functools.wraps(original)
    def evaluate(*args, **kwargs):
        times["startup_seconds"] = time.perf_counter() - BEGAN
        _time_calls(kwargs["lm"] if "lm" in kwargs else args[0], times)
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times["evaluate_seconds"] = time.perf_counter() - began

    evaluator.evaluate = evaluate
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm_eval", *argv]
    try:
        cli_evaluate()
    finally:
        times["total_seconds"] = time.perf_counter() - BEGAN
        with open(out, "w") as fh:
            json.dump(times, fh)


if __name__ == "__main__":
    main()
