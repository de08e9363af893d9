"""Each bad-input case of ``tests/test_bad_input.py`` run against the command line of
several commits, one fresh folder per case, and what each did: a clean one-line error
(with its exit status), a traceback, a multi-line error, accepted (exit 0), or hung.

    python bench/bad_input_table.py --commits 036d780,HEAD --out docs/results/bad_input.md

``--doors`` runs instead every bad value of every setting of
``tests/test_setting_checks.py`` (wrong types, NaN, ±inf, negative, zero, fractional,
huge, empty) through the three doors a setting comes in by: ``bayeval.evaluate(...)`` in
Python, a run file (``bayeval evaluate --run FILE``) and the command's option where it has
one; each on the bundled rte with ``limit = 5`` (a bad value accepted runs five items),
and *changed files* when the run's journal was written.

    python bench/bad_input_table.py --doors --commits 6c8e540,HEAD

Every commit is unpacked with ``git archive`` into a temporary folder and run as
``python -c`` with that folder first on ``PYTHONPATH``, so the installed package and the
working tree do not mix in. The inputs a case names are written by that commit's own code
(its journal format included). A case is *changed files* when it created, changed or
removed anything in its folder.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_bad_input import CASES, _snapshot  # noqa: E402  (the cases and their snapshot)
from test_setting_checks import SETTINGS, _option, _toml  # noqa: E402  (the doors' values)

# the inputs the cases name, written by the unpacked commit's own code (its journal
# format included) through the test module's own writer
FILES = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(ROOT / "tests")!r})
from test_bad_input import _files
_files(Path("."))
"""

RUN = '''
import sys
from bayeval.cli import main
sys.argv = ["bayeval", *{argv!r}]
main()
'''


def unpack_commit(commit: str, into: Path) -> str:
    sha = subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return sha


# a bad setting given to bayeval.evaluate: a BayevalError is the one-line error the
# command would print (exit 2); anything else escapes as a traceback
PYTHON = '''
import sys
import bayeval
from bayeval.errors import BayevalError
try:
    bayeval.evaluate(dataset="rte", journal="run.jsonl", progress=False, **{kwargs})
except BayevalError as exc:
    print(f"error: {{exc}}", file=sys.stderr)
    sys.exit(2)
'''


def _py(value: object) -> str:
    """``value`` as Python source (a non-finite float as ``float('nan')``)."""
    if (isinstance(value, float) and value != value) or value in (float("inf"),
                                                                 float("-inf")):
        return f"float({str(value)!r})"
    return repr(value)


def door_cases() -> list[tuple[str, str, dict[str, object], dict[str, str]]]:
    """(name, code, its fields, files): every bad value of every setting through each
    door."""
    cases = []
    for name, (table, option, values) in sorted(SETTINGS.items()):
        for value in values:
            label = f"{name} = {_toml(value)}"
            limit = {} if name == "limit" else {"limit": "5"}
            kwargs = "{" + ", ".join(f"{k!r}: {v}" for k, v in
                                     {**limit, name: _py(value)}.items()) + "}"
            cases.append((f"python: {label}", PYTHON, {"kwargs": kwargs}, {}))
            line = f"{name} = {_toml(value)}"
            top = "\n".join([*(f"limit = {v}" for v in limit.values()),
                             *([line] if table is None else [])])
            evaluator = f"[evaluator]\n{line}\n" if table == "evaluator" else ""
            task = line if table == "tasks" else ""
            run = (f'{top}\njournal = "run.jsonl"\n{evaluator}[[tasks]]\n'
                   f'dataset = "rte"\n{task}\n')
            cases.append((f"run file: {label}", RUN,
                          {"argv": ["evaluate", "--run", "run.toml", "-q"]}, {"run.toml": run}))
            if option is not None:
                argv = ["evaluate", "--dataset", "rte", "--journal", "run.jsonl",
                        *(["--limit", "5"] if limit else []), option, _option(value), "-q"]
                cases.append((f"command: {option} {_option(value)}", RUN, {"argv": argv}, {}))
    return cases


