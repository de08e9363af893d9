"""Journals: the append-only record of a run that lets a crash lose nothing.

A journal's first line is a header (written atomically, sealed with the run's id); every
later line is one JSON record (a draw, a score, a skip, a re-fit), sealed and ``fsync``-ed
before the call that made it returns (:mod:`bayeval.records.journal_check` checks both on
resume). :class:`JournalFile` is the writing and reading side that
:class:`~bayeval.loop.session.Session` and :class:`~bayeval.selection.session.SelectionSession`
share, with the evaluate-or-skip step of their ``run``; :class:`PairJournal` adds the
(name, item) pairs of a selection run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bayeval.data.matrix import ScoreMatrix, validate_score
from bayeval.data.sources import load_reference
from bayeval.errors import (
    DataError,
    JournalError,
    SessionError,
)
from bayeval.records.files import is_regular_or_absent, write_file
from bayeval.records.journal_check import (
    CHECK,
    RUN,
    header_altered,
    record_altered,
    run_of,
    seal_header,
    seal_record,
)

JOURNAL_FORMAT = "bayeval-journal"
# 2: every journal carries its checks (bayeval.records.journal_check); 1: checks optional (a
# journal of version 1 without them was written before they existed)
JOURNAL_VERSION = 2
READABLE_VERSIONS = (1, 2)


class JournalWarning(UserWarning):
    """A journal was repaired on resume (an incomplete last line was cut off)."""


class JournalFile:
    """The writing side of a journal: a header line written atomically, then one fsync-ed
    JSON line per record. Subclasses provide ``_header()``."""

    _journal_path: Path | None = None
    _failures = 0  # evaluations failed in a row (bayeval.loop.runner.evaluate_or_skip)
    _needs_draws = False  # a design-based estimate: no drawn item may be skipped
    _journal = None
    _run: str | None = None  # the journal's run id, which its records' checks include

    def _header(self) -> dict[str, Any]:
        raise NotImplementedError

    def _header_base(self) -> dict[str, Any]:
        """The header fields every journal has: format, version, time, reference."""
        return {
            "format": JOURNAL_FORMAT,
            "version": JOURNAL_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "reference": {"name": self.reference.name,
                          "fingerprint": self.reference.fingerprint(),
                          "shape": list(self.reference.shape),
                          "source": self.reference_source},
        }

    @staticmethod
    def _check_header(path: Path, header: dict[str, Any]) -> None:
        """Refuse in one line a header that is not an evaluation's, or lacks a field."""
        if "reference" not in header and "models" in header:
            raise JournalError(f"journal {path} is a model selection's, not an evaluation's: "
                               f"continue it with bayeval select --resume --journal {path}")
        need = {"reference": ("name", "shape", "fingerprint"), "method": ("name", "params"),
                "seed": ()}
        for field, parts in need.items():
            if field not in header:
                raise JournalError(f"journal {path} line 1: header lacks field {field!r}")
            for part in parts:
                if not isinstance(header[field], dict) or part not in header[field]:
                    raise JournalError(f"journal {path} line 1: header lacks field "
                                       f"'{field}.{part}'")
        if "target" not in header and "targets" not in header:
            raise JournalError(f"journal {path} line 1: header lacks field 'target'")

    @staticmethod
    def _resume_reference(path: Path, header: dict[str, Any],
                          reference: ScoreMatrix | None) -> ScoreMatrix:
        """The reference matrix to resume with: ``reference`` or the one the header's
        source describes; its fingerprint must be the journal's."""
        if reference is None:
            reference = load_reference(header["reference"].get("source"), path)
        want = header["reference"]["fingerprint"]
        if reference.fingerprint() != want:
            raise JournalError(
                f"journal {path} was written for another reference matrix "
                f"({header['reference']['name']}, {tuple(header['reference']['shape'])}, "
                f"fingerprint {want[:12]}…) than {reference.name} {reference.shape} "
                f"(fingerprint {reference.fingerprint()[:12]}…)")
        return reference

    def _replay_journal(self, path: Path, events: list[dict], note: str | None,
                        whole: int) -> None:
        """Take the journal's lock, replay ``events``, report a cut-off last line, repair
        the file and keep appending to it."""
        self._open_journal(path, None)
        try:
            header, _, _, now = self.read_journal(path)
            if now != whole:  # written between our read and our lock
                raise JournalError(f"journal {path} changed while it was being resumed "
                                   "(another session wrote to it); resume again")
            self._run = run_of(header)
            for lineno, event in enumerate(events, start=2):
                self._replay(event, f"journal {path} line {lineno}")
        except BaseException:
            self.close()  # a failed resume leaves the journal free
            raise
        if note is not None:
            self.notes.append(note)
            warnings.warn(note, JournalWarning, stacklevel=3)
        self._cut_tail(path, whole)

    def _replay(self, event: dict[str, Any], where: str) -> None:
        raise NotImplementedError

    @staticmethod
    @contextlib.contextmanager
    def _record_errors(where: str) -> Iterator[None]:
        """Report a journal record's missing field or invalid content as a JournalError
        naming where it is."""
        try:
            yield
        except KeyError as exc:
            raise JournalError(f"{where}: record lacks field {exc}") from None
        except (DataError, SessionError) as exc:
            raise JournalError(str(exc)) from None

    def _start_journal(self, journal: str | os.PathLike | None) -> None:
        """Begin a new journal at ``journal`` (None: keep nothing on disk): it must not hold
        a run yet, and must be a file path in an existing folder."""
        if journal is None:
            return
        path = self._check_new_journal(journal)
        try:
            self._write_header(path)
        except OSError as exc:
            raise JournalError(f"journal {path}: cannot write it ({exc.strerror})") from None

    def _check_new_journal(self, journal: str | os.PathLike) -> Path:
        """Refuse, before anything is written, a path that cannot begin a new journal."""
        path = Path(journal)
        if path.is_dir():
            raise JournalError(f"journal {path} is a folder; give a file path, e.g. "
                               f"{path / 'run.jsonl'}")
        if not path.parent.is_dir():
            what = "is a file, not a folder" if path.parent.exists() else "does not exist"
            raise JournalError(f"journal {path}: {path.parent} {what}")
        if not is_regular_or_absent(path):
            raise JournalError(f"journal {path}: not a regular file (a journal is read back "
                               "by --resume); give a file path")
        if path.exists() and path.stat().st_size > 0:
            raise JournalError(f"journal {path} already exists; continue it with "
                               f"{type(self).__name__}.resume / --resume, or choose another "
                               "path")
        return path

    def _write_header(self, path: Path) -> None:
        header = seal_header(self._header())
        write_file(path, json.dumps(header) + "\n", durable=True)
        self._open_journal(path, run_of(header))

    def _open_journal(self, path: Path, run: str | None) -> None:
        """Open the journal of run ``run`` (None: a journal without checks) for appending
        and take its advisory lock (one writer)."""
        handle = open(path, "ab")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise JournalError(f"journal {path} is in use by another session (another "
                               "process is writing it); wait for it to finish") from None
        self._journal_path = path
        self._journal = handle
        self._run = run

    def _tell_args(self, args: tuple[str, ...], score: float) -> None:
        """Tell the score of what ``args`` (as the evaluator got them) name."""
        self.tell(*args, score)

    def _skip_args(self, args: tuple[str, ...], reason: str) -> None:
        self.skip(*args, reason)

    def _append(self, record: dict[str, Any]) -> None:
        self._append_many([record])

    def _append_many(self, records: list[dict[str, Any]]) -> None:
        """Write ``records`` as JSON lines and fsync them once."""
        if self._journal is None or not records:
            return
        try:
            self._journal.write("".join(json.dumps(seal_record(r, self._run)) + "\n"
                                        for r in records).encode())
            self._journal.flush()
            os.fsync(self._journal.fileno())
        except OSError as exc:  # a full disk, a file system gone read-only
            raise JournalError(
                f"journal {self.journal_path}: could not write to it ({exc.strerror or exc});"
                " the records before are kept (a part-written last one is cut on resume): "
                "make room and --resume") from None
        self._keep_at_its_path()

    def _keep_at_its_path(self) -> None:
        """The journal still at its path: deleted while the run went on, it is written
        back there from the open file (with a warning) and the run goes on; replaced by
        another file, the run's records are written beside it (``PATH.orphan``) and the
        run stops with a one-line error, nothing lost and nothing overwritten."""
        path, handle = self._journal_path, self._journal
        try:
            here = os.path.samestat(os.stat(path), os.fstat(handle.fileno()))
            gone = False
        except FileNotFoundError:
            here, gone = False, True
        if here:
            return
        try:  # what the open file holds (Linux: the open descriptor's own view)
            with open(f"/proc/self/fd/{handle.fileno()}", "rb") as held:
                text = held.read()
        except OSError:
            raise JournalError(f"journal {path} was {'deleted' if gone else 'replaced'} "
                               "while the run went on") from None
        if gone:
            write_file(path, text, durable=True)
            handle.close()
            self._journal = None
            self._open_journal(path, self._run)
            warnings.warn(f"journal {path} was deleted while the run went on; it was "
                          "written back from the open file", JournalWarning, stacklevel=3)
            return
        orphan = Path(f"{path}.orphan")
        write_file(orphan, text, durable=True)
        raise JournalError(f"journal {path} was replaced by another file while the run went "
                           f"on; this run's records are kept in {orphan} (move it back and "
                           "--resume)")

    def close(self) -> None:
        """Close the journal file (the session can no longer record). A close that
        fails to flush (the disk is full: the write already failed and was reported)
        still closes the file; what it holds stays as it was."""
        if self._journal is not None:
            try:
                self._journal.close()
            except OSError:
                pass
            self._journal = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def journal_path(self) -> Path | None:
        return self._journal_path

    @classmethod
    def read_journal(cls, path: str | os.PathLike) -> tuple[dict[str, Any], list[dict], str | None,
                                                          int]:
        """(header, events, note about a cut-off last line or None, bytes that are whole)."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise JournalError(f"journal {path}: no such file") from None
        except IsADirectoryError:
            raise JournalError(f"journal {path} is a folder, not a journal file") from None
        except OSError as exc:
            raise JournalError(f"journal {path}: cannot read it ({exc.strerror})") from None
        lines = data.split(b"\n")
        # A final element without a newline after it is a line the crash may have cut.
        records: list[dict] = []
        numbers: list[int] = []  # the line of each record
        whole_bytes = 0
        note = None
        offset = 0
        for lineno, raw in enumerate(lines, start=1):
            is_last = lineno == len(lines)
            end = offset + len(raw) + (0 if is_last else 1)
            if raw.strip():
                try:
                    record = json.loads(raw)
                    if not isinstance(record, dict):
                        raise ValueError("not a JSON object")
                except ValueError as exc:
                    tail = all(not rest.strip() for rest in lines[lineno:])
                    if not tail or lineno == 1:
                        where = "header" if lineno == 1 else "record"
                        raise JournalError(f"journal {path} line {lineno}: corrupt {where} "
                                           f"({str(exc)[:60]})") from None
                    note = (f"journal {path} line {lineno}: incomplete record "
                            f"({len(raw)} bytes, written during a crash?) ignored; "
                            f"{max(len(records) - 1, 0)} record(s) before it kept")
                    break
                records.append(record)
                numbers.append(lineno)
            whole_bytes = end
            offset = end
        if not records:
            raise JournalError(f"journal {path}: empty, no header")
        header = records[0]
        if header.get("format") != JOURNAL_FORMAT:
            raise JournalError(f"journal {path} line 1: not a bayeval journal header")
        if header.get("version") not in READABLE_VERSIONS:
            raise JournalError(f"journal {path}: version {header.get('version')} is not "
                               f"supported (this bayeval writes version {JOURNAL_VERSION})")
        _checks_present(path, header, records[1:], numbers[1:])
        if header_altered(header):
            raise JournalError(f"journal {path} line 1: the header was altered (it does not "
                               "match its check)")
        run = run_of(header)
        for lineno, record in zip(numbers[1:], records[1:], strict=True):
            if record_altered(record, run):
                raise JournalError(f"journal {path} line {lineno}: the record was altered or "
                                   "comes from another journal (it does not match its "
                                   "check)")
        return header, records[1:], note, whole_bytes

    @staticmethod
    def _cut_tail(path: Path, whole: int) -> None:
        """Cut an incomplete last line (``whole`` = bytes that are whole lines) and end the
        file with a newline."""
        with open(path, "r+b") as fh:
            fh.truncate(whole)
            if whole > 0:
                fh.seek(whole - 1)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())


def _checks_present(path: Path, header: dict[str, Any], records: list[dict[str, Any]],
                    numbers: list[int]) -> None:
    """Refuse a journal whose checks were taken away: a header with a run id and no
    check (or the reverse), records with checks under a header without one, and a journal
    of this version without them. A journal written before the checks existed (version 1,
    no check anywhere) is read with a warning naming it."""
    if (CHECK in header) != (RUN in header):
        lost = CHECK if RUN in header else RUN
        raise JournalError(f"journal {path} line 1: the header lost its {lost!r} (a "
                           "journal's header holds both its run id and its check)")
    if CHECK in header:
        return
    checked = next((n for n, r in zip(numbers, records, strict=True) if CHECK in r), None)
    if checked is not None:
        raise JournalError(f"journal {path} line {checked}: the record carries a check "
                           "but the header has none (the header's check was removed)")
    if header.get("version") != 1:
        raise JournalError(f"journal {path} line 1: a version {header.get('version')} "
                           "journal without its checks (they were removed)")
    warnings.warn(f"journal {path} was written without integrity checks (by an earlier "
                  "bayeval): an edit of its lines cannot be detected", JournalWarning,
                  stacklevel=4)


class PairJournal(JournalFile):
    """Journaled tell/skip of (model, item) pairs, for sessions that evaluate several
    models: each record names the model under ``pair_field`` ("target", "model").
    Subclasses provide ``_pair`` (names → indices, refusing pairs not asked for),
    ``_apply_tell`` and ``_apply_skip``, and keep ``observations``."""

    pair_field = "model"
    observations: list

    def _pair(self, name: str, item: str, where: str) -> tuple[int, int]:
        raise NotImplementedError

    def _apply_tell(self, first: int, j: int, score: float) -> None:
        raise NotImplementedError

    def _apply_skip(self, first: int, j: int, reason: str) -> None:
        raise NotImplementedError

    def _tell_pair(self, name: str, item: str, score: float) -> None:
        first, j = self._pair(str(name), str(item), "tell")
        score = validate_score(score, f"score of {name!r} on item {item!r}")
        self._append({"event": "tell", "n": len(self.observations) + 1,
                      self.pair_field: name, "item": item, "score": score})
        self._apply_tell(first, j, score)

    def _skip_pair(self, name: str, item: str, reason: str) -> None:
        first, j = self._pair(str(name), str(item), "skip")
        self._append({"event": "skip", self.pair_field: name, "item": item,
                      "reason": reason})
        self._apply_skip(first, j, reason)

    def _replay(self, event: dict[str, Any], where: str) -> None:
        with self._record_errors(where):
            kind = event.get("event")
            first, j = self._pair(str(event[self.pair_field]), str(event["item"]), where)
            if kind == "tell":
                if event.get("n") != len(self.observations) + 1:
                    raise JournalError(f"{where}: evaluation number {event.get('n')} out of "
                                       f"sequence (expected {len(self.observations) + 1})")
                self._apply_tell(first, j, validate_score(event["score"], where))
            elif kind == "skip":
                self._apply_skip(first, j, str(event.get("reason", "")))
            else:
                raise JournalError(f"{where}: unknown event {kind!r}")
