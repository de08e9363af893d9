from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest

from bayeval.data import ScoreMatrix
from bayeval.errors import DataError, EvaluationError, JournalError, SessionError
from bayeval.evaluators import CallableEvaluator, CommandEvaluator, MatrixOracle
from bayeval.loop.session import JournalWarning, Session
from bayeval.records.journal_check import sealed_journal

N_ITEMS = 40
PARAMS = {"epsilon": 0.3, "min_n": 5}  # stops after ~10-25 of 40 items


@pytest.fixture(scope="module")
def world() -> ScoreMatrix:
    rng = np.random.default_rng(11)
    p = rng.uniform(0.2, 0.8, 13)[:, None]
    scores = (rng.random((13, N_ITEMS)) < p).astype(float)
    return ScoreMatrix(scores, [f"m{i}" for i in range(13)],
                       [f"q{j:02d}" for j in range(N_ITEMS)], name="world")


@pytest.fixture(scope="module")
def reference(world):
    return world.drop_models(["m0"])


def _session(reference, **kw):
    kw.setdefault("method_params", PARAMS)
    return Session(reference, "m0", "random", **kw)


def _full_run(reference, world, seed=0, journal=None):
    s = _session(reference, seed=seed, journal=journal)
    result = s.run(MatrixOracle(world, "m0"))
    s.close()
    return s, result


def test_ask_tell_flow(reference, world):
    s = _session(reference, seed=4)
    oracle = MatrixOracle(world, "m0")
    assert not s.done and s.estimate()[0] == 0.5
    batch = s.ask(3)
    assert len(set(batch)) == 3
    assert not set(batch) & set(s.ask(2))  # asked items are held back until told
    while not s.done:
        for item in s.ask():
            s.tell(item, oracle(item))
    value, lower, upper = s.estimate()
    told = [score for _, score in s.observations]
    assert value == pytest.approx(np.mean(told)) and lower < value < upper
    assert s.ask() == [] and "stopping rule" in s.stop_reason
    assert len(s.history) == s.n_observed and s.history[-1][1:] == s.estimate()


def test_same_seed_same_run_other_seed_other_run(reference, world):
    a, ra = _full_run(reference, world, seed=1)
    b, rb = _full_run(reference, world, seed=1)
    c, _ = _full_run(reference, world, seed=2)
    assert a.observations == b.observations and ra == rb
    assert a.observations != c.observations


def test_tell_rejects_bad_input(reference):
    s = _session(reference)
    with pytest.raises(SessionError, match="item 'nope' is not in the benchmark world"):
        s.tell("nope", 1.0)
    for bad in (float("nan"), float("inf"), 1.5, -1.0, "high"):
        with pytest.raises(DataError, match="tell: item 'q01'"):
            s.tell("q01", bad)
    s.tell("q01", "1")
    with pytest.raises(SessionError, match="item 'q01' was already observed"):
        s.tell("q01", 0.0)
    with pytest.raises(SessionError, match="k ≥ 1"):
        s.ask(0)
    assert s.n_observed == 1


def test_target_must_be_held_out(world):
    with pytest.raises(SessionError, match="target 'm3' is also a reference model in world"):
        Session(world, "m3")


def test_max_items_budget(reference, world):
    s = _session(reference, max_items=4, method_params={"epsilon": 1e-6, "min_n": 100})
    s.run(MatrixOracle(world, "m0"))
    assert s.n_observed == 4 and s.stop_reason == "budget of 4 items"


