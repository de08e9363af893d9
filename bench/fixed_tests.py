"""A round's fixes, each with its test: every test run against an earlier commit's
package and the current one, so that the table shows it failing before and passing now.

    python bench/fixed_tests.py --before da93545,6c8e540 \
        --out docs/results/reliability_round5.md

The tests are the working tree's (``tests/``): the earlier commit is unpacked with ``git
archive``, the tests copied into it, and run there with that folder first on
``PYTHONPATH``, so that they import that commit's ``bayeval`` (and the commands they start
run it). A test that fails before shows the class was there; one that
passes now shows it is fixed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bad_input_table import unpack_commit, write_table  # noqa: E402  (one home of each)

# the classes of reliability round five, each with the tests that show it fixed
CLASSES: list[tuple[str, list[str]]] = [
    ("wrong type or value through a run file or Python (fractional limit, seed 'abc' or "
     "2**70, timeout nan, model/method 5, concurrency '4', …)",
     ["tests/test_setting_checks.py::test_a_bad_setting_is_one_line_naming_it_before_any_"
      "journal"]),
    ("unbounded retries through a run file or Python (retries 10**9)",
     ["tests/test_setting_checks.py::test_a_bad_setting_is_one_line_naming_it_before_any_"
      "journal"]),
    ("silently changed or ignored (seed 1.5 or -1, subtasks 'no', epsilon 5 or 1e308)",
     ["tests/test_setting_checks.py::test_a_run_file_never_changes_or_ignores_a_bad_"
      "value"]),
    ("a suite's task journal resumed on its own",
     ["tests/test_setting_checks.py::test_a_suites_task_journal_is_not_resumed_on_its_own"]),
    ("a suite named like one of its tasks",
     ["tests/test_setting_checks.py::test_a_suite_named_like_one_of_its_tasks_is_refused"]),
    ("--harness-results on a FIFO (hung), a device or an existing file; --save-run "
     "/dev/full",
     ["tests/test_reliability.py::test_a_results_file_that_cannot_be_one_is_refused_"
      "before_the_run"]),
    ("resume(batch=0) and other resume settings ('ask(k) needs k ≥ 1')",
     ["tests/test_setting_checks.py::test_a_resume_checks_what_it_may_change"]),
    ("a server answering fewer completions than prompts, or no 'choices'",
     ["tests/test_lm_eval_harness.py::test_a_server_whose_answers_do_not_match_the_"
      "prompts_is_named"]),
    ("a journal deleted or replaced while the run goes on",
     ["tests/test_reliability.py::test_a_journal_deleted_or_replaced_while_the_run_goes_"
      "on_loses_nothing"]),
    ("a run file's journal read from the current folder, its reference from beside it",
     ["tests/test_library.py::test_a_run_files_journal_is_read_from_beside_it_as_its_"
      "reference_is"]),
    ("a suite's result without documents_run",
     ["tests/test_setting_checks.py::test_a_suites_result_says_the_documents_each_task_"
      "and_the_suite_ran"]),
    ("documents_run counting the told documents after an interruption, not those run",
     ["tests/test_python_api.py::test_documents_run_again_after_an_interruption_are_"
      "counted"]),
    ("a harness task needing a package not installed (langdetect for ifeval)",
     ["tests/test_lm_eval_harness.py::test_a_task_whose_metric_needs_an_absent_package_"
      "says_how_to_install_it"]),
]


def run_tests(tree: Path | None, tests: list[str]) -> dict[str, str]:
    """Each test's outcome (passed, failed, error) on ``tree``'s package, the working
    tree's tests copied into it (None: the working tree's package)."""
    env, where = {**os.environ, "COLUMNS": "400"}, ROOT  # (the summary's reasons whole)
    if tree is not None:
        shutil.rmtree(tree / "tests", ignore_errors=True)
        shutil.copytree(ROOT / "tests", tree / "tests",
                        ignore=shutil.ignore_patterns("__pycache__"))
        env["PYTHONPATH"] = f"{tree}{os.pathsep}{env.get('PYTHONPATH', '')}"
        where = tree
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p",
                           "no:cacheprovider", "-n", "2", *tests], cwd=where, env=env,
                          capture_output=True, text=True)
    imported = subprocess.run([sys.executable, "-c", "import bayeval; print(bayeval.__file__)"],
                              cwd=where, env=env, capture_output=True, text=True).stdout
    if not imported.startswith(str(where)):
        raise RuntimeError(f"the tests in {where} would import {imported.strip()}")
    found = {}
    for line in done.stdout.splitlines():  # -rA's summary: "FAILED test - why"
        hit = re.match(r"(PASSED|FAILED|ERROR) (\S+)(?: - (.*))?", line)
        if hit:
            why = (hit.group(3) or "").replace("|", "/")[:90]
            found[hit.group(2).split("[")[0]] = hit.group(1).lower() + (
                f": `{why}`" if why else "")
    return {t: found.get(t, "not run") for t in tests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="da93545,6c8e540",
                        help="comma-separated commits before the fixes, a column each")
    parser.add_argument("--out", type=Path, default=None, help="markdown table to write")
    opts = parser.parse_args()
    tests = sorted({t for _, ts in CLASSES for t in ts})
    before: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as root:
        for commit in opts.before.split(","):
            tree = Path(root) / commit.replace("/", "_")
            tree.mkdir()
            sha = unpack_commit(commit, tree)
            print(f"running {len(tests)} tests on {sha} …", file=sys.stderr, flush=True)
            before[sha] = run_tests(tree, tests)
    now_sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "bayeval"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    now_label = now_sha + (" + working tree" if dirty else "")
    print(f"running {len(tests)} tests on {now_label} …", file=sys.stderr, flush=True)
    now = run_tests(None, tests)
    lines = ["| class | test | " + " | ".join(f"{sha} (before)" for sha in before)
             + f" | {now_label} (now) |", "|---|---|" + "---|" * (len(before) + 1)]
    for name, ts in CLASSES:
        for t in ts:
            cells = [b[t] for b in before.values()] + [now[t]]
            lines.append(f"| {name} | `{t.split('::')[1]}` ({t.split('::')[0]}) | "
                         + " | ".join(cells) + " |")
    write_table(lines, opts.out)


if __name__ == "__main__":
    main()
