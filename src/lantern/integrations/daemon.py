"""Lantern's warm path (docs/daemon.md): one local process per user and configuration that keeps the store open
and the models loaded, so a hook event costs a Python start and one round trip instead of a model load.

    client (hook, CLI, MCP server)  --- one JSON line --->  daemon  (Unix socket, 0600, in a 0700 directory)
                                    <--- one JSON line ---

Request: ``{"v": 1, "op": OP, "id": IDENTITY, "args": {...}, "deadline": UNIX_SECONDS}``; reply:
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": TEXT}``. ``OP`` is one of ``OPS``: ``hook`` (a host's
hook input, run as the in-process hook runs it: ``claude_code.run``; an event that only archives is answered ""
first and run before the next request is read: ``archive_only``), ``archive``, ``recover``, ``recover_compaction``,
``events`` (the ``Lantern`` methods of those names). ``IDENTITY``: the home directory and every ``LANTERN_*``
variable but the daemon's own; a daemon serves only requests of its own identity (the socket's name is a CRC-32 of
it, so each configuration gets its own daemon). ``deadline``: when the client stops waiting and does the work
in-process (``call``: now + its reply timeout); the daemon refuses a request read past ``deadline -
DEADLINE_MARGIN_S`` and ends every database lock wait of its run there (lantern/deadline.py: a write begun later
raises at once, rolled back whole), so a request its client gave up on writes nothing, and the client's own run is
the one that counts (one archive, one event per hook run). A hook run, requested or handed over, waits for locks at
most ``HOOK_DB_WAIT_S`` in all, as an in-process hook does.

Who starts it: the first hook event that finds none (``start=True``) spawns it and runs that event in-process, or,
for an event that only archives, hands it over to it (``hand_over``: the spool); an event answered in-process
first, a prompt and SessionStart(compact) with no model (``ANSWER_FIRST_EVENTS``), starts it once its answer is out
(``start_after``). The CLI and the MCP server use it
when it is there and never start it. It exits after ``idle_seconds()`` with no
request. One request at a time: it is the one writer of the stores it holds. Bounds: a request of at most
``MAX_REQUEST_BYTES``, read within ``READ_TIMEOUT_S``; a reply of at most ``MAX_REPLY_BYTES``.

Refusals: the directory must be ours, a directory (not a link) and closed to others (mode ``& 0o077 == 0``), else
neither side uses it; on Linux each side checks the other's user id (``SO_PEERCRED``) and refuses another user's.
A socket nobody answers (a daemon that died) is stale: the next daemon takes the lock (``flock`` on ``<name>.lock``)
and renames its own socket over it. Whenever the daemon is not there, refuses, or dies mid-request (the reply never
comes), ``call`` raises ``Unavailable`` and the caller does the work in-process: a write is done once more rather
than lost (archives are idempotent: duplicates are never stored twice, and a hook's offsets move only after its
transaction commits).

This module imports only the standard library at its top: a hook reaches the daemon without loading Lantern.
"""

from __future__ import annotations

import _socket  # socket.py and json pull in re and enum: ~50 ms more at a hook's start (BENCHMARKS.md §24)
import os
import sys
import time
import zlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at a hook's start
if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 1
OPS = ("hook", "archive", "recover", "recover_compaction", "events")
SWITCH_ENV = "LANTERN_DAEMON"  # "off": never used, never started
IDLE_ENV = "LANTERN_DAEMON_IDLE"  # seconds without a request before the daemon exits
RUNTIME_ENV = "XDG_RUNTIME_DIR"
IDLE_S = 900.0  # ours: a Claude Code session's prompts come minutes apart; the daemon holds ~300 MiB of models
MAX_REQUEST_BYTES = 16 << 20  # ours: a hook input is a few KiB; an MCP archive of a long conversation fits
MAX_REPLY_BYTES = 64 << 20
WARM_UP_DELAY_S = 1.0  # ours: the warm-up waits this long, so it does not slow the cold hook that spawned it
GRAPH_STEP_S = 2.0  # ours: quiet seconds after a request before the graphs are stepped; the poll while one builds
GRAPH_BUILD_MAX_S = 1800.0  # ours: how long past its idle time a daemon stays up to finish a graph build
READ_TIMEOUT_S = 10.0  # a client that connects and sends no whole line within this is dropped
CONNECT_TIMEOUT_S = 1.0
REPLY_TIMEOUT_S = 50.0  # under Claude Code's 60 s hook timeout; past it the caller works in-process
# ours: a request is given up by the daemon this long before its client's deadline (the reply's way back, clocks
# read at slightly different moments), so what the client then does in-process is never done twice
DEADLINE_MARGIN_S = 1.0
HOOK_HOSTS = ("claude-code", "codex")  # the hosts whose hooks the daemon runs (``_hook_runner``)
# events a hook answers in-process before it starts a missing daemon (``start_after``), with no model but SessionEnd:
# the daemon's start and warm-up would otherwise take the CPU from that answer (BENCHMARKS.md §24c, §27)
ANSWER_FIRST_EVENTS = ("SessionStart", "UserPromptSubmit", "SessionEnd")
FILL_POLL_S = 0.05  # ours: the idle wait while text-first entries are still being filled
FILL_PER_TICK = 64  # ours: text-first entries given their vectors per idle tick (~1 s of MiniLM on a loaded core)


