from __future__ import annotations

import os
import signal
import tempfile

import numpy as np
import pytest

from bayeval.data import ScoreMatrix, load_dataset
from bayeval.devices import keep_compiled_programs, memory_maps, release_compiled_programs
from bayeval.precision import enable_float64

enable_float64()  # the library refuses float32 (bayeval.precision); tests use its internals

# A suite started in the background (`pytest … &`, nohup, a runner without a terminal)
# inherits SIGINT ignored, and so would every process the tests start (an ignored signal
# stays ignored across exec): the Ctrl-C tests would find `bayeval` deaf to Ctrl-C, as a
# background job should be. The test processes take a foreground terminal's SIGINT, which
# their children then start with.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Many tests, both xdist workers and the processes the tests start (the `bayeval` command,
# the tutorials, `python -c` snippets) compile the same programs, down to the small ones
# every eager jnp call compiles (~250 per command, 5–15 s on this CPU). One JAX persistent
# cache for all of them shares those within a run and between runs: JAX's own environment
# variables name it for every process (bayeval.devices.keep_compiled_programs reads
# JAX_COMPILATION_CACHE_DIR too), and XDG_CACHE_HOME keeps the command's other caches out
# of the user's ~/.cache. A cache never changes a result: an entry is keyed by the
# program, the compile options and the versions.
os.environ["XDG_CACHE_HOME"] = os.path.join(tempfile.gettempdir(), "bayeval-tests-cache")
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(tempfile.gettempdir(),
                                                       "bayeval-tests-jax-cache")
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
# Most of a fresh machine's suite time is XLA compiling (bench/suite_time.py: ~half of the
# workers' time is tracing and compiling in process alone). The tests check what programs
# compute, not how fast they run, so every process here compiles with XLA's backend
# optimisation level 0: the same HLO programs, less optimised machine code, which may
# round a last bit differently from a default build. The suite's bit-for-bit comparisons
# of two programs hold at this level and at the default (at level 1 one does not). The
# whole suite: 690 s → 542 s fresh, 271 s → ~308 s warm (docs/results/suite_time.md).
# BAYEVAL_TEST_XLA_OPT=default keeps XLA's own level; a number sets that level.
# XLA's CPU fusion emitters (its MLIR code generation of fused loops) are off as well: the
# same fusions are emitted the older way, which compiles in far less time (four files of
# the suite, fresh: 141 s → 83 s; the whole suite fresh 761 s → 532 s, warm 419 s → 432 s,
# docs/results/suite_time.md). Two differently compiled programs may then round a last
# bit apart (test_streaming.py compares such a pair to 1e-14); the same program always
# gives the same bits. BAYEVAL_TEST_XLA_OPT=default keeps both XLA defaults.
_LEVEL = os.environ.get("BAYEVAL_TEST_XLA_OPT", "0")
if _LEVEL != "default":
    os.environ["XLA_FLAGS"] = " ".join(
        [os.environ.get("XLA_FLAGS", ""), f"--xla_backend_optimization_level={int(_LEVEL)}",
         "--xla_cpu_use_fusion_emitters=false"]).strip()
os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
keep_compiled_programs()
# a live run's plan simulates its method on stand-ins before it starts (seconds each, a
# program compiled per world): the tests of the plan turn it on where they test it
os.environ["BAYEVAL_PLAN"] = "off"
# No test reaches the network (CI has the package registries only): the Hugging Face
# libraries are told so before any of them is imported, since they read it at import
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


_TESTS_RUN = [0]
_MAPPINGS_HIGH = [False]  # above 60% of the limit: counted after every test


