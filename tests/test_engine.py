"""The one loop: every registered method runs the same in the Session and the simulator,
and the package's layering has no arrow upward."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pytest

from bayeval.data import ScoreMatrix
from bayeval.loop.session import Session
from bayeval.loop.simulate import simulate
from bayeval.methods import make_method, method_names

STEPS = 18  # conftest.METHOD_SETTINGS re-fit, compact and stop within these rounds


@pytest.fixture(scope="module")
def world(engine_world):
    return engine_world


@pytest.mark.parametrize("name", method_names())
def test_session_and_simulator_make_the_same_run(world, name, method_settings):
    reference, target = world
    method = make_method(name, **method_settings.get(name, {}))
    seed = 11
    if method.several_targets:
        _same_run_with_two_targets(method, reference, target, seed)
        return
    _same_run(method, reference, target, seed, name)


def test_session_and_simulator_make_the_same_run_with_the_stacked_predictor(world,
                                                                                method_settings):
    reference, target = world
    method = make_method("active-pai", **method_settings["active-pai"], predictor="stacked")
    _same_run(method, reference, target, 11, "active-pai")


def _same_run(method, reference, target, seed, name):
    """The Session's run of ``method`` is the simulator's up to the Session's stop."""
    sim = simulate(method, reference.scores, target[None], [seed], n_steps=STEPS)
    session = Session(reference, "new", method, seed=seed, max_items=STEPS)
    while not session.done:
        for item in session.ask():
            session.tell(item, float(target[reference.item_index(item)]))
    n = session.n_observed
    # the session ends at the rule's stop (or the budget); the simulator records the stop
    # and runs on: the session's run is the simulator's up to there
    assert int(sim.stop_n[0]) == (n if session.stop_reason.startswith("stopping rule")
                                  else 0)
    assert n >= 5
    drawn = [reference.item_index(item) for item, _ in session.observations]
    np.testing.assert_array_equal(drawn, sim.items[0, :n])
    history = np.array([h[1:] for h in session.history])
    # irt re-fits the ability by NUTS, warm-started from the last re-fit: the simulator's
    # vmapped program and the session's unbatched one round float64 sums in another
    # order, and the sampler's trajectories carry that from ~3e-9 relative at the first
    # re-fit to ~2e-6 at the second (jax 0.10; far below NUTS's own Monte Carlo error of
    # ~1e-2), so irt's estimates are held to 1e-4 while its draws stay identical; every
    # other method is exact up to 1e-9
    rtol, atol = (1e-4, 1e-5) if name == "irt" else (1e-9, 1e-9)
    np.testing.assert_allclose(history[:, 0], sim.estimate[0, :n], rtol=rtol,
                               atol=min(atol, 1e-12) if name != "irt" else atol)
    np.testing.assert_allclose(history[:, 1], np.clip(sim.lower[0, :n], 0, 1), atol=atol)
    np.testing.assert_allclose(history[:, 2], np.clip(sim.upper[0, :n], 0, 1), atol=atol)
    # each score's prediction before it was observed (the domain check reads them)
    predicted = [m for _, m in session._predicted]
    np.testing.assert_allclose(predicted, sim.predicted[0, :n], rtol=rtol, atol=atol)


def _same_run_with_two_targets(method, reference, target, seed):
    """A method with a target axis: the world's target and its last reference model as
    two targets; the simulator's cells t · N + i, per-target estimates and stops are the
    Session's."""
    last = reference.models[-1]
    rest = reference.drop_models([last])
    rows = np.stack([target, reference.row(last)])
    names = ["new", last]
    sim = simulate(method, rest.scores, rows[None], [seed], n_steps=STEPS)
    session = Session(rest, names, method, seed=seed, max_items=STEPS)
    while not session.done:
        (t, item), = session.ask()
        session.tell(item, float(rows[names.index(t), rest.item_index(item)]), target=t)
    n = session.n_observed
    # the design is 2 × 4 pairs; re-fits after the 8th and 14th observation
    assert n >= 10 and len(session.refits) == sum(k <= n for k in (8, 14))
    cells = [names.index(t) * rest.n_items + rest.item_index(item)
             for t, item, _ in session.observations]
    np.testing.assert_array_equal(cells, sim.items[0, :n])
    np.testing.assert_array_equal(session.stopped_at, sim.stop_n[0])
    for k, (_, t, value, lower, upper) in enumerate(session.history):
        col = names.index(t)
        assert value == pytest.approx(sim.estimate[0, k, col], rel=1e-9, abs=1e-12)
        assert (lower, upper) == pytest.approx(tuple(np.clip(
            [sim.lower[0, k, col], sim.upper[0, k, col]], 0, 1)), abs=1e-9)
    assert int(sim.refits[0]) == 2  # the simulator runs all STEPS
    if session.stop_reason.startswith("every target met"):
        assert np.all(sim.stop_n[0] > 0) and sim.stop_n[0].max() == n


