"""lm-evaluation-harness as an evaluator: a batch of items, one harness run, their scores.

A session asks ``k`` items (:meth:`bayeval.loop.session.Session.ask`); the items become the
harness's ``--samples`` mapping ``{task: [doc indices]}``
(:func:`bayeval.data.lm_eval.harness_docs`: ``<task>-<doc>`` ids, ``<subtask>/<doc>``
ids of a group, or a column split over a group's subtasks), the harness evaluates exactly
those documents, and each document's per-sample metric is read back as the item's score
(:func:`bayeval.data.lm_eval.parse_sample_records`, the reader of ``--log_samples``).

* :class:`LmEvalCommand` launches ``lm_eval run`` once per batch (any model the harness
  runs; the model is loaded at every launch);
* :class:`LmEvalInProcess` runs in this process: the model and the task loaded, and
  every document's requests built, once; each batch is only the model's calls on the
  asked documents' requests and their scoring (:mod:`bayeval.evaluators.harness_requests`), so a
  document costs what it costs in a full run.

Both expose ``evaluate_batch(items) -> list[float | EvaluationError]`` (which
:meth:`Session.run` uses when ``batch > 1``) and ``__call__(item)`` for one item. A failed
run (non-zero exit, a timeout: the harness's whole process group is killed) fails every
item of its batch; a document the harness did not log fails that item alone. Failures are
:class:`~bayeval.errors.EvaluationError`, handled as every evaluator's are: skipped and
journaled, and a run stops after several in a row.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bayeval.data.lm_eval import (
    find_sample_files,
    harness_docs,
    harness_task,
    parse_sample_records,
    parse_subtasks,
    read_sample_log,
)
from bayeval.data.matrix import validate_score
from bayeval.errors import BayevalError, DataError, EvaluationError
from bayeval.evaluators.base import BatchEvaluator, ChildProcesses
from bayeval.evaluators.harness_requests import (
    BUILD_SETTINGS,
    PreparedTask,
    call_batch_size,
    padded_size,
    run_documents,
    shared_context,
)
from bayeval.records.files import write_file

# options bayeval sets on every launch; a user's --lm-eval-args must not set them
RESERVED = ("--tasks", "--samples", "-E", "--output_path", "-o", "--log_samples", "-s",
            "--limit", "-L")


class HarnessEvaluator(BatchEvaluator):
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


FOLDER_PREFIX = "bayeval-lm-eval-"


def sweep_folders() -> None:
    """Remove the temporary folders of harness launches whose bayeval process is gone
    (killed with SIGKILL, which leaves no chance to clean up): ``bayeval-lm-eval-PID-*``
    with no process PID."""
    root = Path(tempfile.gettempdir())
    for folder in root.glob(f"{FOLDER_PREFIX}*-*"):
        pid = folder.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:
            pass


class LmEvalCommand(HarnessEvaluator):
    """One ``lm_eval run`` launch per batch: ``args`` (e.g. ``--model hf --model_args
    pretrained=gpt2 --include_path tasks/``) plus ``--tasks``, ``--samples``,
    ``--log_samples`` and ``--output_path`` (a temporary folder), which bayeval sets.

    ``executable``: the harness's command (default: this Python's ``-m lm_eval``);
    ``timeout``: seconds per launch, after which its whole process group is killed;
    ``output_path``: where each launch's own output (results and samples files) is kept.
    Each launch's process group is killed on every way out of bayeval (a watchdog process
    ends it after a SIGKILL, :class:`~bayeval.evaluators.ChildProcesses`); a temporary
    folder left by a killed bayeval is removed when the next run starts."""

    def __init__(self, args: str, task: str, subtasks: Sequence[tuple[str, int]] = (),
                 metric: str | None = None, filter_name: str | None = None,
                 timeout: float = 3600.0, executable: Sequence[str] | None = None,
                 output_path: str | Path | None = None) -> None:
        super().__init__(task, subtasks, metric, filter_name)
        self.output_path = None if output_path is None else Path(output_path)
        self.args = harness_argv(args)
        if not timeout > 0:
            raise EvaluationError(f"timeout must be > 0, got {timeout:g}")
        self.timeout = timeout
        self.executable = list(executable or [sys.executable, "-m", "lm_eval"])
        self._children = ChildProcesses()
        sweep_folders()  # once a run: what killed runs left behind

    def cancel(self) -> None:
        """Kill a harness launch running now (with its process group) and start no other
        until :meth:`restart`."""
        self._children.cancel()

    def restart(self) -> None:
        """Let launches start again after :meth:`cancel` (a new run)."""
        self._children.cancelled = False

    def argv(self, samples: dict[str, list[int]], output: Path) -> list[str]:
        """The launch's command line."""
        return [*self.executable, "run", *self.args, "--tasks", ",".join(samples),
                "--samples", json.dumps(samples), "--log_samples", "--output_path",
                str(output)]

    def _run(self, samples: dict[str, list[int]]) -> dict[str, dict[int, float]]:
        with tempfile.TemporaryDirectory(prefix=f"{FOLDER_PREFIX}{os.getpid()}-") as folder:
            try:
                proc, _, stderr = self._children.run(self.argv(samples, Path(folder)),
                                                     self.timeout)
            except subprocess.TimeoutExpired:
                raise EvaluationError(f"lm_eval timed out after {self.timeout:g}s (its "
                                      "process group was killed)") from None
            if proc.returncode != 0:
                lines = [ln for ln in stderr.splitlines() if ln.strip()]
                detail = f": {lines[-1][:160]}" if lines else ""
                raise EvaluationError(f"lm_eval exited with status {proc.returncode}{detail}")
            scores = self._read_back(Path(folder), samples)
            if self.output_path is not None:  # the launch's own output, kept
                shutil.copytree(folder, self.output_path, dirs_exist_ok=True)
            return scores

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