_SECRET_NAMES = ("KEY", "TOKEN", "PASSWORD", "SECRET")


def _unencodable(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


class _Parsing:
    """The settings ``_json.make_scanner`` reads: those of ``json.loads()`` with no hooks."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # "NaN", "Infinity", "-Infinity"


try:  # the json module's own C encoder and scanner, without importing json (and re)
    import _json

    _ENCODER = _json.make_encoder(None, _unencodable, _json.encode_basestring_ascii, None, ":", ",", True, False, True)
    _SCANNER = _json.make_scanner(_Parsing())
except (ImportError, AttributeError):  # an interpreter without them
    _ENCODER = _SCANNER = None


def dumps(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))`` (ASCII; keys sorted, so equal values give equal
    text). Raises TypeError for what JSON cannot hold."""
    if _ENCODER is None:
        import json

        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "".join(_ENCODER(value, 0))


def loads(text: str) -> Any:
    """``json.loads(text)``. Raises ValueError for text that is not one JSON value."""
    if _SCANNER is None:
        import json

        return json.loads(text)
    text = text.strip(" \t\r\n")
    try:
        value, end = _SCANNER(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    except SystemError:
        # the C scanner reports a malformed document through json.decoder's JSONDecodeError, which it looks up
        # without importing: before anything imported json, it fails with no exception set. json.loads gives the
        # precise error (a ValueError)
        import json

        return json.loads(text)
    if end != len(text):
        raise ValueError("text after the JSON value")
    return value


class Unavailable(Exception):
    """No daemon to use for this request (switched off, not running, stale socket, refused, another user, a
    different identity, died mid-request, an error inside it): the caller does the work in-process. ``spawned``:
    this call started a daemon (it comes up in a second or more)."""

    spawned = False


# ----------------------------------------------------------------------------------------------- where it lives


def identity() -> dict[str, Any]:
    """What a daemon must share with its clients: the home directory and the ``LANTERN_*`` variables (every one
    but the daemon's own switches), which decide the default database, the user scope and every setting; the
    working directory too when ``$LANTERN_DB`` is a relative path. A key's value (``..._KEY``, ``..._TOKEN``,
    ``..._PASSWORD``, ``..._SECRET``), and a URL's with a user part (``$LANTERN_DB=postgresql://ann:PASSWORD@...``),
    is there as its CRC-32 only: a request never carries it."""
    env = {
        k: f"crc32:{zlib.crc32(v.encode('utf-8', 'surrogateescape')):08x}"
        if k.endswith(_SECRET_NAMES) or ("://" in v and "@" in v)
        else v
        for k, v in os.environ.items()
        if k.startswith("LANTERN_") and not k.startswith(SWITCH_ENV)
    }
    ident: dict[str, Any] = {"home": os.path.expanduser("~"), "env": dict(sorted(env.items()))}
    db = env.get("LANTERN_DB", "")
    if db and not os.path.isabs(db) and "://" not in db:  # a relative $LANTERN_DB names a file per directory
        ident["cwd"] = os.getcwd()
    return ident


def runtime_dir() -> str:
    """``$XDG_RUNTIME_DIR/lantern`` when that variable names a directory, else ``$TMPDIR/lantern-<uid>``
    (``/tmp`` by default): short enough for a socket path (108 bytes on Linux)."""
    base = os.environ.get(RUNTIME_ENV)
    if base and os.path.isdir(base):
        return os.path.join(base, "lantern")
    return os.path.join(os.environ.get("TMPDIR") or "/tmp", f"lantern-{os.getuid()}")


def socket_path(ident: dict[str, Any] | None = None) -> str:
    """The socket of the daemon of ``ident`` (default this process's ``identity()``)."""
    key = dumps(ident or identity()).encode()
    return os.path.join(runtime_dir(), f"{zlib.crc32(key):08x}.sock")


def secure_dir(path: str, create: bool) -> None:
    """Check (and with ``create`` make, mode 0700) the runtime directory: ours, a real directory, closed to
    others. Raises ``Unavailable`` naming what is wrong."""
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise Unavailable(f"cannot make {path}: {e.strerror}") from None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise Unavailable("not running") from None
    import stat

    if not stat.S_ISDIR(st.st_mode):
        raise Unavailable(f"{path} is not a directory")
    if st.st_uid != os.getuid():
        raise Unavailable(f"{path} belongs to another user")
    if st.st_mode & 0o077:
        raise Unavailable(f"{path} is open to other users (mode {st.st_mode & 0o777:o})")


def peer_uid(sock: _socket.socket) -> int | None:
    """The user id of the process at the other end (Linux ``SO_PEERCRED``); None where the platform has none."""
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    import struct

    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(_socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return uid


def enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def idle_seconds() -> float:
    """``$LANTERN_DAEMON_IDLE`` (seconds, > 0), else ``IDLE_S``."""
    try:
        value = float(os.environ.get(IDLE_ENV) or IDLE_S)
    except ValueError:
        return IDLE_S
    return value if value > 0 else IDLE_S


# ----------------------------------------------------------------------------------------------- the client


def call(
    op: str, args: dict[str, Any], *, start: bool = False, timeout: float = REPLY_TIMEOUT_S, preload: str | None = None
) -> Any:
    """Send one request to this identity's daemon and return its result. ``start``: spawn the daemon when there is
    none or its socket is stale (the caller still gets ``Unavailable`` and works in-process this time), warming
    the database ``preload`` (default the default one) for the next request. Raises
    ``Unavailable`` for every reason the request was not answered (the module docstring's list)."""
    if not enabled():
        raise Unavailable("switched off")
    ident = identity()
    path = socket_path(ident)
    deadline = time.time() + timeout  # past it this client works in-process: the daemon gives the request up
    line = dumps({"v": PROTOCOL, "op": op, "id": ident, "args": args, "deadline": deadline}).encode()
    if len(line) >= MAX_REQUEST_BYTES:
        raise Unavailable(f"request over {MAX_REQUEST_BYTES} bytes")
    secure_dir(os.path.dirname(path), create=start)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            if not isinstance(e, FileNotFoundError) and _is_dir(path):  # no daemon can replace it: none started
                raise Unavailable(f"{path} is a directory, not a socket (remove it to use the daemon)") from None
            gone = Unavailable("not running" if isinstance(e, FileNotFoundError) else "stale socket")
            if start:
                gone.spawned = spawn(preload)
            raise gone from None
        except OSError as e:
            raise Unavailable(f"cannot connect: {e.strerror or type(e).__name__}") from None
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            raise Unavailable("the socket's process belongs to another user")
        sock.settimeout(timeout)
        try:
            sock.sendall(line + b"\n")
            reply = _read_line(sock, MAX_REPLY_BYTES)
        except OSError as e:  # reset, broken pipe, timeout
            gone = Unavailable(f"no reply: {type(e).__name__}")
            if start and isinstance(e, (ConnectionResetError, BrokenPipeError)):
                # a socket nobody answers on (its daemon died mid-accept): the next one replaces it
                gone.spawned = spawn(preload)
            raise gone from None
    finally:
        sock.close()
    if reply is None:
        raise Unavailable("the daemon closed the connection without a reply")
    try:
        answer = loads(reply.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise Unavailable("the daemon's reply is not JSON") from None
    if not isinstance(answer, dict) or not answer.get("ok"):
        raise Unavailable(f"the daemon refused: {answer.get('error') if isinstance(answer, dict) else answer!r}")
    return answer.get("result")


def hook(host: str, text: str, db: str | None, rewound: str | None) -> tuple[str | None, bool]:
    """A hook event through the daemon (started when absent, but after the answer for ``ANSWER_FIRST_EVENTS``:
    ``start_after``): (what to print on stdout, or None when the caller must run it in-process; whether this call
    started the daemon). An archive-only event (``HANDOVER_EVENTS``)
    that finds no daemon and starts one is handed over to it (``hand_over``): "" (nothing to print) at once, the
    archive done by the daemon once it is up. ``db``: the hook's ``--db`` (a relative path is made absolute
    here)."""
    args = _hook_args(host, text, db, rewound)
    try:
        out = call("hook", args, start=_event(text) not in ANSWER_FIRST_EVENTS, preload=args["db"])
    except Unavailable as e:
        if e.spawned and hand_over(args):
            return "", True
        return None, e.spawned
    return (out if isinstance(out, str) else None), False


def _event(text: str) -> str | None:
    """The ``hook_event_name`` of a hook input, None when it has none. Never raises."""
    try:
        payload = loads(text)
    except (ValueError, RecursionError):
        return None
    return payload.get("hook_event_name") if isinstance(payload, dict) else None


def start_after(text: str, db: str | None) -> bool:
    """After a hook of ``ANSWER_FIRST_EVENTS`` (input ``text``) has answered in-process: start this identity's
    daemon (``spawn``, warming ``db``) when none holds its lock, for the events after this one. Returns whether one
    was started. Never raises."""
    try:
        if not enabled() or _event(text) not in ANSWER_FIRST_EVENTS:
            return False
        import fcntl

        path = socket_path()
        secure_dir(os.path.dirname(path), create=True)
        fd = os.open(path[: -len(".sock")] + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a running daemon for its whole life
        except OSError:
            return False
        finally:
            os.close(fd)  # releases it for the daemon about to start
        return spawn(None if db is None or "://" in db else os.path.abspath(db))
    except Exception:  # noqa: BLE001 - the next hook starts it
        return False


def _hook_args(host: str, text: str, db: str | None, rewound: str | None) -> dict[str, Any]:
    if db is not None and "://" not in db:
        db = os.path.abspath(db)
    return {"host": host, "input": text, "db": db, "rewound": rewound}


# ----------------------------------------------------------------------------------------------- handing over
# A hook process that finds no daemon would load the store and the models (1-3 s on a loaded machine) for an event
# that only archives, while the daemon it has just started loads them too. Such an event is left to that daemon:
# the hook writes it to the spool (a directory beside the socket) and exits; the daemon runs it once it is up.
# Nothing is lost when no daemon ever runs it: a hook's offsets move only after its archive commits, so the next
# hook event (every one that recovers archives the new lines first) or `lantern ingest` archives the same lines.

HANDOVER_EVENTS = ("Stop", "PreCompact", "PostCompact")  # archive only; SessionEnd (the last one) stays in-process
HANDOVER_FIELDS = ("hook_event_name", "session_id", "transcript_path")  # all an archive reads; never message text
SPOOL_POLL_S = 2.0  # ours: how often an idle daemon looks at the spool
SPOOL_TMP_MAX_AGE_S = 60.0  # ours: a hook writes its spool file in well under this; an older .tmp is left over


def spool_dir() -> str:
    """The spool of this identity's daemon: ``<socket name>.spool`` in the runtime directory (0700)."""
    return socket_path()[: -len(".sock")] + ".spool"


def archive_only(text: Any) -> str | None:
    """The hook input ``text`` reduced to ``HANDOVER_FIELDS`` when its event only archives (``HANDOVER_EVENTS``)
    and it names a session and a transcript; None for any other input. Never raises."""
    try:
        payload = loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or payload.get("hook_event_name") not in HANDOVER_EVENTS:
        return None
    if not all(isinstance(payload.get(k), str) and payload[k] for k in HANDOVER_FIELDS):
        return None
    return dumps({k: payload[k] for k in HANDOVER_FIELDS})


def hand_over(args: dict[str, Any]) -> bool:
    """Write the hook request ``args`` (``host``, ``input``, ``db``, ``rewound``) to the spool for the daemon
    being started, when its event only archives (``archive_only``: only ``HANDOVER_FIELDS`` of the input are
    kept), in a 0600 file written whole (a temporary name, then renamed). Returns whether it was handed over
    (False: the caller runs it in-process). Never raises."""
    try:
        kept = archive_only(args["input"])
        if kept is None:
            return False
        job = dumps({**args, "input": kept}).encode()
        folder = spool_dir()
        secure_dir(os.path.dirname(folder), create=True)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        secure_dir(folder, create=False)
        name = f"{time.time_ns():020d}-{os.getpid()}"
        tmp = os.path.join(folder, f".{name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, job)
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(folder, f"{name}.job"))
        return True
    except Exception:  # noqa: BLE001 - in-process then
        return False


def _same_secure_dir(fd: int, path: str) -> bool:
    """Whether the directory open as ``fd`` is the one at ``path`` that ``secure_dir`` checked (same device and
    inode), and itself a directory of this user closed to others: a folder swapped between the check and the open
    is not read."""
    import stat

    st, at = os.fstat(fd), os.lstat(path)
    return (
        stat.S_ISDIR(st.st_mode)
        and (st.st_dev, st.st_ino) == (at.st_dev, at.st_ino)
        and st.st_uid == os.getuid()
        and not st.st_mode & 0o077
    )


def _read_job(dir_fd: int, name: str) -> bytes:
    """The bytes of the spool file ``name`` in the directory open as ``dir_fd``, opened without following a link
    and without blocking (a FIFO or a device would otherwise hold the daemon), then checked on the open file: a
    regular file of this user of at most ``MAX_REQUEST_BYTES``. Raises ValueError naming what it is instead, OSError
    when it cannot be opened (a symbolic link: ELOOP)."""
    import stat

    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{name} is not a regular file")
        if st.st_uid != os.getuid():
            raise ValueError(f"{name} belongs to another user")
        if st.st_size > MAX_REQUEST_BYTES:
            raise ValueError(f"{name} holds more than {MAX_REQUEST_BYTES} bytes")
        chunks, size = [], 0
        while chunk := os.read(fd, MAX_REQUEST_BYTES + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_REQUEST_BYTES:  # grown since the fstat
                raise ValueError(f"{name} holds more than {MAX_REQUEST_BYTES} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _remove_entry(dir_fd: int, name: str) -> bool:
    """Remove the spool entry ``name`` (a file, a link, an empty folder; a folder holding anything is left, never
    walked). Returns whether it is gone. Never raises."""
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except IsADirectoryError:
        try:
            os.rmdir(name, dir_fd=dir_fd)
            return True
        except OSError:
            return False
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _remove_stale_tmp(dir_fd: int, names: list[str]) -> None:
    """Remove the spool's ``.NAME.tmp`` files (``hand_over`` writes one, then renames it) older than
    ``SPOOL_TMP_MAX_AGE_S``: a hook that died between the two left it, and no one will rename it. A younger one may
    still be written, and is kept. Never follows a link (the link itself is what is removed)."""
    now = time.time()
    for name in names:
        try:
            if now - os.lstat(name, dir_fd=dir_fd).st_mtime > SPOOL_TMP_MAX_AGE_S:
                os.unlink(name, dir_fd=dir_fd)
                _log(f"left-over spool file {name} removed")
        except OSError:
            pass


def spawn(preload: str | None = None) -> bool:
    """Start a daemon of this identity, detached (its own session; stdin and stdout /dev/null, stderr to
    ``~/.lantern/logs/daemon.log``) so the host waiting on the hook's pipes never waits on it; it warms the
    database ``preload`` (``serve``). Returns whether the process was started. Never raises."""
    try:
        folder = os.path.join(os.path.expanduser("~"), ".lantern", "logs")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        code = "import sys; from lantern.integrations.daemon import serve; raise SystemExit(serve(preload=sys.argv[1]))"
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.path.join(folder, "daemon.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
        ]
        argv = [sys.executable, "-c", code, preload or ""]
        os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=actions, setsid=True)
        return True
    except Exception:
        return False


def _read_line(sock: _socket.socket, limit: int) -> bytes | None:
    """Bytes up to the first newline; None when the peer closed first. Raises ValueError past ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return None
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError(f"over {limit} bytes without a newline")


# ----------------------------------------------------------------------------------------------- the daemon


def _log(text: str) -> None:
    """One line on stderr (the daemon's log file): UTC time, pid, ``text``. Never message content."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        sys.stderr.write(f"{stamp} daemon {os.getpid()}: {text}\n")
        sys.stderr.flush()
    except Exception:
        pass


class Daemon:
    """The serving side: ``handles`` keeps one open ``Lantern`` per (database, user), reopened when the file was
    replaced or removed since (a handle on an unlinked file would write where no one reads)."""

    def __init__(self, config: Any = None) -> None:
        self.ident = identity()
        self.config = config  # the Config of the handles it opens (None: Lantern's default)
        self.handles: dict[tuple[str, str | None], tuple[Any, tuple[int, int] | None]] = {}
        self.after_reply: list[dict[str, Any]] = []  # archive-only hook requests, run once their reply is sent
        # spool entries that are not jobs and cannot be removed (a folder holding files: never walked), logged the
        # first time the drain meets them; their count is logged at exit
        self.spool_stuck: set[str] = set()
        self._stepper: Any = None  # the thread of the graph step in progress (``step_graphs_aside``)
        self._building = False  # what the last step returned

    def lantern(self, db: str | None, user: str | None) -> Any:
        from lantern.api import Lantern
        from lantern.config import DEFAULT, default_db_path, is_server_url

        location = str(db if db is not None else default_db_path())
        key = (location, user)
        mark = None if is_server_url(location) else _file_id(location)
        held = self.handles.get(key)
        if held is not None and (is_server_url(location) or (mark is not None and held[1] == mark)):
            return held[0]
        if held is not None:
            self.handles.pop(key)[0].close()
        handle = Lantern(location, user=user, config=self.config or DEFAULT)
        handle.build_graphs(background=True)  # long-lived: a large store's HNSW graphs built here and saved
        self.handles[key] = (handle, None if is_server_url(location) else _file_id(location))
        return handle

    def warm_up(self, db: str | None) -> None:
        """Load what the next hook needs: its modules, and ``db``'s handle (the hook's ``user``) with the model
        loaded by one embedding, when ``db`` (default the default database) exists. Never raises."""
        try:
            import lantern.integrations.claude_code  # noqa: F401
            import lantern.memory.triggers  # noqa: F401
            from lantern.config import default_db_path, is_server_url

            location = db or str(default_db_path())
            if is_server_url(location) or not os.path.isfile(location):
                return
            start = time.monotonic()
            handle = self.lantern(location, os.environ.get("LANTERN_USER") or None)
            handle.embedder.embed(["warm up"])
            _log(f"warmed up in {time.monotonic() - start:.2f} s")
        except Exception as e:  # a hook then loads what it needs itself
            _log(f"warm-up skipped: {type(e).__name__}")

    def fill(self) -> int:
        """Between requests: the vectors of up to ``FILL_PER_TICK`` entries a cold hook stored text-first
        (``Lantern.fill_unembedded``) in each open handle's store, so that none stays without one for long and a
        request never waits behind a long fill. Costs one indexed query per handle when there is none. Returns
        how many were written. Never raises."""
        done = 0
        for handle, _ in list(self.handles.values()):
            if handle.busy():  # a graph step holds it (step_graphs_aside): the serve loop must not wait for it
                continue
            try:
                done += handle.fill_unembedded(FILL_PER_TICK)
            except Exception as e:  # the next process that loads the models fills them (Lantern.fill_unembedded)
                _log(f"vector fill skipped: {type(e).__name__}")
        if done:
            _log(f"filled the vectors of {done} entr{'y' if done == 1 else 'ies'} stored text-first")
        return done

    def step_graphs(self) -> bool:
        """Between requests: each open handle's HNSW graphs a step further (``Lantern.step_graphs``: a large
        store's build started in a worker thread, a finished one saved with the index snapshot). So the graphs of
        a store only hooks write to (no read ever starts a build there) are built by this long-lived process and
        loaded by the short-lived ones. Returns whether a build is still running. Never raises."""
        building = False
        for handle, _ in list(self.handles.values()):
            try:
                building = handle.step_graphs() or building
            except Exception as e:  # the next request meets the same store and reports it in its own words
                _log(f"graph step skipped: {type(e).__name__}")
        return building

    def step_graphs_aside(self) -> bool:
        """``step_graphs`` in a worker thread (``lantern-graph-step``), off the request path: the serve loop goes
        back to ``accept`` at once, so a request arriving during a step (a large store's first full index load,
        a snapshot written: seconds) is read and answered meanwhile; one on the same store waits for that
        handle's lock only (``Lantern`` runs one call at a time: its connection is never used by two threads at
        once). One step at a time. Returns whether a step runs or a build is still running: call again later."""
        import threading

        if self._stepper is not None and self._stepper.is_alive():
            return True  # one step at a time

        def step() -> None:
            was, self._building = self._building, self.step_graphs()
            if was and not self._building:
                _log("graphs built and saved")

        self._stepper = threading.Thread(target=step, name="lantern-graph-step", daemon=True)
        self._stepper.start()
        return True

    def stepping(self) -> bool:
        """Whether a graph step runs, or the last one left a build running."""
        return (self._stepper is not None and self._stepper.is_alive()) or self._building

    def run_hook(self, job: dict[str, Any], deadline: float | None = None) -> str:
        """A hook request's stdout text: its host's in-process hook run with this daemon's handles, its database
        lock waits bounded together as an in-process hook's are (``claude_code.bounded_run``: ``HOOK_DB_WAIT_S``)
        and, for a request, by its client's ``deadline`` (``request_seconds_left``)."""
        from lantern.deadline import lock_deadline
        from lantern.integrations.claude_code import HOOK_DB_WAIT_S

        if job.get("host") not in HOOK_HOSTS or not isinstance(job.get("input"), str):
            raise ValueError("a hook request needs a known host and its input text")
        seconds = HOOK_DB_WAIT_S if deadline is None else min(HOOK_DB_WAIT_S, request_seconds_left(deadline))
        with lock_deadline(seconds):
            return _hook_runner(job["host"])(
                job["input"], job.get("db"), rewound=job.get("rewound"), opener=self.opener
            )

    def drain(self) -> int:
        """Run the archive-only hook requests answered already (``after_reply``), then the events handed over in
        the spool (``hand_over``), oldest first, each spool file removed before it runs (an event that fails is
        logged by its hook, never run again). Returns how many ran. Never raises."""
        ran = 0
        while self.after_reply:
            try:
                self.run_hook(self.after_reply.pop(0))
                ran += 1
            except Exception as e:  # noqa: BLE001 - the next hook archives the same lines
                _log(f"archive after the reply skipped: {type(e).__name__}")
        return ran + self._drain_spool()

    def _drain_spool(self) -> int:
        """Run the spool's ``*.job`` files (``hand_over``), oldest first, trusting none of what the spool holds:
        the folder is checked as ``hand_over`` checks it (``secure_dir``) and then opened without following a
        link, its entries read through that descriptor; a job is read only when it is a regular file of this user
        of at most ``MAX_REQUEST_BYTES`` (``_read_job``: never blocks on a FIFO, never follows a link), else it is
        removed with a log line (a folder only when empty: its content is never walked; one that cannot be removed
        is logged the first time only and kept in ``spool_stuck``); a ``.NAME.tmp`` left by a
        hook that died before its rename is removed once older than ``SPOOL_TMP_MAX_AGE_S``. Returns how many ran.
        Never raises."""
        folder = spool_dir()
        try:
            secure_dir(folder, create=False)
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (Unavailable, OSError):
            return 0
        ran = 0
        try:
            if not _same_secure_dir(fd, folder):
                _log("spool skipped: it changed while it was checked")
                return 0
            names = sorted(os.listdir(fd))
            self.spool_stuck.intersection_update(names)  # one removed by hand since is forgotten
            _remove_stale_tmp(fd, [n for n in names if n.startswith(".") and n.endswith(".tmp")])
            for name in (n for n in names if n.endswith(".job") and not n.startswith(".")):
                try:
                    data = _read_job(fd, name)
                    os.unlink(name, dir_fd=fd)
                    self.run_hook(loads(data.decode("utf-8", "replace")))
                    ran += 1
                except Exception as e:  # noqa: BLE001 - the next hook archives the same lines
                    removed = _remove_entry(fd, name)
                    if removed or name not in self.spool_stuck:  # one left behind is logged once, and counted
                        left = "" if removed else " (left in the spool; logged once)"
                        _log(f"handed-over event skipped: {type(e).__name__}: {e}{left}")
                    if not removed:
                        self.spool_stuck.add(name)
        except OSError as e:
            _log(f"spool skipped: {type(e).__name__}")
        finally:
            os.close(fd)
        if ran:
            _log(f"ran {ran} handed-over hook event{'' if ran == 1 else 's'}")
        return ran

    def close(self) -> None:
        if self.spool_stuck:
            n = len(self.spool_stuck)
            _log(f"{n} spool entr{'y' if n == 1 else 'ies'} could not be run or removed (not a job file)")
        if self._stepper is not None:  # its step ends before the handles it steps close
            self._stepper.join()
        for handle, _ in self.handles.values():
            try:
                handle.close()
            except Exception:
                pass
        self.handles.clear()

    def opener(self, ctx: Any) -> Any:
        """A hook's ``HookContext.opener``: this daemon's handle of the hook's database, left open after use."""
        import contextlib

        return contextlib.nullcontext(self.lantern(str(ctx.db), ctx.user))

    def handle(self, request: Any) -> Any:
        """The result of one request (JSON-ready). Raises ValueError for a malformed one."""
        if not isinstance(request, dict) or request.get("v") != PROTOCOL:
            raise ValueError(f"not a protocol {PROTOCOL} request")
        if request.get("id") != self.ident:
            raise ValueError("a client of another identity (home or LANTERN_* variables differ)")
        op, args = request.get("op"), request.get("args")
        if op not in OPS or not isinstance(args, dict):
            raise ValueError(f"unknown op {op!r}")
        deadline = request.get("deadline")
        if not isinstance(deadline, (int, float)) or isinstance(deadline, bool) or deadline != deadline:
            deadline = None  # a client without one (or NaN): the daemon's own bounds only
        if deadline is not None and request_seconds_left(deadline) <= 0:
            raise Expired("the client has given up on this request (past its deadline)")
        if op == "hook":
            if args.get("host") not in HOOK_HOSTS or not isinstance(args.get("input"), str):
                raise ValueError("a hook request needs a known host and its input text")
            kept = archive_only(args["input"])
            if kept is not None:  # nothing to print: answered at once, archived before the next request is read
                self.after_reply.append({**args, "input": kept})
                return ""
            return self.run_hook(args, deadline)
        if deadline is None:
            return self._call(op, args)
        from lantern.deadline import lock_deadline

        with lock_deadline(request_seconds_left(deadline)):  # a write the client gave up on is never made
            return self._call(op, args)

    def _call(self, op: str, args: dict[str, Any]) -> Any:
        """The result of a ``Lantern`` method request (``op`` other than hook)."""
        lantern = self.lantern(args.get("db"), args.get("user"))
        kw = {k: v for k, v in (args.get("kwargs") or {}).items() if k in _KWARGS[op]}
        if op == "archive":
            import dataclasses

            return dataclasses.asdict(lantern.archive(args["messages"], **kw))
        if op == "recover":
            started = time.perf_counter()
            rec = lantern.recover(args["query"], **kw)
            if isinstance(args.get("receipt"), str):  # the serving source's receipt (service.MemoryService.recover)
                lantern.record_compaction(
                    rec,
                    session=kw.get("session"),
                    reason="query",
                    lost=[],
                    source=args["receipt"],
                    latency_ms=1000 * (time.perf_counter() - started),
                    **{k: kw[k] for k in ("user", "agent", "project") if k in kw},
                )
            return rec.to_json()
        if op == "recover_compaction":
            return lantern.recover_compaction(args.get("summary"), **kw).to_json()
        return [r.to_json() for r in lantern.events(**kw)]


class Expired(ValueError):
    """A request read past its client's deadline (less ``DEADLINE_MARGIN_S``): refused unrun."""


def request_seconds_left(deadline: float) -> float:
    """Seconds the daemon has left for a request whose client waits until ``deadline`` (unix seconds), less
    ``DEADLINE_MARGIN_S``; 0 when past."""
    return max(0.0, deadline - DEADLINE_MARGIN_S - time.time())


def _hook_runner(host: str) -> Any:
    """The in-process hook of ``host``: ``run(text, db, rewound=, opener=) -> stdout text``, never raising
    (``claude_code.run``'s contract; a new host's hook module keeps it and is added here and to ``HOOK_HOSTS``)."""
    if host == "codex":
        from lantern.integrations.codex import run as codex_run

        return codex_run
    from lantern.integrations.claude_code import run

    return {"claude-code": run}[host]


_KWARGS = {
    "archive": {"session", "format", "agent", "project"},
    "recover": {"session", "budget", "exclude", "top_k", "agent", "project", "min_score", "proactive"},
    "recover_compaction": {"live", "session", "budget", "agent", "project", "record", "source", "reason"},
    "events": {"session", "limit", "event_id", "agent", "project"},
}


def _is_dir(path: str) -> bool:
    """Whether ``path`` is a directory (not followed when a link), which a daemon's socket cannot replace (a stale
    socket, a file or a FIFO it replaces); False when it is absent or unreadable."""
    import stat

    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def serve(idle_s: float | None = None, preload: str | None = None) -> int:
    """Run this identity's daemon until ``idle_s`` (default ``idle_seconds()``) pass with no request, or SIGTERM or
    SIGINT; whichever ends it, it removes its socket, its lock file and its spool folder when empty (``_remove_own``).
    Once listening, it warms up unless a request comes within ``WARM_UP_DELAY_S``: the hook's modules, and the
    handle of the database ``preload`` ("" or None: the default one; only when that file exists) with its
    embedding model loaded.
    Returns 0 also when another daemon of the identity holds the lock (it serves), 1 when the directory is not
    safe to use."""
    import signal

    idle = idle_s or idle_seconds()
    path = socket_path()
    try:
        secure_dir(os.path.dirname(path), create=True)
    except Unavailable as e:
        _log(f"not started: {e}")
        return 1
    lock_path = path[: -len(".sock")] + ".lock"
    lock = _take_lock(lock_path)
    if lock is None:
        return 0  # another daemon of this identity is up
    for stop in (signal.SIGTERM, signal.SIGINT):  # a clean exit: the finally below removes what it made
        signal.signal(stop, lambda *_: sys.exit(0))
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
    import socket  # the server side: socket.socket's accept() and context manager

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{path}.{os.getpid()}"
    daemon = Daemon()
    bound = None
    try:
        try:
            old = os.umask(0o177)
            try:
                listener.bind(tmp)
            finally:
                os.umask(old)
            os.chmod(tmp, 0o600)
            listener.listen(16)
            os.replace(tmp, path)  # over a stale socket, atomically
        except OSError as e:  # a directory (or a file it may not replace) at the socket's path: say so, no traceback
            _log(f"not started: cannot listen at {path}: {e.strerror or type(e).__name__}")
            return 1  # the temporary socket is removed below
        bound = _file_id(path)
        _log(f"serving {path} (idle exit after {idle:g} s)")
        me = os.getuid()
        last = time.monotonic()
        warmed = filling = False  # filling: the last idle fill found work (more may wait: look again soon)
        step_due = building = False  # the graphs are stepped after a quiet moment, and polled while one builds
        while True:
            quiet = time.monotonic() - last
            left = max(0.05, idle - quiet)
            timeout = min(left, SPOOL_POLL_S) if warmed else min(left, WARM_UP_DELAY_S)
            if filling:
                timeout = min(timeout, FILL_POLL_S)
            if warmed and (step_due or building):
                timeout = min(timeout, max(0.05, GRAPH_STEP_S - quiet) if step_due else GRAPH_STEP_S)
            listener.settimeout(timeout)
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if _file_id(path) != bound:  # its socket removed or replaced: no client can reach this daemon
                    _log("socket gone: exiting")
                    break
                if not warmed:  # the hook that started us has had the CPU to itself
                    daemon.warm_up(preload or None)
                    warmed = step_due = True
                ran, filled = daemon.drain(), daemon.fill()
                filling = filled > 0
                if ran + filled:
                    last = time.monotonic()
                    step_due = True
                    continue
                if (step_due and time.monotonic() - last >= GRAPH_STEP_S) or building:
                    step_due = False
                    daemon.step_graphs_aside()  # off the request path: accept goes on meanwhile
                    building = daemon.stepping()
                over = time.monotonic() - last - idle
                if over >= 0 and (not building or over >= GRAPH_BUILD_MAX_S):
                    _log("idle: exiting")
                    break
                continue
            with conn:
                uid = peer_uid(conn)
                if uid is not None and uid != me:
                    _log(f"refused a client of user {uid}")
                    _reply(conn, {"ok": False, "error": "another user's client"})
                    continue
                _serve_one(daemon, conn)
            daemon.drain()
            last = time.monotonic()
            warmed = step_due = True  # a request came first: it loaded what it needed
    finally:
        if bound is not None and _file_id(path) == bound:
            try:
                os.unlink(path)
            except OSError:
                pass
        for leftover in (tmp,):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        listener.close()
        daemon.close()
        _remove_own(lock, lock_path)
        os.close(lock)  # releases the lock: the next daemon may start
    return 0


def _take_lock(lock_path: str) -> int | None:
    """The open, ``flock``-ed lock file of this identity's daemon, or None when another daemon holds it. A daemon
    removes its lock file as it exits (``_remove_own``), while it still holds the lock: a file locked here that
    is no longer the one at ``lock_path`` was removed meanwhile, and the one there now is taken instead."""
    import fcntl

    for _ in range(8):
        lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            return None
        st = os.fstat(lock)
        if _file_id(lock_path) == (st.st_dev, st.st_ino):
            return lock
        os.close(lock)
    return None


def _remove_own(lock: int, lock_path: str) -> None:
    """On exit (idle, SIGTERM, SIGINT): remove the lock file while holding it (when it is still ours) and the
    spool folder when empty (a folder holding jobs is left: the next daemon runs them). Never raises."""
    try:
        st = os.fstat(lock)
        if _file_id(lock_path) == (st.st_dev, st.st_ino):
            os.unlink(lock_path)
    except OSError:
        pass
    try:
        os.rmdir(lock_path[: -len(".lock")] + ".spool")
    except OSError:
        pass


def _serve_one(daemon: Daemon, conn: _socket.socket) -> None:
    conn.settimeout(READ_TIMEOUT_S)
    try:
        line = _read_line(conn, MAX_REQUEST_BYTES)
    except (OSError, ValueError) as e:
        _reply(conn, {"ok": False, "error": f"request not read: {e}"})
        return
    if line is None:
        return
    try:
        result = daemon.handle(loads(line.decode("utf-8", "replace")))
    except Exception as e:  # the client works in-process and meets the same error there, in its own words
        _log(f"request failed: {type(e).__name__}")
        _reply(conn, {"ok": False, "error": type(e).__name__})
        return
    _reply(conn, {"ok": True, "result": result})


def _reply(conn: _socket.socket, answer: dict[str, Any]) -> None:
    try:
        conn.settimeout(REPLY_TIMEOUT_S)
        conn.sendall(dumps(answer).encode() + b"\n")
    except OSError:
        pass