# The layers of docs/architecture.md, lowest first. A part may import parts of its own layer
# or below (same-layer imports must not form a cycle); the package root (the public API)
# is above them all.
LAYERS = [
    {"types", "errors", "precision", "devices", "hparams"},
    {"data"},
    {"records"},
    {"models"},
    {"inference"},
    {"acquisition", "stopping", "estimators", "compression"},
    {"methods"},
    {"loop", "evaluators", "selection"},
    {"evaluation"},
    {"experiments"},
    {"cli"},
]
PACKAGE = Path(__file__).resolve().parents[1] / "bayeval"


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "bayeval" else None


def _imports() -> dict[tuple[str, str], list[str]]:
    """(importing part, imported part) → the files with such an import, for every import
    (top-level or inside a function) between two parts of the package."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        here = _part(".".join(rel.parts))
        if here is None or here == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
                if node.module == "bayeval":  # names that are parts, not the API's names
                    targets = [f"bayeval.{a.name}" for a in node.names
                               if (PACKAGE / a.name).is_dir()
                               or (PACKAGE / f"{a.name}.py").exists()]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                there = _part(target)
                if there is not None and there != here:
                    edges.setdefault((here, there), []).append(str(rel))
    return edges


def test_layering_has_no_arrow_upward_and_no_cycle():
    layer = {part: i for i, parts in enumerate(LAYERS) for part in parts}
    actual = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
              if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.stem != "__init__"}
    assert actual == set(layer), f"parts without a layer: {sorted(actual - set(layer))}"
    edges = _imports()
    upward = {f"{a} → {b} ({files[0]})" for (a, b), files in edges.items()
              if layer[a] < layer[b]}
    assert not upward, sorted(upward)
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(a for a in graph if reaches(a, a, {a}))
    assert not cycles, f"import cycles through {cycles}"


def test_the_root_holds_the_ground_floor_and_earlier_paths_still_import():
    # the package's tree shows the loop: beside its folders the root holds only the ground
    # floor (layer 0) and the public API
    root = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert root == LAYERS[0], sorted(root ^ LAYERS[0])
    # every module that moved is importable from where it was, as the same module object
    # (so a patch of one is a patch of the other), its spec its own
    import importlib

    import bayeval

    for earlier, now in bayeval.MOVED.items():
        assert importlib.import_module(earlier) is importlib.import_module(now), earlier
        assert importlib.import_module(now).__spec__.name == now
        assert not (PACKAGE / f"{earlier.split('.')[1]}.py").exists()
    from bayeval.session import Session as Earlier
    from bayeval.simulate import simulate

    assert Earlier is bayeval.Session and bayeval.simulate is simulate  # not the module
    from bayeval.evaluators import MatrixOracle
    from bayeval.evaluators.base import MatrixOracle as Base

    assert MatrixOracle is Base


def test_layering_check_sees_an_upward_import(tmp_path, monkeypatch):
    # the check itself: a models/ file importing inference/ is reported
    fake = tmp_path / "bayeval"
    (fake / "models").mkdir(parents=True)
    (fake / "models" / "x.py").write_text("from bayeval.inference.base import Backend\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert _imports() == {("models", "inference"): ["bayeval/models/x"]}


def _module_graph(package: Path) -> dict[str, set[str]]:
    """module → the package's modules it imports (at the top or inside a function)."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def module(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                there = module(target) if target.startswith(package.name) else None
                if there and there != name:
                    graph.setdefault(name, set()).add(there)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected parts of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(part) > 1:
                found.append(sorted(part))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_the_package_modules(tmp_path):
    # every import of every module, function-level ones included: no two modules need
    # each other, directly or round a longer loop
    assert not _cycles(_module_graph(PACKAGE)), _cycles(_module_graph(PACKAGE))
    # the check can fail: a private helper imported back and forth is found
    fake = tmp_path / "bayeval"
    (fake / "cli").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "cli" / "__init__.py").write_text("")
    (fake / "cli" / "a.py").write_text("def f():\n    from bayeval.cli.b import _g\n")
    (fake / "cli" / "b.py").write_text("from bayeval.cli.c import h\n")
    (fake / "cli" / "c.py").write_text("from bayeval.cli import a\n")
    assert _cycles(_module_graph(fake)) == [["bayeval.cli.a", "bayeval.cli.b",
                                             "bayeval.cli.c"]]