# the harness's seeds when it is not told others (lm_eval.simple_evaluate's defaults)
HARNESS_SEEDS = {"random_seed": 0, "numpy_random_seed": 1234, "torch_random_seed": 1234,
                 "fewshot_random_seed": 1234}
# what bayeval's options are for the harness options it sets itself
OWN_LIMIT = "bayeval's own --limit"
EQUIVALENT = {"--limit": OWN_LIMIT, "-L": OWN_LIMIT, "--samples": "the items it asks",
              "-E": "the items it asks", "--tasks": "--task", "-t": "--task",
              "--output_path": "--output-path", "-o": "--output-path",
              "--log_samples": "--output-path", "-s": "--output-path"}


def refuse_reserved(args: Sequence[str]) -> None:
    """A one-line error for a harness option that bayeval sets itself, naming bayeval's."""
    for arg in args:
        name = arg.split("=")[0]
        if name in RESERVED:
            raise EvaluationError(f"--lm-eval-args: drop {name}; bayeval sets it for each "
                                  f"batch (use {EQUIVALENT.get(name, 'bayeval’s option')})")


def harness_argv(args: str | Sequence[str]) -> list[str]:
    """``--lm-eval-args`` as a list of harness options, refused in one line where they
    cannot be read, set what bayeval sets (:func:`refuse_reserved`) or name no model."""
    try:
        argv = shlex.split(args) if isinstance(args, str) else list(args)
    except ValueError as exc:
        raise EvaluationError(f"--lm-eval-args: {exc}") from None
    refuse_reserved(argv)
    if not any(a.split("=")[0] in ("--model", "-M") for a in argv):
        raise EvaluationError("--lm-eval-args needs --model (e.g. '--model hf "
                              "--model_args pretrained=gpt2')")
    return argv


def harness_config(args: str | Sequence[str], task: str) -> Any:
    """The harness's own reading of ``args`` (its ``lm_eval run`` options) with
    ``--tasks task``: an ``lm_eval.config.evaluate_config.EvaluatorConfig``. An option the
    harness refuses is a one-line EvaluationError with the harness's words."""
    import contextlib
    import io

    try:
        from lm_eval._cli.harness import HarnessCLI
        from lm_eval.config.evaluate_config import EvaluatorConfig
    except ImportError:
        raise EvaluationError("lm-evaluation-harness is not installed (pip install "
                              "lm-eval)") from None
    argv = harness_argv(args)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            namespace = HarnessCLI()._parser.parse_args(["run", *argv, "--tasks", task])
    except SystemExit:
        words = [ln for ln in said.getvalue().splitlines() if ln.strip()]
        raise EvaluationError(f"--lm-eval-args: the harness refused them: "
                              f"{words[-1] if words else 'bad options'}") from None
    try:
        return EvaluatorConfig.from_cli(namespace)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        raise EvaluationError(f"--lm-eval-args: {exc}") from None


