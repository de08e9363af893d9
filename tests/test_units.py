"""The one result cache of the benches (bayeval.experiments.units), its executors (worker
processes, Ray) and the run axis split over devices (bayeval.devices)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayeval.experiments.units import Executor, ResultCache, Unit, run_units

ROOT = Path(__file__).resolve().parents[1]


def square_unit(unit: Unit, data: dict) -> pd.DataFrame:
    """A unit whose result is known in closed form: the squares of its run range times a
    shared factor; its calls are logged (one line per call) in data["log"] when given;
    with data["gate"], each call then waits (up to a minute) for that file to exist."""
    if data.get("log"):
        with open(data["log"], "a") as fh:
            fh.write(f"{unit.first}\n")
    if data.get("gate"):
        deadline = time.monotonic() + 60
        while not Path(data["gate"]).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    runs = np.arange(unit.first, unit.last)
    return pd.DataFrame({"run": runs, "value": data["factor"] * runs.astype(float) ** 2})


def arrays_unit(unit: Unit, data: dict) -> dict:
    return {"x": np.full((2, 3), float(unit.first)), "items": np.arange(unit.last)}


def _units(n: int = 4, **settings) -> list[Unit]:
    return [Unit("test", "toy", "sq", 10 * i, 10 * i + 10, settings) for i in range(n)]


def test_units_compute_once_and_are_reused(tmp_path):
    log = tmp_path / "calls.txt"
    data = {"factor": 3.0, "log": str(log)}
    first = run_units(_units(), square_unit, data, tmp_path / "out")
    assert log.read_text().split() == ["0", "10", "20", "30"]
    for unit, frame in zip(_units(), first, strict=True):  # the closed form
        np.testing.assert_array_equal(frame.value, 3.0 * np.arange(unit.first, unit.last) ** 2)
    again = run_units([*_units(), _units()[0]], square_unit, data, tmp_path / "out")
    pd.testing.assert_frame_equal(again.pop(), first[0])  # a unit asked twice
    assert log.read_text().split() == ["0", "10", "20", "30"]  # nothing recomputed
    for a, b in zip(first, again, strict=True):
        pd.testing.assert_frame_equal(a, b)
    # another setting is another unit: computed afresh, the old files stay
    run_units(_units(2, budget=0.5), square_unit, data, tmp_path / "out")
    assert log.read_text().split() == ["0", "10", "20", "30", "0", "10"]
    assert len(list((tmp_path / "out" / "units").rglob("*.parquet"))) == 6
    assert not list((tmp_path / "out").rglob("*.tmp")) and not list(
        (tmp_path / "out").rglob("*.claim"))


def test_arrays_round_trip_and_a_damaged_file_is_recomputed(tmp_path):
    units = _units(2)
    first = run_units(units, arrays_unit, {}, tmp_path)
    np.testing.assert_array_equal(first[1]["x"], np.full((2, 3), 10.0))
    path = next(p for p in (tmp_path / "units").rglob("*.npz") if "000010" in p.name)
    path.write_bytes(b"not an npz")
    again = run_units(units, arrays_unit, {}, tmp_path)
    np.testing.assert_array_equal(again[1]["items"], np.arange(20))


def test_a_live_claim_is_respected_and_a_dead_one_taken_over(tmp_path):
    cache = ResultCache(tmp_path)
    unit = _units(1)[0]
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        claim = unit.stem(tmp_path).with_suffix(".claim")
        claim.parent.mkdir(parents=True)
        claim.write_text(f"{socket.gethostname()} {sleeper.pid}\n")
        assert cache.held_elsewhere(unit) and not cache.claim(unit)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not cache.held_elsewhere(unit)  # its process is gone
    assert cache.claim(unit) and claim.read_text().split()[1] == str(os.getpid())
    cache.release(unit)
    assert not claim.exists()


def test_a_claim_being_written_is_not_taken_over(tmp_path):
    """A claim file that exists but is still empty (its writer between creating and writing
    it, under load) belongs to someone: another process must not take the unit (two
    processes computed one unit when an empty claim counted as stale). Only an unreadable
    claim older than any write could take is abandoned; a claim is taken whole, with its
    holder in it, and no private file is left behind."""
    cache = ResultCache(tmp_path)
    unit = _units(1)[0]
    path = cache._claim_path(unit)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    assert not cache.claim(unit)
    old = time.time() - 60
    os.utime(path, (old, old))
    assert cache.claim(unit)
    assert path.read_text().split() == [socket.gethostname(), str(os.getpid())]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_two_processes_on_one_out_share_the_units(tmp_path):
    """Two processes started together on one --out: every unit is computed once, both
    compute (a unit is claimed when a worker is free for it, not all at the start), and
    both return the same, correct results. A computation waits until the other process
    has computed a unit too (the gate: its log), so the first to start holds its first
    unit until the second, finding it claimed, takes another."""
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from test_units import square_unit, _units
        from bayeval.experiments.units import run_units
        units = [u for u in _units(12)]
        out = run_units(units, square_unit, {{"factor": 2.0, "log": sys.argv[1],
                                              "gate": sys.argv[2]}},
                        {str(tmp_path / "out")!r}, poll_s=0.05)
        print(json.dumps([f.value.tolist() for f in out]))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / f"log{i}"),
                               str(tmp_path / f"log{1 - i}")],
                              stdout=subprocess.PIPE, text=True, env=env) for i in range(2)]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    expected = [(2.0 * np.arange(10 * i, 10 * i + 10) ** 2).tolist() for i in range(12)]
    assert outs[0] == outs[1] == expected
    calls = [int(x) for i in range(2) if (tmp_path / f"log{i}").exists()
             for x in (tmp_path / f"log{i}").read_text().split()]
    assert sorted(calls) == [10 * i for i in range(12)]  # each unit once
    # each process computed some (the gate)
    assert all((tmp_path / f"log{i}").read_text().split() for i in range(2))


@pytest.mark.parametrize("signum", [15, 9])
def test_an_interrupted_pool_exits_at_once_and_leaves_no_worker(tmp_path, signum):
    """SIGTERM (15) or SIGKILL (9) to a bench whose two workers are each inside a unit
    (held there up to a minute by a gate that never opens): SIGTERM's handler ends it
    within a few seconds, not when the units finish (the pool's own shutdown would wait the
    minute); after SIGKILL, which no handler sees, the workers end themselves once their
    parent is gone. Either way no worker is left within 10 s, a sixth of the units' wait.
    The bound on SIGTERM's exit, 15 s, is a quarter of it."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from test_units import square_unit, _units
        from bayeval.errors import terminate_like_interrupt
        from bayeval.experiments.units import Executor, run_units
        terminate_like_interrupt()
        run_units(_units(4), square_unit, {{"factor": 1.0, "log": sys.argv[1],
                                           "gate": sys.argv[2]}}, None, Executor(workers=2))
    """)
    log = tmp_path / "log"
    proc = subprocess.Popen([sys.executable, "-c", script, str(log), str(tmp_path / "never")],
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
                log.exists() and len(log.read_text().split()) >= 2):
            time.sleep(0.1)
        assert len(log.read_text().split()) == 2  # both workers inside a unit
        start = time.monotonic()
        proc.send_signal(signum)
        code = proc.wait(timeout=60)
        took = time.monotonic() - start
        assert code != 0 and took < 15, (code, took)
        deadline = time.monotonic() + 10  # the pool's helpers end with their parent
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 0)  # no process left in the command's group
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)


@pytest.mark.parametrize("signum", [15, 2])
def test_an_interruption_inside_a_garbage_collector_callback_is_not_lost(signum):
    """Python runs a signal's handler wherever the main thread is, also inside a garbage
    collector's callback (JAX registers one; a bench's SIGTERM landed there while JAX was
    imported, and the bench went on for its 2000 units), and drops what the handler raises
    there. After terminate_like_interrupt the dropped interruption, SIGTERM's or Ctrl-C's,
    is raised again in the main thread's next step: the loop below never ends otherwise."""
    import gc
    import signal

    from bayeval.errors import Terminated, terminate_like_interrupt

    armed = [True]

    def collecting(phase, info):
        if phase == "start" and armed:
            armed.clear()
            signal.raise_signal(signum)  # its handler raises here, inside the callback

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    hook = sys.unraisablehook
    signal.signal(signal.SIGINT, signal.default_int_handler)
    terminate_like_interrupt()
    gc.callbacks.append(collecting)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            gc.collect()
            while time.monotonic() - start < 5:  # without the fix: 5 s, then no raise
                pass
        assert not armed  # the signal was raised inside the callback
        assert isinstance(raised.value, Terminated) == (signum == 15)
        # Without the fix the loop above runs its 5 s and no KeyboardInterrupt comes; with
        # it the raise comes at the first step after gc.collect(), whose own time grows with
        # the heap and the machine's load (1.2 s seen on a loaded CI worker): 4 s parts them.
        assert time.monotonic() - start < 4
    finally:
        gc.callbacks.remove(collecting)
        sys.unraisablehook = hook
        for s, handler in handlers.items():
            signal.signal(s, handler)


