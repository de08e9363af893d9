"""Writing the files bayeval is told to write (a subset, a journal's header, a history
file, the harness's results): whole or not at all where the target is a regular file,
and never by replacing something that is not one.

A regular file (or a path that does not exist yet) is written to a temporary file beside
it and moved over it with ``os.replace``, so that a crash or a full disk leaves the old
file or the new one, and never a part; the temporary file is removed when the write
fails. Through a symbolic link, the file it points to is replaced and the link kept. A
device or a pipe (``/dev/stdout``, a FIFO) cannot be replaced, and replacing it would
turn ``/dev/null`` into a regular file: it is written directly.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from bayeval.errors import BayevalError


def is_regular_or_absent(path: str | os.PathLike) -> bool:
    """Whether ``path`` (followed through links) is a regular file or does not exist."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def fsync_folder(path: Path) -> None:
    """Make a rename in ``path``'s folder durable (where the system allows it)."""
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file(path: str | os.PathLike, data: bytes | str, *, durable: bool = False) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` as the module docstring says;
    ``durable``: fsync the data and the rename before returning. Returns the path
    written (a link's target). An OSError (no space, no permission) propagates after the
    temporary file is removed."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if not is_regular_or_absent(target):  # a device or a pipe: written as it is
        with open(target, "wb") as fh:
            fh.write(raw)
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(raw)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:  # named by the file asked for, not the temporary one
        tmp.unlink(missing_ok=True)
        raise type(exc)(exc.errno, exc.strerror, str(target)) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_folder(target)
    return target


__all__ = ["fsync_folder", "is_regular_or_absent", "write_file"]


def read_text(path: str | os.PathLike, what: str) -> str:
    """The UTF-8 text of the file ``path`` a user handed over (``what``: how the message
    names it, e.g. ``--items FILE``): a path that is not a regular file (a folder, a FIFO
    that would block) or bytes that are not UTF-8 are a one-line DataError naming the
    file (and the byte's offset)."""
    from bayeval.errors import DataError

    path = Path(path)
    if not path.exists():
        raise DataError(f"{what}: no such file")
    if not path.is_file():
        raise DataError(f"{what}: not a regular file")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{what}: not UTF-8 text (byte {exc.start} is "
                        f"{raw[exc.start]:#04x})") from None


def check_output(path: Path | None, flag: str, folder: bool = False,
                 new: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written: a file path that is a
    folder, a FIFO, a device or lies in a missing folder, a folder path that is a file, an
    unwritable place; with ``new``, an existing file too (nothing is overwritten without
    a word)."""
    if path is None:
        return
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise BayevalError(f"{flag} {path}: is a file, not a folder")
        base = path if path.exists() else path.parent
        while not base.exists():
            base = base.parent
        if not base.is_dir() or not os.access(base, os.W_OK):
            raise BayevalError(f"{flag} {path}: cannot create a folder in {base}")
        return
    if path.is_dir():
        raise BayevalError(f"{flag} {path}: is a folder; give a file path")
    if path.exists() and not path.is_file():
        raise BayevalError(f"{flag} {path}: is not a regular file (a FIFO, a device); give "
                           "a file path")
    if new and path.exists():
        raise BayevalError(f"{flag} {path}: exists; give a new path (it is not "
                           "overwritten)")
    if not path.parent.is_dir():
        what = "is a file, not a folder" if path.parent.exists() else "does not exist"
        raise BayevalError(f"{flag} {path}: {path.parent} {what}")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise BayevalError(f"{flag} {path}: not writable")


def json_text(value: Any, indent: int | None = None) -> str:
    """``value`` as strict JSON (what ``--json`` prints): a float that is not finite (NaN,
    ±inf), which JSON cannot hold, becomes null."""
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(value), indent=indent, allow_nan=False)