def check_harness_task(args: str | Sequence[str], task: str) -> tuple[Any, Any]:
    """Refuse, in one line, harness options the harness refuses and a task it does not
    know (its own task index, with the options' ``--include_path``), before any launch:
    (the harness's ``EvaluatorConfig`` of ``args``, its ``TaskManager``)."""
    cfg = harness_config(args, task)
    local = local_task_manager(cfg.include_path, task, cfg.metadata)
    if local is not None:
        return cfg, local
    try:
        return cfg, cfg.process_tasks(cfg.metadata)
    except (KeyError, ValueError) as exc:
        raise EvaluationError(_unknown_task(task, cfg.include_path, exc)) from None


def local_task_manager(include_path: Any, task: str, metadata: dict | None = None) -> Any:
    """A ``TaskManager`` that indexes only ``include_path``, not the harness's own thousands
    of task YAMLs (which take seconds to read at every start), when ``task`` is a plain task
    there; None otherwise (no path, or a group or tag, whose members may be the harness's
    tasks), and the full index is needed. A task in ``include_path`` takes precedence over
    a harness task of the same name in the full index as well, so both read the same
    YAML."""
    if not include_path:
        return None
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=include_path, include_defaults=False,
                          metadata=metadata or {})
    return manager if task in manager.all_subtasks else None

