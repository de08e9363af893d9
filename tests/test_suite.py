"""Suites (bayeval.loop.suite): the average's interval, the allocation against Neyman's, the
live suite against its simulated runs composed, the suite file and the CLI."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from bayeval.data import load_dataset
from bayeval.errors import BayevalError
from bayeval.estimators.interval import wilson_fpc_bounds, z_value
from bayeval.evaluators import MatrixOracle
from bayeval.loop.session import Session
from bayeval.loop.simulate import simulate
from bayeval.loop.suite import (
    NEVER,
    SuiteRule,
    SuiteRun,
    average_interval,
    compose,
    normalised_weights,
    task_seed,
)
from bayeval.methods import make_method

Z = z_value(0.95)


def test_the_average_interval_is_wald_when_symmetric_and_mover_otherwise():
    rng = np.random.default_rng(0)
    est = rng.uniform(0.3, 0.7, (50, 3))
    half = rng.uniform(0.01, 0.1, (50, 3))
    w = normalised_weights([1, 2, 3])
    value, lo, hi = average_interval(est, est - half, est + half, w)
    # symmetric intervals: the Wald interval of Σ w θ̂ with Var = Σ w² (h/z)², by hand
    for r in range(50):
        mean = sum(w[k] * est[r, k] for k in range(3))
        sd = math.sqrt(sum(w[k] ** 2 * (half[r, k] / Z) ** 2 for k in range(3)))
        assert value[r] == pytest.approx(mean)
        assert (lo[r], hi[r]) == pytest.approx((mean - Z * sd, mean + Z * sd))
    # asymmetric: each side from that side's half-widths (Zou & Donner 2008)
    below, above = half, 2 * half
    value, lo, hi = average_interval(est, est - below, est + above, w)
    assert np.allclose(value - lo, np.sqrt((w**2 * below**2).sum(1)))
    assert np.allclose(hi - value, np.sqrt((w**2 * above**2).sum(1)))
    with pytest.raises(BayevalError, match="positive"):
        normalised_weights([1, 0])


def test_the_allocation_is_neymans_and_stops_at_the_width():
    # trajectories whose variance is σ_k²/n exactly: the greedy rule's items are Neyman's
    # allocation n_k ∝ w_k σ_k / sqrt(c_k) (the optimum of Σ c n subject to Σ w² σ²/n fixed)
    sigma, costs, weights = np.array([0.5, 0.3, 0.4]), np.array([1.0, 4.0, 1.0]), [1, 2, 1]
    N = 5000
    n = np.arange(1, N + 1)
    half = [np.broadcast_to(Z * s / np.sqrt(n), (1, N)) for s in sigma]
    est = [np.full((1, N), 0.5)] * 3
    rule = SuiteRule(epsilon=0.02, n_min=5)
    r = compose(est, [0.5 - h for h in half], [0.5 + h for h in half], weights, rule, costs)
    w = normalised_weights(weights)
    neyman = w * sigma / np.sqrt(costs)
    # discrete greedy steps: within one item of the proportions
    assert np.allclose(r.n[0] / r.n[0].sum(), neyman / neyman.sum(), atol=2 / r.n[0].sum())
    assert 2 * Z * math.sqrt((w**2 * sigma**2 / r.n[0]).sum()) <= 0.02
    # its cost is the continuous optimum's, Σ c n with n_k = λ w σ / sqrt(c) and λ = Σ w σ
    # sqrt(c) / (ε / 2z)², to within a few items' cost (whole items, one step past it)
    lam = (w * sigma * np.sqrt(costs)).sum() / (0.02 / (2 * Z)) ** 2
    best = (costs * lam * neyman).sum()
    assert r.cost[0] == pytest.approx((r.n[0] * costs).sum())
    assert best <= r.cost[0] <= best + 3 * costs.max()
    # a budget stops it first
    short = compose(est, [0.5 - h for h in half], [0.5 + h for h in half], weights,
                    SuiteRule(epsilon=0.02, n_min=5, max_items=100), costs)
    assert short.items[0] == 100


def test_given_variances_allocate_whatever_the_intervals_say():
    # the intervals say σ = (0.5, 0.3, 0.4); planning variances say (0.2, 0.6, 0.2)²: the
    # items follow Neyman's proportions on the planning values, and the stop still reads
    # the intervals (the average's width from the trajectories is at most ε at the stop,
    # and one item less on every task would leave it wider)
    sigma, plan = np.array([0.5, 0.3, 0.4]), np.array([0.2, 0.6, 0.2])
    N = 5000
    n = np.arange(1, N + 1)
    half = [np.broadcast_to(Z * s / np.sqrt(n), (2, N)) for s in sigma]
    est = [np.full((2, N), 0.5)] * 3
    rule = SuiteRule(epsilon=0.04, n_min=5)
    # row 0 planned, row 1 planned with the true σ²: the interval-reading rule's items
    r = compose(est, [0.5 - h for h in half], [0.5 + h for h in half], [1, 1, 1], rule,
                variances=np.stack([plan**2, sigma**2]))
    live = compose(est, [0.5 - h for h in half], [0.5 + h for h in half], [1, 1, 1], rule)
    assert np.allclose(r.n[0] / r.n[0].sum(), plan / plan.sum(), atol=2 / r.n[0].sum())
    assert np.abs(r.n[1] - live.n[0]).max() <= 1
    width = 2 * Z * np.sqrt((sigma**2 / r.n[0]).sum()) / 3
    assert width <= 0.04 < 2 * Z * np.sqrt((sigma**2 / (r.n[0] - 1)).sum()) / 3


def test_a_task_epsilon_holds_every_task_to_its_width_too():
    # the same trajectories with a per-task width: the run goes on past the average's stop
    # until every task's interval is at most task_epsilon wide, and no further
    sigma = np.array([0.5, 0.1, 0.4])
    N = 5000
    n = np.arange(1, N + 1)
    half = [np.broadcast_to(Z * s / np.sqrt(n), (1, N)) for s in sigma]
    est = [np.full((1, N), 0.5)] * 3
    low, high = [0.5 - h for h in half], [0.5 + h for h in half]
    plain = compose(est, low, high, [1, 1, 1], SuiteRule(epsilon=0.05, n_min=5))
    both = compose(est, low, high, [1, 1, 1],
                   SuiteRule(epsilon=0.05, task_epsilon=0.06, n_min=5))
    widths = both.upper[0] - both.lower[0]
    assert np.all(widths <= 0.06) and both.average_upper[0] - both.average_lower[0] <= 0.05
    assert (plain.upper[0] - plain.lower[0]).max() > 0.06  # the average alone stops sooner
    # each task stops at the first n whose width is ≤ 0.06, unless the average asked more
    first = np.ceil((2 * Z * sigma / 0.06) ** 2).astype(int)
    assert np.all(both.n[0] >= np.minimum(first, plain.n[0]))
    assert np.all(both.n[0] <= np.maximum(first, plain.n[0]) + 1)


def test_uniform_sampling_composed_covers_the_average():
    # 2000 suites of three tasks sampled uniformly without replacement, each task's interval
    # Wilson–FPC (RS-Mean's): the MOVER average at the adaptive stop covers at the nominal
    # level (SE at 2000 runs ≈ 0.005: 0.93 is three SEs under 0.945). The allocation and the
    # stop read the tasks' intervals, so an interval that collapses on an unlucky run starves
    # its task: with Wald–FPC intervals instead the same suites cover 0.91 at this ε
    rng = np.random.default_rng(1)
    R, sizes, rates = 2000, (200, 300, 250), (0.2, 0.5, 0.85)
    est, low, high, truth = [], [], [], []
    for N, p in zip(sizes, rates, strict=True):
        pop = (rng.random(N) < p).astype(float)
        draws = pop[np.argsort(rng.random((R, N)), 1)]
        n = np.arange(1, N + 1)
        mean = np.cumsum(draws, 1) / n
        lower, upper = wilson_fpc_bounds(mean, n.astype(float), N, Z)
        est.append(mean)
        low.append(np.asarray(lower))
        high.append(np.asarray(upper))
        truth.append(pop.mean())
    r = compose(est, low, high, [1, 1, 1], SuiteRule(epsilon=0.08, n_min=30))
    covered = (r.average_lower <= np.mean(truth)) & (np.mean(truth) <= r.average_upper)
    assert covered.mean() >= 0.93, covered.mean()
    assert np.all(r.average_upper - r.average_lower <= 0.08)


@pytest.fixture(scope="module")
def two_tasks():
    """Two small tasks (RTE 60 items, MRPC 80, 24 reference models each) and a target row
    of each."""
    out = []
    for name, n_items in (("rte", 60), ("mrpc", 80)):
        m = load_dataset(name)
        m = m.select_items(np.arange(n_items)).select_models(np.arange(25))
        out.append((name, m, str(m.models[24])))
    return out


@pytest.mark.parametrize(("batch", "budget", "variances"),
                         [(1, None, None), (4, None, None), (4, 22, None),
                          (4, None, (0.02, 0.3))])
def test_a_live_suite_is_its_simulated_runs_composed(two_tasks, batch, budget, variances):
    method = make_method("active-pai", epsilon=NEVER, n_min=8)
    rule = SuiteRule(epsilon=0.2, n_min=8, max_items=budget)
    weights, costs = [1.0, 2.0], [1.0, 1.5]
    for seed in (batch,):  # a seed per case
        sessions, evaluators, runs = [], [], []
        for k, (_, m, target) in enumerate(two_tasks):
            ref = m.drop_models([target])
            sessions.append(Session(ref, target, method, seed=task_seed(seed, k)))
            evaluators.append(MatrixOracle(m, target))
            runs.append(simulate(method, ref.scores, m.scores[[m.model_index(target)]],
                                 [task_seed(seed, k)], batch=batch))
        live = SuiteRun([t[0] for t in two_tasks], sessions, weights, rule, costs, variances)
        live.run(evaluators, batch)
        done = compose([r.estimate for r in runs], [r.lower for r in runs],
                       [r.upper for r in runs], weights, rule, costs, batch,
                       None if variances is None else np.array(variances))
        assert [s.n_observed for s in sessions] == list(done.n[0])
        assert 8 < sum(done.n[0]) < 140  # stopped on the width or the budget, not at the end
        for k, s in enumerate(sessions):
            value, lower, upper = s.estimate()
            assert (value, lower, upper) == pytest.approx(
                (done.estimate[0, k], done.lower[0, k], done.upper[0, k]), abs=1e-12)
        assert live.average() == pytest.approx(
            (done.average[0], done.average_lower[0], done.average_upper[0]), abs=1e-12)
        assert live.result()["cost"] == pytest.approx(done.cost[0])
        # with a budget of 22 (the warm-up takes 16), the last batch of 4 is cut to fit
        assert live.stop_reason.startswith("budget of 22 items" if budget else
                                           "average's interval at most 0.2")
        assert budget is None or sum(done.n[0]) == budget


# two GLUE tasks, each with its target held out of its reference (the CLI tests share
# these shapes, so their programs compile once)
GLUE = ("[[tasks]]\ndataset = 'rte'\ntarget = 'rte-model-003'\n"
        "[[tasks]]\ndataset = 'mrpc'\ntarget = 'mrpc-model-003'\n")


def _suite_file(path, text: str | bytes):
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("epsilon = 0.1\n", "needs two or more [[tasks]]"),
    ("[[tasks]]\ndataset = 'rte'\n[[tasks]]\ndataset = 'rte'\n", "two tasks are named 'rte'"),
    ("[[tasks]]\ndataset = 'rte'\n[[tasks]]\ndataset = 'mrpc'\nweight = -1\n",
     "task 2: weight must be a positive finite number"),
    ("[[tasks]]\ndataset = 'rte'\n[[tasks]]\ndataset = 'mrpc'\ncost = inf\n",
     "task 2: cost must be a positive finite number, got inf"),
    ("[[tasks]]\ndataset = 'rte'\ncommand = 5\n[[tasks]]\ndataset = 'mrpc'\n",
     "task 1: command must be a string, got 5"),
    ("[[tasks]]\ndataset = 'rte'\nname = \"a\\u0000b\"\n[[tasks]]\ndataset = 'mrpc'\n",
     "task 1: the task name 'a\\x00b' cannot name its files"),
    ("[[tasks]]\ndataset = 'rte'\nname = '../../escape'\n[[tasks]]\ndataset = 'mrpc'\n",
     "task 1: the task name '../../escape' cannot name its files"),
    (b"[[tasks]]\ndataset = 'rte'\nname = 'caf\xe9'\n[[tasks]]\ndataset = 'mrpc'\n",
     "not UTF-8 text (byte 37 is 0xe9)"),
    ("".join(f"[[tasks]]\ndataset = 'rte'\nname = 't{k}'\n" for k in range(1001)),
     "1001 tasks; a suite holds at most 1000"),
    ("[[tasks]]\ndataset = 'rte'\nwieght = 1\n[[tasks]]\ndataset = 'mrpc'\n",
     "task 1: unknown key 'wieght'"),
    ("[[tasks]]\nname = 'a'\n[[tasks]]\ndataset = 'mrpc'\n",
     "task 1: give either dataset or reference"),
    ("epsilon = 2\n[[tasks]]\ndataset = 'rte'\n[[tasks]]\ndataset = 'mrpc'\n",
     "epsilon must be in (0, 1)"),
    ("[[tasks]\n", "not a readable suite file"),
    ("[[tasks]]\ndataset = 'rte'\n[[tasks]]\ndataset = 'mrpc'\n",
     "target 'rte-model-000' is not a model of mrpc"),
])
def test_a_bad_suite_file_is_one_line(tmp_path, cli, text, message):
    done = cli("evaluate", "--suite", _suite_file(tmp_path / "s.toml", text),
               "--target", "rte-model-000", "-q")
    assert done.returncode == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


@pytest.mark.parametrize(("text", "message"), [
    ("tasks:\n  - dataset: rte\n    weight: 1\n    weight: 9\n  - dataset: mrpc\n",
     "key 'weight' is given twice (line 2)"),
    # a billion laughs: 9⁷ copies of "x" if the aliases were expanded
    ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     + "".join(f"{x}: &{x} [{', '.join([f'*{p}'] * 9)}]\n"
               for p, x in zip("bcdef", "cdefg", strict=True))
     + "tasks:\n  - dataset: rte\n    name: *g\n  - dataset: mrpc\n",
     "more than 50 YAML aliases"),
])
def test_a_yaml_suite_refuses_repeated_keys_and_alias_bombs(tmp_path, cli, text, message):
    pytest.importorskip("yaml")
    done = cli("evaluate", "--suite", _suite_file(tmp_path / "s.yaml", text), "-q")
    assert done.returncode == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_a_budget_below_the_suites_tasks_is_refused_before_any_work(tmp_path, cli):
    text = "".join(f"[[tasks]]\ndataset = 'rte'\nname = 't{k}'\n" for k in range(8))
    done = cli("evaluate", "--suite", _suite_file(tmp_path / "s.toml", text), "--max-items",
               "6", "--journal", tmp_path / "run", "-q")
    assert done.returncode == 2 and "--limit 6 cannot give each of the suite's 8 tasks" \
        in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_suite_that_is_no_regular_file_is_said_so(tmp_path, cli):
    done = cli("evaluate", "--suite", tmp_path, "-q")
    assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr


def test_a_suite_folder_is_checked_as_a_journal_is(tmp_path, cli):
    # suite.json edited (a weight 1 → 9, two journal names swapped), or edited and sealed
    # anew with a journal outside the folder, a journal named twice or a weight "abc", or
    # the journal files swapped on disk: each resume is a one-line error, where once it
    # changed the average without a word, read outside the folder or raised a traceback
    import shutil

    from bayeval.records.journal_check import seal_header

    suite = _suite_file(tmp_path / "glue.toml", "epsilon = 0.1\n" + GLUE)
    folder = tmp_path / "run"
    done = cli("evaluate", "--suite", suite, "--journal", folder, "--max-items", "40", "-q")
    assert done.returncode == 0, done.stderr
    record = json.loads((folder / "suite.json").read_text())
    a, b = record["tasks"]

    def edited(tasks, seal):
        changed = {**record, "tasks": tasks}
        return seal_header(changed) if seal else changed

    cases = {
        "weight": (edited([{**a, "weight": 9.0}, b], False), "the record was altered"),
        "swapped names": (edited([{**a, "journal": b["journal"]},
                                  {**b, "journal": a["journal"]}], False), "altered"),
        "outside": (edited([{**a, "journal": "../outside.jsonl"}, b], True),
                    "journal '../outside.jsonl' is not a file of the suite's folder"),
        "twice": (edited([a, {**b, "journal": a["journal"]}], True),
                  f"journal '{a['journal']}' is named twice"),
        "abc": (edited([{**a, "weight": "abc"}, b], True),
                "weight must be a positive finite number, got 'abc'"),
        "no check": ({k: v for k, v in record.items() if k != "check"}, "lost its 'check'"),
    }
    for name, (text, message) in cases.items():
        copy = tmp_path / name
        shutil.copytree(folder, copy)
        (copy / "suite.json").write_text(json.dumps(text))
        again = cli("evaluate", "--resume", "--journal", copy, "--max-items", "60", "-q")
        lines = again.stderr.strip().splitlines()
        assert again.returncode == 2 and len(lines) == 1 and message in lines[0], (name,
                                                                                   again.stderr)
    copy = tmp_path / "files swapped"
    shutil.copytree(folder, copy)
    (copy / a["journal"]).rename(copy / "x")
    (copy / b["journal"]).rename(copy / a["journal"])
    (copy / "x").rename(copy / b["journal"])
    again = cli("evaluate", "--resume", "--journal", copy, "-q")
    assert again.returncode == 2 and "the journal of task 'mrpc' of this suite, not of task " \
        "'rte'" in again.stderr, again.stderr


def test_huge_weights_normalise_without_overflow():
    from bayeval.errors import BayevalError
    from bayeval.loop.suite import normalised_weights

    assert list(normalised_weights([1e308, 1e308])) == [0.5, 0.5]
    assert normalised_weights([1e308, 1e-300])[0] == 1.0
    with pytest.raises(BayevalError, match="positive numbers"):
        normalised_weights(["abc", 1])


def test_a_suite_from_the_command_line_resumes_with_a_larger_budget(tmp_path, cli):
    suite = _suite_file(tmp_path / "glue.toml", (
        "epsilon = 0.1\nmethod = 'active-pai(n_min=10)'\n"
        "[[tasks]]\ndataset = 'rte'\ntarget = 'rte-model-003'\n"
        "[[tasks]]\ndataset = 'mrpc'\nweight = 2\ntarget = 'mrpc-model-003'\n"))
    whole = cli("evaluate", "--suite", suite, "--journal", tmp_path / "a", "--json", "-q")
    assert whole.returncode == 0, whole.stderr
    a = json.loads(whole.stdout)
    assert [t["task"] for t in a["tasks"]] == ["rte", "mrpc"]
    assert [t["weight"] for t in a["tasks"]] == pytest.approx([1 / 3, 2 / 3])
    assert a["estimate"] == pytest.approx(sum(t["weight"] * t["estimate"] for t in a["tasks"]))
    assert a["upper"] - a["lower"] <= 0.1 and a["stopped"].startswith("average's interval")
    truth = (load_dataset("rte").model_means()[3] + 2 * load_dataset("mrpc").model_means()[3]) / 3
    assert a["true_score"] == pytest.approx(truth)
    # the same run cut by a budget, then resumed with a larger one: the same result
    cut = cli("evaluate", "--suite", suite, "--journal", tmp_path / "b", "--max-items", "25",
              "--json", "-q")
    assert json.loads(cut.stdout)["items_used"] == 25
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "00-rte.jsonl", "01-mrpc.jsonl", "suite.json"]
    again = cli("evaluate", "--resume", "--journal", tmp_path / "b", "--max-items", "5000",
                "--json", "-q")
    assert again.returncode == 0, again.stderr
    b = json.loads(again.stdout)
    for key in ("estimate", "lower", "upper", "items_used"):
        assert b[key] == a[key]
    assert [t["items_used"] for t in b["tasks"]] == [t["items_used"] for t in a["tasks"]]
    # the harness's results layout: each task under results, the suite under groups
    cli("evaluate", "--resume", "--journal", tmp_path / "b", "--harness-results",
        tmp_path / "r.json", "-q")
    record = json.loads((tmp_path / "r.json").read_text())
    assert set(record["results"]) == {"rte", "mrpc"}
    assert record["groups"]["glue"]["accuracy,none"] == pytest.approx(a["estimate"])
    # a path ending in a slash is a folder (made), the file inside it named as the harness
    cli("evaluate", "--resume", "--journal", tmp_path / "b", "--harness-results",
        f"{tmp_path / 'out'}/", "-q")
    [inside] = (tmp_path / "out").glob("results_*.json")
    assert set(json.loads(inside.read_text())["results"]) == {"rte", "mrpc"}


def test_a_suite_of_harness_tasks_is_written_with_the_harness_names(tmp_path, cli):
    # bundled matrices the harness produced carry its task and metric: the results file
    # names leaderboard_ifeval with prompt_level_strict_acc and arc_challenge with
    # acc_norm (not "ifeval" and "score"), records the ε asked for (not the tasks' own
    # never-stop ε), and the printed result names the target
    suite = _suite_file(tmp_path / "board.toml", (
        "epsilon = 0.2\n[[tasks]]\ndataset = 'ifeval'\n[[tasks]]\ndataset = 'arc_challenge'\n"))
    done = cli("evaluate", "--suite", suite, "--max-items", "40", "--harness-results",
               tmp_path / "r.json", "-q")
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "r.json").read_text())
    assert set(record["results"]) == {"leaderboard_ifeval", "arc_challenge"}
    assert "prompt_level_strict_acc,none" in record["results"]["leaderboard_ifeval"]
    assert "acc_norm,none" in record["results"]["arc_challenge"]
    assert record["higher_is_better"]["arc_challenge"] == {"acc_norm": True}
    assert record["bayeval"]["params"]["epsilon"] == 0.2
    assert f"target {record['model_name']} · method active-pai" in done.stdout
    # a single run from a file of the user's: its task is the file's stem, not its path
    from bayeval.data import write_csv

    write_csv(load_dataset("rte"), tmp_path / "my_rte.csv")
    one = cli("evaluate", "--reference", tmp_path / "my_rte.csv", "--max-items", "40",
              "--harness-results", tmp_path / "one.json", "-q")
    assert one.returncode == 0, one.stderr
    assert list(json.loads((tmp_path / "one.json").read_text())["results"]) == ["my_rte"]


def test_subtasks_of_a_task_that_is_no_group_is_one_line(cli):
    # (--subtasks itself: tests/test_lm_eval_harness.py, on a local group's logs and live)
    one = cli("evaluate", "--dataset", "ifeval", "--subtasks", "-q")
    assert one.returncode == 2 and "not a harness group" in one.stderr


def test_a_suite_runs_a_command_per_task_with_its_name(tmp_path, cli):
    # --evaluator command: {task} in --command is the task's name, so one command serves
    # every task; each item's call is logged by the command itself
    log = tmp_path / "calls.txt"
    suite = _suite_file(tmp_path / "s.toml", GLUE)
    done = cli("evaluate", "--suite", suite, "--evaluator", "command",
               "--command", f"echo {{task}} {{item}} >> {log}; echo 1", "--max-items", "12",
               "--method", "active-pai(n_min=4)", "--journal", tmp_path / "run", "--json",
               "-q")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    calls = [line.split() for line in log.read_text().splitlines()]
    assert len(calls) == r["items_used"] == 12
    for t in r["tasks"]:
        asked = [item for task, item in calls if task == t["task"]]
        assert len(asked) == t["items_used"] and all(i.startswith(t["task"]) for i in asked)
        assert t["true_score"] is None  # a command's scores: nothing to judge against


def _glue_answers(path):
    """A file of ``item score`` lines: the GLUE suite's target's scores, for a command
    that looks each answer up."""
    rows = []
    for name in ("rte", "mrpc"):
        m = load_dataset(name)
        rows += [f"{i} {s:g}" for i, s in zip(m.items, m.row(f"{name}-model-003"), strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _tells(folder) -> dict[str, list[tuple[str, float]]]:
    """Each task journal's (item, score) told, in order."""
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]
        out[path.name] = [(r["item"], r["score"]) for r in rows if r.get("event") == "tell"]
    return out


