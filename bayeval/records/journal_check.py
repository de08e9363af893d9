"""Integrity of a journal's lines: any changed byte, and any line taken from another
journal, is found when the journal is read.

The header holds ``run``, a random id of the run, and ``check``, a digest of the header's
other fields; every record holds ``check``, a digest of the run id and the record's other
fields. A flipped digit in a journaled score or draw probability, an edited header, or a
record spliced in from another run's journal then no longer matches, and reading the
journal says which line. The digests are over a canonical form of the fields (JSON with
sorted keys), so they do not depend on how a line was spaced. Journals written before
these fields existed have neither and are read as they were.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

CHECK = "check"
RUN = "run"


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in record.items() if k != CHECK}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest(record: dict[str, Any], run: str = "") -> str:
    """The check of ``record`` (its fields but ``check``) in run ``run``: 16 hex digits of
    SHA-256."""
    return hashlib.sha256(run.encode() + b"\x1f" + _canonical(record)).hexdigest()[:16]


def seal_header(header: dict[str, Any]) -> dict[str, Any]:
    """``header`` with a run id (kept if it has one) and its check."""
    sealed = {**header, RUN: header.get(RUN) or uuid.uuid4().hex}
    sealed[CHECK] = digest(sealed)
    return sealed


def run_of(header: dict[str, Any]) -> str | None:
    """The run id whose checks a journal's records carry (None: a journal written before
    the checks, read without them)."""
    return header.get(RUN) if CHECK in header else None


def seal_record(record: dict[str, Any], run: str | None) -> dict[str, Any]:
    """``record`` with its check in run ``run`` (a check it held replaced; unchanged for a
    journal without a run id)."""
    return record if run is None else {**record, CHECK: digest(record, run)}


def sealed_journal(records: list[dict[str, Any]]) -> str:
    """The text of a journal of ``records`` (the header first) with every check made
    anew, the header's run id kept: what a deliberately edited journal must be written as
    to be read again."""
    header = seal_header(records[0])
    return "".join(json.dumps(r) + "\n" for r in [header, *(
        seal_record(r, header[RUN]) for r in records[1:])])


def header_altered(header: dict[str, Any]) -> bool:
    """Whether a header that carries a check does not match it."""
    return CHECK in header and header[CHECK] != digest(header)


def record_altered(record: dict[str, Any], run: str | None) -> bool:
    """Whether ``record`` of run ``run`` lacks its check or does not match it (never for
    a journal without a run id)."""
    return run is not None and record.get(CHECK) != digest(record, run)


__all__ = ["CHECK", "RUN", "digest", "header_altered", "record_altered", "run_of",
           "seal_header", "seal_record", "sealed_journal"]