class LmEvalInProcess(HarnessEvaluator):
    """lm-evaluation-harness in this process, the model and the task loaded once and every
    document's requests built once at the start (:class:`~bayeval.evaluators.harness_requests.
    PreparedTask`, with the prompts a full run gives them); each batch runs only the
    model calls of the asked documents, packed as a full run packs them (one call per
    request type: the model sorts them by length and batches them by its batch size), and
    scores them (the task's filters and per-document metrics).

    ``model`` is an ``lm_eval.api.model.LM`` or a registered model name (``"hf"``,
    ``"local-completions"``, ``"dummy"``, …) built with ``model_args``; ``include_path``
    adds local task YAMLs to the harness's (or ``task_manager``, an
    ``lm_eval.tasks.TaskManager``, is used as it is). ``evaluate_kwargs`` are
    ``simple_evaluate``'s settings: ``num_fewshot``, ``gen_kwargs``, ``batch_size``,
    ``max_batch_size``, ``device``, the four seeds (``random_seed``, …; set once, at the
    start), and how requests are built (``apply_chat_template``, ``system_instruction``,
    ``fewshot_as_multiturn``, ``confirm_run_unsafe_code``). The task is looked up at once:
    an unknown one is a one-line error before any model is loaded. ``output_path``: the
    harness's own per-document output of the target is kept there
    (``samples_<task>_<time>.jsonl``, appended after each batch, and a
    ``results_<time>.json`` summary written by :meth:`close`, at the end of a run and on
    its interruption), so the new model can join the reference later, under ``name``
    (default: the harness's name for the model).

    ``model`` may also be a model another evaluator loaded (``evaluator.lm``): the tasks
    of a suite share one loaded model (``loaded_model`` says whether this evaluator loaded
    its own); ``model_name`` names the model in the kept output.

    ``model_seconds`` (time in the model's calls), ``build_seconds`` (the requests'
    building) and ``launches`` (calls) say where the evaluator's time went."""

    def __init__(self, model: Any, task: str, subtasks: Sequence[tuple[str, int]] = (),
                 metric: str | None = None, filter_name: str | None = None,
                 model_args: str | dict = "", include_path: str | Path | None = None,
                 task_manager: Any = None, output_path: str | Path | None = None,
                 name: str | None = None, model_name: str | None = None,
                 **evaluate_kwargs: Any) -> None:
        super().__init__(task, subtasks, metric, filter_name)
        try:
            from lm_eval.tasks import TaskManager
        except ImportError:
            raise EvaluationError("lm-evaluation-harness is not installed (pip install "
                                  "lm-eval)") from None
        settings = dict(evaluate_kwargs)
        seeds = {k: settings.pop(k, v) for k, v in HARNESS_SEEDS.items()}
        num_fewshot = settings.pop("num_fewshot", None)
        gen_kwargs = settings.pop("gen_kwargs", None)
        build = {k: settings.pop(k, None) for k in ("batch_size", "max_batch_size", "device")}
        requests = {k: settings.pop(k) for k in BUILD_SETTINGS if k in settings}
        if settings:
            raise EvaluationError(f"LmEvalInProcess: unknown harness setting(s) "
                                  f"{', '.join(sorted(settings))}")
        folder = None if include_path is None else str(include_path)
        self.tasks = (task_manager or local_task_manager(folder, task)
                      or TaskManager(include_path=folder))
        self.loaded = self._load_task(task)
        self._seed(seeds)
        self.model_name = model_name or (model if isinstance(model, str)
                                         else type(model).__name__)
        self.lm = self._model(model, model_args, build) if isinstance(model, str) else model
        self.loaded_model = isinstance(model, str)  # False: a model given, already loaded
        began = time.perf_counter()
        self.prepared: dict[str, PreparedTask] = {}
        for key, task_obj in self.loaded["tasks"].items():
            _configure_task(task_obj, num_fewshot, gen_kwargs, seeds["fewshot_random_seed"])
            self.prepared[key] = PreparedTask(key, task_obj, self.lm, requests)
        self.build_seconds = time.perf_counter() - began
        self.model_seconds = 0.0
        self.model_args = model_args if isinstance(model_args, str) else ",".join(
            f"{k}={v}" for k, v in model_args.items())
        self.batch_size = build["batch_size"]
        self._shared = shared_context(self.lm)
        self._full_per_document: float | None = None
        self.call_batch_sizes: list[int] = []  # the model's batch size in each call
        # per subtask the documents the kept output holds (appended once each)
        self._kept_docs: dict[str, set[int]] = {k: set() for k in self.prepared}
        self._tracker = None if output_path is None else self._kept_output(
            output_path, name, requests.get("system_instruction"))

    @classmethod
    def from_args(cls, args: str | Sequence[str], task: str,
                  subtasks: Sequence[tuple[str, int]] = (), metric: str | None = None,
                  filter_name: str | None = None, output_path: str | Path | None = None,
                  name: str | None = None, lm: Any = None) -> LmEvalInProcess:
        """The evaluator for the harness options ``args`` (``--model hf --model_args
        pretrained=… --include_path …``, as ``lm_eval run`` takes them); ``lm``: a model
        already loaded with those options (another task's of the same run), used as it is."""
        cfg, manager = check_harness_task(args, task)
        seeds = dict(zip(HARNESS_SEEDS, cfg.seed, strict=True)) if cfg.seed else {}
        extra = {k: getattr(cfg, k) for k in BUILD_SETTINGS if getattr(cfg, k)}
        return cls(cfg.model if lm is None else lm, task, subtasks, metric, filter_name,
                   model_args=cfg.model_args or "", task_manager=manager,
                   model_name=cfg.model,
                   output_path=output_path, name=name, num_fewshot=cfg.num_fewshot,
                   gen_kwargs=cfg.gen_kwargs or None, batch_size=cfg.batch_size,
                   max_batch_size=cfg.max_batch_size, device=cfg.device, **seeds, **extra)

    def _load_task(self, task: str) -> dict:
        try:
            loaded = self.tasks.load([task])
        except (KeyError, ValueError) as exc:
            raise EvaluationError(_unknown_task(task, getattr(self.tasks, "include_path",
                                                              None), exc)) from None
        except ImportError as exc:  # its metric's package: langdetect for ifeval, …
            module = (exc.name or "").split(".")[0]
            if not module:
                raise EvaluationError(f"the harness could not load task {task!r}: "
                                      f"{type(exc).__name__}: {exc}") from None
            raise EvaluationError(f"the harness task {task!r} needs the package {module!r}, "
                                  f"not installed here: {install_hint(module)}") from None
        except Exception as exc:  # its dataset cannot be read: offline, no access, …
            raise EvaluationError(f"the harness could not load task {task!r}: "
                                  f"{type(exc).__name__}: {str(exc)[:160]}") from None
        if not loaded.get("tasks"):
            raise EvaluationError(f"the harness task {task!r} holds no task to run")
        return loaded

    @staticmethod
    def _model(model: str, model_args: str | dict, build: dict[str, Any]) -> Any:
        """The harness's model ``model`` built with ``model_args`` (one-line errors)."""
        from lm_eval.api.registry import get_model

        try:
            maker = get_model(model)
        except (KeyError, ValueError) as exc:
            raise EvaluationError(f"the harness has no model {model!r} ({exc})") from None
        except ImportError as exc:  # its backend's package (torch for hf, …) is missing
            raise EvaluationError(f"the harness's model {model!r} needs a package that "
                                  f"is not installed: {exc}") from None
        try:
            return (maker.create_from_arg_obj(model_args, build) if isinstance(
                model_args, dict) else maker.create_from_arg_string(model_args, build))
        except Exception as exc:  # a model's loader raises anything
            twice = re.search(r"multiple values for keyword argument '(\w+)'", str(exc))
            if twice and twice.group(1) in build:  # as the harness's own run refuses it
                raise EvaluationError(
                    f"--model_args sets {twice.group(1)}, which the harness passes on its "
                    f"own: give it as --{twice.group(1)} instead") from None
            raise EvaluationError(f"the harness could not load model {model!r} with "
                                  f"{model_args!r}: {type(exc).__name__}: "
                                  f"{str(exc)[:160]}") from None

    def _kept_output(self, output_path: str | Path, name: str | None,
                     system_instruction: str | None) -> Any:
        """The harness's tracker of the kept output, its files stamped and named as the
        harness names its own runs' (under ``name`` when given)."""
        from lm_eval.loggers import EvaluationTracker
        from lm_eval.utils import sanitize_model_name

        tracker = EvaluationTracker(output_path=str(output_path))
        tracker.date_id = datetime.now().isoformat().replace(":", "-")
        config = tracker.general_config_tracker
        config.log_experiment_args(model_source=self.model_name, model_args=self.model_args,
                                   system_instruction=system_instruction,
                                   chat_template=None, fewshot_as_multiturn=False)
        if name is not None:
            config.model_name = name
            config.model_name_sanitized = sanitize_model_name(name)
        self._continue(tracker, Path(output_path) / config.model_name_sanitized)
        return tracker

    def _continue(self, tracker: Any, folder: Path) -> None:
        """A resumed run continues the kept output of the run it resumes (the latest
        partial run bayeval kept there for this model: a summary marked as bayeval's, or
        samples with no summary, a run killed before it could write one): its samples
        files are appended to, its summary counts their documents, and a document they
        hold is never appended again, so the folder reads back as one run of every
        document scored."""
        if not folder.is_dir():
            return
        runs = {p.stem.removeprefix("results_") for p in folder.glob("results_*.json")}
        runs |= {p.stem.rsplit("_", 1)[-1] for p in folder.glob("samples_*.jsonl")}
        if not runs:
            return
        newest = max(runs)
        results = folder / f"results_{newest}.json"
        if results.is_file():
            try:
                partial = "bayeval" in json.loads(results.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                partial = False
            if not partial:
                return  # the newest run there is a full one: a new partial run beside it
        tracker.date_id = newest
        for key, prepared in self.prepared.items():
            samples = folder / f"samples_{key}_{newest}.jsonl"
            if samples.is_file():
                text = samples.read_bytes()
                if text and not text.endswith(b"\n"):  # a line cut by a kill: dropped
                    text = text[:text.rfind(b"\n") + 1]  # (its document runs again)
                    with open(samples, "r+b") as f:
                        f.truncate(len(text))
                records = [json.loads(line) for line in text.decode("utf-8").splitlines()
                           if line]
                self._kept_docs[key] = prepared.take_records(records)

    @staticmethod
    def _seed(seeds: dict[str, int | None]) -> None:
        """Seed the generators the harness's models read, once (as simple_evaluate does
        at each call)."""
        import random

        import numpy as np

        if seeds["random_seed"] is not None:
            random.seed(seeds["random_seed"])
        if seeds["numpy_random_seed"] is not None:
            np.random.seed(seeds["numpy_random_seed"])
        if seeds["torch_random_seed"] is not None:
            try:
                import torch
            except ImportError:
                return
            torch.manual_seed(seeds["torch_random_seed"])

    def _run(self, samples: dict[str, list[int]]) -> dict[str, dict[int, float]]:
        unknown = [k for k in samples if k not in self.prepared]
        if unknown:
            raise EvaluationError(f"the harness task {self.task!r} has no subtask "
                                  f"{unknown[0]!r} (it has {', '.join(self.prepared)})")
        batch = {k: (self.prepared[k], docs) for k, docs in samples.items()}
        size = self._call_batch(self._requests(samples), sum(map(len, samples.values())))
        if size is None:
            self.model_seconds += run_documents(self.lm, batch)
        else:  # the call packed at its own batch size, the model's own restored after
            kept = self.lm.batch_size_per_gpu
            self.lm.batch_size_per_gpu = size
            try:
                self.model_seconds += run_documents(self.lm, batch)
            finally:
                self.lm.batch_size_per_gpu = kept
            self.call_batch_sizes.append(size)
        scores, logged = {}, {}
        for key, (prepared, docs) in batch.items():
            records = prepared.records(docs, self._kept_docs[key])
            try:
                log = parse_sample_records(
                    [(f"{key} doc {r['doc_id']}", r) for r in records], key, self.metric,
                    self.filter_name)
            except DataError as exc:
                raise EvaluationError(str(exc)) from None
            self.metric = self.metric or log.metric
            scores[key] = log.scores
            logged[key] = records
        if self._tracker is not None:  # the batch's documents, appended (once each)
            for key, records in logged.items():
                fresh = [r for r in records if r["doc_id"] not in self._kept_docs[key]]
                self._kept_docs[key].update(r["doc_id"] for r in fresh)
                if fresh:
                    self._tracker.save_results_samples(task_name=key, samples=fresh)
        return scores

    def _requests(self, samples: dict[str, list[int]] | None) -> list[Any]:
        """The requests of ``samples``' documents (None: every document of the task)."""
        if samples is None:
            return [r for prepared in self.prepared.values()
                    for doc in sorted(prepared.requests) for r in prepared.requests[doc]]
        return [r for key, docs in samples.items() if key in self.prepared
                for doc in docs for r in self.prepared[key].requests.get(doc, ())]

    def _model_batch(self) -> int:
        """The harness's batch size as a number (``auto``, chosen by the model: 1, no
        padding modelled)."""
        size = str(self.batch_size or 1)
        return int(size) if size.isdigit() and int(size) > 0 else 1

    def _call_batch(self, requests: list[Any], documents: int) -> int | None:
        """The model's batch size for a call of ``documents`` documents' ``requests``
        where bayeval sets it, None where the model keeps its own. On a model that runs
        on the CPU, whose cost grows with the padded size whatever the batch, a call of
        a few dozen documents of mixed lengths is run at the largest batch size that
        pads it no more per document than the full run
        (:func:`~bayeval.evaluators.harness_requests.call_batch_size`); an accelerator's
        model, one whose batch size the harness chooses (``auto``) or whose batch size
        cannot be set per call keeps its own."""
        if (not isinstance(getattr(self.lm, "batch_size_per_gpu", None), int)
                or not str(self.batch_size or "").isdigit()
                or not str(getattr(self.lm, "device", "")).startswith("cpu")):
            return None
        if self._full_per_document is None:
            docs = sum(len(p.requests) for p in self.prepared.values())
            self._full_per_document = padded_size(self._requests(None), self._model_batch(),
                                                  self._shared) / max(docs, 1)
        return call_batch_size(requests, documents, self._model_batch(),
                               self._full_per_document, self._shared)

    def packed_size(self, items: Sequence[str] | None = None) -> float:
        """What running ``items`` in one call costs the model in padded characters
        (:func:`~bayeval.evaluators.harness_requests.padded_size` at the call's batch
        size, rows shared as the model shares them; ``None``: every document of the task
        at the harness's batch size, as a full run packs them), so that the run's time
        projects a full run's (:mod:`bayeval.loop.timing`). A batch size the harness
        chooses itself (``auto``) counts as 1: no padding is modelled."""
        if items is None:
            return padded_size(self._requests(None), self._model_batch(), self._shared)
        samples, _ = self.samples_for(items)
        requests = self._requests(samples)
        size = self._call_batch(requests, sum(map(len, samples.values())))
        return padded_size(requests, self._model_batch() if size is None else size,
                           self._shared)

    def close(self) -> None:
        """Write the kept output's summary (``results_<time>.json``) of the documents
        run so far by this evaluator, as the harness aggregates them; nothing without
        ``output_path`` or before the first document. Called at the end of a run and on
        its interruption; calling it again rewrites the summary."""
        scored = {k: p for k, p in self.prepared.items() if p.scored}
        if self._tracker is None or not scored:
            return
        from lm_eval.evaluator_utils import _process_results
        from lm_eval.utils import handle_non_serializable

        accs = {k: {"task": p.task, "raw_metrics": p.raw_metrics, "logged_samples": []}
                for k, p in scored.items()}
        summary = dict(_process_results(accs, {}, bootstrap_iters=0)._to_eval_results())
        config = self._tracker.general_config_tracker
        summary["model_name"] = config.model_name
        summary["config"] = {"model": self.model_name, "model_args": self.model_args,
                             "batch_size": self.batch_size}
        group = list(self.prepared) != [self.task]
        kept = list(self.prepared) if group else list(scored)
        if group:  # listed as the harness lists a group's run: it reads back as the group
            summary["group_subtasks"] = {self.task: kept, **{k: [] for k in kept}}
        summary["n-samples"] = {k: {"original": self.prepared[k].n_docs,
                                    "effective": self.prepared[k].scored} for k in kept}
        summary["bayeval"] = {"note": "documents chosen by bayeval; a partial run"}
        path = (Path(self._tracker.output_path) / config.model_name_sanitized
                / f"results_{self._tracker.date_id}.json")
        write_file(path, json.dumps(summary, indent=2, default=handle_non_serializable))

    def __enter__(self) -> LmEvalInProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _configure_task(task: Any, num_fewshot: int | None, gen_kwargs: Any,
                    fewshot_seed: int | None) -> None:
    """The harness's per-run task settings, as ``lm_eval.simple_evaluate`` applies them:
    generation options for generative tasks, the few-shot count (a task's own 0 kept;
    none given: the task's, else 0) and the few-shot sampler's seed."""
    if task.get_config("output_type") == "generate_until" and gen_kwargs:
        task.set_config(key="generation_kwargs", value=gen_kwargs, update=True)
    if num_fewshot is not None and task.get_config("num_fewshot") != 0:
        task.set_config(key="num_fewshot", value=num_fewshot)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=fewshot_seed)


