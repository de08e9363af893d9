"""Files bayeval writes (bayeval.records.files.write_file): whole or not at all for a regular file,
through a symbolic link to the file it names, directly to a device or a pipe (never
replaced by a regular file), and a journal only ever on a regular file. Checked on the
real file system: a FIFO made here, /dev/null, a link."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

from bayeval.errors import JournalError
from bayeval.records.files import write_file
from bayeval.selection.session import SelectionSession


def test_a_regular_file_is_replaced_whole_and_a_link_is_kept(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert write_file(link, "new") == real
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    # the disk fills at the rename (fault injected at os.replace: a full disk cannot be
    # made without mounting one)
    target = tmp_path / "subset.json"
    target.write_text("old")

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError, match="No space"):
        write_file(target, "new" * 1000)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["subset.json"]


def test_a_pipe_is_written_directly_and_stays_a_pipe(tmp_path):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_file(fifo, '{"a": 1}\n')
    reader.join(timeout=10)
    assert got == [b'{"a": 1}\n']
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.skipif(not Path("/dev/null").is_char_device(),
                    reason="this system has no /dev/null device")
def test_dev_null_stays_a_device():
    write_file("/dev/null", "anything")
    assert Path("/dev/null").is_char_device()


@pytest.mark.parametrize("kind", ["fifo", "devnull"])
def test_a_journal_is_never_begun_on_something_other_than_a_file(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "journal.jsonl"
        os.mkfifo(path)
    else:
        path = Path("/dev/null")
        if not path.is_char_device():
            pytest.skip("this system has no /dev/null device")
    with pytest.raises(JournalError, match="not a regular file"):
        SelectionSession(["a", "b"], ["i0", "i1", "i2"], 4, journal=path)
    assert stat.S_ISFIFO(os.stat(path).st_mode) or path.is_char_device()


def test_a_refused_new_selection_leaves_the_history_file_of_the_journal_alone(tmp_path):
    # the journal exists: the new run is refused before its history file is written, so
    # the original selection can still be resumed
    journal = tmp_path / "sel.jsonl"
    models, items = ["a", "b", "c"], [f"i{k}" for k in range(6)]
    SelectionSession(models, items, 9, journal=journal, weights=np.ones(6)).close()
    history = journal.with_name(journal.name + ".history.npz")
    before = history.read_bytes()
    with pytest.raises(JournalError, match="already exists"):
        SelectionSession(models, items, 9, journal=journal, weights=np.arange(1.0, 7.0))
    assert history.read_bytes() == before
    SelectionSession.resume(journal).close()