def _private_imports(folder: Path) -> list[str]:
    """``module: name`` for every private name a module of ``folder`` imports from
    another module of the package."""
    found = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bayeval"):
                found += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_command_module_imports_a_private_name(tmp_path):
    # a command reaches the library through its public names only
    assert not _private_imports(PACKAGE / "cli"), _private_imports(PACKAGE / "cli")
    (tmp_path / "x.py").write_text("from bayeval.cli.evaluate import _true_score\n"
                                   "from bayeval import __version__\n")
    assert _private_imports(tmp_path) == ["x.py: bayeval.cli.evaluate._true_score"]


def _long_bodies(folder: Path, limit: int) -> list[str]:
    """``file:function (lines)`` for each function whose body, its docstring and its
    signature aside, is over ``limit`` lines."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body
            if (len(body) > 1 and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                body = body[1:]
            lines = node.end_lineno - body[0].lineno + 1
            if lines > limit:
                found.append(f"{path.name}:{node.name} ({lines})")
    return found


def _method_subclasses(root: Path) -> list[str]:
    """Classes under ``root`` derived from Method (by the name of a base)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    (b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)) == "Method"
                    for b in node.bases):
                found.append(f"{path.relative_to(root)}:{node.name}")
    return found


def test_a_target_axis_is_a_part_not_an_override_of_the_hooks(tmp_path):
    # every method, one target or several, is a Method composed of parts (the several
    # targets' turns and joint backend among them): no subclass overrides the hooks, so a
    # joint run and a one-target run go through the same Session and simulator code (the
    # same-run test above runs both)
    from bayeval.inference.base import RefitInPieces
    from bayeval.methods import Method
    from bayeval.methods.targets import OneTarget, TargetTurns

    assert _method_subclasses(PACKAGE) == []
    (tmp_path / "x.py").write_text("from bayeval import methods\n"
                                   "class J(methods.Method):\n    pass\n")
    assert _method_subclasses(tmp_path) == ["x.py:J"]
    for name in method_names():
        method = make_method(name)
        assert type(method) is Method, name
        several = name.endswith("-joint")
        assert isinstance(method.turns, TargetTurns if several else OneTarget), name
        assert method.several_targets == several
        # the joint posterior's state is re-fitted in pieces in a Session (its buffers
        # donated); no one-target backend needs that
        assert isinstance(method.backend.settings, RefitInPieces) == several, name


def test_the_command_line_is_a_shell_under_1800_lines():
    # what the commands do is in the library (bayeval.evaluate, the benches' run_*_bench,
    # the results' summaries, the settings' meanings); bayeval/cli parses, calls, prints
    lines = sum(len(p.read_text(encoding="utf-8").splitlines())
                for p in (PACKAGE / "cli").glob("*.py"))
    assert lines < 1800, lines


def test_the_command_line_is_a_shell_of_short_functions(tmp_path):
    # each command parses, calls the library and prints: no function body in bayeval/cli
    # over 60 lines (the options of its signature aside)
    assert not _long_bodies(PACKAGE / "cli", 60), _long_bodies(PACKAGE / "cli", 60)
    (tmp_path / "x.py").write_text('def f(\n    a=1,\n):\n    """doc."""\n'
                                   + "    a += 1\n" * 61)
    assert _long_bodies(tmp_path, 60) == ["x.py:f (61)"]
    assert _long_bodies(tmp_path, 61) == []