def run_code(tree: Path, code: str, fields: dict[str, object], timeout: float,
             files: dict[str, str] | None = None) -> dict[str, object]:
    """``code`` (formatted with ``fields``, ``{tmp}`` in an argument the folder) run in a
    fresh folder holding the cases' inputs and ``files``: its outcome, exit status, first
    stderr line, seconds."""
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu",
           "HOME": str(tree)}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        made = subprocess.run([sys.executable, "-c", FILES], cwd=folder,
                              env={**env, "JAX_ENABLE_X64": "1"}, capture_output=True,
                              text=True)
        if made.returncode:
            raise RuntimeError(f"writing the inputs failed in {tree}:\n{made.stderr}")
        for file, text in (files or {}).items():
            (folder / file).write_text(text)
        before = _snapshot(folder)
        if "argv" in fields:
            fields = {"argv": [a.format(tmp=folder) if "{tmp}" in a else a
                               for a in fields["argv"]]}
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-c", code.format(**fields)], cwd=folder,
                                  env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"outcome": f"hung (> {timeout:.0f} s)", "code": "", "line": "",
                    "seconds": timeout}
        seconds = time.perf_counter() - start
        changed = _snapshot(folder) != before
    err = [line for line in done.stderr.strip().splitlines() if line.strip()]
    if "Traceback (most recent call last)" in done.stderr:
        outcome = "traceback"
        line = err[-1] if err else ""
    elif done.returncode == 0:
        outcome = "accepted (exit 0)"
        line = ""
    elif len(err) == 1:
        outcome = "one-line error"
        line = err[0]
    else:
        outcome = f"{len(err)}-line error"
        line = next((x for x in err if "rror" in x), err[0] if err else "")
    if changed:
        outcome += ", changed files"
    return {"outcome": outcome, "code": done.returncode, "line": line[:110],
            "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", default="036d780,HEAD",
                        help="comma-separated commits, the first being 'before'")
    parser.add_argument("--out", type=Path, default=None, help="markdown table to write")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    parser.add_argument("--only", default="", help="run only cases whose name has this")
    parser.add_argument("--doors", action="store_true",
                        help="every bad setting through Python, a run file and the command")
    opts = parser.parse_args()

    cases = (door_cases() if opts.doors else
             [(name, RUN, {"argv": [*argv, *(["-q"] if argv[0] == "evaluate" else [])]}, {})
              for name, argv, _ in CASES])
    cases = [c for c in cases if opts.only in c[0]]
    commits = opts.commits.split(",")
    results: dict[str, list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory() as root:
        for commit in commits:
            tree = Path(root) / commit.replace("/", "_")
            tree.mkdir()
            sha = unpack_commit(commit, tree)
            rows = []
            for i, (name, code, fields, files) in enumerate(cases, 1):
                row = run_code(tree, code, fields, opts.timeout, files)
                print(f"[{sha} {i}/{len(cases)}] {name}: {row['outcome']} "
                      f"({row['seconds']:.1f} s)", file=sys.stderr, flush=True)
                rows.append(row)
            results[sha] = rows
    shas = list(results)
    lines = [f"| case | {' | '.join(shas)} |", "|---|" + "---|" * len(shas)]
    for i, (name, *_) in enumerate(cases):
        cells = []
        for sha in shas:
            r = results[sha][i]
            cell = f"{r['outcome']}" + (f", exit {r['code']}" if r["code"] not in ("", 0)
                                        else "")
            cell += f", {r['seconds']:.1f} s"
            if r["line"]:
                cell += f": `{str(r['line']).replace('|', '/')}`"
            cells.append(cell)
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines.append("")
    for sha in shas:
        tally: dict[str, int] = {}
        for r in results[sha]:
            key = str(r["outcome"])
            tally[key] = tally.get(key, 0) + 1
        lines.append(f"- {sha}: " + ", ".join(f"{v} {k}" for k, v in sorted(tally.items())))
    write_table(lines, opts.out)


def write_table(lines: list[str], out: Path | None) -> None:
    """The markdown ``lines`` printed, and written to ``out`` where given."""
    text = "\n".join(lines) + "\n"
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
