"""The ``lantern`` command run in the test process (typer's ``CliRunner``), for the tests of what the command
prints, exits with and writes. A real process costs ~0.65 s to start (the interpreter, the imports, the models);
in-process the models of the test process are already loaded. What a process has and the test process lacks is
put back here, so the assertions keep their meaning:

* stdout / stderr are not a terminal (CliRunner's buffers), or stdout (``terminal="stdout"``) or stderr
  (``terminal="stderr"``) is a real pseudo-terminal (``pty.openpty``; ``isatty()`` is true because it is one),
  ``columns`` wide through ``$COLUMNS`` as a process would be given it;
* an exception that escapes the command is what Python prints for it: ``Traceback ...`` on stderr, exit 1
  (CliRunner would keep it aside), so ``"Traceback" not in stderr`` still fails when one escapes;
* warnings logged while no handler of ours is attached reach stderr as in a fresh process (logging's last-resort
  handler): pytest's own logging handlers are detached for the call;
* ``env`` changes $VARS for the call only (a value None removes one); the test's cwd is the command's.

The result is a ``subprocess.CompletedProcess`` (``returncode``, ``stdout`` and ``stderr`` as bytes), like the
result of the real process it stands for; tests/test_cli.py ``test_in_process_runs_print_what_a_process_prints``
checks that they agree. Not reproduced: Python's own ``warnings`` (pytest collects them; a process would print
them on stderr) and whatever happens at interpreter start or exit. What stays for real processes: exit on a signal
and Ctrl-C, a real stdin pipe, a missing extra at import time, file modes under a user namespace, a full disk, a
hang that must end in a timeout, and the installed ``lantern`` entry point.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pty
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import typer
from typer.testing import CliRunner

from lantern.cli import app

Arg = str | bytes | os.PathLike


def lantern(
    *args: Arg,
    db: Path | None = None,
    input: bytes | str | None = None,
    env: dict | None = None,
    terminal: str | None = None,
    columns: int | str | None = 200,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    """``lantern [--db DB] ARGS`` in-process. ``columns``: $COLUMNS for the call (None: unset, as for a pipe
    whose environment has none). ``terminal``: None, "stdout" or "stderr" (that stream is a pseudo-terminal).
    ``env``: $VARS set (a value None: unset) for the call; ``cwd``: its working directory."""
    argv = [*(("--db", str(db)) if db is not None else ()), *(_arg(a) for a in args)]
    overrides = {"COLUMNS": None if columns is None else str(columns), **(env or {})}
    with _root_logging_detached(), _cwd(cwd):
        if terminal is None:
            result = _Runner().invoke(app, argv, input=input, env=overrides, prog_name="lantern")
            code, out, err = result.exit_code, result.stdout_bytes, result.stderr_bytes
            exc = result.exception if not isinstance(result.exception, SystemExit) else None
            if exc is not None:
                err += _traceback(result.exc_info)
        else:
            code, out, err = _on_a_pty(argv, input, overrides, terminal)
    return subprocess.CompletedProcess(["lantern", *argv], code, out, err)


class _Runner(CliRunner):
    """CliRunner whose binary streams carry the names of the interpreter's (``sys.stdin.buffer.name`` is
    ``"<stdin>"``): the command names its input after them (``error: <stdin>, line 3: ...``)."""

    @contextlib.contextmanager
    def isolation(self, *args, **kwargs):
        with super().isolation(*args, **kwargs) as streams:
            for stream, name in ((sys.stdin, "<stdin>"), (sys.stdout, "<stdout>"), (sys.stderr, "<stderr>")):
                stream.buffer.name = name
            yield streams


def _arg(a: Arg) -> str:
    """An argument as the interpreter would give it to the program: bytes that are not UTF-8 decoded with
    surrogateescape (os.fsdecode), as ``sys.argv`` holds them."""
    return os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else a


def _traceback(exc_info) -> bytes:
    return "".join(traceback.format_exception(*exc_info)).encode("utf-8", "backslashreplace")


@contextlib.contextmanager
def _root_logging_detached():
    root = logging.getLogger()
    handlers = root.handlers[:]
    for h in handlers:
        root.removeHandler(h)
    try:
        yield
    finally:
        for h in handlers:
            root.addHandler(h)


def whole_environment(env: dict) -> dict:
    """The ``env`` of :func:`lantern` that makes ``os.environ`` equal to ``env`` (a whole environment, as given to a
    process) for the call: its values set, every other variable unset."""
    return {**{k: None for k in os.environ if k not in env}, **env}


@contextlib.contextmanager
def _cwd(path: Path | None):
    if path is None:
        yield
        return
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _environ(overrides: dict):
    before = {k: os.environ.get(k) for k in overrides}
    try:
        for k, v in overrides.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _on_a_pty(argv: list[str], input, overrides: dict, which: str) -> tuple[int, bytes, bytes]:
    """Run the command with ``which`` of stdout / stderr on a new pseudo-terminal and the other on a buffer (not a
    terminal); returns (exit code, stdout, stderr), the terminal's bytes as written (the line discipline's CR
    before each LF included, as a process's terminal shows them)."""
    main_fd, child_fd = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(main_fd, 65536)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    errors = getattr(sys.__stdout__, "errors", None) or "strict"  # the interpreter's choice for its own stdout
    tty = io.TextIOWrapper(io.FileIO(child_fd, "w", closefd=True), encoding="utf-8", errors=errors, line_buffering=True)
    buffer = io.BytesIO()
    other = io.TextIOWrapper(buffer, encoding="utf-8", errors="backslashreplace", write_through=True)
    data = input.encode("utf-8") if isinstance(input, str) else (input or b"")
    stdin_buffer = io.BytesIO(data)
    stdin_buffer.name = "<stdin>"
    stdin = io.TextIOWrapper(stdin_buffer, encoding="utf-8")
    saved = sys.stdin, sys.stdout, sys.stderr
    code = 0
    try:
        sys.stdin = stdin
        sys.stdout, sys.stderr = (tty, other) if which == "stdout" else (other, tty)
        with _environ(overrides):
            try:
                typer.main.get_command(app).main(argv, prog_name="lantern")
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:
                code = 1
                print("".join(traceback.format_exception(*sys.exc_info())), end="", file=sys.stderr)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        tty.close()  # the last writer of the terminal: the reader sees EIO
        reader.join(timeout=60)
        os.close(main_fd)
    shown = b"".join(chunks)
    return (code, shown, buffer.getvalue()) if which == "stdout" else (code, buffer.getvalue(), shown)