def install_hint(module: str) -> str:
    """How to install ``module`` for the harness: the harness's own extras that require it
    (its installed metadata, e.g. ``langdetect`` → ``pip install 'lm-eval[ifeval]'``),
    else the package of that name."""
    import importlib.metadata

    want = module.lower().replace("-", "_")
    try:
        requires = importlib.metadata.requires("lm-eval") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    extras = set()
    for line in requires:
        found = re.match(r"\s*([A-Za-z0-9_.-]+).*extra\s*==\s*[\"']([^\"']+)", line)
        if found and found.group(1).lower().replace("-", "_") == want:
            extras.add(found.group(2))
    tasks = sorted(e for e in extras if e not in ("dev", "tasks", "all"))
    if tasks:
        return f"pip install 'lm-eval[{tasks[0]}]'"
    return f"pip install {module}"


def _unknown_task(task: str, include_path: Any, exc: Exception) -> str:
    hint = ("; add --include_path DIR to --lm-eval-args for a task of your own"
            if not include_path else f" (looked in the harness's tasks and {include_path})")
    detail = str(exc).strip("'\"")
    return f"lm-evaluation-harness has no task {task!r}{hint}: {detail[:120]}"


def harness_settings(matrix, lm_eval_args: str, task: str | None, metric: str | None,
                     filter_name: str | None) -> dict[str, Any]:
    """The lm-eval evaluator's settings, journaled for a resume: the harness task (``--task``,
    else the matrix's), its subtasks, and the metric and filter of the reference's scores."""
    name = task or harness_task(matrix)
    if not name:
        raise BayevalError(f"--evaluator lm-eval: {matrix.name} records no "
                           "lm-evaluation-harness task; give --task NAME")
    metric = metric or matrix.metadata.get("metric")
    if not metric:
        raise BayevalError(f"--evaluator lm-eval: {matrix.name} records no metric; give "
                           "--metric NAME (the per-sample field the reference scores are)")
    return {"lm_eval_args": lm_eval_args, "task": name, "metric": metric,
            "filter": filter_name or matrix.metadata.get("filter"),
            "subtasks": [list(x) for x in parse_subtasks(matrix.metadata.get("subtasks"))]}


__all__ = ["RESERVED", "HarnessEvaluator", "LmEvalCommand", "LmEvalInProcess",
           "check_harness_task", "harness_argv", "harness_config", "harness_settings",
           "refuse_reserved"]