def test_worker_processes_equal_this_process(tmp_path):
    data = {"factor": 1.5}
    here = run_units(_units(4), square_unit, data, None)
    pool = run_units(_units(4), square_unit, data, None, Executor(workers=2))
    for a, b in zip(here, pool, strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_bench_selection_on_ray_equals_the_local_run(tmp_path):
    """A Ray run of bench selection on two local workers, and a run on two worker
    processes, write the same accuracy.csv as the local run, byte for byte."""
    pytest.importorskip("ray", reason="Ray (the test extra's ray, or bayeval[ray]) is not "
                        "installed")
    from typer.testing import CliRunner

    from bayeval.cli import app

    runner = CliRunner()
    args = ["bench", "selection", "--datasets", "rte", "--runs", "30", "--algorithms",
            "US,SyUS", "--max-budget", "0.05"]
    local = runner.invoke(app, [*args, "--out", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    ray_run = runner.invoke(app, [*args, "--executor", "ray", "--workers", "2", "--out",
                                  str(tmp_path / "ray")])
    assert ray_run.exit_code == 0, ray_run.output
    assert (tmp_path / "local" / "accuracy.csv").read_bytes() == \
        (tmp_path / "ray" / "accuracy.csv").read_bytes()
    pool = runner.invoke(app, [*args, "--workers", "2", "--out", str(tmp_path / "pool")])
    assert pool.exit_code == 0, pool.output
    assert (tmp_path / "local" / "accuracy.csv").read_bytes() == \
        (tmp_path / "pool" / "accuracy.csv").read_bytes()


def test_selection_units_add_up_to_the_whole_table():
    """Counts of the run pieces merge to accuracy_table over all runs (an independent
    path: one call, its own chunking)."""
    from bayeval.data import load_dataset
    from bayeval.experiments.selection import (
        accuracy_table,
        merge_units,
        selection_unit,
        selection_units,
    )

    scores = load_dataset("rte").scores[:12, :40]
    units = selection_units("toy", 12, "SySRs", (0.1, 0.5), runs=9, unit_runs=4)
    assert [(u.first, u.last) for u in units] == [(0, 4), (4, 8), (8, 9)]
    merged = merge_units("toy", "SySRs", [selection_unit(u, {"toy": scores}) for u in units],
                         9)
    whole = accuracy_table(scores, ["SySRs"], (0.1, 0.5), runs=9, chunk=9, dataset="toy")
    pd.testing.assert_frame_equal(merged, whole)


DEVICES_SCRIPT = """
import json, sys
from bayeval.devices import use_cpu_cores
assert use_cpu_cores(2) == 2
import numpy as np
from bayeval.data import load_dataset
from bayeval.methods import make_method
from bayeval.methods.faq import HybridParams, simulate_hybrid
from bayeval.models.factor import factor_prior, fit_factors
from bayeval.precision import enable_float64
from bayeval.loop.simulate import simulate
enable_float64()
m = load_dataset("rte")
ref, rows = m.scores[:40, :60], m.scores[40:45, :60]
out = {}
method = make_method("random")
for d in (1, 2):  # 5 runs: on 2 devices the last chunk is padded
    r = simulate(method, ref, rows, list(range(5)), n_steps=20, devices=d)
    out[f"random{d}"] = [r.estimate.tolist(), r.items.tolist(), r.upper.tolist()]
fit = fit_factors(ref, 2, 0.1)
mean0, cov0 = factor_prior(fit.U)
for d in (1, 2):
    o = simulate_hybrid(fit.V, mean0, cov0, rows, np.arange(5), np.arange(5),
                        HybridParams(1.0, 0.0, 0.0, 0.05), 12, chunk=4, devices=d)
    out[f"faq{d}"] = [o.theta.tolist(), o.var.tolist(), o.distinct.tolist()]
print(json.dumps(out))
"""


def test_runs_split_over_two_devices_equal_one_device():
    """The same runs on 1 and on 2 CPU devices (a fresh process: the device count is set
    before JAX starts): the same items and, to rounding, the same estimates."""
    done = subprocess.run([sys.executable, "-c", DEVICES_SCRIPT], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["random1"][1] == out["random2"][1]  # items: exactly
    assert out["faq1"][2] == out["faq2"][2]  # distinct items drawn: exactly
    # estimates: one device's batch of 5 against two of 3 and 2; elementwise float64
    # arithmetic on the same inputs, so at most a few ulps apart
    for name in ("random", "faq"):
        for a, b in zip(out[f"{name}1"], out[f"{name}2"], strict=True):
            np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float),
                                       rtol=1e-12, atol=1e-14)


def test_text_arrays_round_trip_without_pickle(tmp_path):
    """Text columns (object arrays in pandas) are stored as Unicode, so the saved unit is
    read back rather than silently recomputed."""
    cache = ResultCache(tmp_path)
    unit = _units(1)[0]
    cache.put(unit, {"table/method": pd.Series(["random", "BestRand"]).to_numpy(),
                     "table/mae": np.array([0.1, 0.2])})
    back = cache.get(unit)
    assert back is not None and back["table/method"].tolist() == ["random", "BestRand"]


def test_estimation_units_are_reused_with_the_same_curves(tmp_path):
    from bayeval.data import load_dataset
    from bayeval.data.matrix import ScoreMatrix
    from bayeval.experiments.estimation import run_estimation

    full = load_dataset("rte")
    matrix = ScoreMatrix(full.scores[:40, :50], full.models[:40], full.items[:50], name="toy")
    lines: list[str] = []
    kwargs = dict(regimes=("interpolation",), methods=("random",), n_targets=2, seeds=2,
                  n_steps=15, out=tmp_path, log=lines.append)
    first, stops = run_estimation(matrix, **kwargs)
    assert not any("reusing" in line for line in lines)
    again, stops2 = run_estimation(matrix, **kwargs)
    assert any("reusing 2 of 2" in line for line in lines)
    pd.testing.assert_frame_equal(first, again)
    pd.testing.assert_frame_equal(stops, stops2)


def test_a_changed_method_default_is_not_served_from_the_cache(tmp_path, monkeypatch):
    """A unit is keyed by every parameter of its method spec, defaults included: after a
    release changes a default, the same spec is run anew, not read from the cache."""
    from bayeval.data import load_dataset
    from bayeval.data.matrix import ScoreMatrix
    from bayeval.experiments.estimation import run_estimation
    from bayeval.methods import base

    full = load_dataset("rte")
    matrix = ScoreMatrix(full.scores[:40, :50], full.models[:40], full.items[:50], name="toy")
    lines: list[str] = []
    kwargs = dict(regimes=("interpolation",), methods=("random",), n_targets=2, seeds=2,
                  n_steps=15, out=tmp_path, log=lines.append)
    run_estimation(matrix, **kwargs)
    original = base._REGISTRY["random"]

    def changed(epsilon: float = 0.1, min_n: int = 31, level: float = 0.95):
        return original(epsilon=epsilon, min_n=min_n, level=level)

    monkeypatch.setitem(base._REGISTRY, "random", changed)
    run_estimation(matrix, **kwargs)
    assert not any("reusing" in line for line in lines)


def test_compiled_programs_go_where_jax_or_xdg_says(tmp_path, monkeypatch):
    """keep_compiled_programs: JAX's own JAX_COMPILATION_CACHE_DIR when set (the tests
    set it, conftest.py), else $XDG_CACHE_HOME/bayeval/jax."""
    import jax

    from bayeval.devices import keep_compiled_programs

    before = jax.config.jax_compilation_cache_dir
    try:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
        keep_compiled_programs()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "jax")
        monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
        keep_compiled_programs()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "xdg" / "bayeval" / "jax")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(),
                    reason="no /proc/self/maps: memory mappings are counted on Linux only")