def test_a_suite_killed_mid_run_resumes_to_the_uninterrupted_result(tmp_path, cli,
                                                                    killed_when):
    # a live suite (a command that looks each answer up, slowly) SIGKILLed after its first
    # scores, then resumed: nothing journaled is lost and the result is the one an
    # uninterrupted run gives (the allocation reads only the tasks' journaled states)
    answers = _glue_answers(tmp_path / "answers.txt")
    suite = _suite_file(tmp_path / "s.toml", "epsilon = 0.1\n" + GLUE)
    args = ["evaluate", "--suite", str(suite), "--evaluator", "command",
            "--command", f"sleep 0.02; awk -v i={{item}} '$1 == i {{print $2}}' {answers}",
            "--method", "active-pai(n_min=10)", "--json", "-q"]
    whole = cli(*args, "--journal", tmp_path / "a")
    assert whole.returncode == 0, whole.stderr
    a = json.loads(whole.stdout)
    killed_when([*args, "--journal", tmp_path / "b"],
                lambda: (tmp_path / "b").exists()
                and sum(map(len, _tells(tmp_path / "b").values())) >= 25, 120)
    before = _tells(tmp_path / "b")
    assert 25 <= sum(map(len, before.values())) < a["items_used"]  # killed mid-run
    again = cli("evaluate", "--resume", "--journal", tmp_path / "b", "--json", "-q")
    assert again.returncode == 0, again.stderr
    b = json.loads(again.stdout)
    after = _tells(tmp_path / "b")
    for name, told in before.items():
        assert after[name][:len(told)] == told  # nothing lost or changed
    assert after == _tells(tmp_path / "a")  # the uninterrupted run's items and scores
    for key in ("estimate", "lower", "upper", "items_used"):
        assert b[key] == a[key]