@pytest.fixture(autouse=True)
def _memory_mappings_left():
    """A test worker runs thousands of differently shaped programs; it drops JAX's
    in-memory programs once its memory mappings pass 85% of the kernel's limit
    (bayeval.devices.release_compiled_programs: at the limit XLA's CPU backend fails to
    load the next program and the process crashed). The test compiling the most programs
    adds ~1,400 mappings, far under the last 15% (9,800 of Linux's default 65,530).
    Counting them costs ~1 ms per thousand: after every 10th test while they are under
    60% of the limit (10 tests add at most a few thousand), after each test above. At
    half the limit each worker dropped its programs once a run, 15-25 s of dropping and
    then the next tests' tracing again."""
    yield
    _TESTS_RUN[0] += 1
    if _TESTS_RUN[0] % 10 == 0 or _MAPPINGS_HIGH[0]:
        found = memory_maps()
        share = 0.0 if found is None else found[0] / found[1]
        _MAPPINGS_HIGH[0] = share > 0.6
        if share > 0.85:  # (release_compiled_programs counts them again: once a run at most)
            release_compiled_programs(share=0.85)
            _MAPPINGS_HIGH[0] = False


@pytest.fixture
def cli(capsys):
    """``cli(*args, cwd=None)``: ``bayeval ARGS`` through the console entry point in this
    process (a subprocess would add only an interpreter's and JAX's start-up), run in
    ``cwd``; its exit status, stdout and stderr as a
    :class:`subprocess.CompletedProcess`."""
    import subprocess

    from bayeval.cli import main

    def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
        here = os.getcwd()
        if cwd is not None:
            os.chdir(cwd)
        capsys.readouterr()
        try:
            with pytest.raises(SystemExit) as done:
                main([str(a) for a in args])
        finally:
            os.chdir(here)
        captured = capsys.readouterr()
        code = done.value.code
        return subprocess.CompletedProcess(args, 0 if code is None else code, captured.out,
                                           captured.err)

    return run