def test_released_programs_give_their_memory_mappings_back_and_run_again():
    """release_compiled_programs: below its share of vm.max_map_count nothing is dropped;
    above it the compiled programs' mappings go back to the kernel (each loaded program
    holds several, counted in /proc/self/maps) and a dropped program computes the same
    again. Without it a process running ~10,000 programs reached the limit and crashed."""
    import jax
    import jax.numpy as jnp

    from bayeval.devices import memory_maps, release_compiled_programs

    assert not release_compiled_programs(share=1.0)  # a test process is far from the limit
    fns = [jax.jit(lambda x, k=k: jnp.tanh(x * k).sum() + k) for k in range(20)]
    first = [float(f(jnp.arange(3.0))) for f in fns]
    held = memory_maps()[0]
    assert release_compiled_programs(share=0.0)
    # each program holds several mappings (adjacent ones of equal protection may merge,
    # so not an exact count); without the release the count would only grow
    assert memory_maps()[0] <= held - 20
    assert [float(f(jnp.arange(3.0))) for f in fns] == first


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "slurm"}, "unknown executor 'slurm'"),
    ({"workers": 0}, "--workers must be at least 1, got 0"),
    ({"address": "auto"}, "give it with --executor ray"),
])
def test_an_executor_refuses_what_it_cannot_run(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Executor(**kwargs)


def test_the_bench_cli_refuses_an_address_without_ray(tmp_path):
    from typer.testing import CliRunner

    from bayeval.cli import app

    done = CliRunner().invoke(app, ["bench", "selection", "--datasets", "rte", "--address",
                                    "auto", "--out", str(tmp_path)])
    assert done.exit_code != 0
    assert "--address is the Ray cluster's: give it with --executor ray" in done.output
    assert not (tmp_path / "units").exists()


def test_clustered_coverage_against_its_closed_form():
    # the cluster-robust SE of a coverage share: with one run per cluster it is the
    # binomial SE times sqrt(n/(n−1)); with clusters, against the sandwich computed by
    # dense algebra (X = 1, residuals e, cluster indicator matrix C: (X'X)⁻¹ X'C C'X
    # (X'X)⁻¹ e-weighted, times G/(G−1)); identical runs in a cluster widen it
    from bayeval.experiments.metrics import clustered_coverage, coverage

    rng = np.random.default_rng(0)
    y = rng.random(200) < 0.9
    share, se = clustered_coverage(y, np.arange(200))
    assert share == coverage(y)[0]
    assert se == pytest.approx(coverage(y)[1] * np.sqrt(200 / 199), rel=1e-12)
    clusters = rng.integers(0, 30, 200)
    e = y - y.mean()
    C = (clusters[:, None] == np.unique(clusters)[None, :]).astype(float)
    G = C.shape[1]
    dense = np.sqrt(G / (G - 1) * (e @ C @ C.T @ e)) / 200
    assert clustered_coverage(y, clusters)[1] == pytest.approx(dense, rel=1e-12)
    copies = np.repeat(y[:40], 5)  # each run five times: five times the weight of one
    assert clustered_coverage(copies, np.repeat(np.arange(40), 5))[1] > 2 * coverage(
        copies)[1]
