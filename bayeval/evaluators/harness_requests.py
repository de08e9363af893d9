"""A harness task's requests built once, and a batch of its documents run on a model as a
full ``lm_eval`` run runs them.

A full run (``lm_eval.evaluator.evaluate``) builds every document's requests
(``Task.build_all_requests``: the prompt with its few-shot examples, one
``Instance`` per choice or generation), hands all requests of a type to the model in one
call (``lm.loglikelihood``, ``lm.generate_until``; the model sorts them by length, packs
them into batches of its batch size and shares a context among the choices of a
multiple-choice document), then applies the task's filters and scores each document
(``Task.process_results``).

:class:`PreparedTask` does the same in two parts. At the start it builds the requests of
**all** documents, in document order, as the full run does: the few-shot sampler draws
from one random stream document after document, so a document's prompt is the one the
full run gives it only when every document is built in that order. Per batch,
:func:`run_documents` hands the chosen documents' requests (of every task of the batch)
to the model in one call per request type, applies the filters to those requests, and
scores each document; :meth:`PreparedTask.records` gives the per-document records the
harness logs with ``--log_samples`` (the same fields, the same hashes). No per-batch
``evaluate()``: nothing is rebuilt, aggregated or re-read.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from typing import Any

from bayeval.errors import EvaluationError

# what lm_eval.evaluator.evaluate takes that changes how requests are built
BUILD_SETTINGS = ("system_instruction", "apply_chat_template", "fewshot_as_multiturn",
                  "confirm_run_unsafe_code")


class PreparedTask:
    """One harness task (``task``: an ``lm_eval.api.task.Task``) named ``name``, its
    requests built for every document (module docstring). ``settings``: the request
    settings of :data:`BUILD_SETTINGS` and ``lm``, the model whose chat template is
    applied when ``apply_chat_template`` is set."""

    def __init__(self, name: str, task: Any, lm: Any, settings: dict[str, Any]) -> None:
        if getattr(task, "UNSAFE_CODE", False) and not settings.get("confirm_run_unsafe_code"):
            raise EvaluationError(f"the harness task {name!r} runs untrusted code: give "
                                  "--confirm_run_unsafe_code in --lm-eval-args to run it")
        if getattr(task, "MULTIMODAL", False) and not getattr(lm, "MULTIMODAL", False):
            raise EvaluationError(f"the harness task {name!r} needs a multimodal model "
                                  "(hf-multimodal, vllm-vlm)")
        chat = bool(settings.get("apply_chat_template"))
        try:
            task.build_all_requests(
                rank=0, world_size=1, system_instruction=settings.get("system_instruction"),
                apply_chat_template=chat,
                fewshot_as_multiturn=bool(settings.get("fewshot_as_multiturn")),
                chat_template=getattr(lm, "apply_chat_template", None) if chat else None,
                tokenizer_name=getattr(lm, "tokenizer_name", "") if chat else "")
        except Exception as exc:  # a task's templates raise anything
            raise EvaluationError(f"the harness could not build the requests of {name!r}: "
                                  f"{type(exc).__name__}: {str(exc)[:160]}") from None
        self.name = name
        self.task = task
        self.n_docs = len(task.eval_docs)
        self.requests: dict[int, list[Any]] = defaultdict(list)
        for instance in task.instances:
            self.requests[instance.doc_id].append(instance)
        for instances in self.requests.values():
            instances.sort(key=lambda x: x.idx)
        self.filters = list(getattr(task, "_filters", []))
        # per (metric, filter) the values of every document scored so far (the summary)
        self.raw_metrics: dict[tuple[str, str], list] = defaultdict(list)
        self.scored = 0

    def instances(self, docs: Sequence[int]) -> list[Any]:
        """The requests of ``docs`` (each document's in the harness's order), cleared of
        any earlier answers."""
        out = []
        for doc in docs:
            if doc not in self.requests:
                raise EvaluationError(f"the harness task {self.name!r} has no document "
                                      f"{doc} ({self.n_docs} documents)")
            for instance in self.requests[doc]:
                instance.resps = []
                instance.filtered_resps = {}
                out.append(instance)
        return out

    def records(self, docs: Sequence[int], counted: Collection[int] = ()
                ) -> list[dict[str, Any]]:
        """After the model answered ``docs``' requests: filter them and score each
        document; the harness's per-document records (``--log_samples``), every filter's,
        documents in index order. Documents of ``counted`` (already in the summary, from
        the kept output a resumed run continues) are scored but not counted again."""
        from lm_eval.utils import handle_non_serializable, hash_string

        docs = sorted(docs)
        batch = [i for d in docs for i in self.requests[d]]
        try:
            for ensemble in self.filters:
                ensemble.apply(batch)
        except Exception as exc:  # a task's filters raise anything
            raise EvaluationError(f"the harness's filters of {self.name!r} failed: "
                                  f"{type(exc).__name__}: {str(exc)[:160]}") from None
        out = []
        for key in batch[0].filtered_resps:
            for doc_id in docs:
                requests = self.requests[doc_id]
                doc = requests[0].doc
                try:
                    metrics = self.task.process_results(
                        doc, [r.filtered_resps[key] for r in requests])
                    target = self.task.doc_to_target(doc)
                except Exception as exc:  # a task's scoring raises anything
                    raise EvaluationError(f"the harness could not score document {doc_id} "
                                          f"of {self.name!r}: {type(exc).__name__}: "
                                          f"{str(exc)[:160]}") from None
                record = {
                    "doc_id": doc_id, "doc": doc, "target": target,
                    "arguments": [r.args for r in requests],
                    "resps": [r.resps for r in requests],
                    "filtered_resps": [r.filtered_resps[key] for r in requests],
                    "filter": key, "metrics": list(metrics),
                    "doc_hash": hash_string(json.dumps(
                        doc, indent=2, default=handle_non_serializable, ensure_ascii=False)),
                    "prompt_hash": hash_string(requests[0].arguments[0]),
                    "target_hash": hash_string(str(target)),
                    **metrics}
                out.append(record)
                if doc_id not in counted:
                    for metric, value in metrics.items():
                        self.raw_metrics[(metric, key)].append(value)
        self.scored += len([d for d in docs if d not in counted])
        return out

    def take_records(self, records: Sequence[dict[str, Any]]) -> set[int]:
        """Records an earlier run of this evaluator kept (its samples file, continued by a
        resumed run) counted into the summary as if scored here; the documents they hold."""
        docs = set()
        for record in records:
            for metric in record.get("metrics", ()):
                if metric in record:
                    self.raw_metrics[(metric, record["filter"])].append(record[metric])
            docs.add(int(record["doc_id"]))
        self.scored += len(docs)
        return docs


GENERATED_CHARS_PER_TOKEN = 4  # a generated token's share of a request's size, in chars


def request_size(instance: Any) -> float:
    """A request's size in characters, what the model's cost grows with: its context and
    continuation (``loglikelihood``), its text (``loglikelihood_rolling``), or its context
    and the tokens it may generate (``generate_until``: ``max_gen_toks``, the harness's
    256 by default, at :data:`GENERATED_CHARS_PER_TOKEN` characters each)."""
    args = instance.args
    if instance.request_type == "generate_until":
        kwargs = args[1] if len(args) > 1 and isinstance(args[1], dict) else {}
        tokens = kwargs.get("max_gen_toks", 256)
        tokens = tokens if isinstance(tokens, int) and tokens > 0 else 256
        return float(len(str(args[0])) + GENERATED_CHARS_PER_TOKEN * tokens)
    return float(sum(len(a) for a in args if isinstance(a, str)))


def padded_size(requests: Sequence[Any], batch_size: int,
                shared: Callable[[Any], Any] | None = None) -> float:
    """What the model pays for ``requests`` run in one call, in padded characters: per
    request type the requests sorted by size, longest first, in batches of
    ``batch_size``, each batch as long as its longest request (the harness's packing).
    A whole task's requests in one call pad little; a few dozen drawn documents of mixed
    lengths pad short prompts to the longest among them.

    ``shared`` (:func:`shared_context`): the key under which the model runs
    ``loglikelihood`` requests as one row (the harness's HF model runs the choices of a
    multiple-choice document whose continuations are one token long as one forward pass
    of their shared context, ``logits_cache``); a key's row is as long as its longest
    request. None: every request is its own row."""
    by_type: dict[str, list[float]] = defaultdict(list)
    rows: dict[Any, float] = {}
    for instance in requests:
        size = request_size(instance)
        key = (None if shared is None or instance.request_type != "loglikelihood"
               else shared(instance))
        if key is None:
            by_type[instance.request_type].extend([size] * instance.repeats)
        else:
            rows[key] = max(rows.get(key, 0.0), size)
    if rows:
        by_type["loglikelihood"].extend(rows.values())
    total = 0.0
    for sizes in by_type.values():
        sizes.sort(reverse=True)
        total += sum(sizes[i] * len(sizes[i:i + batch_size])
                     for i in range(0, len(sizes), batch_size))
    return total


def shared_context(lm: Any) -> Callable[[Any], Any] | None:
    """The key under which ``lm`` runs ``loglikelihood`` requests as one row, or None
    where it runs each on its own: the harness's HF model with a causal backend and its
    logits cache on (the default) groups requests by their context and continuation
    less its last token (``HFLM._loglikelihood_tokens``), so the choices of a document
    whose continuations are one token long share one forward pass. The continuation's
    tokens are the model's tokenizer's (``tok_encode``)."""
    encode = getattr(lm, "tok_encode", None)
    if not (getattr(lm, "logits_cache", False) and getattr(lm, "backend", None) == "causal"
            and callable(encode)):
        return None
    cache: dict[str, tuple] = {}

    def key(instance: Any) -> Any:
        context, continuation = instance.args[0], instance.args[1]
        if continuation not in cache:
            try:
                cache[continuation] = tuple(encode(continuation))[:-1]
            except Exception:  # a tokenizer that refuses the text: a row of its own
                cache[continuation] = (id(instance),)
        return (context, cache[continuation])

    return key


PACK_SLACK = 0.10  # a call may pad this much more per document than the full run does


def call_batch_size(requests: Sequence[Any], documents: int, batch_size: int,
                    full_per_document: float,
                    shared: Callable[[Any], Any] | None = None) -> int:
    """The model's batch size for one call of ``documents`` documents' ``requests``: the
    largest of ``batch_size``, its half, its quarter, … down to 1 at which the call pads
    at most :data:`PACK_SLACK` more per document than the full run
    (``full_per_document``: :func:`padded_size` of every document at ``batch_size``,
    divided by their number), or 1 where none does. A few dozen drawn documents of mixed
    lengths in one batch pad every prompt to the longest among them (a call of 32
    multiple-choice documents whose prompts run from 5 to 119 words pads 2.8× what the
    full run pays per document); in batches of 4, sorted by length, 1.07×."""
    size = max(int(batch_size), 1)
    limit = (1.0 + PACK_SLACK) * full_per_document * max(documents, 1)
    while size > 1 and padded_size(requests, size, shared) > limit:
        size = (size + 1) // 2
    return size


class _AbandonedTasks(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" for the harness's API
    requests (their traceback passes through ``lm_eval/models/api_models.py``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "exception was never retrieved" not in str(record.msg):
            return True
        tb = record.exc_info[2] if record.exc_info else None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.endswith(_API_MODELS):
                return False
            tb = tb.tb_next
        return True


_API_MODELS = "lm_eval/models/api_models.py"
_ABANDONED = _AbandonedTasks()


def _forget_abandoned_tasks() -> None:
    """A harness API model gathers its requests on an event loop; once one fails the
    others go on failing in the background, their exceptions never retrieved, and asyncio
    prints a traceback for each when it is collected: the same failure, which the caller
    reports once. Those lines are dropped (for the harness's requests only) from the first
    failure on."""
    log = logging.getLogger("asyncio")
    if _ABANDONED not in log.filters:
        log.addFilter(_ABANDONED)
    gc.collect()


def model_failure(lm: Any, kind: str, exc: Exception) -> str:
    """One line for a model call that raised: for a model behind a server (the harness's
    API models have a ``base_url``), what the server's answer lacked, named."""
    text = f"{kind}: {type(exc).__name__}: {str(exc)[:160]}"
    url = getattr(lm, "base_url", None)
    if not url:
        return f"the model's {text.replace(': ', ' failed: ', 1)}"
    said = str(exc)
    if isinstance(exc, KeyError):
        what = (f"answered without the field {exc} that an OpenAI-style completions "
                "response holds")
    elif "zip()" in said and "argument 2 is shorter" in said:
        what = "answered fewer completions than the prompts it was sent"
    elif "zip()" in said and "argument 2 is longer" in said:
        what = "answered more completions than the prompts it was sent"
    else:
        what = "failed"
    return f"the server at {url} {what} ({text})"


def run_documents(lm: Any, batch: dict[str, tuple[PreparedTask, list[int]]]) -> float:
    """Run the requests of every ``(task, docs)`` of ``batch`` on ``lm``: one call per
    request type for all of them (each request repeated ``repeats`` times, as the full run
    does), the answers put on the requests. Returns the seconds spent in the model's
    calls."""
    by_type: dict[str, list[Any]] = defaultdict(list)
    for prepared, docs in batch.values():
        for instance in prepared.instances(docs):
            by_type[instance.request_type].extend([instance] * instance.repeats)
    spent = 0.0
    for kind, requests in by_type.items():
        began = time.perf_counter()
        try:
            answers = getattr(lm, kind)(requests)
        except Exception as exc:  # the model raises anything
            _forget_abandoned_tasks()
            raise EvaluationError(model_failure(lm, kind, exc)) from None
        spent += time.perf_counter() - began
        if len(answers) != len(requests):
            raise EvaluationError(f"the model's {kind} answered {len(answers)} of "
                                  f"{len(requests)} requests")
        for request, answer in zip(requests, answers, strict=True):
            request.resps.append(answer)
    return spent


__all__ = ["BUILD_SETTINGS", "PACK_SLACK", "PreparedTask", "call_batch_size", "model_failure",
           "padded_size", "request_size", "run_documents", "shared_context"]