def test_journal_resume_continues_exactly(tmp_path, reference, world):
    uninterrupted, result = _full_run(reference, world, seed=3)
    path = tmp_path / "j.jsonl"
    s = _session(reference, seed=3, journal=path)
    oracle = MatrixOracle(world, "m0")
    for _ in range(7):
        (item,) = s.ask()
        s.tell(item, oracle(item))
    s.close()
    resumed = Session.resume(path, reference=reference)
    assert resumed.observations == uninterrupted.observations[:7]
    assert resumed.run(oracle) == result
    assert resumed.observations == uninterrupted.observations
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "bayeval-journal"
    records = [json.loads(x) for x in lines[1:]]
    # each draw is journaled before its score: ask, tell, ask, tell, …
    assert [r["event"] for r in records] == ["ask", "tell"] * (len(records) // 2)
    assert [r["n"] for r in records[1::2]] == list(range(1, len(records) // 2 + 1))
    assert [r["order"] for r in records[::2]] == list(range(len(records) // 2))


def test_crash_at_every_byte_loses_nothing(tmp_path, reference, world):
    """A crash leaves some prefix of the journal (writes are appends). Resuming from any
    prefix — cut mid-line or at a line end — must end exactly like the uninterrupted run."""
    full = tmp_path / "full.jsonl"
    done, result = _full_run(reference, world, seed=5, journal=full)
    data = full.read_bytes()
    header_end = data.index(b"\n") + 1
    line_ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    # every line end, and a cut every 17 bytes between (17 is prime, so the cuts fall at
    # every offset inside lines of the usual lengths)
    cuts = sorted(set(line_ends) | set(range(header_end, len(data), 17)))
    oracle = MatrixOracle(world, "m0")
    for cut in cuts:
        path = tmp_path / f"cut{cut}.jsonl"
        path.write_bytes(data[:cut])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s = Session.resume(path, reference=reference)
        # a line cut just before its newline is still a whole record
        whole_json = cut in line_ends or data[cut:cut + 1] == b"\n"
        kept = data[:cut] + (b"\n" if cut not in line_ends and whole_json else b"")
        tells = sum(b'"event": "tell"' in line for line in kept.split(b"\n")[1:]
                    if line.endswith(b"}"))
        assert s.n_observed == tells
        assert bool(caught) == (not whole_json)  # a cut record is reported
        assert s.run(oracle) == result
        assert s.observations == done.observations
        s.close()
        # the repaired journal equals the uninterrupted one, plus a record of the asks that
        # were cut off unanswered and sent to the evaluator again (documents run twice)
        lines = kept.split(b"\n")[1:]
        pending = (sum(b'"event": "ask"' in x for x in lines if x.endswith(b"}"))
                   - sum(b'"event": "tell"' in x or b'"event": "skip"' in x
                         for x in lines if x.endswith(b"}")))
        repaired = path.read_bytes().splitlines(keepends=True)
        again = [json.loads(x) for x in repaired if b'"event": "reask"' in x]
        assert sum(r["count"] for r in again) == s.documents_rerun == pending
        assert b"".join(x for x in repaired if b'"event": "reask"' not in x) == data


def test_corrupt_middle_line_is_an_error(tmp_path, reference, world):
    path = tmp_path / "j.jsonl"
    _full_run(reference, world, seed=0, journal=path)
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = '{"event": "tell", "n": 3, "item": "q0\n'
    path.write_text("".join(lines))
    with pytest.raises(JournalError, match=r"j.jsonl line 4: corrupt record"):
        Session.resume(path, reference=reference)


def test_incomplete_last_line_is_reported_and_cut(tmp_path, reference, world):
    path = tmp_path / "j.jsonl"
    _full_run(reference, world, seed=0, journal=path)
    text = path.read_text()
    n_lines = text.count("\n")
    path.write_text(text + '{"event": "tell", "n": 99, "it')
    with pytest.warns(JournalWarning, match=rf"line {n_lines + 1}: incomplete record"):
        s = Session.resume(path, reference=reference)
    assert s.n_observed == text.count("\"event\": \"tell\"") and s.notes
    s.close()
    assert path.read_text() == text


def test_journal_for_another_matrix(tmp_path, reference, world):
    path = tmp_path / "j.jsonl"
    _full_run(reference, world, seed=0, journal=path)
    other = world.drop_models(["m0", "m1"])
    with pytest.raises(JournalError, match="j.jsonl was written for another reference matrix"):
        Session.resume(path, reference=other)


def test_journal_is_not_overwritten(tmp_path, reference):
    path = tmp_path / "j.jsonl"
    path.write_text("precious\n")
    with pytest.raises(JournalError, match="already exists; continue it"):
        _session(reference, journal=path)
    assert path.read_text() == "precious\n"


def test_bad_journals(tmp_path, reference):
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    with pytest.raises(JournalError, match="empty, no header"):
        Session.resume(empty, reference=reference)
    foreign = tmp_path / "f.jsonl"
    foreign.write_text('{"hello": 1}\n')
    with pytest.raises(JournalError, match="line 1: not a bayeval journal header"):
        Session.resume(foreign, reference=reference)
    with pytest.raises(JournalError, match="no such file"):
        Session.resume(tmp_path / "missing.jsonl", reference=reference)


def test_tampered_journal_records(tmp_path, reference, world):
    path = tmp_path / "j.jsonl"
    _full_run(reference, world, seed=0, journal=path)
    # header, ask, tell, ask, tell…; edited with their checks made anew (sealed_journal),
    # so that the records' meaning is what is refused
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text(sealed_journal(lines[:3] + [{**lines[2], "n": 2}]))
    with pytest.raises(JournalError, match="line 4: item 'q.*' recorded twice"):
        Session.resume(path, reference=reference)
    path.write_text(sealed_journal(lines[:4] + [{**lines[4], "n": 3}]))
    with pytest.raises(JournalError, match="line 5: observation number 3 out of sequence"):
        Session.resume(path, reference=reference)
    path.write_text(sealed_journal(lines[:1] + [lines[3]]))
    with pytest.raises(JournalError, match="line 2: draw number 1 out of sequence"):
        Session.resume(path, reference=reference)
    path.write_text(sealed_journal(lines[:3] + [lines[4]]))
    with pytest.raises(JournalError, match="line 4: item 'q.*' was not drawn as round 1"):
        Session.resume(path, reference=reference)


def test_any_altered_byte_or_spliced_line_is_found_and_named(tmp_path, reference, world):
    # one digit of a score, of a draw probability or of the header changed, or a record
    # of another run's journal put in: each is a one-line error naming the line, where it
    # once changed the resumed estimate without a word
    path, other = tmp_path / "j.jsonl", tmp_path / "other.jsonl"
    _full_run(reference, world, seed=0, journal=path)
    _full_run(reference, world, seed=0, journal=other)  # the same run, another journal
    good = path.read_text().splitlines(keepends=True)
    tell = next(k for k, x in enumerate(good) if '"event": "tell"' in x)
    q = json.loads(good[tell])["q"]
    cases = {
        "a score": (tell, good[tell].replace('"score": 1.0', '"score": 0.0')
                    if '"score": 1.0' in good[tell] else
                    good[tell].replace('"score": 0.0', '"score": 1.0')),
        "a draw probability": (tell, good[tell].replace(repr(q), repr(q * 1.0000001))),
        "a record of another journal": (tell, other.read_text().splitlines(
            keepends=True)[tell]),
        "the header": (0, good[0].replace('"seed": 0', '"seed": 1')),
    }
    for what, (k, line) in cases.items():
        assert line != good[k], what
        path.write_text("".join(good[:k] + [line] + good[k + 1:]))
        with pytest.raises(JournalError, match=rf"line {k + 1}: the (header|record) was "
                                               r"altered"):
            Session.resume(path, reference=reference)
    path.write_text("".join(good))
    Session.resume(path, reference=reference).close()  # the journal as written reads back


def test_taking_the_checks_away_turns_no_check_off(tmp_path, reference, world):
    # a journal whose header lost its check (or its run id), or whose every check and run
    # id were stripped, with every score flipped: refused in one line, where it once
    # resumed to another estimate; a journal of version 1 without checks (written before
    # they existed) is read, with a warning naming it
    from bayeval.records.journal import JournalWarning

    path = tmp_path / "j.jsonl"
    _full_run(reference, world, seed=0, journal=path)
    lines = [json.loads(x) for x in path.read_text().splitlines()]

    def flipped(record):
        if record.get("event") == "tell":
            return {**record, "score": 1.0 - record["score"]}
        return record

    def bare(record):
        return {k: v for k, v in record.items() if k not in ("check", "run")}

    cases = {
        "the header's check": ([{k: v for k, v in lines[0].items() if k != "check"},
                                *map(flipped, lines[1:])], "line 1: the header lost its 'check'"),
        "the header's run id": ([{k: v for k, v in lines[0].items() if k != "run"},
                                 *lines[1:]], "line 1: the header lost its 'run'"),
        "the header's check and run id": ([bare(lines[0]), *map(flipped, lines[1:])],
                                          "line 2: the record carries a check but the "
                                          "header has none"),
        "every check": ([bare(r) for r in [lines[0], *map(flipped, lines[1:])]],
                        "line 1: a version 2 journal without its checks"),
    }
    for records, message in cases.values():
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        with pytest.raises(JournalError, match=message):
            Session.resume(path, reference=reference)
    old = [{**bare(r), "version": 1} if k == 0 else bare(r) for k, r in enumerate(lines)]
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    with pytest.warns(JournalWarning, match="written without integrity checks"):
        Session.resume(path, reference=reference).close()


def test_failed_evaluations_are_skipped_never_scored(tmp_path, reference, world):
    oracle = MatrixOracle(world, "m0")
    bad = {"q03", "q17", "q21", "q30"}

    def flaky(item):
        if item in bad:
            raise RuntimeError("GPU fell over")
        return oracle(item)

    path = tmp_path / "j.jsonl"
    s = _session(reference, seed=0, journal=path, method_params={"epsilon": 1e-6, "min_n": 99})
    s.run(CallableEvaluator(flaky, retries=1))
    assert {item for item, _ in s.skipped} == bad
    assert s.n_observed == N_ITEMS - len(bad)
    assert not bad & {item for item, _ in s.observations}
    assert "evaluator raised RuntimeError: GPU fell over (after 2 attempt(s))" in s.skipped[0][1]
    s.close()
    again = Session.resume(path, reference=reference)
    assert again.skipped == s.skipped and again.done


def test_command_evaluator(tmp_path):
    py = sys.executable
    ok = CommandEvaluator(f"{py} -c \"import sys; print('log line'); print(0.25)\" {{item}}")
    assert ok("a b'c") == 0.25
    script = tmp_path / "count.sh"
    counter = tmp_path / "n"
    # fails on the first call, succeeds on the second: a retry rescues it
    script.write_text(f'n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}\n'
                      'if [ "$n" = 0 ]; then echo boom >&2; exit 3; fi\necho 1\n')
    assert CommandEvaluator(f"sh {script}", retries=1)("x") == 1.0
    cases = [
        ("echo boom >&2; exit 3", r"command exited with status 3: boom \(after 2 attempt"),
        ("echo not-a-number", r"command answered: 'not-a-number' is not a number"),
        ("echo 7", r"score 7 outside \[0, 1\]"),
        ("echo nan", r"finite number in \[0, 1\] is required"),
        # Python's float() reads other scripts' digits and underscores: not scores
        ("echo ١", r"command answered: '١' is not a number"),
        ("echo 0.0_1", r"command answered: '0.0_1' is not a number"),
        ("true", "command printed nothing"),
        ("sleep 5", r"timed out after 0.2s"),
    ]
    for cmd, message in cases:
        with pytest.raises(EvaluationError, match=message):
            CommandEvaluator(cmd + " #", timeout=0.2, retries=1)("item-1")  # '#': no id


def test_oracle_true_score(world):
    oracle = MatrixOracle(world, "m0")
    assert oracle.true_score == pytest.approx(world.row("m0").mean())
