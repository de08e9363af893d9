"""The ``bayeval`` command line: one module per command over the shared options and
helpers of :mod:`bayeval.cli.common`; the work itself is in the library."""

from __future__ import annotations

import importlib

from bayeval.cli.common import app

# in the order ``bayeval --help`` lists them
COMMANDS = ("datasets", "evaluate", "plan", "select", "compress", "estimate", "diagnose", "bench")
for _name in COMMANDS:
    importlib.import_module(f"bayeval.cli.{_name}")

__all__ = ["COMMANDS", "app", "main"]


def main(argv: list[str] | None = None) -> None:
    """The ``bayeval`` console command: the app, with Click's own usage errors (an
    unknown option, a value out of its range or of the wrong type) said in one line like
    every other error, exit status 2, instead of Click's framed multi-line box."""
    import sys

    import typer

    from bayeval.cli.common import EXIT_USAGE, err
    from bayeval.errors import terminate_like_interrupt

    # Click's base exception, whether typer vendors Click or depends on it
    click_exception = next(c for c in typer.BadParameter.__mro__
                           if c.__name__ == "ClickException")
    terminate_like_interrupt()
    _writable_anywhere()
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["--version"] and len(args) > 1:  # its eager callback would ignore them
        err.print(f"error: --version takes no value and no command (got {args[1]!r}; see "
                  "bayeval --help)", highlight=False, markup=False, soft_wrap=True)
        sys.exit(EXIT_USAGE)
    try:
        code = app(args=args, standalone_mode=False)
        if code == 130:  # Typer's exit for an interruption that left a command unsaid
            from bayeval.cli.common import interrupted
            from bayeval.errors import last_interruption

            code = interrupted(last_interruption()).code
    except OSError as exc:
        if _output_failed(exc):
            sys.exit(1)
        _file_failed(exc)
        sys.exit(EXIT_USAGE)
    except click_exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help was printed: nothing to add
            sys.exit(EXIT_USAGE)
        where = exc.ctx.command_path if getattr(exc, "ctx", None) is not None else "bayeval"
        err.print(f"[bold red]error:[/] {exc.format_message()} (see {where} --help)",
                  highlight=False, markup=True, soft_wrap=True)
        sys.exit(exc.exit_code if exc.exit_code else EXIT_USAGE)
    except typer.Abort as exc:  # the same, in Typer's earlier versions
        from bayeval.cli.common import interrupted

        sys.exit(interrupted(exc.__cause__ or exc).code)
    sys.exit(code if isinstance(code, int) else 0)


def _writable_anywhere() -> None:
    """Output that the terminal's or pipe's encoding cannot show (ε, ≥, × on an ASCII-only
    one) is written as escapes, instead of ending the command."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _output_failed(exc: OSError) -> bool:
    """Whether ``exc`` is the failure to write the command's output (a full device, a
    closed pipe): then say so in one line on stderr and silence stdout, whose buffer would
    fail again at exit."""
    import errno
    import os
    import sys

    if exc.errno not in (errno.ENOSPC, errno.EPIPE, errno.EDQUOT, errno.EIO):
        return False
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass
    try:
        print(f"error: the output could not be written ({exc.strerror})", file=sys.stderr)
    except OSError:
        pass
    return True


def _file_failed(exc: OSError) -> None:
    """A file bayeval reads or writes failed (no permission, a read-only file system, a
    full disk, a path that is not a folder): one line naming the file and the fault.
    Whatever a journal held before stays there (its records are written whole and
    fsync'd), and an atomic write leaves the earlier file as it was."""
    import sys

    where = f"{exc.filename}: " if exc.filename else ""
    reason = exc.strerror or str(exc) or type(exc).__name__
    try:
        print(f"error: {where}{reason}", file=sys.stderr)
    except OSError:
        pass
