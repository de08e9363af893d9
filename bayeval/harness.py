"""lm-evaluation-harness as an evaluator: a batch of items, one harness run, their scores.

A session asks ``k`` items (:meth:`bayeval.session.Session.ask`); the items become the
harness's ``--samples`` mapping ``{task: [doc indices]}``
(:func:`bayeval.data.lm_eval.harness_docs`: ``<task>-<doc>`` ids, ``<subtask>/<doc>``
ids of a group, or a column split over a group's subtasks), the harness evaluates exactly
those documents, and each document's per-sample metric is read back as the item's score
(:func:`bayeval.data.lm_eval.parse_sample_records`, the reader of ``--log_samples``).

* :class:`LmEvalCommand` launches ``lm_eval run`` once per batch (any model the harness
  runs; the model is loaded at every launch);
* :class:`LmEvalInProcess` calls ``lm_eval.simple_evaluate(..., samples=...)`` in this
  process and keeps the model loaded between batches.

Both expose ``evaluate_batch(items) -> list[float | EvaluationError]`` (which
:meth:`Session.run` uses when ``batch > 1``) and ``__call__(item)`` for one item. A failed
run (non-zero exit, a timeout: the harness's whole process group is killed) fails every
item of its batch; a document the harness did not log fails that item alone. Failures are
:class:`~bayeval.errors.EvaluationError`, handled as every evaluator's are: skipped and
journaled, and a run stops after several in a row.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bayeval.data.lm_eval import (
    find_sample_files,
    harness_docs,
    parse_sample_records,
    read_sample_log,
)
from bayeval.data.matrix import validate_score
from bayeval.errors import DataError, EvaluationError

# options bayeval sets on every launch; a user's --lm-eval-args must not set them
RESERVED = ("--tasks", "--samples", "-E", "--output_path", "-o", "--log_samples", "-s",
            "--limit", "-L")


class HarnessEvaluator:
    """Shared part of the harness evaluators: items → ``--samples`` → scores.

    ``task``: the harness task (or group) the items belong to; ``subtasks``: its subtasks'
    document counts in column order, when the items are column indices of a group (the
    bundled MuSR); ``metric`` / ``filter_name``: which per-sample field and filter to read
    (default: the log's first metric, its only filter)."""

    def __init__(self, task: str, subtasks: Sequence[tuple[str, int]] = (),
                 metric: str | None = None, filter_name: str | None = None) -> None:
        if not task:
            raise EvaluationError("the lm-eval evaluator needs the harness task (--task)")
        self.task = task
        self.subtasks = [(str(n), int(c)) for n, c in subtasks]
        self.metric = metric
        self.filter_name = filter_name
        self.launches = 0

    def samples_for(self, items: Sequence[str]) -> tuple[dict[str, list[int]],
                                                         list[tuple[str, int]]]:
        """(the ``--samples`` mapping, each item's (task, doc))."""
        try:
            docs = harness_docs(items, self.task, self.subtasks)
        except DataError as exc:
            raise EvaluationError(str(exc)) from None
        samples: dict[str, list[int]] = {}
        for key, index in docs:
            samples.setdefault(key, []).append(index)
        return {k: sorted(set(v)) for k, v in samples.items()}, docs

    def _run(self, samples: dict[str, list[int]]) -> dict[str, dict[int, float]]:
        raise NotImplementedError

    def evaluate_batch(self, items: Sequence[str]) -> list[float | EvaluationError]:
        """Each item's score, or the EvaluationError that kept it from one, from one run."""
        try:
            samples, docs = self.samples_for(items)
            self.launches += 1
            scores = self._run(samples)
        except EvaluationError as exc:
            return [exc for _ in items]
        out: list[float | EvaluationError] = []
        for item, (key, index) in zip(items, docs, strict=True):
            value = scores.get(key, {}).get(index)
            if value is None:
                out.append(EvaluationError(f"item {item!r}: the harness logged no score for "
                                           f"doc {index} of {key}"))
                continue
            try:
                out.append(validate_score(value, f"item {item!r}: the harness's "
                                                 f"{self.metric or 'metric'}"))
            except DataError as exc:
                out.append(EvaluationError(str(exc)))
        return out

    def __call__(self, item: str) -> float:
        result = self.evaluate_batch([item])[0]
        if isinstance(result, EvaluationError):
            raise result
        return result


class LmEvalCommand(HarnessEvaluator):
    """One ``lm_eval run`` launch per batch: ``args`` (e.g. ``--model hf --model_args
    pretrained=gpt2 --include_path tasks/``) plus ``--tasks``, ``--samples``,
    ``--log_samples`` and ``--output_path`` (a temporary folder), which bayeval sets.

    ``executable``: the harness's command (default: this Python's ``-m lm_eval``);
    ``timeout``: seconds per launch, after which its whole process group is killed."""

    def __init__(self, args: str, task: str, subtasks: Sequence[tuple[str, int]] = (),
                 metric: str | None = None, filter_name: str | None = None,
                 timeout: float = 3600.0, executable: Sequence[str] | None = None) -> None:
        super().__init__(task, subtasks, metric, filter_name)
        try:
            self.args = shlex.split(args)
        except ValueError as exc:
            raise EvaluationError(f"--lm-eval-args: {exc}") from None
        clash = [a for a in self.args if a.split("=")[0] in RESERVED]
        if clash:
            raise EvaluationError(f"--lm-eval-args: drop {clash[0].split('=')[0]} (bayeval "
                                  "sets --tasks, --samples, --log_samples and --output_path "
                                  "for each batch)")
        if not any(a.split("=")[0] == "--model" for a in self.args):
            raise EvaluationError("--lm-eval-args needs --model (e.g. '--model hf "
                                  "--model_args pretrained=gpt2')")
        if not timeout > 0:
            raise EvaluationError(f"timeout must be > 0, got {timeout:g}")
        self.timeout = timeout
        self.executable = list(executable or [sys.executable, "-m", "lm_eval"])

    def argv(self, samples: dict[str, list[int]], output: Path) -> list[str]:
        """The launch's command line."""
        return [*self.executable, "run", *self.args, "--tasks", ",".join(samples),
                "--samples", json.dumps(samples), "--log_samples", "--output_path",
                str(output)]

    def _run(self, samples: dict[str, list[int]]) -> dict[str, dict[int, float]]:
        from bayeval.evaluators import kill_group

        with tempfile.TemporaryDirectory(prefix="bayeval-lm-eval-") as folder:
            proc = subprocess.Popen(self.argv(samples, Path(folder)), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    text=True, start_new_session=True)
            try:
                _, stderr = proc.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                raise EvaluationError(f"lm_eval timed out after {self.timeout:g}s (its "
                                      "process group was killed)") from None
            if proc.returncode != 0:
                lines = [ln for ln in stderr.splitlines() if ln.strip()]
                detail = f": {lines[-1][:160]}" if lines else ""
                raise EvaluationError(f"lm_eval exited with status {proc.returncode}{detail}")
            return self._read_back(Path(folder), samples)

    def _read_back(self, folder: Path, samples: dict[str, list[int]]
                   ) -> dict[str, dict[int, float]]:
        scores = {}
        for key in samples:
            files = find_sample_files(folder, key)
            if len(files) != 1:
                raise EvaluationError(f"lm_eval wrote {len(files)} samples files for {key} "
                                      f"(expected one) under {folder}")
            try:
                log = read_sample_log(files[0], self.metric, self.filter_name)
            except DataError as exc:
                raise EvaluationError(str(exc)) from None
            self.metric = self.metric or log.metric
            scores[key] = log.scores
        return scores


class LmEvalInProcess(HarnessEvaluator):
    """``lm_eval.simple_evaluate(model=lm, tasks=…, samples=…)`` in this process, the
    model loaded once: ``model`` is an ``lm_eval.api.model.LM`` or a registered model name
    (``"hf"``, ``"dummy"``, …) built with ``model_args``; ``include_path`` adds local task
    YAMLs to the harness's (or ``task_manager``, an ``lm_eval.tasks.TaskManager``, is used
    as it is); ``evaluate_kwargs`` go to ``simple_evaluate`` (``num_fewshot``, ...)."""

    def __init__(self, model: Any, task: str, subtasks: Sequence[tuple[str, int]] = (),
                 metric: str | None = None, filter_name: str | None = None,
                 model_args: str = "", include_path: str | Path | None = None,
                 task_manager: Any = None, **evaluate_kwargs: Any) -> None:
        super().__init__(task, subtasks, metric, filter_name)
        try:
            import lm_eval
            from lm_eval.api.registry import get_model
            from lm_eval.tasks import TaskManager
        except ImportError:
            raise EvaluationError("lm-evaluation-harness is not installed (pip install "
                                  "lm-eval)") from None
        self._evaluate = lm_eval.simple_evaluate
        self.lm = get_model(model).create_from_arg_string(model_args) if isinstance(
            model, str) else model
        self.tasks = task_manager or TaskManager(
            include_path=None if include_path is None else str(include_path))
        self.evaluate_kwargs = evaluate_kwargs

    def _run(self, samples: dict[str, list[int]]) -> dict[str, dict[int, float]]:
        try:
            result = self._evaluate(model=self.lm, tasks=list(samples), samples=samples,
                                    log_samples=True, task_manager=self.tasks,
                                    **self.evaluate_kwargs)
        except Exception as exc:  # the harness and the model raise anything
            raise EvaluationError(f"lm_eval.simple_evaluate failed: {type(exc).__name__}: "
                                  f"{str(exc)[:160]}") from None
        logged = (result or {}).get("samples", {})
        scores = {}
        for key in samples:
            records = [(f"{key} sample {i}", r) for i, r in enumerate(logged.get(key, []))]
            try:
                log = parse_sample_records(records, key, self.metric, self.filter_name)
            except DataError as exc:
                raise EvaluationError(str(exc)) from None
            self.metric = self.metric or log.metric
            scores[key] = log.scores
        return scores


__all__ = ["RESERVED", "HarnessEvaluator", "LmEvalCommand", "LmEvalInProcess"]