@pytest.fixture
def killed_when():
    """``killed_when(args, ready, timeout, script=None)``: start ``bayeval ARGS`` (or the
    Python ``script`` with ARGS) as a process, wait until ``ready()`` holds (while it
    still runs, at most ``timeout`` seconds), then SIGKILL it; it must not have ended by
    itself (its stderr says why if it did)."""
    import subprocess
    import sys
    import time

    def run(args, ready, timeout: float, script=None) -> None:
        program = ["-m", "bayeval.cli"] if script is None else [str(script)]
        proc = subprocess.Popen([sys.executable, *program, *map(str, args)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + timeout
            while not ready() and proc.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            assert proc.poll() is None, proc.communicate()[1][-800:]
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.communicate()

    return run


@pytest.fixture(scope="session")
def interrupt_after():
    """``interrupt_after(n)``: a watch (bayeval.evaluation.watch) that interrupts a run, as
    Ctrl-C does, once ``n`` scores are told."""
    import contextlib

    def make(n: int):
        @contextlib.contextmanager
        def watch(run, batch):
            def on_step(session, *_):
                if session.n_observed >= n:
                    raise KeyboardInterrupt
            yield on_step
        return watch

    return make


@pytest.fixture(scope="session")
def ifeval() -> ScoreMatrix:
    return load_dataset("ifeval")


@pytest.fixture(scope="session")
def ifeval_slice(ifeval):
    """``make(seed, n_models, n_items, name) -> (reference, target row)``: n_models + 1
    random IFEval models on n_items random items (kept in order); the first model is the
    target, the others the reference matrix (models m0, m1, …, items i0, i1, …)."""

    def make(seed: int, n_models: int, n_items: int, name: str):
        rng = np.random.default_rng(seed)
        models = rng.choice(ifeval.n_models, n_models + 1, replace=False)
        items = np.sort(rng.choice(ifeval.n_items, n_items, replace=False))
        scores = ifeval.scores[np.ix_(models, items)]
        reference = ScoreMatrix(scores[1:], [f"m{i}" for i in range(n_models)],
                                [f"i{j}" for j in range(n_items)], name=name)
        return reference, scores[0]

    return make


# One world and one settings object per method, shared by every file that runs methods
# (tests/test_engine.py, test_complete.py, test_hparams.py, test_streaming.py, …): a
# program compiled for one is a program for all (same shapes, same structure; the
# settings that are values, such as ε and n_min, may differ, bayeval.hparams).
# Small settings so that re-fits, compactions and stops happen within ENGINE_STEPS rounds; a
# registered method missing here runs with its defaults (and is still compared).
METHOD_SETTINGS = {
    "active-pai": {"epsilon": 0.6, "n_min": 5},  # re-fits: covered by bayesame's row
    # two targets, each with its own design-valid estimator and stop
    "active-pai-joint": {"epsilon": 0.6, "n_min": 5, "refit_every": 6, "adam_steps": 5,
                         "pending": 4},
    "bayesame": {"refit_every": 6, "lbfgs_steps": 5, "window": 4, "epsilon": 0.4},
    "bayesame-rs": {"refit_every": 6, "lbfgs_steps": 5, "window": 4, "epsilon": 0.4},
    "bayesame-laplace": {"refit_every": 6, "lbfgs_steps": 3, "relinearise_every": 4},
    "bayes-aipw": {"window": 4, "epsilon": 0.4},
    "bq": {"epsilon": 0.3, "n_min": 5},
    # two targets: the design (2 × 4 pairs), re-fits after the 8th and 14th observation
    "bayesame-joint": {"refit_every": 6, "adam_steps": 5, "window": 4, "epsilon": 0.4,
                       "pending": 4},
    "faq": {"budget": 18, "k": 2},
    "fluid": {"epsilon": 0.6, "n_min": 5},
    # NUTS fits after the 1st, 6th, 12th and 18th observation, short chains
    "irt": {"refit_every": 6, "first_fits": "", "num_warmup": 30, "num_samples": 30,
            "num_chains": 2},
    "random": {"epsilon": 0.45, "min_n": 5},
}
ENGINE_STEPS = 18


@pytest.fixture(scope="session")
def engine_world(ifeval_slice):
    """(reference, target row): 30 IFEval models × 40 items and the target."""
    return ifeval_slice(5, 30, 40, "engine")


@pytest.fixture(scope="session")
def method_settings() -> dict:
    """:data:`METHOD_SETTINGS`, for the tests that build methods."""
    return METHOD_SETTINGS


@pytest.fixture
def small() -> ScoreMatrix:
    """6 models × 8 items, binary, with one missing cell."""
    rng = np.random.default_rng(0)
    scores = (rng.random((6, 8)) < np.linspace(0.2, 0.8, 6)[:, None]).astype(float)
    scores[2, 3] = np.nan
    return ScoreMatrix(scores, [f"m{i}" for i in range(6)], [f"it{j}" for j in range(8)],
                       name="small")


@pytest.fixture(scope="session")
def ref() -> np.ndarray:
    """A binary reference matrix, 6 models × 10 items in 7 buckets (some of size > 1), for
    the multi-target tests."""
    rng = np.random.default_rng(11)
    base = (rng.random((6, 7)) < 0.5).astype(float)
    return base[:, np.array([0, 1, 2, 3, 4, 5, 6, 0, 2, 2])]


@pytest.fixture(scope="session")
def fragile_refit():
    """(kernel, reference) whose hyperparameter re-fit fails: 9 models × 100 items in 100
    buckets; once 40 are observed the re-fit runs on a 64-slot subsystem, where the kernel
    is NaN (it is finite on all 100 buckets, so the prior and the rebuild are fine)."""
    from bayeval.models.kernels import squared_exponential

    def fragile(phi, alpha, beta):
        return squared_exponential(phi, alpha, beta) * (np.nan if phi.shape[0] == 64 else 1)

    rng = np.random.default_rng(3)
    ref = (rng.random((9, 100)) < 0.5).astype(float)
    ref[0] = np.arange(100) / 100
    return fragile, ref


# The longest tests on a fresh machine (2 cores, empty compile cache; `python -m pytest -q
# -n 2 --durations=40`), their files started first: xdist hands tests out in collection
# order, and a long test taken last leaves the other worker idle at the end of the run. A
# node id here that no longer exists only loses its place; bench/suite_time.py reports the
# current ones.
LONGEST_FIRST = (
    "tests/test_cli.py::test_sigkill_at_random_points_then_resume_equals_uninterrupted",
    "tests/test_laplace.py::test_laplace_mcmc_and_exact_agree_on_real_data",
    "tests/test_irt.py::test_irt_method_fits_on_schedule_and_ends_at_the_truth",
    "tests/test_tutorials.py::test_checkpoints_tutorial_runs",
    "tests/test_lm_eval_harness.py::test_resume_may_correct_the_harness_options",
    "tests/test_irt.py::test_ability_and_score_intervals_cover_on_simulated_data",
    "tests/test_bench_reference.py::test_every_bench_runs_on_a_user_matrix",
    "tests/test_tutorials.py::test_bayesame_tutorial_runs",
    "tests/test_engine.py::test_session_and_simulator_make_the_same_run",
    "tests/test_lm_eval_harness.py::test_logs_to_evaluate_to_subset_to_estimate",
    "tests/test_units.py::test_bench_selection_on_ray_equals_the_local_run",
    "tests/test_joint_evaluation.py::test_joint_run_design_round_robin_stopping_and_the_sim",
    "tests/test_tutorials.py::test_custom_priors_tutorial_runs",
    "tests/test_coverage.py::test_interval_coverage_at_stopping_on_ifeval",
    "tests/test_cli.py::test_diagnose_prints_diagnostics_and_plots",
    "tests/test_selection.py::test_every_algorithm_finds_a_dominant_model",
    "tests/test_cli.py::test_command_evaluator_on_a_reference_file",
    "tests/test_joint_session.py::test_cli_evaluates_several_targets_with_a_command",
    "tests/test_selection.py::test_ucb_e_matches_the_step_by_step_reference",
    "tests/test_tutorials.py::test_new_method_tutorial_runs",
    "tests/test_faq.py::test_fast_simulator_matches_the_composed_rule_and_covers",
    "tests/test_complete.py::test_every_method_is_exact_once_every_item_is_scored",
    "tests/test_session.py::test_crash_at_every_byte_loses_nothing",
    "tests/test_tutorials.py::test_active_pai_tutorial_runs",
)


def pytest_collection_modifyitems(session, config, items):
    """Start the files that hold the longest tests first (:data:`LONGEST_FIRST`), each
    file's tests together and in their order (a module's fixtures are built once), the
    rest after them in their order."""
    module_rank: dict[str, int] = {}
    for item in items:
        rank = next((i for i, prefix in enumerate(LONGEST_FIRST)
                     if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))
        module = item.nodeid.split("::")[0]
        module_rank[module] = min(rank, module_rank.get(module, rank))
    items.sort(key=lambda item: module_rank[item.nodeid.split("::")[0]])  # stable


# BAYEVAL_COMPILE_PROFILE=FILE: each test's seconds of JAX tracing and compiling in this
# process, appended to FILE as "seconds<TAB>node id" lines (bench/suite_time.py reads them
# to say where a fresh machine's time goes). Off by default.
_PROFILE = os.environ.get("BAYEVAL_COMPILE_PROFILE")
if _PROFILE:
    import jax

    _compile_seconds = [0.0]

    def _on_event(event: str, duration: float, **kwargs) -> None:
        if event in ("/jax/core/compile/jaxpr_trace_duration",
                     "/jax/core/compile/backend_compile_duration"):
            _compile_seconds[0] += duration

    jax.monitoring.register_event_duration_secs_listener(_on_event)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        start = _compile_seconds[0]
        yield
        with open(_PROFILE, "a") as handle:
            handle.write(f"{_compile_seconds[0] - start:.3f}\t{item.nodeid}\n")
