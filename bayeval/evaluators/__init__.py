"""Evaluators: what answers ``Session.ask`` with the target model's score on an item.

* :mod:`bayeval.evaluators.base` — a matrix (simulation), a Python function, a shell
  command per item or batch, and the child processes they start.
* :mod:`bayeval.evaluators.harness` — lm-evaluation-harness, in this process (the model and
  the task's requests built once: :mod:`~bayeval.evaluators.harness_requests`) or one
  ``lm_eval`` launch per batch; :mod:`~bayeval.evaluators.harness_results` writes an
  estimate in the harness's results layout.
* :mod:`bayeval.evaluators.inspect_eval` — Inspect AI's ``eval()`` on the asked samples.

The names of :mod:`~bayeval.evaluators.base` are importable from here.
"""

from bayeval.evaluators.base import (
    BatchEvaluator,
    CallableEvaluator,
    CancelledError,
    ChildProcesses,
    CommandEvaluator,
    MatrixOracle,
    MatrixPairOracle,
    closing,
)

__all__ = ["BatchEvaluator", "CallableEvaluator", "CancelledError", "ChildProcesses",
           "CommandEvaluator", "MatrixOracle", "MatrixPairOracle", "closing"]