def test_batch_draw_probabilities_are_sequential_and_match_the_draws():
    # q of the j-th item of a batch is its probability with the batch's earlier items
    # removed (docs/methods.md §9 "Batches"): against enumeration of the ordered pairs, and
    # against the frequencies of Gumbel-top-2 draws (20 000 draws: each pair's count is
    # within 5 binomial SE, a miss chance below 1e-5 for any of the 12 pairs)
    import jax
    import jax.numpy as jnp

    from bayeval import acquisition as acq

    log_w = jnp.log(jnp.array([1.0, 2.0, 3.0, 4.0, 9.0]))
    available = jnp.array([True, True, True, True, False])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    pairs = {(a, b): w[a] / w.sum() * w[b] / (w.sum() - w[a])
             for a in range(4) for b in range(4) if a != b}
    for (a, b), p in pairs.items():
        q = acq.sample.probabilities(log_w, available, jnp.array([a, b]))
        assert float(q[0] * q[1]) == pytest.approx(p, rel=1e-12)
    keys = jax.random.split(jax.random.key(3), 20_000)
    draws = np.asarray(jax.vmap(lambda k: acq.sample(k, log_w, available, 2))(keys))
    for (a, b), p in pairs.items():
        count = np.sum((draws[:, 0] == a) & (draws[:, 1] == b))
        assert abs(count - 20_000 * p) < 5 * np.sqrt(20_000 * p * (1 - p))
    # with replacement: independent draws over everything available; argmax: certain
    q = acq.sample_with_replacement.probabilities(log_w, available, jnp.array([3, 3]))
    np.testing.assert_allclose(q, [0.4, 0.4], rtol=1e-12)
    assert np.all(np.asarray(acq.argmax.probabilities(log_w, available, jnp.array([3]))) == 1)


def test_a_design_based_estimator_refuses_a_deterministic_policy():
    from bayeval import acquisition as acq
    from bayeval.errors import BayevalError
    from bayeval.estimators import pai
    from bayeval.methods import Method
    from bayeval.methods.baselines import random_sample_mean
    from bayeval.stopping import rules as stop

    backend = random_sample_mean().backend
    with pytest.raises(BayevalError, match="does not give"):
        Method("x", backend, acq.uniform(), acq.argmax, stop.budget(5),
               estimator=pai.estimator())
    Method("x", backend, acq.uniform(), acq.sample, stop.budget(5), estimator=pai.estimator())


def test_import_leaves_jax_in_32_bit_and_a_session_needs_no_set_up_call():
    # import bayeval touches no JAX setting; a Session (like evaluate and resume) turns on
    # 64-bit floats itself; the simulator's entry point still says so in one line
    import subprocess

    code = (
        "import jax, bayeval\n"
        "assert not jax.config.jax_enable_x64\n"
        "from bayeval import Session, load_dataset\n"
        "from bayeval.methods import make_method\n"
        "try:\n"
        "    make_method('random').init(load_dataset('mrpc').scores, 4, jax.random.key(0))\n"
        "except bayeval.BayevalError as exc:\n"
        "    print(exc)\n"
        "print(Session(load_dataset('mrpc'), 'new', 'random').estimate())\n"
        "assert jax.config.jax_enable_x64\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("method 'random' needs 64-bit floats, and JAX is in 32-bit mode: "
                        "call bayeval.enable_float64() once at the start of your program")
    assert lines[1].startswith("(0.5, 0.0, 1.0)")


def test_a_failed_refit_reaches_the_session_and_the_simulator(fragile_refit):
    from bayeval import acquisition as acq
    from bayeval.inference.exact import ExactBucketGP
    from bayeval.loop.session import RefitWarning
    from bayeval.methods import Method
    from bayeval.stopping import rules as stop

    fragile, ref = fragile_refit
    target = (np.random.default_rng(5).random(100) < 0.5).astype(float)
    method = Method("fragile", ExactBucketGP(refit_every=40, kernel=fragile).backend(),
                    acq.uniform(), acq.sample, stop.budget(45))
    matrix = ScoreMatrix(ref, [f"m{i}" for i in range(9)], [f"i{j}" for j in range(100)])
    session = Session(matrix, "new", method, seed=2)
    with pytest.warns(RefitWarning, match="re-fit after observation 40 failed"):
        session.run(lambda item: float(target[matrix.item_index(item)]))
    assert [r["n"] for r in session.refits] == [40] and not session.refits[0]["accepted"]
    sim = simulate(method, ref, target[None], [2], n_steps=45)
    assert int(sim.refits[0]) == 1 and int(sim.failed_refits[0]) == 1


def test_method_specs_read_none_true_false_as_text_where_the_default_is_text():
    """`active-pai(floor=none)` names the "none" floor: the spec reader turns the word into
    None, and a text parameter takes it back as text; a bool parameter keeps its bool."""
    from bayeval.methods.base import parse_method_spec

    name, params = parse_method_spec("active-pai(floor=none, anytime=true)")
    assert params == {"floor": None, "anytime": True}
    method = make_method(name, **params)
    assert method.params["floor"] == "none" and method.params["anytime"] is True
    assert "conditional floor" not in method.estimator.name and "anytime" in method.estimator.name