def test_the_open_llm_leaderboard_suite_names_the_harness_tasks(tmp_path):
    # examples/suites/open_llm_leaderboard.toml: simulated, each task is reported (and
    # written with --harness-results) under the harness's own task and metric; with
    # --evaluator lm-eval each task would run the harness task its matrix names
    from typer.testing import CliRunner

    from bayeval.cli import app
    from bayeval.evaluation import RunSettings
    from bayeval.evaluation.sources import fresh_source
    from bayeval.evaluators.harness import harness_settings

    suite = Path(__file__).resolve().parents[1] / "examples/suites/open_llm_leaderboard.toml"
    done = CliRunner().invoke(app, ["evaluate", "--suite", str(suite), "--max-items", "120",
                                    "--harness-results", str(tmp_path / "r.json"), "--json",
                                    "-q"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert [t["task"] for t in result["tasks"]] == ["leaderboard_ifeval", "leaderboard_musr"]
    written = json.loads((tmp_path / "r.json").read_text())
    assert set(written["results"]) >= {"leaderboard_ifeval", "leaderboard_musr"}
    assert any(k.startswith("prompt_level_strict_acc")
               for k in written["results"]["leaderboard_ifeval"])
    assert any(k.startswith("acc_norm") for k in written["results"]["leaderboard_musr"])
    runs = []
    for task in RunSettings.from_file(suite).tasks:
        _, matrix = fresh_source(task.dataset, None)
        runs.append(harness_settings(matrix, "--model hf", None, None, None))
    assert [(r["task"], r["metric"]) for r in runs] == [
        ("leaderboard_ifeval", "prompt_level_strict_acc"), ("leaderboard_musr", "acc_norm")]
    assert runs[1]["subtasks"]  # the group's subtasks, as the harness runs them


def test_a_suite_keeps_k_evaluations_in_flight_across_its_tasks(tmp_path, cli):
    # --concurrency 3 on a suite: evaluations of both tasks overlap (at most 3 at once,
    # seen in the command's own start/end log), every drawn item is told once to its
    # task, the items in flight at the stop are told too, the average's interval meets ε,
    # and a resume of the finished folder reports the same result
    answers, log = _glue_answers(tmp_path / "answers.txt"), tmp_path / "log.txt"
    suite = _suite_file(tmp_path / "s.toml", "epsilon = 0.15\n" + GLUE)
    command = (f"echo + >> {log}; sleep 0.05; echo - >> {log}; "
               f"awk -v i={{item}} '$1 == i {{print $2}}' {answers}")
    done = cli("evaluate", "--suite", str(suite), "--evaluator", "command", "--command",
               command, "--concurrency", "3", "--method", "active-pai(n_min=10)",
               "--journal", tmp_path / "j", "--json", "-q")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    marks = log.read_text().split()
    depth = np.cumsum([1 if m == "+" else -1 for m in marks])
    assert 2 <= depth.max() <= 3 and depth[-1] == 0
    told = _tells(tmp_path / "j")
    assert all(len({i for i, _ in t}) == len(t) for t in told.values())  # each item once
    assert sum(map(len, told.values())) == result["items_used"] == marks.count("+")
    assert [t["items_used"] for t in result["tasks"]] == [len(t) for t in told.values()]
    assert result["upper"] - result["lower"] <= 0.15 or "budget" in result["stopped"]
    again = cli("evaluate", "--resume", "--journal", tmp_path / "j", "--json", "-q")
    assert again.returncode == 0, again.stderr
    b = json.loads(again.stdout)
    for key in ("estimate", "lower", "upper", "items_used"):
        assert b[key] == result[key]


@pytest.mark.parametrize(("option", "values", "message"), [
    ("costs", [1.0, 0.0], "suite costs must be positive, one per task, got [1.0, 0.0]"),
    ("costs", [1.0], "suite costs must be positive, one per task, got [1.0]"),
    ("variances", [0.2, float("nan")], "suite variances must be positive, one per task"),
    ("variances", [0.2, 0.1, 0.3], "suite variances must be positive, one per task")])
def test_a_live_suite_refuses_costs_or_variances_that_are_not_one_positive_per_task(
        option, values, message):
    with pytest.raises(BayevalError, match=re.escape(message)):
        SuiteRun(["a", "b"], [object(), object()], [1, 1], SuiteRule(), **{option: values})


def test_a_suite_benchs_units_are_keyed_by_the_methods_defaults_too(monkeypatch):
    # a unit cached under one default of a method must not stand for the same spec under
    # another default: the unit of "active-pai" carries every resolved parameter, and the
    # same spec with one default changed is another unit
    from bayeval.experiments import suite as bench_suite
    settings = {"tasks": ["a", "b"], "n_targets": 20, "reps": 5}
    plain = bench_suite.seed_unit("a", "active-pai", 3, settings)
    assert plain.settings["parameters"]["small_sample"] is True
    assert plain == bench_suite.seed_unit("a", "active-pai", 3, settings)
    assert plain != bench_suite.seed_unit("a", "active-pai", 4, settings)
    resolved = bench_suite.resolved_parameters
    monkeypatch.setattr(bench_suite, "resolved_parameters",
                        lambda spec: {**resolved(spec), "small_sample": False})
    assert plain != bench_suite.seed_unit("a", "active-pai", 3, settings)
