"""The bad-input table: every public call of ringio, fed each class of bad input.

One row per case: the API, the class of bad input, the call (a Python expression run
with the fixtures of ``tests/badinput/env.py`` in scope; ``await`` allowed) and what
must happen: an exception type (and errno where the kernel is the one refusing), or
``OK(what, check)``, a documented result. ``tools/badinput_table.py`` renders this
table as docs/bad-input.md.

Fixture names: ``fd`` (read-write on ``path``, 8 KiB), ``rofd``/``wofd`` (read-only /
write-only), ``dirfd`` (a directory), ``badfd`` (a number that is not open), ``rpipe``/
``wpipe``, ``s1``/``s2`` (a connected socketpair), ``listener`` (TCP on 127.0.0.1),
``unconnected``, ``closed_sock``, ``udp``, ``pyfile`` (a builtin file), ``buf`` (a
16-byte bytearray), ``ro``/``rmv`` (read-only bytes / memoryview), ``nc``
(non-contiguous view), ``big`` (2**63-1), ``huge`` (2**64); per group ``ctx``,
``ring``, ``actx``, ``lctx``, ``cctx``, ``w`` (a Watcher), ``f``/``fr``/``fw``/``fc``
(read-write / read-only / write-only / closed ringio files), ``loop`` and their
``closed_*`` twins; ``aiofiles`` (``ringio.compat.aiofiles``), ``lab``
(``ringio.compat.linux_aio_bind``); in the tempfile group ``ntf``, ``sp``/``spr``
(spooled, in memory / rolled over), ``spc``/``sprc`` (closed twins) and ``td``.
"""

from __future__ import annotations

import errno as E
import re
import sys
from dataclasses import dataclass
from io import UnsupportedOperation
from typing import Any

from ringio import WatcherClosedError


@dataclass(frozen=True)
class OK:
    """A documented result instead of an exception: `check` is an expression of `r`."""

    what: str
    check: str


@dataclass(frozen=True)
class Since:
    """An error that follows asyncio's, which changed in a CPython version: `before`
    until `version`, `after` from it on (the doc names both)."""

    version: tuple[int, int]
    before: type[BaseException]
    after: type[BaseException]
    why: str

    def current(self) -> type[BaseException]:
        return self.after if sys.version_info >= self.version else self.before

    def name(self) -> str:
        v = ".".join(map(str, self.version))
        return f"{self.before.__name__} ({self.after.__name__} from Python {v}: {self.why})"


@dataclass(frozen=True)
class Case:
    api: str
    case: str
    call: str
    expect: Any  # (exception type, errno or None[, filename expression]) or OK
    group: str
    per_engine: bool
    isolate: bool
    since: Since | None = None

    @property
    def id(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.]+", "-", f"{self.api}--{self.case}").strip("-")

    @property
    def expect_name(self) -> str:
        if self.since is not None:
            return self.since.name()
        if isinstance(self.expect, OK):
            return self.expect.what
        exc, no, filename = (*self.expect, None)[:3]
        if isinstance(exc, tuple):
            return " or ".join(t.__name__ for t in exc)
        detail = [E.errorcode[no]] if no is not None else []
        if filename is not None:
            detail.append(f"filename={filename}")
        return exc.__name__ + (f" ({', '.join(detail)})" if detail else "")


CASES: list[Case] = []
_GROUP = ""
_PER_ENGINE = False


def group(name: str, per_engine: bool = False) -> None:
    """Rows that follow share a fixture set (and health check); per_engine rows run
    once on each file engine (uring, aio, thread)."""
    global _GROUP, _PER_ENGINE
    _GROUP, _PER_ENGINE = name, per_engine


def row(api: str, case: str, call: str, expect: Any, *, isolate: bool = False) -> None:
    since = None
    if isinstance(expect, Since):
        since, expect = expect, expect.current()
    if isinstance(expect, type):
        expect = (expect, None)
    elif isinstance(expect, tuple) and all(isinstance(t, type) for t in expect):
        expect = (expect, None)  # any of these types
    CASES.append(Case(api, case, call, expect, _GROUP, _PER_ENGINE, isolate, since))


def err(no: int) -> tuple[type[OSError], int]:
    """OSError with this errno (the kernel's refusal)."""
    return (OSError, no)


def fnf(filename: str) -> tuple[type[OSError], int, str]:
    """FileNotFoundError (ENOENT) whose ``filename`` is the value of this expression
    of the fixtures (as os: the path that was not found)."""
    return (FileNotFoundError, E.ENOENT, filename)


# Common bad-argument sets, applied to many calls.
NOT_FD = [("fd is a str", "'3'"), ("fd is None", "None"), ("fd is a float", "3.0")]

# ------------------------------------------------------------------ ringio.aio ops
group("aio")
for name, args in [
    ("pread", "{fd}, bytearray(8), 0"),
    ("pwrite", "{fd}, b'ab', 0"),
    ("preadv", "{fd}, [bytearray(8)], 0"),
    ("pwritev", "{fd}, [b'ab'], 0"),
    ("fsync", "{fd}"),
    ("fdsync", "{fd}"),
    ("poll", "{fd}, 1"),
    ("noop", "{fd}"),
]:
    api = f"ringio.aio.{name}"
    for what, bad in NOT_FD:
        row(api, what, f"aio.{name}({args.format(fd=bad)})", TypeError)
    row(api, "fd is negative", f"aio.{name}({args.format(fd='-1')})", ValueError)
    row(api, "fd beyond int32", f"aio.{name}({args.format(fd='huge')})", OverflowError)
    if name != "noop":
        row(
            api,
            "fd not open (submitted)",
            f"ctx.submit([aio.{name}({args.format(fd='badfd')})])",
            err(E.EBADF),
        )
    row(
        api,
        "op after the context is closed",
        f"closed_ctx.submit([aio.{name}({args.format(fd='fd')})])",
        ValueError,
    )
for name in ("pread", "pwrite"):
    api = f"ringio.aio.{name}"
    b = "bytearray(8)" if name == "pread" else "b'ab'"
    row(api, "negative offset", f"aio.{name}(fd, {b}, -1)", ValueError)
    row(api, "offset beyond int64", f"aio.{name}(fd, {b}, huge)", OverflowError)
    row(
        api,
        "offset at 2**63-1 (submitted)",
        f"ctx.submit([aio.{name}(fd, {b}, big)])",
        err(E.EINVAL),
    )
    row(api, "offset is a float", f"aio.{name}(fd, {b}, 1.5)", TypeError)
    row(api, "buffer is None", f"aio.{name}(fd, None, 0)", TypeError)
    row(api, "buffer is a str", f"aio.{name}(fd, 'abc', 0)", TypeError)
    row(api, "buffer is non-contiguous", f"aio.{name}(fd, nc, 0)", BufferError)
    row(
        api,
        "fd is a directory (submitted)",
        f"ctx.submit([aio.{name}(dirfd, {b}, 0)])",
        err(E.EINVAL if name == "pread" else E.EBADF),
    )
    row(
        api,
        "unknown rw_flags (submitted)",
        f"ctx.submit([aio.{name}(fd, {b}, 0, rw_flags=0x7fff0000)])",
        err(E.EOPNOTSUPP),
    )
    row(api, "priority not an ioprio value", f"aio.{name}(fd, {b}, 0, priority=2**20)", ValueError)
    row(api, "resfd negative", f"aio.{name}(fd, {b}, 0, resfd=-5)", ValueError)
    row(
        api,
        "resfd not open (submitted)",
        f"ctx.submit([aio.{name}(fd, {b}, 0, resfd=badfd)])",
        err(E.EBADF),
    )
row("ringio.aio.pread", "read-only target (bytes)", "aio.pread(fd, ro, 0)", TypeError)
row("ringio.aio.pread", "read-only target (memoryview)", "aio.pread(fd, rmv, 0)", TypeError)
row(
    "ringio.aio.pread",
    "fd is write-only (submitted)",
    "ctx.submit([aio.pread(wofd, bytearray(8), 0)])",
    err(E.EBADF),
)
row(
    "ringio.aio.pwrite",
    "fd is read-only (submitted)",
    "ctx.submit([aio.pwrite(rofd, b'x', 0)])",
    err(E.EBADF),
)
row(
    "ringio.aio.pread",
    "fd is a socket (completes with ENOTCONN)",
    "scenarios.aio_result(ctx, aio.pread(unconnected, bytearray(8), 0))",
    OK("completion error ENOTCONN", "r == -errno.ENOTCONN"),
)
row(
    "ringio.aio.pread",
    "offset past end of file",
    "scenarios.aio_result(ctx, aio.pread(fd, bytearray(8), 10**9))",
    OK("0 bytes", "r == 0"),
)
row(
    "ringio.aio.pread",
    "buffer resized before submit",
    "scenarios.resize_after_op(aio.pread)",
    OK("the op uses the buffer as it is at submit", "r == 9"),
)
row(
    "ringio.aio.pread",
    "buffer dropped while in flight",
    "scenarios.aio_drop_buffer_in_flight(ctx, fd)",
    OK("8192 bytes read", "r == 8192"),
    isolate=True,
)
row("ringio.aio.preadv", "not a list", "aio.preadv(fd, 5, 0)", TypeError)
row(
    "ringio.aio.preadv",
    "a read-only buffer in the list",
    "aio.preadv(fd, [bytearray(2), ro], 0)",
    TypeError,
)
row("ringio.aio.preadv", "None in the list", "aio.preadv(fd, [None], 0)", TypeError)
row(
    "ringio.aio.preadv",
    "empty list (submitted)",
    "scenarios.aio_result(ctx, aio.preadv(fd, [], 0))",
    OK("0 bytes", "r == 0"),
)
row("ringio.aio.pwritev", "a str in the list", "aio.pwritev(fd, ['ab'], 0)", TypeError)
row("ringio.aio.pwritev", "negative offset", "aio.pwritev(fd, [b'ab'], -1)", ValueError)
row("ringio.aio.poll", "events is a str", "aio.poll(fd, 'x')", TypeError)
row("ringio.aio.poll", "events negative", "aio.poll(fd, -1)", OverflowError)
row(
    "ringio.aio.noop",
    "submitted (the kernel refuses IOCB_CMD_NOOP)",
    "ctx.submit([aio.noop(fd)])",
    err(E.EINVAL),
)
row("ringio.aio.ioprio", "unknown class", "aio.ioprio(9)", ValueError)
row("ringio.aio.ioprio", "level 8", "aio.ioprio(aio.IOPRIO_CLASS_BE, 8)", ValueError)
row("ringio.aio.ioprio", "level negative", "aio.ioprio(aio.IOPRIO_CLASS_BE, -1)", ValueError)
row("ringio.aio.ioprio", "level is a str", "aio.ioprio(aio.IOPRIO_CLASS_BE, 'x')", TypeError)
row("ringio.aio.ioprio", "class is None", "aio.ioprio(None)", ValueError)
# Context
row("ringio.aio.Context", "maxevents 0", "aio.Context(0)", ValueError)
row("ringio.aio.Context", "maxevents negative", "aio.Context(-1)", ValueError)
row("ringio.aio.Context", "maxevents 2**40", "aio.Context(2**40)", ValueError)
row("ringio.aio.Context", "maxevents is a str", "aio.Context('8')", TypeError)
row("ringio.aio.Context", "maxevents is None", "aio.Context(None)", TypeError)
row("ringio.aio.Context.submit", "not a list", "ctx.submit(5)", TypeError)
row("ringio.aio.Context.submit", "not an op in the list", "ctx.submit([5])", TypeError)
row("ringio.aio.Context.submit", "None", "ctx.submit(None)", TypeError)
row(
    "ringio.aio.Context.submit",
    "an op already in flight",
    "scenarios.submit_twice_in_flight(ctx, rpipe)",
    ValueError,
)
row(
    "ringio.aio.Context.submit",
    "more ops than maxevents",
    "scenarios.aio_overfill(ctx, fd, 64)",
    OK("all complete or the kernel refuses with EAGAIN", "r in ('done', errno.EAGAIN)"),
)
row("ringio.aio.Context.get_events", "min_nr negative", "ctx.get_events(-1)", ValueError)
row("ringio.aio.Context.get_events", "min_nr > max_nr", "ctx.get_events(3, 1)", ValueError)
row(
    "ringio.aio.Context.get_events",
    "min_nr > ops in flight, no timeout (would hang)",
    "ctx.get_events(1)",
    ValueError,
)
row(
    "ringio.aio.Context.get_events",
    "negative timeout",
    "ctx.get_events(0, 1, timeout=-1)",
    ValueError,
)
row(
    "ringio.aio.Context.get_events",
    "NaN timeout",
    "ctx.get_events(0, 1, timeout=float('nan'))",
    ValueError,
)
row(
    "ringio.aio.Context.get_events",
    "timeout is a str",
    "ctx.get_events(0, 1, timeout='1')",
    TypeError,
)
row(
    "ringio.aio.Context.get_events",
    "after close",
    "closed_ctx.get_events(0, 1, timeout=0)",
    ValueError,
)
row(
    "ringio.aio.Context.cancel",
    "op never submitted",
    "ctx.cancel(aio.pread(fd, bytearray(8), 0))",
    ValueError,
)
row("ringio.aio.Context.cancel", "not an op", "ctx.cancel(5)", TypeError)
row(
    "ringio.aio.Context.cancel",
    "after close",
    "closed_ctx.cancel(aio.pread(fd, bytearray(8), 0))",
    ValueError,
)
row("ringio.aio.Context.fileno", "after close", "closed_ctx.fileno()", ValueError)
row("ringio.aio.Context.close", "twice", "closed_ctx.close()", OK("None", "r is None"))
row(
    "ringio.aio.Context.close",
    "with a poll in flight",
    "scenarios.close_with_poll_in_flight(ctx, rpipe)",
    OK("returns; the poll completes cancelled", "r is True"),
    isolate=True,
)

# ------------------------------------------------------------------ ringio.aio.AsyncContext
group("aioasync")
A = "ringio.aio.AsyncContext"
row(A, "maxevents 0", "aio.AsyncContext(0)", ValueError)
row(A, "maxevents is a str", "aio.AsyncContext('8')", TypeError)
row(A + ".read", "negative size", "await actx.read(fd, -1)", ValueError)
row(A + ".read", "size is a str", "await actx.read(fd, '8')", TypeError)
row(A + ".read", "fd not open", "await actx.read(badfd, 8)", err(E.EBADF))
row(A + ".read", "fd is a str", "await actx.read('3', 8)", TypeError)
row(A + ".read", "fd is a directory", "await actx.read(dirfd, 8)", err(E.EINVAL))
row(A + ".read", "fd is write-only", "await actx.read(wofd, 8)", err(E.EBADF))
row(A + ".read", "negative offset", "await actx.read(fd, 8, -1)", ValueError)
row(A + ".read", "offset 2**63-1", "await actx.read(fd, 8, big)", err(E.EINVAL))
row(A + ".read", "offset past end of file", "await actx.read(fd, 8, 10**9)", OK("b''", "r == b''"))
row(A + ".readinto", "read-only buffer", "await actx.readinto(fd, ro)", TypeError)
row(A + ".readinto", "None buffer", "await actx.readinto(fd, None)", TypeError)
row(
    A + ".readinto",
    "buffer resized while in flight",
    "await scenarios.actx_resize_in_flight(actx, fd)",
    OK(
        "BufferError at the resize (or resized before submit); the read completes",
        "r in (('BufferError', 16), ('resized', 8192))",
    ),
    isolate=True,
)
row(A + ".write", "str data", "await actx.write(fd, 'abc')", TypeError)
row(A + ".write", "fd is read-only", "await actx.write(rofd, b'ab')", err(E.EBADF))
row(A + ".write", "fd is a socket", "await actx.write(unconnected, b'ab')", OSError)
row(A + ".readv", "not iterable", "await actx.readv(fd, 5)", TypeError)
row(A + ".writev", "a str in the list", "await actx.writev(fd, ['ab'])", TypeError)
row(A + ".fsync", "fd not open", "await actx.fsync(badfd)", err(E.EBADF))
row(A + ".fdsync", "fd is a pipe", "await actx.fdsync(wpipe)", err(E.EINVAL))
row(A + ".poll", "events is a str", "await actx.poll(rpipe, 'x')", TypeError)
row(A + ".poll", "fd not open", "await actx.poll(badfd)", err(E.EBADF))
row(
    A,
    "more ops than maxevents (back-pressure)",
    "await scenarios.actx_backpressure(actx, fd, 200)",
    OK("all 200 complete", "r == 200"),
)
row(A, "op after close", "await scenarios.actx_after_close(actx, fd)", ValueError)

# ------------------------------------------------------------------ ringio.uring
group("uring")
row("ringio.uring.Ring", "entries 0", "uring.Ring(0)", ValueError)
row("ringio.uring.Ring", "entries negative", "uring.Ring(-1)", ValueError)
row("ringio.uring.Ring", "entries 2**40", "uring.Ring(2**40)", ValueError)
row("ringio.uring.Ring", "entries is a str", "uring.Ring('8')", TypeError)
row("ringio.uring.Ring", "sqpoll_idle negative", "uring.Ring(8, sqpoll_idle=-1)", OverflowError)
row("ringio.uring.Ring.submit", "not a list", "ring.submit(5)", TypeError)
row("ringio.uring.Ring.submit", "not an op in the list", "ring.submit(['x'])", TypeError)
row("ringio.uring.Ring.submit", "after close", "closed_ring.submit([uring.noop(fd)])", ValueError)
row(
    "ringio.uring.Ring.submit",
    "more ops than the SQ holds",
    "scenarios.ring_overfill(ring, fd, 100)",
    OK("all 100 complete", "r == 100"),
)
row(
    "ringio.uring.Ring.get_events",
    "min_nr > ops in flight, no timeout (would hang)",
    "ring.get_events(1)",
    ValueError,
)
row(
    "ringio.uring.Ring.get_events",
    "negative timeout",
    "ring.get_events(0, 1, timeout=-1)",
    ValueError,
)
row("ringio.uring.Ring.get_events", "min_nr > max_nr", "ring.get_events(2, 1)", ValueError)
row(
    "ringio.uring.Ring.get_events",
    "after close",
    "closed_ring.get_events(0, 1, timeout=0)",
    ValueError,
)
row("ringio.uring.Ring.cancel", "op never submitted", "ring.cancel(uring.noop(fd))", ValueError)
row("ringio.uring.Ring.cancel", "after close", "closed_ring.cancel(uring.noop(fd))", ValueError)
row("ringio.uring.Ring.fileno", "after close", "closed_ring.fileno()", ValueError)
row(
    "ringio.uring.Ring.fileno",
    "a ring made with eventfd=False",
    "uring.Ring(8, eventfd=False).fileno()",
    ValueError,
)
row("ringio.uring.Ring.close", "twice", "closed_ring.close()", OK("None", "r is None"))
row(
    "ringio.uring.Ring.close",
    "with a read in flight",
    "scenarios.ring_close_in_flight(ring, rpipe)",
    OK("returns; the buffer is not written after", "r is True"),
    isolate=True,
)
row(
    "ringio.uring.read",
    "fd not open",
    "scenarios.ring_result(ring, uring.read(badfd, bytearray(8)))",
    OK("completion error EBADF", "r == -errno.EBADF"),
)
row(
    "ringio.uring.read",
    "fd is a directory",
    "scenarios.ring_result(ring, uring.read(dirfd, bytearray(8)))",
    OK("completion error EISDIR", "r == -errno.EISDIR"),
)
row("ringio.uring.read", "read-only target", "uring.read(rpipe, ro)", TypeError)
row("ringio.uring.read", "fd is a str", "uring.read('3', bytearray(8))", TypeError)
row(
    "ringio.uring.read",
    "buffer resized while in flight",
    "scenarios.ring_resize_in_flight(ring, rpipe, wpipe)",
    OK("BufferError at the resize; the read completes", "r == ('BufferError', b'hi')"),
    isolate=True,
)
row(
    "ringio.uring.read",
    "buffer dropped while in flight",
    "scenarios.ring_drop_in_flight(ring, rpipe, wpipe)",
    OK("the read completes into the held buffer", "r == 2"),
    isolate=True,
)
row(
    "ringio.uring.write",
    "fd is read-only",
    "scenarios.ring_result(ring, uring.write(rofd, b'ab'))",
    OK("completion error EBADF", "r == -errno.EBADF"),
)
row("ringio.uring.write", "str data", "uring.write(wpipe, 'ab')", TypeError)
row(
    "ringio.uring.pread",
    "offset 2**63-1",
    "scenarios.ring_result(ring, uring.pread(fd, bytearray(8), big))",
    OK("completion error EINVAL", "r == -errno.EINVAL"),
)
row("ringio.uring.pread", "negative offset", "uring.pread(fd, bytearray(8), -1)", ValueError)
row(
    "ringio.uring.pwrite",
    "fd is a pipe (no offset)",
    "scenarios.ring_result(ring, uring.pwrite(wpipe, b'a', 0))",
    OK("1 byte (io_uring ignores the offset of a stream)", "r == 1"),
)
P = "ringio.uring.openat"
row(P, "path is None", "uring.openat(None, os.O_RDONLY)", TypeError)
row(P, "path is an int", "uring.openat(5, os.O_RDONLY)", TypeError)
row(P, "embedded NUL", "uring.openat('a\\0b', os.O_RDONLY)", ValueError)
row(P, "flags is a str", "uring.openat(path, 'r')", TypeError)
row(P, "mode negative", "uring.openat(path, os.O_RDONLY, -1)", OverflowError)
row(P, "dir_fd negative", "uring.openat('x', os.O_RDONLY, dir_fd=-5)", ValueError)
row(
    P,
    "missing file",
    "scenarios.ring_result(ring, uring.openat(missing, os.O_RDONLY))",
    OK("completion error ENOENT", "r == -errno.ENOENT"),
)
row(
    P,
    "dir_fd not open",
    "scenarios.ring_result(ring, uring.openat('x', os.O_RDONLY, dir_fd=badfd))",
    OK("completion error EBADF", "r == -errno.EBADF"),
)
row(
    P,
    "dir_fd is a file",
    "scenarios.ring_result(ring, uring.openat('x', os.O_RDONLY, dir_fd=fd))",
    OK("completion error ENOTDIR", "r == -errno.ENOTDIR"),
)
row(
    P,
    "path too long",
    "scenarios.ring_result(ring, uring.openat('a' * 5000, os.O_RDONLY))",
    OK("completion error ENAMETOOLONG", "r == -errno.ENAMETOOLONG"),
)
row(
    P,
    "O_DIRECTORY on a file",
    "scenarios.ring_result(ring, uring.openat(path, os.O_RDONLY | os.O_DIRECTORY))",
    OK("completion error ENOTDIR", "r == -errno.ENOTDIR"),
)
row(
    "ringio.uring.close",
    "fd not open",
    "scenarios.ring_result(ring, uring.close(badfd))",
    OK("completion error EBADF", "r == -errno.EBADF"),
)
row("ringio.uring.close", "fd is a str", "uring.close('3')", TypeError)
row(
    "ringio.uring.statx",
    "empty path",
    "scenarios.ring_result(ring, uring.statx(''))",
    OK("completion error ENOENT", "r == -errno.ENOENT"),
)
row("ringio.uring.statx", "mask negative", "uring.statx(path, mask=-1)", OverflowError)
row(
    "ringio.uring.statx",
    "unknown flags",
    "scenarios.ring_result(ring, uring.statx(path, flags=0x7fffffff))",
    OK("completion error EINVAL", "r == -errno.EINVAL"),
)
row("ringio.uring.statx", "path is None", "uring.statx(None)", TypeError)
row(
    "ringio.uring.fstat",
    "fd not open",
    "scenarios.ring_result(ring, uring.fstat(badfd))",
    OK("completion error EBADF", "r == -errno.EBADF"),
)
row("ringio.uring.fstat", "fd is a str", "uring.fstat('3')", TypeError)
row("ringio.uring.fstat", "fd is None", "uring.fstat(None)", TypeError)
row("ringio.uring.fstat", "fd negative", "uring.fstat(-1)", ValueError)
row(
    "ringio.uring.stat_result",
    "op not submitted",
    "uring.stat_result(uring.statx(path))",
    ValueError,
)
row(
    "ringio.uring.stat_result", "op is not a statx", "uring.stat_result(uring.noop(fd))", ValueError
)
row("ringio.uring.stat_result", "None", "uring.stat_result(None)", TypeError)
row(
    "ringio.uring.stat_result",
    "a failed statx",
    "scenarios.failed_statx_result(ring, missing)",
    ValueError,
)
row("ringio.uring.ftruncate", "negative length", "uring.ftruncate(fd, -1)", ValueError)
row(
    "ringio.uring.ftruncate",
    "length 2**63-1",
    "scenarios.ring_result(ring, uring.ftruncate(fd, big))",
    OK("completion error EFBIG or EINVAL", "r in (-errno.EFBIG, -errno.EINVAL)"),
)
row(
    "ringio.uring.ftruncate",
    "fd is read-only",
    "scenarios.ring_result(ring, uring.ftruncate(rofd, 0))",
    OK("completion error EINVAL or EBADF", "r in (-errno.EINVAL, -errno.EBADF)"),
)
row(
    "ringio.uring.ftruncate",
    "fd is a pipe",
    "scenarios.ring_result(ring, uring.ftruncate(wpipe, 0))",
    OK("completion error EINVAL", "r == -errno.EINVAL"),
)
row("ringio.uring.fallocate", "negative offset", "uring.fallocate(fd, -1, 10)", ValueError)
row("ringio.uring.fallocate", "zero length", "uring.fallocate(fd, 0, 0)", ValueError)
row(
    "ringio.uring.fallocate",
    "unknown mode",
    "scenarios.ring_result(ring, uring.fallocate(fd, 0, 10, 0x7fffffff))",
    OK("completion error EOPNOTSUPP", "r == -errno.EOPNOTSUPP"),
)
row(
    "ringio.uring.renameat",
    "missing source",
    "scenarios.ring_result(ring, uring.renameat(missing, newpath))",
    OK("completion error ENOENT", "r == -errno.ENOENT"),
)
row(
    "ringio.uring.renameat",
    "unknown flags",
    "scenarios.ring_result(ring, uring.renameat(path, newpath, flags=0x7fff))",
    OK("completion error EINVAL", "r == -errno.EINVAL"),
)
row("ringio.uring.renameat", "dst is None", "uring.renameat(path, None)", TypeError)
row(
    "ringio.uring.unlinkat",
    "missing",
    "scenarios.ring_result(ring, uring.unlinkat(missing))",
    OK("completion error ENOENT", "r == -errno.ENOENT"),
)
row(
    "ringio.uring.unlinkat",
    "a directory without rmdir",
    "scenarios.ring_result(ring, uring.unlinkat(tmp))",
    OK("completion error EISDIR", "r == -errno.EISDIR"),
)
row(
    "ringio.uring.unlinkat",
    "a file with rmdir=True",
    "scenarios.ring_result(ring, uring.unlinkat(path, rmdir=True))",
    OK("completion error ENOTDIR", "r == -errno.ENOTDIR"),
)
row(
    "ringio.uring.mkdirat",
    "exists",
    "scenarios.ring_result(ring, uring.mkdirat(tmp))",
    OK("completion error EEXIST", "r == -errno.EEXIST"),
)
row("ringio.uring.mkdirat", "mode negative", "uring.mkdirat(newpath, -1)", OverflowError)
row(
    "ringio.uring.symlinkat",
    "target exists",
    "scenarios.ring_result(ring, uring.symlinkat('x', path))",
    OK("completion error EEXIST", "r == -errno.EEXIST"),
)
row(
    "ringio.uring.linkat",
    "missing source",
    "scenarios.ring_result(ring, uring.linkat(missing, newpath))",
    OK("completion error ENOENT", "r == -errno.ENOENT"),
)
row(
    "ringio.uring.linkat",
    "a directory",
    "scenarios.ring_result(ring, uring.linkat(tmp, newpath))",
    OK("completion error EPERM", "r == -errno.EPERM"),
)

# ------------------------------------------------------------------ aligned, dio_alignment
group("aligned")
row("ringio.aligned", "nbytes negative", "ringio.aligned(-1)", ValueError)
row("ringio.aligned", "nbytes is a str", "ringio.aligned('4096')", TypeError)
row("ringio.aligned", "nbytes 2**62", "ringio.aligned(2**62)", MemoryError)
row("ringio.aligned", "alignment 3", "ringio.aligned(4096, 3)", ValueError)
row("ringio.aligned", "alignment 0", "ringio.aligned(4096, 0)", ValueError)
row(
    "ringio.aligned",
    "alignment negative",
    "ringio.aligned(4096, -4096)",
    (ValueError, OverflowError),
)
row("ringio.aligned", "nbytes 0", "len(ringio.aligned(0))", OK("an empty buffer", "r == 0"))
row("ringio.aligned", "resized", "scenarios.resize_aligned()", BufferError)
row("ringio.dio_alignment", "fd not open", "ringio.dio_alignment(badfd)", err(E.EBADF))
row("ringio.dio_alignment", "fd negative", "ringio.dio_alignment(-1)", err(E.EBADF))
row("ringio.dio_alignment", "fd is a str", "ringio.dio_alignment('3')", TypeError)
row("ringio.dio_alignment", "fd is None", "ringio.dio_alignment(None)", TypeError)
row(
    "ringio.dio_alignment",
    "fd is a socket",
    "ringio.dio_alignment(s1.fileno())",
    OK("None (no O_DIRECT alignment)", "r is None"),
)

# ------------------------------------------------------------------ ringio.open
group("open", per_engine=True)
OPEN = "ringio.open"
row(OPEN, "file is None", "await ringio.open(None)", TypeError)
row(OPEN, "file is a float", "await ringio.open(1.5)", TypeError)
row(OPEN, "missing file", "await ringio.open(missing)", FileNotFoundError)
row(OPEN, "a directory", "await ringio.open(tmp)", IsADirectoryError)
row(OPEN, "a directory for writing", "await ringio.open(tmp, 'w')", IsADirectoryError)
row(OPEN, "fd not open", "await ringio.open(badfd, 'rb')", err(E.EBADF))
row(OPEN, "fd negative", "await ringio.open(-1, 'rb')", ValueError)
row(OPEN, "fd is a directory", "await ringio.open(dirfd, 'rb', closefd=False)", IsADirectoryError)
row(OPEN, "embedded NUL", "await ringio.open('a\\0b')", ValueError)
row(OPEN, "path too long", "await ringio.open('a' * 5000)", err(E.ENAMETOOLONG))
row(OPEN, "mode unknown letter", "await ringio.open(path, 'rz')", ValueError)
row(OPEN, "mode is None", "await ringio.open(path, None)", TypeError)
row(OPEN, "mode rw", "await ringio.open(path, 'rw')", ValueError)
row(OPEN, "mode bt", "await ringio.open(path, 'bt')", ValueError)
row(OPEN, "mode x on an existing file", "await ringio.open(path, 'x')", FileExistsError)
row(OPEN, "buffering is a str", "await ringio.open(path, 'rb', '0')", TypeError)
row(OPEN, "unbuffered text", "await ringio.open(path, 'r', 0)", ValueError)
row(OPEN, "encoding in binary mode", "await ringio.open(path, 'rb', encoding='utf-8')", ValueError)
row(OPEN, "unknown encoding", "await ringio.open(path, encoding='nope')", LookupError)
row(OPEN, "encoding is an int", "await ringio.open(path, encoding=5)", TypeError)
row(
    OPEN,
    "unknown errors handler",
    "await ringio.open(path, encoding='utf-8', errors='nope')",
    LookupError,
)
row(OPEN, "illegal newline", "await ringio.open(path, encoding='utf-8', newline='x')", ValueError)
row(OPEN, "closefd=False with a name", "await ringio.open(path, 'rb', closefd=False)", ValueError)
row(OPEN, "direct=True in text mode", "await ringio.open(path, 'r', direct=True)", ValueError)
row(
    OPEN,
    "opener returns a str",
    "await ringio.open(path, 'rb', opener=lambda p, fl: 'x')",
    TypeError,
)
row(OPEN, "opener returns -1", "await ringio.open(path, 'rb', opener=lambda p, fl: -1)", ValueError)
row(
    OPEN,
    "opener raises",
    "await ringio.open(path, 'rb', opener=lambda p, fl: os.open(missing, fl))",
    FileNotFoundError,
)
row(
    OPEN,
    "fd is a socket (reads work as a stream)",
    "await scenarios.open_socket_fd(s1, s2)",
    OK("b'hi'", "r == b'hi'"),
)
row(
    OPEN,
    "not awaited, never entered",
    "type(ringio.open(missing)).__name__",
    OK("an _Opening, no fd opened", "r == '_Opening'"),
)

# ------------------------------------------------------------------ file objects
FILE_GROUPS = [
    ("filebin", "ringio.AsyncBufferedFile"),
    ("fileraw", "ringio.AsyncFileIO"),
    ("filetext", "ringio.AsyncTextFile"),
]
for grp, cls in FILE_GROUPS:
    group(grp, per_engine=True)
    text = grp == "filetext"
    data = "'ab'" if text else "b'ab'"
    wrong = "b'ab'" if text else "'ab'"
    row(cls + ".read", "size is a str", "await f.read('1')", TypeError)
    row(cls + ".read", "size is a float", "await f.read(1.5)", TypeError)
    row(cls + ".read", "on a write-only file", "await fw.read()", UnsupportedOperation)
    row(cls + ".read", "after close", "await fc.read()", ValueError)
    row(
        cls + ".read",
        "size 2**62 at end of file",
        "(await f.seek(0, 2), await f.read(2**62))[1]",
        OK("'' (the builtin: MemoryError)", "r == ''") if text else MemoryError,
    )
    row(cls + ".readline", "size is a str", "await f.readline('1')", TypeError)
    row(cls + ".readline", "after close", "await fc.readline()", ValueError)
    row(cls + ".readlines", "hint is a str", "await f.readlines('1')", TypeError)
    row(cls + ".write", "wrong data type", f"await f.write({wrong})", TypeError)
    row(cls + ".write", "None", "await f.write(None)", TypeError)
    row(cls + ".write", "on a read-only file", f"await fr.write({data})", UnsupportedOperation)
    row(cls + ".write", "after close", f"await fc.write({data})", ValueError)
    row(cls + ".writelines", "an int in the list", "await f.writelines([5])", TypeError)
    row(cls + ".seek", "offset is a str", "await f.seek('1')", TypeError)
    row(cls + ".seek", "offset is a float", "await f.seek(1.5)", TypeError)
    if grp == "fileraw":  # as FileIO: lseek refuses it
        row(cls + ".seek", "whence 7", "await f.seek(0, 7)", err(E.EINVAL))
    else:
        row(cls + ".seek", "whence 7", "await f.seek(0, 7)", ValueError)
    row(cls + ".seek", "after close", "await fc.seek(0)", ValueError)
    row(cls + ".tell", "after close", "await fc.tell()", ValueError)
    row(cls + ".truncate", "size is a str", "await f.truncate('1')", TypeError)
    row(cls + ".truncate", "on a read-only file", "await fr.truncate(0)", UnsupportedOperation)
    row(cls + ".truncate", "after close", "await fc.truncate(0)", ValueError)
    row(cls + ".fsync", "after close", "await fc.fsync()", ValueError)
    row(cls + ".flush", "after close", "await fc.flush()", ValueError)
    row(cls + ".fileno", "after close", "fc.fileno()", ValueError)
    row(cls + ".close", "twice", "await fc.close()", OK("None", "r is None"))
    row(
        cls + ".close",
        "fd closed behind its back",
        "await scenarios.close_fd_under(f)",
        err(E.EBADF),
    )
    row(
        cls + ".read",
        "fd closed behind its back",
        "await scenarios.read_fd_closed_under(f)",
        err(E.EBADF),
    )
    if text:
        row(cls + ".seek", "negative cookie", "await f.seek(-1)", ValueError)
        row(cls + ".seek", "nonzero relative seek", "await f.seek(1, 1)", UnsupportedOperation)
        row(
            cls + ".read",
            "undecodable bytes, strict",
            "await scenarios.text_undecodable(path)",
            UnicodeDecodeError,
        )
        row(
            cls + ".write",
            "unencodable text, strict",
            "await f.write('\\u20ac')",
            UnicodeEncodeError,
        )
        continue
    row(cls + ".seek", "negative position", "await f.seek(-1)", (OSError, E.EINVAL))
    row(cls + ".seek", "negative result of SEEK_CUR", "await f.seek(-10, 1)", (OSError, E.EINVAL))
    row(cls + ".truncate", "negative size", "await f.truncate(-1)", (OSError, E.EINVAL))
    row(cls + ".truncate", "size 2**63-1", "await f.truncate(big)", (OSError, E.EFBIG))
    row(cls + ".readinto", "read-only buffer", "await f.readinto(ro)", TypeError)
    row(cls + ".readinto", "read-only memoryview", "await f.readinto(rmv)", TypeError)
    row(cls + ".readinto", "None", "await f.readinto(None)", TypeError)
    row(cls + ".readinto", "after close", "await fc.readinto(bytearray(4))", ValueError)
    row(
        cls + ".readinto",
        "buffer resized while in flight",
        "await scenarios.file_resize_in_flight(f)",
        OK(
            "the read completes with the old size or the resize fails", "r in ('ok', 'BufferError')"
        ),
        isolate=True,
    )
    row(cls + ".pread", "negative offset", "await f.pread(4, -1)", ValueError)
    row(cls + ".pread", "negative size", "await f.pread(-1, 0)", ValueError)
    row(cls + ".pread", "offset 2**63-1", "await f.pread(4, big)", err(E.EINVAL))
    row(cls + ".pread", "offset beyond int64", "await f.pread(4, huge)", OverflowError)
    row(cls + ".pread", "size is a str", "await f.pread('4', 0)", TypeError)
    row(cls + ".pread", "on a write-only file", "await fw.pread(4, 0)", UnsupportedOperation)
    pinto = cls + ".preadinto"
    row(pinto, "read-only buffer", "await f.preadinto(ro, 0)", TypeError)
    row(pinto, "read-only memoryview", "await f.preadinto(rmv, 0)", TypeError)
    row(pinto, "None", "await f.preadinto(None, 0)", TypeError)
    row(pinto, "negative offset", "await f.preadinto(bytearray(4), -1)", ValueError)
    row(pinto, "offset is a float", "await f.preadinto(bytearray(4), 1.5)", TypeError)
    row(pinto, "offset 2**63-1", "await f.preadinto(bytearray(4), big)", err(E.EINVAL))
    row(pinto, "offset beyond int64", "await f.preadinto(bytearray(4), huge)", OverflowError)
    row(pinto, "on a write-only file", "await fw.preadinto(bytearray(4), 0)",
        UnsupportedOperation)  # fmt: skip
    row(pinto, "after close", "await fc.preadinto(bytearray(4), 0)", ValueError)
    many = cls + ".pread_many"
    row(many, "negative offset", "await f.pread_many(4, [0, -1])", ValueError)
    row(many, "negative size", "await f.pread_many(-1, [0])", ValueError)
    row(many, "depth 0", "await f.pread_many(4, [0], depth=0)", ValueError)
    row(many, "offsets not iterable", "await f.pread_many(4, 5)", TypeError)
    row(many, "offsets is a str", "await f.pread_many(4, '01')", TypeError)
    row(many, "a float offset", "await f.pread_many(4, [1.5])", TypeError)
    row(many, "offset 2**63-1", "await f.pread_many(4, [0, big])", err(E.EINVAL))
    row(many, "offset beyond int64", "await f.pread_many(4, [huge])", OverflowError)
    row(many, "size is a str", "await f.pread_many('4', [0])", TypeError)
    row(many, "on a write-only file", "await fw.pread_many(4, [0])", UnsupportedOperation)
    row(many, "after close", "await fc.pread_many(4, [0])", ValueError)
    into = cls + ".preadinto_many"
    row(into, "read-only buffer", "await f.preadinto_many(ro, [0])", TypeError)
    row(into, "None", "await f.preadinto_many(None, [0])", TypeError)
    row(into, "parts of unequal size", "await f.preadinto_many(bytearray(5), [0, 1])", ValueError)
    row(into, "negative offset", "await f.preadinto_many(bytearray(4), [-1])", ValueError)
    row(into, "offset 2**63-1", "await f.preadinto_many(bytearray(4), [big])", err(E.EINVAL))
    row(into, "on a write-only file", "await fw.preadinto_many(bytearray(4), [0])",
        UnsupportedOperation)  # fmt: skip
    row(into, "after close", "await fc.preadinto_many(bytearray(4), [0])", ValueError)
    row(cls + ".pwrite", "negative offset", "await f.pwrite(b'ab', -1)", ValueError)
    row(cls + ".pwrite", "str data", "await f.pwrite('ab', 0)", TypeError)
    row(cls + ".pwrite", "offset 2**63-1", "await f.pwrite(b'ab', big)", err(E.EINVAL))
    row(cls + ".pwrite", "on a read-only file", "await fr.pwrite(b'ab', 0)", UnsupportedOperation)
    row(cls + ".readv", "a read-only buffer", "await f.readv([bytearray(2), ro])", TypeError)
    row(cls + ".readv", "not iterable", "await f.readv(5)", TypeError)
    row(cls + ".writev", "a str in the list", "await f.writev(['ab'])", TypeError)
    row(cls + ".writev", "after close", "await fc.writev([b'ab'])", ValueError)
    row(
        cls + ".write",
        "many concurrent writes (serialised)",
        "await scenarios.many_writes(f, 200)",
        OK("all 200 land, in one piece each", "r == 200 * 4"),
    )

group("filedirect", per_engine=True)
D = "ringio.open(direct=True)"
row(
    D + ".pread",
    "misaligned offset and size (bounced)",
    "await f.pread(5, 3)",
    OK("the right bytes", "r == PAYLOAD[3:8]"),
)
row(
    D + ".pwrite",
    "misaligned (bounced)",
    "await scenarios.direct_pwrite_misaligned(f)",
    OK("read back the same", "r is True"),
)
row(
    D + ".readinto",
    "misaligned buffer (bounced)",
    "await scenarios.direct_readinto_misaligned(f)",
    OK("the right bytes", "r == PAYLOAD[:100]"),
)
row(
    "ringio.aio.pread",
    "O_DIRECT, misaligned buffer",
    "scenarios.aio_direct_misaligned(path)",
    err(E.EINVAL),
)
row(
    "ringio.uring.pread",
    "O_DIRECT, misaligned offset",
    "scenarios.uring_direct_misaligned(path)",
    OK("completion error EINVAL", "r == -errno.EINVAL"),
)

# ------------------------------------------------------------------ ringio.os, ringio.os.path
group("os", per_engine=True)
OS = "ringio.os"
ros = "ringio.os"
for fn, args in [
    ("stat", "{p}"),
    ("remove", "{p}"),
    ("unlink", "{p}"),
    ("rmdir", "{p}"),
    ("mkdir", "{p}"),
    ("listdir", "{p}"),
    ("scandir", "{p}"),
    ("readlink", "{p}"),
    ("makedirs", "{p}"),
    ("removedirs", "{p}"),
    ("access", "{p}, os.R_OK"),
    ("statvfs", "{p}"),
]:
    row(
        f"{OS}.{fn}",
        "path is None" if fn not in ("listdir", "scandir") else "path is a float",
        f"await {ros}.{fn}({args.format(p='None' if fn not in ('listdir', 'scandir') else '1.5')})",
        TypeError,
    )
    row(
        f"{OS}.{fn}",
        "embedded NUL",
        f"await {ros}.{fn}({args.format(p=repr('a' + chr(0) + 'b'))})",
        ValueError,
    )
for fn in ("stat", "remove", "unlink", "rmdir", "listdir", "readlink", "removedirs", "statvfs"):
    row(f"{OS}.{fn}", "missing", f"await {ros}.{fn}(missing)", FileNotFoundError)
row(OS + ".stat", "fd not open", f"await {ros}.stat(badfd)", err(E.EBADF))
row(OS + ".stat", "fd negative (as os.stat: EFAULT)", f"await {ros}.stat(-1)", err(E.EFAULT))
row(OS + ".stat", "dir_fd is a str", f"await {ros}.stat('x', dir_fd='3')", TypeError)
row(OS + ".stat", "dir_fd not open", f"await {ros}.stat('x', dir_fd=badfd)", err(E.EBADF))
row(OS + ".stat", "dir_fd is a file", f"await {ros}.stat('x', dir_fd=fd)", NotADirectoryError)
row(OS + ".stat", "path too long", f"await {ros}.stat('a' * 5000)", err(E.ENAMETOOLONG))
row(
    OS + ".stat",
    "loop is not the running loop",
    f"await {ros}.stat(path, loop=asyncio.new_event_loop())",
    ValueError,
)
row(OS + ".remove", "a directory", f"await {ros}.remove(tmp)", IsADirectoryError)
row(OS + ".rmdir", "a file", f"await {ros}.rmdir(path)", NotADirectoryError)
row(OS + ".rmdir", "not empty", f"await {ros}.rmdir(tmp)", err(E.ENOTEMPTY))
row(OS + ".mkdir", "exists", f"await {ros}.mkdir(tmp)", FileExistsError)
row(OS + ".mkdir", "mode is a str", f"await {ros}.mkdir(newpath, '755')", TypeError)
row(OS + ".mkdir", "parent missing", f"await {ros}.mkdir(missing + '/x')", FileNotFoundError)
row(OS + ".mkdir", "parent is a file", f"await {ros}.mkdir(path + '/x')", NotADirectoryError)
row(OS + ".makedirs", "exists", f"await {ros}.makedirs(tmp)", FileExistsError)
row(OS + ".makedirs", "through a file", f"await {ros}.makedirs(path + '/a/b')", NotADirectoryError)
row(OS + ".rename", "missing source", f"await {ros}.rename(missing, newpath)", FileNotFoundError)
row(OS + ".rename", "dst is None", f"await {ros}.rename(path, None)", TypeError)
row(OS + ".rename", "dir over a file", f"await {ros}.rename(tmp, path)", OSError)
row(OS + ".replace", "src is an int", f"await {ros}.replace(3, newpath)", TypeError)
row(
    OS + ".renames",
    "missing source",
    f"await {ros}.renames(missing, newpath + '/a')",
    FileNotFoundError,
)
row(OS + ".link", "missing source", f"await {ros}.link(missing, newpath)", FileNotFoundError)
row(OS + ".link", "dst exists", f"await {ros}.link(path, path)", FileExistsError)
row(OS + ".link", "a directory", f"await {ros}.link(tmp, newpath)", PermissionError)
row(OS + ".symlink", "dst exists", f"await {ros}.symlink('x', path)", FileExistsError)
row(OS + ".symlink", "src is None", f"await {ros}.symlink(None, newpath)", TypeError)
row(OS + ".readlink", "not a link", f"await {ros}.readlink(path)", err(E.EINVAL))
row(OS + ".listdir", "a file", f"await {ros}.listdir(path)", NotADirectoryError)
row(OS + ".scandir", "missing", f"await {ros}.scandir(missing)", FileNotFoundError)
row(OS + ".access", "mode is a str", f"await {ros}.access(path, 'r')", TypeError)
row(OS + ".access", "missing", f"await {ros}.access(missing, os.R_OK)", OK("False", "r is False"))
row(OS + ".sendfile", "out fd not open", f"await {ros}.sendfile(badfd, fd, 0, 10)", err(E.EBADF))
row(
    OS + ".sendfile",
    "in fd is a directory",
    f"await {ros}.sendfile(s1.fileno(), dirfd, 0, 10)",
    OSError,
)
row(
    OS + ".sendfile",
    "negative count",
    f"await {ros}.sendfile(s1.fileno(), fd, 0, -1)",
    (OSError, OverflowError, ValueError),
)
row(OS + ".wrap", "a non-callable", f"await {ros}.wrap(5)()", TypeError)
PT = "ringio.os.path"
for fn in ("exists", "isfile", "isdir", "islink", "ismount"):
    row(f"{PT}.{fn}", "missing", f"await {ros}.path.{fn}(missing)", OK("False", "r is False"))
    row(f"{PT}.{fn}", "embedded NUL", f"await {ros}.path.{fn}('a\\0b')", OK("False", "r is False"))
    row(f"{PT}.{fn}", "path is None", f"await {ros}.path.{fn}(None)", TypeError)
row(PT + ".exists", "fd not open", f"await {ros}.path.exists(badfd)", OK("False", "r is False"))
for fn in ("getsize", "getmtime", "getatime", "getctime"):
    row(f"{PT}.{fn}", "missing", f"await {ros}.path.{fn}(missing)", FileNotFoundError)
    row(f"{PT}.{fn}", "path is None", f"await {ros}.path.{fn}(None)", TypeError)
row(PT + ".samefile", "missing", f"await {ros}.path.samefile(path, missing)", FileNotFoundError)
row(PT + ".sameopenfile", "fd not open", f"await {ros}.path.sameopenfile(fd, badfd)", err(E.EBADF))
row(PT + ".sameopenfile", "fd is a str", f"await {ros}.path.sameopenfile(fd, 'x')", TypeError)
row(PT + ".abspath", "path is None", f"await {ros}.path.abspath(None)", TypeError)

# ------------------------------------------------------------------ compat.linux_aio
group("linux_aio")
LA = "ringio.compat.linux_aio"
row(LA + ".AIOContext", "max_jobs 0", "linux_aio.AIOContext(0)", err(E.EINVAL))
row(LA + ".AIOContext", "max_jobs negative", "linux_aio.AIOContext(-1)", err(E.EINVAL))
row(LA + ".AIOContext", "max_jobs is a str", "linux_aio.AIOContext('8')", TypeError)
row(
    LA + ".ReadBlock",
    "memoryview buffer (unsupported, as linux_aio)",
    "linux_aio.ReadBlock(fd, memoryview(bytearray(8)))",
    NotImplementedError,
)
row(
    LA + ".ReadBlock",
    "bytes buffer (read-only target)",
    "lctx.submit(linux_aio.ReadBlock(fd, b'abcd'))",
    TypeError,
)
row(
    LA + ".ReadBlock",
    "file without fileno()",
    "linux_aio.ReadBlock(object(), bytearray(8))",
    TypeError,
)
row(
    LA + ".ReadBlock",
    "fd not open",
    "lctx.submit(linux_aio.ReadBlock(badfd, bytearray(8)))",
    err(E.EBADF),
)
row(
    LA + ".ReadBlock",
    "length beyond the buffer",
    "lctx.submit(linux_aio.ReadBlock(fd, bytearray(8), length=64))",
    ValueError,
)
row(
    LA + ".ReadBlock",
    "negative offset",
    "lctx.submit(linux_aio.ReadBlock(fd, bytearray(8), offset=-1))",
    (ValueError, OSError),
)
row(
    LA + ".WriteBlock",
    "fd is read-only",
    "lctx.submit(linux_aio.WriteBlock(rofd, b'ab'))",
    err(E.EBADF),
)
row(LA + ".WriteBlock", "content is None", "linux_aio.WriteBlock(fd, None)", TypeError)
row(
    LA + ".ReadVBlock",
    "a bytes buffer in the list",
    "lctx.submit(linux_aio.ReadVBlock(fd, [bytearray(2), b'ab']))",
    TypeError,
)
row(
    LA + ".PollBlock",
    "event_masks is a str",
    "lctx.submit(linux_aio.PollBlock(fd, 'x'))",
    TypeError,
)
row(LA + ".FsyncBlock", "fd is a pipe", "lctx.submit(linux_aio.FsyncBlock(wpipe))", err(E.EINVAL))
row(LA + ".AIOContext.submit", "not a block", "lctx.submit(5)", TypeError)
row(LA + ".AIOContext.submit", "after close", "scenarios.linux_aio_after_close(fd)", err(E.EINVAL))
row(LA + ".AIOContext.get_events", "min_jobs > max_jobs", "lctx.get_events(3, 1)", err(E.EINVAL))
row(LA + ".AIOContext.get_events", "max_jobs negative", "lctx.get_events(0, -1)", ValueError)
row(
    LA + ".AIOContext.get_events",
    "min_jobs > in flight, no timeout (would hang)",
    "lctx.get_events(1, 1)",
    ValueError,
)
row(
    LA + ".AIOContext.cancel",
    "block not in flight",
    "lctx.cancel(linux_aio.FsyncBlock(fd))",
    err(E.EINVAL),
)
row(LA + ".AIOContext.cancel", "not a block", "lctx.cancel(5)", TypeError)

# ------------------------------------------------------------------ compat.caio
group("caio", per_engine=True)
C = "ringio.compat.caio.AsyncioContext"
row(C, "max_requests negative", "caio.AsyncioContext(-1)", ValueError)
row(C, "max_requests is a str", "caio.AsyncioContext('8')", TypeError)
row(C + ".read", "nbytes negative", "await cctx.read(-1, fd, 0)", ValueError)
row(C + ".read", "nbytes is a str", "await cctx.read('8', fd, 0)", TypeError)
row(C + ".read", "fd not open", "await cctx.read(8, badfd, 0)", err(E.EBADF))
row(C + ".read", "fd is a directory", "await cctx.read(8, dirfd, 0)", IsADirectoryError)
row(C + ".read", "negative offset", "await cctx.read(8, fd, -1)", err(E.EINVAL))
row(C + ".read", "offset past end of file", "await cctx.read(8, fd, 10**9)", OK("b''", "r == b''"))
row(C + ".read", "fd is write-only", "await cctx.read(8, wofd, 0)", err(E.EBADF))
row(C + ".write", "str payload", "await cctx.write('ab', fd, 0)", TypeError)
row(C + ".write", "fd is read-only", "await cctx.write(b'ab', rofd, 0)", err(E.EBADF))
row(C + ".write", "offset 2**63-1", "await cctx.write(b'ab', fd, big)", err(E.EINVAL))
row(C + ".write", "fd is a float", "await cctx.write(b'ab', 3.0, 0)", TypeError)
row(C + ".fsync", "fd not open", "await cctx.fsync(badfd)", err(E.EBADF))
row(C + ".fdsync", "fd is a pipe", "await cctx.fdsync(wpipe)", err(E.EINVAL))
row(C + ".read", "after close", "await scenarios.caio_after_close(cctx, fd)", RuntimeError)
row(
    C,
    "more requests than max_requests (back-pressure)",
    "await scenarios.caio_backpressure(cctx, fd, 100)",
    OK("all 100 complete", "r == 100"),
)

# ------------------------------------------------------------------ Watcher
group("watcher")
W = "ringio.Watcher"
row(W, "bufsize is a str", "ringio.Watcher('x')", TypeError)
row(W, "bufsize 0", "ringio.Watcher(0)", ValueError)
row(W, "bufsize negative", "ringio.Watcher(-1)", ValueError)
row(W, "bufsize 2**40", "ringio.Watcher(2**40)", ValueError)
row(W, "nbufs not a power of two", "ringio.Watcher(4096, nbufs=3)", ValueError)
row(W, "nbufs negative", "ringio.Watcher(4096, nbufs=-1)", ValueError)
row(W, "entries 0", "ringio.Watcher(4096, entries=0)", ValueError)
row(W, "loop is a str", "ringio.Watcher(4096, loop='x')", TypeError)
row(W, "loop is a plain asyncio loop", "scenarios.watcher_loop_arg('plain')", TypeError)
row(W, "loop is a closed ringio.EventLoop", "scenarios.watcher_loop_arg('closed')", RuntimeError)
row(W, "loop=True, no ringio.EventLoop running", "ringio.Watcher(4096, loop=True)", RuntimeError)
row(
    W,
    "the loop whose ring it shares is closed with an op pending",
    "scenarios.watcher_loop_bound('loop closed')",
    OK("the op comes back with WatcherClosedError", "r == (['WatcherClosedError'], True)"),
    isolate=True,
)
row(
    W + ".fileno",
    "loop-bound (no eventfd)",
    "scenarios.watcher_loop_bound('fileno')",
    UnsupportedOperation,
)
row(
    W + ".wait_io_async",
    "loop-bound, awaited on another loop",
    "scenarios.watcher_loop_bound('other loop')",
    RuntimeError,
)
for op, args in [
    ("read", ""),
    ("read_timeout", ", None, time.monotonic() + 1"),
    ("read_full", ", bytearray(4)"),
    ("write", ", b'x'"),
    ("write_timeout", ", b'x', time.monotonic() + 1"),
    ("read_from", ""),
    ("write_to", ", b'x', ('127.0.0.1', 9)"),
    ("accept", ""),
    ("connect", ", ('127.0.0.1', 9)"),
]:
    row(f"{W}.{op}", "not a socket (int)", f"w.{op}(1, 5{args})", TypeError)
    row(f"{W}.{op}", "a file, not a socket", f"w.{op}(1, pyfile{args})", TypeError)
    row(f"{W}.{op}", "closed socket", f"w.{op}(1, closed_sock{args})", err(E.EBADF))
    row(f"{W}.{op}", "after close", f"closed_w.{op}(1, s1{args})", WatcherClosedError)
row(W + ".read", "read-only buffer", "w.read(1, s1, ro)", TypeError)
row(W + ".read", "empty buffer", "w.read(1, s1, bytearray(0))", ValueError)
row(W + ".read", "non-contiguous buffer", "w.read(1, s1, nc)", BufferError)
row(W + ".read_full", "empty buffer", "w.read_full(1, s1, bytearray(0))", ValueError)
row(W + ".read_timeout", "deadline is a str", "w.read_timeout(1, s1, None, 'x')", TypeError)
row(
    W + ".read_timeout",
    "deadline in the past",
    "scenarios.watcher_one(w, lambda: w.read_timeout(1, s1, None, 0.0))",
    OK("TimeoutError in the result", "isinstance(r.error, TimeoutError)"),
)
row(W + ".write", "str data", "w.write(1, s1, 'x')", TypeError)
row(W + ".write", "None data", "w.write(1, s1, None)", TypeError)
row(
    W + ".write",
    "peer closed (EPIPE)",
    "scenarios.watcher_write_peer_closed(w, s1, s2)",
    OK(
        "BrokenPipeError or ConnectionResetError in the result",
        "isinstance(r.error, (BrokenPipeError, ConnectionResetError))",
    ),
)
row(W + ".write_to", "address is a str", "w.write_to(1, udp, b'x', 'nope')", TypeError)
row(W + ".write_to", "bad IPv4 address", "w.write_to(1, udp, b'x', ('300.1.1.1', 9))", ValueError)
row(
    W + ".write_to",
    "port out of range",
    "w.write_to(1, udp, b'x', ('127.0.0.1', 70000))",
    ValueError,
)
row(
    W + ".connect",
    "port out of range",
    "w.connect(1, unconnected, ('127.0.0.1', 99999))",
    ValueError,
)
row(
    W + ".connect",
    "refused",
    "scenarios.watcher_one(w, lambda: w.connect(1, unconnected, scenarios.closed_port()))",
    OK("ConnectionRefusedError in the result", "isinstance(r.error, ConnectionRefusedError)"),
)
row(
    W + ".accept",
    "not listening",
    "scenarios.watcher_one(w, lambda: w.accept(1, unconnected))",
    OK("EINVAL in the result", "isinstance(r.error, OSError) and r.error.errno == errno.EINVAL"),
)
row(
    W + ".read",
    "buffer resized while in flight",
    "scenarios.watcher_resize_in_flight(w, s1, s2)",
    OK("BufferError at the resize; the read completes", "r == ('BufferError', b'hi')"),
    isolate=True,
)
row(
    W + ".read",
    "memoryview released while in flight",
    "scenarios.watcher_release_in_flight(w, s1, s2)",
    OK("BufferError at the release; the read completes", "r == ('BufferError', b'hi')"),
    isolate=True,
)
row(
    W + ".read",
    "buffer dropped while in flight",
    "scenarios.watcher_drop_in_flight(w, s1, s2)",
    OK("the read completes", "r == 2"),
    isolate=True,
)
row(
    W + ".read",
    "RingBuffer used after the next wait_io",
    "scenarios.watcher_stale_ringbuffer(w, s1, s2)",
    BufferError,
)
row(
    W + ".read",
    "socket closed by the user while in flight",
    "scenarios.watcher_close_sock_in_flight(w, s1, s2)",
    OK("the read still completes (the Watcher holds its own reference)", "r == b'hi'"),
    isolate=True,
)
row(W + ".free", "not a socket", "w.free(5)", TypeError)
row(W + ".free", "twice", "scenarios.watcher_free_twice(w, s1)", OK("None", "r is None"))
row(
    W + ".free",
    "with a read pending",
    "scenarios.watcher_free_pending(w, s1)",
    OK("ConnFreedError in the result", "isinstance(r.error, ringio.ConnFreedError)"),
)
row(W + ".wait_io", "negative timeout", "w.wait_io(-1)", ValueError)
row(W + ".wait_io", "timeout is a str", "w.wait_io('x')", TypeError)
row(W + ".wait_io", "after close", "closed_w.wait_io(0)", WatcherClosedError)
row(W + ".wait_io", "from another thread", "scenarios.watcher_other_thread(w, s1)", RuntimeError)
row(W + ".close", "twice", "closed_w.close()", OK("None", "r is None"))
row(
    W + ".close",
    "with ops pending",
    "scenarios.watcher_close_pending(w, s1)",
    OK("WatcherClosedError in the last results", "r is True"),
    isolate=True,
)
row(
    W,
    "many ops on one socket (queued, back-pressure)",
    "scenarios.watcher_many_ops(w, s1, s2, 500)",
    OK("all 500 writes and reads complete in order", "r is True"),
)

# ------------------------------------------------------------------ EventLoop
group("loop")
EL = "ringio.EventLoop"
row(
    EL + ".call_soon",
    "after close",
    "scenarios.loop_call_soon(lambda lp: lp.call_soon(print), closed=True)",
    RuntimeError,
)
row(
    EL + ".call_soon",
    "not callable, debug mode",
    "scenarios.loop_call_soon(lambda lp: lp.call_soon(5), debug=True)",
    TypeError,
)
row(
    EL + ".call_soon",
    "not callable",
    "scenarios.loop_run_not_callable()",
    OK(
        "accepted, as asyncio outside debug mode; the TypeError goes to the handler",
        "len(r) == 1 and isinstance(r[0], TypeError)",
    ),
)
for timer in ("call_later", "call_at"):
    row(
        EL + "." + timer,
        "after close",
        f"scenarios.loop_call_soon(lambda lp: lp.{timer}(1, print), closed=True)",
        RuntimeError,
    )
    row(
        EL + "." + timer,
        "time None",
        f"scenarios.loop_call_soon(lambda lp: lp.{timer}(None, print))",
        TypeError,
    )
    row(
        EL + "." + timer,
        "not callable, debug mode",
        f"scenarios.loop_call_soon(lambda lp: lp.{timer}(1, 5), debug=True)",
        TypeError,
    )
row(
    EL + ".call_later",
    "delay is a str",
    "scenarios.loop_call_soon(lambda lp: lp.call_later('1', print))",
    TypeError,
)
row(
    EL + ".call_at",
    "time is a str",
    "scenarios.loop_call_soon(lambda lp: lp.call_at('1', print).when())",
    OK("accepted, as asyncio's call_at: the handle keeps it", "r == '1'"),
)
row(
    EL + ".close",
    "twice",
    "scenarios.loop_call_soon(lambda lp: lp.close(), closed=True)",
    OK("None", "r is None"),
)
row(EL + ".close", "while running", "scenarios.loop_close_while_running()", RuntimeError)
row(EL + ".sock_recv", "nbytes negative", "await loop.sock_recv(s1, -1)", ValueError)
row(EL + ".sock_recv", "nbytes is a str", "await loop.sock_recv(s1, 'x')", TypeError)
row(EL + ".sock_recv", "closed socket", "await loop.sock_recv(closed_sock, 8)", OSError)
row(EL + ".sock_recv", "not a socket", "await loop.sock_recv(5, 8)", (TypeError, AttributeError))
row(
    EL + ".sock_recv",
    "a file, not a socket",
    "await loop.sock_recv(pyfile, 8)",
    (TypeError, AttributeError),
)
row(
    EL + ".sock_recv",
    "unconnected socket",
    "await scenarios.nonblocking(loop.sock_recv, unconnected, 8)",
    err(E.ENOTCONN),
)
row(
    EL + ".sock_recv",
    "socket closed while waiting",
    "await scenarios.loop_close_while_recv(loop, s1)",
    OSError,
    isolate=True,
)
row(EL + ".sock_recv_into", "read-only buffer", "await loop.sock_recv_into(s1, ro)", TypeError)
row(EL + ".sock_recv_into", "None", "await loop.sock_recv_into(s1, None)", TypeError)
row(
    EL + ".sock_recv_into",
    "buffer resized while waiting",
    "await scenarios.loop_resize_while_recv(loop, s1, s2)",
    OK("the resize works (private buffer); the data arrives", "r == b'hi'"),
    isolate=True,
)
row(EL + ".sock_sendall", "str data", "await loop.sock_sendall(s1, 'x')", TypeError)
row(EL + ".sock_sendall", "None", "await loop.sock_sendall(s1, None)", TypeError)
row(
    EL + ".sock_sendall",
    "peer closed",
    "await scenarios.loop_send_peer_closed(loop, s1, s2)",
    (BrokenPipeError, ConnectionResetError),
)
row(EL + ".sock_sendall", "closed socket", "await loop.sock_sendall(closed_sock, b'x')", OSError)
row(
    EL + ".sock_connect",
    "refused",
    "await scenarios.nonblocking(loop.sock_connect, unconnected, scenarios.closed_port())",
    ConnectionRefusedError,
)
row(
    EL + ".sock_connect",
    "port out of range",
    "await scenarios.nonblocking(loop.sock_connect, unconnected, ('127.0.0.1', 99999))",
    OverflowError,
)
row(
    EL + ".sock_accept",
    "not listening",
    "await scenarios.nonblocking(loop.sock_accept, unconnected)",
    err(E.EINVAL),
)
row(
    EL + ".create_connection",
    "refused",
    "await loop.create_connection(asyncio.Protocol, *scenarios.closed_port())",
    ConnectionRefusedError,
)
row(
    EL + ".create_connection",
    "port is a str that is not a number",
    "await loop.create_connection(asyncio.Protocol, '127.0.0.1', 'x')",
    OSError,
)
row(
    EL + ".create_connection",
    "neither host nor sock",
    "await loop.create_connection(asyncio.Protocol)",
    ValueError,
)
row(
    EL + ".create_server",
    "port out of range",
    "await loop.create_server(asyncio.Protocol, '127.0.0.1', 70000)",
    OverflowError,
)
row(
    EL + ".create_server",
    "port in use",
    "await loop.create_server(asyncio.Protocol, *listener.getsockname())",
    err(E.EADDRINUSE),
)
row(EL + ".add_reader", "fd negative", "loop.add_reader(-1, print)", ValueError)
row(EL + ".add_reader", "not an fd", "loop.add_reader('x', print)", ValueError)
row(
    EL + ".add_reader",
    "fd not open",
    "scenarios.loop_add_reader_badfd(loop, badfd)",
    OK("registered; no callback, the loop keeps running", "r == 0"),
)
row(
    EL + ".add_writer",
    "callback not callable (asyncio checks only in debug mode)",
    "(loop.add_writer(s1, 5), loop.remove_writer(s1))[1]",
    OK("True, as asyncio", "r is True"),
)
row(EL + ".remove_reader", "never added", "loop.remove_reader(s1)", OK("False", "r is False"))
row(
    EL + ".run_until_complete",
    "while running",
    "loop.run_until_complete(asyncio.sleep(0))",
    RuntimeError,
)

# ------------------------------------------------------------------ uring: the rest
group("uring")
for name, args in [
    ("fsync", "{fd}"),
    ("fdsync", "{fd}"),
    ("noop", "{fd}"),
    ("poll", "{fd}, 1"),
    ("preadv", "{fd}, [bytearray(8)], 0"),
    ("pwritev", "{fd}, [b'ab'], 0"),
]:
    api = f"ringio.uring.{name}"
    row(api, "fd is a str", f"uring.{name}({args.format(fd=repr('3'))})", TypeError)
    row(api, "fd is None", f"uring.{name}({args.format(fd='None')})", TypeError)
    row(api, "fd is negative", f"uring.{name}({args.format(fd='-1')})", ValueError)
    row(api, "fd beyond int32", f"uring.{name}({args.format(fd='huge')})", OverflowError)
    if name != "noop":
        row(
            api,
            "fd not open",
            f"scenarios.ring_result(ring, uring.{name}({args.format(fd='badfd')}))",
            OK("completion error EBADF", "r == -errno.EBADF"),
        )
    row(
        api,
        "op after the ring is closed",
        f"closed_ring.submit([uring.{name}({args.format(fd='fd')})])",
        ValueError,
    )
row(
    "ringio.uring.fsync",
    "fd is a pipe",
    "scenarios.ring_result(ring, uring.fsync(wpipe))",
    OK("completion error EINVAL", "r == -errno.EINVAL"),
)
row(
    "ringio.uring.fdsync",
    "fd is a socket",
    "scenarios.ring_result(ring, uring.fdsync(s1))",
    OK("completion error EINVAL", "r == -errno.EINVAL"),
)
row(
    "ringio.uring.noop",
    "fd not open (a NOP never looks at it)",
    "scenarios.ring_result(ring, uring.noop(badfd))",
    OK("0", "r == 0"),
)
row("ringio.uring.poll", "events is a str", "uring.poll(fd, 'x')", TypeError)
row("ringio.uring.poll", "events negative", "uring.poll(fd, -1)", OverflowError)
row(
    "ringio.uring.poll",
    "fd is a directory (always ready)",
    "scenarios.ring_result(ring, uring.poll(dirfd, 1))",
    OK("POLLIN", "r & 1 == 1"),
)
for name, bufs in (("preadv", "[bytearray(8)]"), ("pwritev", "[b'ab']")):
    api = f"ringio.uring.{name}"
    row(api, "not a list", f"uring.{name}(fd, 5, 0)", TypeError)
    row(api, "None", f"uring.{name}(fd, None, 0)", TypeError)
    row(api, "None in the list", f"uring.{name}(fd, [None], 0)", TypeError)
    row(api, "negative offset", f"uring.{name}(fd, {bufs}, -1)", ValueError)
    row(api, "offset beyond int64", f"uring.{name}(fd, {bufs}, huge)", OverflowError)
    row(
        api,
        "offset 2**63-1",
        f"scenarios.ring_result(ring, uring.{name}(fd, {bufs}, big))",
        OK("completion error EINVAL", "r == -errno.EINVAL"),
    )
    row(api, "non-contiguous buffer", f"uring.{name}(fd, [nc], 0)", BufferError)
    row(
        api,
        "empty list",
        f"scenarios.ring_result(ring, uring.{name}(fd, [], 0))",
        OK("0 bytes", "r == 0"),
    )
row("ringio.uring.preadv", "a read-only buffer in the list", "uring.preadv(fd, [ro], 0)", TypeError)
row(
    "ringio.uring.preadv",
    "fd is a directory",
    "scenarios.ring_result(ring, uring.preadv(dirfd, [bytearray(4)], 0))",
    OK("completion error EISDIR", "r == -errno.EISDIR"),
)
row(
    "ringio.uring.preadv",
    "a buffer of the list resized while in flight",
    "scenarios.ring_readv_resize_in_flight(ring, rpipe, wpipe)",
    OK("BufferError at the resize; the read completes", "r == ('BufferError', b'hi')"),
    isolate=True,
)
row("ringio.uring.pwritev", "a str in the list", "uring.pwritev(fd, ['ab'], 0)", TypeError)
row(
    "ringio.uring.pwritev",
    "fd is read-only",
    "scenarios.ring_result(ring, uring.pwritev(rofd, [b'ab'], 0))",
    OK("completion error EBADF", "r == -errno.EBADF"),
)
row("ringio.uring.probe", "an argument", "uring.probe(1)", TypeError)
row(
    "ringio.uring.probe",
    "an op name it does not know",
    "uring.probe().get('nope')",
    OK("None (a dict of op name -> supported)", "r is None"),
)
row("ringio.uring.Ring.reap", "an argument", "ring.reap(1)", TypeError)
row("ringio.uring.Ring.reap", "nothing in flight", "ring.reap()", OK("[]", "r == []"))
row(
    "ringio.uring.Ring.reap",
    "after close, with a read that was in flight",
    "scenarios.ring_reap_after_close(ring, rpipe)",
    OK("the final completion once (ECANCELED), then []", "r == ([-errno.ECANCELED], [])"),
)
row("ringio.uring.Ring.resolve_futures", "an argument", "ring.resolve_futures(1)", TypeError)
row(
    "ringio.uring.Ring.resolve_futures",
    "nothing in flight",
    "ring.resolve_futures()",
    OK("[]", "r == []"),
)
row(
    "ringio.uring.Ring.resolve_futures",
    "an op whose data is not a future",
    "scenarios.ring_resolve_non_future(ring, fd)",
    OK("its completion, handed back unsettled", "r == [8]"),
)
row(
    "ringio.uring.Ring.resolve_futures",
    "after close, with a read that was in flight",
    "scenarios.ring_resolve_after_close(ring, rpipe)",
    OK("the final completion once (ECANCELED), handed back, then []",
       "r == ([-errno.ECANCELED], [])"),
)
row(
    "ringio.uring.Completion.result",
    "an argument",
    "scenarios.ring_completion(ring, fd).result(1)",
    TypeError,
)
row(
    "ringio.uring.Completion.result",
    "a failed op",
    "scenarios.ring_completion(ring, badfd).result()",
    err(E.EBADF),
)
row(
    "ringio.uring.Op.statx_result",
    "not a statx op",
    "uring.noop(fd).statx_result()",
    ValueError,
)
row(
    "ringio.uring.Op.statx_result",
    "never submitted",
    "uring.statx(path).statx_result()",
    OK("None (no result yet)", "r is None"),
)
row(
    "ringio.uring.Op.statx_result",
    "a failed statx",
    "scenarios.failed_statx_fields(ring, missing)",
    OK("None (the statx failed)", "r is None"),
)

group("aio")
row("ringio.aio.Context.reap", "an argument", "ctx.reap(1)", TypeError)
row("ringio.aio.Context.reap", "nothing in flight", "ctx.reap()", OK("[]", "r == []"))
row(
    "ringio.aio.Context.reap",
    "after close, with a poll that was in flight",
    "scenarios.aio_reap_after_close(ctx, rpipe)",
    OK("the final completion once, then []", "len(r[0]) == 1 and r[1] == []"),
)
row("ringio.aio.Context.resolve_futures", "an argument", "ctx.resolve_futures(1)", TypeError)
row(
    "ringio.aio.Context.resolve_futures",
    "nothing in flight",
    "ctx.resolve_futures()",
    OK("[]", "r == []"),
)
row(
    "ringio.aio.Context.resolve_futures",
    "an op whose data is not a future",
    "scenarios.aio_resolve_non_future(ctx, fd)",
    OK("its completion, handed back unsettled", "r == [8]"),
)
row(
    "ringio.aio.Context.resolve_futures",
    "after close, with a poll that was in flight",
    "scenarios.aio_resolve_after_close(ctx, rpipe)",
    OK("the final completion once, handed back, then []", "len(r[0]) == 1 and r[1] == []"),
)
row(
    "ringio.aio.Completion.result",
    "a failed op",
    "scenarios.aio_completion(ctx, aio.fsync(wpipe)).result()",
    err(E.EINVAL),
)
row(
    "ringio.aio.Completion.result",
    "an argument",
    "scenarios.aio_completion(ctx, aio.pread(fd, bytearray(4), 0)).result(1)",
    TypeError,
)
row(
    "ringio.aio.Op.statx_result",
    "not a statx op (kernel AIO has none)",
    "aio.pread(fd, bytearray(4), 0).statx_result()",
    ValueError,
)

group("aioasync")
row(A + ".close", "twice", "(actx.close(), actx.close())", OK("None twice", "r == (None, None)"))
row(
    A + ".close",
    "with a poll in flight",
    "await scenarios.actx_close_in_flight(actx, rpipe)",
    OK("the pending poll fails with ECANCELED or ValueError", "r is True"),
)

group("caio", per_engine=True)
row(C + ".close", "twice", "(cctx.close(), cctx.close())", OK("None twice", "r == (None, None)"))

# ------------------------------------------------------------------ ringio.os: the rest
group("os", per_engine=True)
row(OS + ".getcwd", "an argument", f"await {ros}.getcwd('x')", TypeError)
row(
    OS + ".getcwd",
    "loop is not the running loop",
    f"await {ros}.getcwd(loop=asyncio.new_event_loop())",
    ValueError,
)
row(
    OS + ".getcwd",
    "the current directory was removed",
    "await scenarios.getcwd_removed(ringio.os.getcwd)",
    FileNotFoundError,
    isolate=True,
)
row(
    OS + ".ScandirIterator.close",
    "twice, then iterated",
    "await scenarios.scandir_close_twice(ringio.os.scandir, tmp)",
    OK("None twice, then no entries (as os.scandir)", "r == (None, None, [])"),
)
row(OS + ".ScandirIterator.close", "an argument", f"(await {ros}.scandir(tmp)).close(1)", TypeError)
row(OS + ".scandir", "fd not open", f"await {ros}.scandir(badfd)", err(E.EBADF))
row(OS + ".scandir", "fd is a file", f"await {ros}.scandir(fd)", NotADirectoryError)

# ------------------------------------------------------------------ file objects: the rest
for grp, cls in FILE_GROUPS:
    group(grp, per_engine=True)
    text = grp == "filetext"
    data = "'ab'" if text else "b'ab'"
    for fn in ("readable", "writable", "seekable", "isatty"):
        row(f"{cls}.{fn}", "after close (as io: ValueError)", f"fc.{fn}()", ValueError)
    row(cls + ".fdatasync", "after close", "await fc.fdatasync()", ValueError)
    row(
        cls + ".fdatasync",
        "fd closed behind its back",
        "await scenarios.sync_fd_closed_under(f)",
        err(E.EBADF),
    )
    row(
        cls + ".aclose",
        "twice",
        "(await f.aclose(), await f.aclose())",
        OK("None twice", "r == (None, None)"),
    )
    row(cls + ".aclose", "an argument", "await f.aclose(1)", TypeError)
    row(
        cls + ".writelines",
        "after close, empty list (as io)",
        "await fc.writelines([])",
        ValueError,
    )
    row(cls + ".writelines", "after close", f"await fc.writelines([{data}])", ValueError)
    row(
        cls + ".writelines",
        "on a read-only file",
        f"await fr.writelines([{data}])",
        UnsupportedOperation,
    )
    row(
        cls + ".writelines",
        "empty list on a read-only file (as io: nothing to write)",
        "await fr.writelines([])",
        OK("None", "r is None"),
    )
    if text:
        continue
    row(cls + ".read1", "size is a str", "await f.read1('1')", TypeError)
    row(cls + ".read1", "size is None (as io: TypeError)", "await f.read1(None)", TypeError)
    row(cls + ".read1", "size is a float", "await f.read1(1.5)", TypeError)
    row(cls + ".read1", "on a write-only file", "await fw.read1(4)", UnsupportedOperation)
    row(cls + ".read1", "after close", "await fc.read1(4)", ValueError)
    row(
        cls + ".read1",
        "negative size (as io: up to one buffer)",
        "await f.read1(-5)",
        OK("the start of the file", "len(r) > 0 and PAYLOAD.startswith(r)"),
    )
    row(cls + ".readall", "an argument", "await f.readall(5)", TypeError)
    row(cls + ".readall", "on a write-only file", "await fw.readall()", UnsupportedOperation)
    row(cls + ".readall", "after close", "await fc.readall()", ValueError)
    row(
        cls + ".readall",
        "fd closed behind its back",
        "await scenarios.readall_fd_closed_under(f)",
        err(E.EBADF),
    )

# ------------------------------------------------------------------ Watcher: the rest
group("watcher")
row(W + ".fileno", "an argument", "w.fileno(1)", TypeError)
row(W + ".fileno", "after close", "closed_w.fileno()", WatcherClosedError)
row(
    W + ".wait_io_async",
    "after close",
    "closed_w.wait_io_async()",
    WatcherClosedError,
)
row(W + ".wait_io_async", "an argument", "w.wait_io_async(1)", TypeError)
row(
    W + ".wait_io_async",
    "closed while waiting",
    "scenarios.watcher_close_while_waiting_async(w, s1)",
    OK("the pending read comes back with WatcherClosedError", "r is True"),
    isolate=True,
)
row(
    "ringio.RingBuffer.tobytes",
    "after the buffer was recycled (next wait_io)",
    "scenarios.watcher_stale_ringbuffer(w, s1, s2)",
    BufferError,
)
row(
    "ringio.RingBuffer.tobytes",
    "after the Watcher is closed",
    "scenarios.ringbuffer_after_close(w, s1, s2)",
    OK("the data (the buffer keeps the memory; no later wait_io recycles it)", "r == b'hi'"),
)
row(
    "ringio.RingBuffer.tobytes",
    "an argument",
    "scenarios.ringbuffer(w, s1, s2).tobytes(1)",
    TypeError,
)

# ------------------------------------------------------------------ engine, run, install
group("runner")
row("ringio.engine", "an argument", "ringio.engine('uring')", TypeError)
row(
    "ringio.engine",
    "RINGIO_ENGINE names no engine",
    "scenarios.engine_with_env('nope')",
    ValueError,
    isolate=True,
)
# asyncio.run's error for what it cannot run: 3.14 runs any awaitable, and raises
# TypeError for the rest.
_NOT_RUNNABLE = Since((3, 14), ValueError, TypeError, "asyncio.run takes any awaitable")
row("ringio.run", "not a coroutine", "scenarios.in_thread(ringio.run, 5)", _NOT_RUNNABLE)
row("ringio.run", "None", "scenarios.in_thread(ringio.run, None)", _NOT_RUNNABLE)
row(
    "ringio.run",
    "a coroutine function, not a coroutine",
    "scenarios.in_thread(ringio.run, asyncio.sleep)",
    _NOT_RUNNABLE,
)

row(
    "ringio.run",
    "from inside a running loop",
    "scenarios.run_inside_loop()",
    RuntimeError,
)
row(
    "ringio.run",
    "debug is a str (as asyncio.run: truthy)",
    "scenarios.in_thread(lambda: ringio.run(asyncio.sleep(0), debug='x'))",
    OK("None", "r is None"),
)
row(
    "ringio.run",
    "the coroutine raises",
    "scenarios.in_thread(lambda: ringio.run(scenarios.raises(KeyError('k'))))",
    KeyError,
)
row("ringio.install", "an argument", "ringio.install(5)", TypeError)
row(
    "ringio.install",
    "twice",
    "scenarios.install_twice()",
    OK("a ringio loop from asyncio.new_event_loop()", "r == 'EventLoop'"),
    isolate=True,
)
row("ringio.new_event_loop", "an argument", "ringio.new_event_loop(5)", TypeError)
row(
    "ringio.new_event_loop",
    "closed, then used",
    "scenarios.in_thread(scenarios.closed_loop_used)",
    RuntimeError,
)
row("ringio.EventLoopPolicy", "an argument", "ringio.EventLoopPolicy(5)", TypeError)
row(
    "ringio.EventLoopPolicy",
    "get_event_loop from a thread without a loop",
    "scenarios.in_thread(ringio.EventLoopPolicy().get_event_loop)",
    RuntimeError,
)

# ------------------------------------------------------------------ RingSelector
group("selector")
RS = "ringio.loop.RingSelector"
LR = "ringio.loop.LoopRing"
row(RS, "entries 0", "scenarios.selector_select(ringio.loop.RingSelector(0))", ValueError)
row(RS, "entries is a str", "scenarios.selector_select(ringio.loop.RingSelector('x'))", TypeError)
row(
    RS + ".register",
    "fd negative",
    "scenarios.with_selector(lambda s: s.register(-1, 1))",
    ValueError,
)
row(
    RS + ".register",
    "not a file object",
    "scenarios.with_selector(lambda s: s.register('x', 1))",
    ValueError,
)
row(RS + ".register", "None", "scenarios.with_selector(lambda s: s.register(None, 1))", ValueError)
row(
    RS + ".register", "events 0", "scenarios.with_selector(lambda s: s.register(s1, 0))", ValueError
)
row(
    RS + ".register",
    "unknown events",
    "scenarios.with_selector(lambda s: s.register(s1, 99))",
    ValueError,
)
row(
    RS + ".register",
    "twice",
    "scenarios.with_selector(lambda s: (s.register(s1, 1), s.register(s1, 1)))",
    KeyError,
)
row(
    RS + ".register",
    "after close",
    "scenarios.with_selector(lambda s: (s.close(), s.register(s1, 1)))",
    RuntimeError,
)
row(
    RS + ".unregister",
    "never registered",
    "scenarios.with_selector(lambda s: s.unregister(s1))",
    KeyError,
)
row(
    RS + ".unregister",
    "not a file object",
    "scenarios.with_selector(lambda s: s.unregister('x'))",
    ValueError,
)
row(
    RS + ".unregister",
    "its fd closed first",
    "scenarios.selector_unregister_closed_sock()",
    OK("the key (as selectors)", "r is True"),
)
row(
    RS + ".modify",
    "never registered",
    "scenarios.with_selector(lambda s: s.modify(s1, 1))",
    KeyError,
)
row(
    RS + ".modify",
    "events 0",
    "scenarios.with_selector(lambda s: (s.register(s1, 1), s.modify(s1, 0)))",
    ValueError,
)
row(
    RS + ".get_key",
    "never registered",
    "scenarios.with_selector(lambda s: s.get_key(s1))",
    KeyError,
)
row(RS + ".get_key", "None", "scenarios.with_selector(lambda s: s.get_key(None))", ValueError)
row(
    RS + ".get_map",
    "an argument",
    "scenarios.with_selector(lambda s: s.get_map(1))",
    TypeError,
)
row(
    RS + ".select",
    "timeout is a str",
    "scenarios.with_selector(lambda s: s.select('x'))",
    TypeError,
)
row(
    RS + ".select",
    "negative timeout (as selectors: a poll)",
    "scenarios.with_selector(lambda s: s.select(-1))",
    OK("[]", "r == []"),
)
row(
    RS + ".select",
    "NaN timeout",
    "scenarios.with_selector(lambda s: s.select(float('nan')))",
    ValueError,
)
row(
    RS + ".select",
    "after close",
    "scenarios.with_selector(lambda s: (s.close(), s.select(0)))",
    RuntimeError,
)
row(
    RS + ".close",
    "twice",
    "scenarios.with_selector(lambda s: (s.close(), s.close()))",
    OK("None twice", "r == (None, None)"),
)
row(
    RS + ".close",
    "with an op queued on its loop ring",
    "scenarios.selector_close_with_queued(fd)",
    OK("the op's callback gets ECANCELED", "r == -errno.ECANCELED"),
)
row(LR, "entries 0", "scenarios.loop_ring_made(ringio.loop.LoopRing(0))", ValueError)
row(LR, "entries is a str", "scenarios.loop_ring_made(ringio.loop.LoopRing('x'))", TypeError)
row(LR + ".submit_op", "not an op", "scenarios.with_loop_ring(lambda r: r.submit_op(5))", TypeError)
row(
    LR + ".submit_op",
    "op data not callable",
    "scenarios.with_loop_ring(lambda r: r.submit_op(uring.noop(fd)))",
    TypeError,
)
row(
    LR + ".submit_op",
    "after close (would never complete)",
    "scenarios.with_loop_ring(lambda r: (r.close(), r.submit_op(uring.noop(fd, data=print))))",
    RuntimeError,
)
row(
    LR + ".cancel_op",
    "not an op",
    "scenarios.with_loop_ring(lambda r: r.cancel_op(5))",
    TypeError,
)
row(
    LR + ".cancel_op",
    "never submitted",
    "scenarios.with_loop_ring(lambda r: r.cancel_op(uring.noop(fd, data=print)))",
    OK("None (nothing to cancel)", "r is None"),
)
row(
    LR + ".close",
    "twice",
    "scenarios.with_loop_ring(lambda r: (r.close(), r.close()))",
    OK("None twice", "r == (None, None)"),
)
row(
    LR + ".close",
    "with an op queued",
    "scenarios.loop_ring_close_with_queued(fd)",
    OK("the op's callback gets ECANCELED", "r == -errno.ECANCELED"),
)
row(
    LR + ".owned_ring",
    "after close",
    "scenarios.with_loop_ring(lambda r: (r.close(), r.owned_ring()))",
    RuntimeError,
)
row(
    LR + ".watcher_ring",
    "after close",
    "scenarios.with_loop_ring(lambda r: (r.close(), r.watcher_ring()))",
    RuntimeError,
)

# ------------------------------------------------------------------ linux_aio: the rest
group("linux_aio")
row(
    LA + ".AIOBlock.change_cmd",
    "unknown command",
    "linux_aio.ReadBlock(fd, bytearray(8)).change_cmd('x')",
    ValueError,
)
row(
    LA + ".AIOBlock.change_cmd",
    "None",
    "linux_aio.ReadBlock(fd, bytearray(8)).change_cmd(None)",
    ValueError,
)
row(
    LA + ".AIOBlock.change_cmd",
    "a retired block (submitted)",
    "scenarios.linux_aio_retired_block(lctx, fd)",
    ValueError,
)
row(
    LA + ".AIOBlock.set_priority",
    "class is a str (as linux_aio)",
    "linux_aio.ReadBlock(fd, bytearray(8)).set_priority('x', 1)",
    TypeError,
)
row(
    LA + ".AIOBlock.set_priority",
    "one argument",
    "linux_aio.ReadBlock(fd, bytearray(8)).set_priority(1)",
    TypeError,
)
row(
    LA + ".AIOBlock.set_priority",
    "unknown class 7 (submitted)",
    "scenarios.linux_aio_bad_priority(lctx, fd)",
    err(E.EINVAL),
)
row(
    LA + ".AIOEvent.stripped_buffer",
    "a vector block (as linux_aio: not implemented)",
    "scenarios.linux_aio_event(lctx, linux_aio.ReadVBlock(fd, [bytearray(4)])).stripped_buffer()",
    NotImplementedError,
)
row(
    LA + ".AIOEvent.stripped_buffer",
    "a block without a buffer",
    "scenarios.linux_aio_event(lctx, linux_aio.FsyncBlock(fd)).stripped_buffer()",
    OK("None", "r is None"),
)
row(
    LA + ".AIOContext.close",
    "twice",
    "(lctx.close(), lctx.close())",
    OK("None twice", "r == (None, None)"),
)
row(
    LA + ".AIOContext.close",
    "with a poll in flight",
    "scenarios.linux_aio_close_in_flight(lctx, rpipe)",
    OK("returns; the context is closed", "r is True"),
    isolate=True,
)
LB = "ringio.compat.linux_aio_bind"
row(
    LB + ".gen_io_priority",
    "class is a str (as linux_aio_bind)",
    "lab.gen_io_priority('x', 0)",
    TypeError,
)
row(
    LB + ".gen_io_priority",
    "level is None",
    "lab.gen_io_priority(lab.IOCBPriorityClass.BE, None)",
    TypeError,
)
row(
    LB + ".gen_io_priority",
    "level negative (as linux_aio_bind: no check)",
    "lab.gen_io_priority(lab.IOCBPriorityClass.BE, -1)",
    OK("-1", "r == -1"),
)
for enum in ("IOCBCMD", "IOCBFlag", "IOCBRWFlag", "IOCBPriorityClass"):
    row(
        f"{LB}.{enum}.from_param",
        "a str (as linux_aio_bind)",
        f"lab.{enum}.from_param('x')",
        ValueError,
    )
    row(f"{LB}.{enum}.from_param", "None", f"lab.{enum}.from_param(None)", TypeError)
    row(
        f"{LB}.{enum}.from_param",
        "an int that is no member (as ctypes: passed on)",
        f"lab.{enum}.from_param(99)",
        OK("99", "r == 99"),
    )

# ------------------------------------------------------------------ compat.aiofiles
# Each row's exception is the one aiofiles 25.1 raises for the same call (the
# stdlib's, raised in its thread); differences are named in the case.
group("aiofiles", per_engine=True)
AF = "ringio.compat.aiofiles"
for api, call in (
    (AF + ".open", "aiofiles.open"),
    (AF + ".threadpool.open", "aiofiles.threadpool.open"),
):
    row(api, "file is None", f"await {call}(None)", TypeError)
    row(api, "file is a float", f"await {call}(1.5)", TypeError)
    row(api, "missing file", f"await {call}(missing)", fnf("missing"))
    row(api, "a directory", f"await {call}(tmp)", (IsADirectoryError, E.EISDIR, "tmp"))
    row(api, "fd not open", f"await {call}(badfd, 'rb')", err(E.EBADF))
    row(api, "fd negative", f"await {call}(-1, 'rb')", ValueError)
    row(api, "embedded NUL", f"await {call}('a\\0b')", ValueError)
    row(api, "mode unknown letter", f"await {call}(path, 'rz')", ValueError)
    row(api, "mode is None", f"await {call}(path, None)", TypeError)
row(AF + ".open", "a directory for writing", "await aiofiles.open(tmp, 'w')", IsADirectoryError)
row(
    AF + ".open",
    "fd is a directory",
    "await aiofiles.open(dirfd, 'rb', closefd=False)",
    IsADirectoryError,
)
row(AF + ".open", "path too long", "await aiofiles.open('a' * 5000)", err(E.ENAMETOOLONG))
row(
    AF + ".open",
    "mode x on an existing file",
    "await aiofiles.open(path, 'x')",
    (FileExistsError, E.EEXIST, "path"),
)
row(AF + ".open", "unbuffered text", "await aiofiles.open(path, 'r', 0)", ValueError)
row(AF + ".open", "buffering is a str", "await aiofiles.open(path, 'rb', 'x')", TypeError)
row(AF + ".open", "unknown encoding", "await aiofiles.open(path, encoding='nope')", LookupError)
row(
    AF + ".open",
    "encoding in binary mode",
    "await aiofiles.open(path, 'rb', encoding='utf-8')",
    ValueError,
)
row(AF + ".open", "illegal newline", "await aiofiles.open(path, newline='x')", ValueError)
row(
    AF + ".open",
    "closefd=False with a name",
    "await aiofiles.open(path, 'rb', closefd=False)",
    ValueError,
)
row(
    AF + ".open",
    "opener returns -1",
    "await aiofiles.open(path, 'rb', opener=lambda p, fl: -1)",
    ValueError,
)
row(
    AF + ".open",
    "loop is not the running loop (documented: ValueError; aiofiles fails later, RuntimeError)",
    "await aiofiles.open(path, loop=asyncio.new_event_loop())",
    ValueError,
)
row(
    AF + ".open",
    "executor is not an executor (documented: unused; aiofiles: AttributeError)",
    "await scenarios.aclosing(aiofiles.open(path, 'rb', executor=5))",
    OK("the file opens", "r is True"),
)
row(
    AF + ".open",
    "async with on a missing file",
    "await scenarios.async_with(aiofiles.open(missing))",
    fnf("missing"),
)
row(
    AF + ".open",
    "not awaited, never entered",
    "type(aiofiles.open(missing)).__name__",
    OK("an AiofilesContextManager, no fd opened", "r == 'AiofilesContextManager'"),
)
row(
    AF + ".open",
    "200 files at once (back-pressure, not failure)",
    "await scenarios.aiofiles_many(aiofiles, path, 200)",
    OK("all 200 read right", "r == 200"),
)
TP = AF + ".threadpool"
row(TP + ".wrap", "not a file", "aiofiles.threadpool.wrap(5)", TypeError)
row(
    TP + ".wrap",
    "a builtin file (aiofiles' kind, not ringio's)",
    "aiofiles.threadpool.wrap(pyfile)",
    TypeError,
)
row(TP + ".wrap", "None", "aiofiles.threadpool.wrap(None)", TypeError)
row(
    TP + ".sync_open",
    "file is None (the builtin open)",
    "aiofiles.threadpool.sync_open(None)",
    TypeError,
)
row(TP + ".sync_open", "missing file", "aiofiles.threadpool.sync_open(missing)", fnf("missing"))
row(TP + ".sync_open", "a directory", "aiofiles.threadpool.sync_open(tmp)", IsADirectoryError)
for name, bad, expect in (
    ("stdout", "5", TypeError),
    ("stderr", "b'x'", TypeError),
    ("stdout_bytes", "'x'", TypeError),
    ("stderr_bytes", "None", TypeError),
):
    row(f"{AF}.{name}.write", "wrong data type", f"await aiofiles.{name}.write({bad})", expect)
for name in ("stdin", "stdin_bytes"):
    row(
        f"{AF}.{name}.read",
        "size is a str (sys.stdin a pipe)",
        f"await scenarios.with_stdin(aiofiles, rpipe, {name!r}, lambda s: s.read('x'))",
        TypeError,
    )
row(
    AF + ".stdout.write",
    "the stream was closed (sys.stdout replaced by a closed file)",
    "await scenarios.std_stream_closed(aiofiles, 'stdout')",
    ValueError,
)
# The file wrappers: each method forwards to the ringio file's (rows above); these
# rows check that the forwarding keeps the exception.
BR = AF + ".threadpool.binary.AsyncBufferedReader"
FI = AF + ".threadpool.binary.AsyncFileIO"
TW = AF + ".threadpool.text.AsyncTextIOWrapper"
BW = AF + ".threadpool.binary.AsyncBufferedIOBase"
for cls, mode in ((BR, "'rb'"), (FI, "'rb', 0"), (TW, "'r'")):
    opened = f"await scenarios.opened(aiofiles, path, {mode})"
    closed = f"await scenarios.opened(aiofiles, path, {mode}, close=True)"
    row(cls + ".read", "size is a str", f"await ({opened}).read('1')", TypeError)
    row(cls + ".read", "after close", f"await ({closed}).read()", ValueError)
    row(
        cls + ".write",
        "on a read-only file",
        f"await ({opened}).write({'b' if 'b' in mode else ''}'x')",
        UnsupportedOperation,
    )
    row(
        cls + ".seek",
        "whence 7",
        f"await ({opened}).seek(0, 7)",
        err(E.EINVAL) if cls == FI else ValueError,
    )
    row(cls + ".tell", "after close", f"await ({closed}).tell()", ValueError)
    row(cls + ".fileno", "after close", f"({closed}).fileno()", ValueError)
    row(cls + ".readable", "after close", f"({closed}).readable()", ValueError)
    row(cls + ".seekable", "after close", f"await ({closed}).seekable()", ValueError)
    row(cls + ".close", "twice", f"await ({closed}).close()", OK("None", "r is None"))
row(
    BR + ".peek",
    "after close",
    "await (await scenarios.opened(aiofiles, path, 'rb', close=True)).peek(1)",
    ValueError,
)
row(
    BR + ".read1",
    "size is a str",
    "await (await scenarios.opened(aiofiles, path, 'rb')).read1('x')",
    TypeError,
)
row(
    BR + ".readinto",
    "read-only buffer",
    "await (await scenarios.opened(aiofiles, path, 'rb')).readinto(ro)",
    TypeError,
)
row(
    FI + ".readall",
    "after close",
    "await (await scenarios.opened(aiofiles, path, 'rb', 0, close=True)).readall()",
    ValueError,
)
row(
    BW + ".read",
    "on a write-only file",
    "await (await scenarios.opened(aiofiles, newpath, 'wb')).read()",
    UnsupportedOperation,
)
row(
    TW + ".write",
    "bytes data",
    "await (await scenarios.opened(aiofiles, newpath, 'w')).write(b'x')",
    TypeError,
)
row(
    BW + ".detach",
    "after close (as io)",
    "(await scenarios.opened(aiofiles, path, 'rb', close=True)).detach()",
    ValueError,
)
row(
    BW + ".detach",
    "then read through the binary wrapper (as io)",
    "await scenarios.binary_detached_then_read(aiofiles, path)",
    ValueError,
)
row(
    TW + ".detach",
    "after close (as io)",
    "(await scenarios.opened(aiofiles, path, 'r', close=True)).detach()",
    ValueError,
)
row(
    TW + ".detach",
    "then read through the text wrapper (as io)",
    "await scenarios.detached_then_read(aiofiles, path)",
    ValueError,
)
row(AF + ".install", "an argument", "aiofiles.install(5)", TypeError)
row(
    AF + ".install",
    "twice, then uninstall with the first result",
    "scenarios.aiofiles_install_twice(aiofiles)",
    OK("the original aiofiles back", "r is True"),
    isolate=True,
)
row(AF + ".uninstall", "None", "aiofiles.uninstall(None)", AttributeError)
row(AF + ".uninstall", "a list", "aiofiles.uninstall([1])", AttributeError)
row(
    AF + ".uninstall",
    "an empty dict (nothing to put back)",
    "aiofiles.uninstall({})",
    OK("None", "r is None"),
)
STT = AF + ".tempfile.temptypes.AsyncSpooledTemporaryFile"
row(
    STT + ".write",
    "str to a binary spool",
    "await (await aiofiles.tempfile.SpooledTemporaryFile()).write('x')",
    TypeError,
)
row(
    STT + ".write",
    "after close",
    "await scenarios.closed_then(await aiofiles.tempfile.SpooledTemporaryFile(), 'write', b'x')",
    ValueError,
)
row(
    STT + ".writelines",
    "an int in the list",
    "await (await aiofiles.tempfile.SpooledTemporaryFile()).writelines([5])",
    TypeError,
)
row(
    STT + ".writelines",
    "past max_size into a missing dir (the rollover fails)",
    "await (await aiofiles.tempfile.SpooledTemporaryFile(1, dir=missing)).writelines([b'ab'])",
    FileNotFoundError,
)
TDT = AF + ".tempfile.temptypes.AsyncTemporaryDirectory"
row(
    TDT + ".close",
    "twice",
    "await scenarios.tempdir_close_twice(aiofiles.tempfile.TemporaryDirectory(dir=tmp))",
    OK("None twice", "r == (None, None)"),
)
row(
    TDT + ".cleanup",
    "removed behind its back",
    "await scenarios.tempdir_gone(await aiofiles.tempfile.TemporaryDirectory(dir=tmp))",
    OK("None (as tempfile)", "r is None"),
)
row(
    AF + ".threadpool.utils.delegate_to_executor",
    "an attribute name that is not a str",
    "aiofiles.threadpool.utils.delegate_to_executor(5)(type('X', (), {}))",
    TypeError,
)
row(
    AF + ".threadpool.utils.proxy_method_directly",
    "an attribute name that is not a str",
    "aiofiles.threadpool.utils.proxy_method_directly(None)(type('X', (), {}))",
    TypeError,
)
row(
    AF + ".threadpool.utils.proxy_property_directly",
    "an attribute name that is not a str",
    "aiofiles.threadpool.utils.proxy_property_directly(5)(type('X', (), {}))",
    TypeError,
)
row(
    AF + ".threadpool.utils.cond_delegate_to_executor",
    "an attribute name that is not a str",
    "aiofiles.threadpool.utils.cond_delegate_to_executor(5)(type('X', (), {}))",
    TypeError,
)
AO = AF + ".os"
ao = "aiofiles.os"
for fn, args in [
    ("stat", "{p}"),
    ("remove", "{p}"),
    ("unlink", "{p}"),
    ("rmdir", "{p}"),
    ("mkdir", "{p}"),
    ("readlink", "{p}"),
    ("makedirs", "{p}"),
    ("removedirs", "{p}"),
    ("access", "{p}, os.R_OK"),
    ("statvfs", "{p}"),
    ("listdir", "{p}"),
    ("scandir", "{p}"),
]:
    bad = "1.5" if fn in ("listdir", "scandir") else "None"
    row(
        f"{AO}.{fn}",
        f"path is {'a float' if bad == '1.5' else 'None'}",
        f"await {ao}.{fn}({args.format(p=bad)})",
        TypeError,
    )
    row(
        f"{AO}.{fn}",
        "embedded NUL",
        f"await {ao}.{fn}({args.format(p=repr('a' + chr(0) + 'b'))})",
        ValueError,
    )
for fn in (
    "stat",
    "remove",
    "unlink",
    "rmdir",
    "listdir",
    "scandir",
    "readlink",
    "removedirs",
    "statvfs",
):
    row(f"{AO}.{fn}", "missing", f"await {ao}.{fn}(missing)", fnf("missing"))
row(AO + ".stat", "fd not open", f"await {ao}.stat(badfd)", err(E.EBADF))
row(AO + ".stat", "fd negative (as os.stat: EFAULT)", f"await {ao}.stat(-1)", err(E.EFAULT))
row(AO + ".stat", "dir_fd is a file", f"await {ao}.stat('x', dir_fd=fd)", NotADirectoryError)
row(AO + ".stat", "path too long", f"await {ao}.stat('a' * 5000)", err(E.ENAMETOOLONG))
row(AO + ".remove", "a directory", f"await {ao}.remove(tmp)", (IsADirectoryError, E.EISDIR, "tmp"))
row(AO + ".unlink", "a directory", f"await {ao}.unlink(tmp)", (IsADirectoryError, E.EISDIR, "tmp"))
row(AO + ".rmdir", "a file", f"await {ao}.rmdir(path)", (NotADirectoryError, E.ENOTDIR, "path"))
row(AO + ".rmdir", "not empty", f"await {ao}.rmdir(tmp)", (OSError, E.ENOTEMPTY, "tmp"))
row(AO + ".mkdir", "exists", f"await {ao}.mkdir(tmp)", (FileExistsError, E.EEXIST, "tmp"))
row(AO + ".mkdir", "mode is a str", f"await {ao}.mkdir(newpath, '755')", TypeError)
row(AO + ".mkdir", "parent missing", f"await {ao}.mkdir(missing + '/x')", fnf("missing + '/x'"))
row(AO + ".makedirs", "exists", f"await {ao}.makedirs(tmp)", FileExistsError)
row(AO + ".makedirs", "through a file", f"await {ao}.makedirs(path + '/a')", NotADirectoryError)
row(AO + ".rename", "missing source", f"await {ao}.rename(missing, newpath)", fnf("missing"))
row(AO + ".rename", "dst is None", f"await {ao}.rename(path, None)", TypeError)
row(AO + ".rename", "dir over a file", f"await {ao}.rename(tmp, path)", OSError)
row(
    AO + ".renames",
    "missing source",
    f"await {ao}.renames(missing, newpath + '/a')",
    fnf("missing"),
)
row(AO + ".replace", "src is an int", f"await {ao}.replace(3, newpath)", TypeError)
row(AO + ".replace", "missing source", f"await {ao}.replace(missing, newpath)", fnf("missing"))
row(AO + ".link", "missing source", f"await {ao}.link(missing, newpath)", fnf("missing"))
row(AO + ".link", "dst exists", f"await {ao}.link(path, path)", FileExistsError)
row(AO + ".symlink", "dst exists", f"await {ao}.symlink('x', path)", FileExistsError)
row(AO + ".symlink", "src is None", f"await {ao}.symlink(None, newpath)", TypeError)
row(AO + ".readlink", "not a link", f"await {ao}.readlink(path)", (OSError, E.EINVAL, "path"))
row(AO + ".listdir", "a file", f"await {ao}.listdir(path)", (NotADirectoryError, E.ENOTDIR, "path"))
row(AO + ".scandir", "a file", f"await {ao}.scandir(path)", (NotADirectoryError, E.ENOTDIR, "path"))
row(AO + ".access", "mode is a str", f"await {ao}.access(path, 'r')", TypeError)
row(AO + ".access", "missing", f"await {ao}.access(missing, os.R_OK)", OK("False", "r is False"))
row(AO + ".sendfile", "out fd not open", f"await {ao}.sendfile(badfd, fd, 0, 10)", err(E.EBADF))
row(
    AO + ".sendfile",
    "in fd is a directory",
    f"await {ao}.sendfile(s1.fileno(), dirfd, 0, 10)",
    err(E.EINVAL),
)
row(
    AO + ".sendfile",
    "negative offset",
    f"await {ao}.sendfile(s1.fileno(), fd, -1, 10)",
    err(E.EINVAL),
)
row(
    AO + ".sendfile",
    "negative count",
    f"await {ao}.sendfile(s1.fileno(), fd, 0, -1)",
    err(E.EINVAL),
)
row(AO + ".sendfile", "out fd is a str", f"await {ao}.sendfile('x', fd, 0, 10)", TypeError)
row(AO + ".getcwd", "an argument", f"await {ao}.getcwd(5)", TypeError)
row(AO + ".wrap", "a non-callable", f"await {ao}.wrap(5)()", TypeError)
row(AO + ".wrap", "None", f"await {ao}.wrap(None)()", TypeError)
row(
    AO + ".wrap",
    "the wrapped function raises",
    f"await {ao}.wrap(os.stat)(missing)",
    fnf("missing"),
)
AP = AF + ".ospath"
ap = "aiofiles.ospath"
for fn in ("exists", "isfile", "isdir", "islink", "ismount"):
    row(f"{AP}.{fn}", "missing", f"await {ap}.{fn}(missing)", OK("False", "r is False"))
    row(f"{AP}.{fn}", "embedded NUL", f"await {ap}.{fn}('a\\0b')", OK("False", "r is False"))
    row(f"{AP}.{fn}", "path is None", f"await {ap}.{fn}(None)", TypeError)
row(AP + ".exists", "fd not open", f"await {ap}.exists(badfd)", OK("False", "r is False"))
row(AP + ".isdir", "path is a float", f"await {ap}.isdir(5.0)", TypeError)
for fn in ("getsize", "getmtime", "getatime", "getctime"):
    row(f"{AP}.{fn}", "missing", f"await {ap}.{fn}(missing)", fnf("missing"))
    row(f"{AP}.{fn}", "path is None", f"await {ap}.{fn}(None)", TypeError)
    row(f"{AP}.{fn}", "embedded NUL", f"await {ap}.{fn}('a\\0b')", ValueError)
row(AP + ".samefile", "missing", f"await {ap}.samefile(path, missing)", fnf("missing"))
row(AP + ".samefile", "path is None", f"await {ap}.samefile(None, path)", TypeError)
row(AP + ".sameopenfile", "fd not open", f"await {ap}.sameopenfile(fd, badfd)", err(E.EBADF))
row(AP + ".sameopenfile", "fd is a str", f"await {ap}.sameopenfile(fd, 'x')", TypeError)
row(AP + ".abspath", "path is None", f"await {ap}.abspath(None)", TypeError)
row(
    AP + ".abspath",
    "embedded NUL (as os.path: no check)",
    f"await {ap}.abspath('a\\0b')",
    OK("the joined path", "r.endswith('a\\0b')"),
)
AT = AF + ".tempfile"
at = "aiofiles.tempfile"
for fn in ("TemporaryFile", "NamedTemporaryFile"):
    row(f"{AT}.{fn}", "mode unknown letter", f"await {at}.{fn}('rz')", ValueError)
    row(f"{AT}.{fn}", "dir missing", f"await {at}.{fn}(dir=missing)", FileNotFoundError)
    row(f"{AT}.{fn}", "dir is a file", f"await {at}.{fn}(dir=path)", NotADirectoryError)
    row(f"{AT}.{fn}", "dir has an embedded NUL", f"await {at}.{fn}(dir='a\\0b')", ValueError)
    row(f"{AT}.{fn}", "buffering is a str", f"await {at}.{fn}(buffering='x')", TypeError)
    row(f"{AT}.{fn}", "unknown encoding", f"await {at}.{fn}('w', encoding='nope')", LookupError)
    row(f"{AT}.{fn}", "unbuffered text", f"await {at}.{fn}('w', 0)", ValueError)
    if fn == "NamedTemporaryFile":  # TemporaryFile's O_TMPFILE file has no name
        row(f"{AT}.{fn}", "prefix is an int", f"await {at}.{fn}(prefix=5, dir=tmp)", TypeError)
row(
    AT + ".NamedTemporaryFile",
    "prefix bytes, suffix str",
    f"await {at}.NamedTemporaryFile(prefix=b'x', suffix='y', dir=tmp)",
    TypeError,
)
row(
    AT + ".NamedTemporaryFile",
    "suffix with a NUL",
    f"await {at}.NamedTemporaryFile(suffix='a\\0b', dir=tmp)",
    ValueError,
)
row(
    AT + ".TemporaryFile",
    "dir is an int (stdlib: EBADF by accident; here TypeError)",
    f"await {at}.TemporaryFile(dir=5)",
    TypeError,
)
row(
    AT + ".SpooledTemporaryFile",
    "max_size is a str (fails at the first write, as tempfile)",
    f"await (await {at}.SpooledTemporaryFile(max_size='x')).write(b'a')",
    TypeError,
)
row(
    AT + ".SpooledTemporaryFile",
    "unknown encoding",
    f"await {at}.SpooledTemporaryFile(mode='w', encoding='nope')",
    LookupError,
)
row(
    AT + ".SpooledTemporaryFile",
    "str to a binary spool",
    f"await (await {at}.SpooledTemporaryFile()).write('x')",
    TypeError,
)
row(
    AT + ".SpooledTemporaryFile",
    "bytes to a text spool",
    f"await (await {at}.SpooledTemporaryFile(mode='w+')).write(b'x')",
    TypeError,
)
row(
    AT + ".SpooledTemporaryFile",
    "dir missing (fails at the rollover)",
    f"await (await {at}.SpooledTemporaryFile(max_size=1, dir=missing)).write(b'xx')",
    FileNotFoundError,
)
row(
    AT + ".TemporaryDirectory",
    "dir missing",
    f"await {at}.TemporaryDirectory(dir=missing)",
    FileNotFoundError,
)
row(
    AT + ".TemporaryDirectory",
    "dir is a file",
    f"await {at}.TemporaryDirectory(dir=path)",
    NotADirectoryError,
)
row(
    AT + ".TemporaryDirectory",
    "dir has an embedded NUL",
    f"await {at}.TemporaryDirectory(dir='a\\0b')",
    ValueError,
)
row(
    AT + ".TemporaryDirectory",
    "suffix is an int",
    f"await {at}.TemporaryDirectory(suffix=5, dir=tmp)",
    TypeError,
)
row(
    AT + ".TemporaryDirectory",
    "removed behind its back, then cleaned up",
    f"await scenarios.tempdir_removed_under({at}.TemporaryDirectory(dir=tmp))",
    OK("no error (as tempfile)", "r is None"),
)
row(AT + ".wrap", "not a file", f"{at}.wrap(5, 5)", TypeError)

# ------------------------------------------------------------------ ringio.tempfile
# As the stdlib's tempfile: the constructors raise what tempfile raises; the objects'
# methods what the stdlib objects raise.
group("tempfile", per_engine=True)
RT = "ringio.tempfile"
rt = "ringio.tempfile"
for fn in ("TemporaryFile", "NamedTemporaryFile"):
    row(f"{RT}.{fn}", "mode unknown letter", f"await {rt}.{fn}('rz')", ValueError)
    row(f"{RT}.{fn}", "mode is None", f"await {rt}.{fn}(None)", TypeError)
    row(f"{RT}.{fn}", "dir missing", f"await {rt}.{fn}(dir=missing)", FileNotFoundError)
    row(f"{RT}.{fn}", "dir is a file", f"await {rt}.{fn}(dir=path)", NotADirectoryError)
    row(f"{RT}.{fn}", "dir has an embedded NUL", f"await {rt}.{fn}(dir='a\\0b')", ValueError)
    row(
        f"{RT}.{fn}",
        "dir is an int (stdlib: EBADF by accident)",
        f"await {rt}.{fn}(dir=5)",
        TypeError,
    )
    row(f"{RT}.{fn}", "buffering is a str", f"await {rt}.{fn}(buffering='x', dir=tmp)", TypeError)
    row(
        f"{RT}.{fn}",
        "unknown encoding",
        f"await {rt}.{fn}('w', encoding='nope', dir=tmp)",
        LookupError,
    )
    row(
        f"{RT}.{fn}",
        "encoding in binary mode",
        f"await {rt}.{fn}('wb', encoding='utf-8', dir=tmp)",
        ValueError,
    )
    row(f"{RT}.{fn}", "unbuffered text", f"await {rt}.{fn}('w', 0, dir=tmp)", ValueError)
    if fn == "NamedTemporaryFile":  # TemporaryFile's O_TMPFILE file has no name
        row(f"{RT}.{fn}", "prefix is an int", f"await {rt}.{fn}(prefix=5, dir=tmp)", TypeError)
    row(f"{RT}.{fn}", "prefix bytes, dir str", f"await {rt}.{fn}(prefix=b'x', dir=tmp)", TypeError)
    row(
        f"{RT}.{fn}",
        "loop is not the running loop",
        f"await {rt}.{fn}(dir=tmp, loop=asyncio.new_event_loop())",
        ValueError,
    )
    row(
        f"{RT}.{fn}",
        "not awaited, never entered",
        f"scenarios.pending_dropped({rt}.{fn}(dir=tmp), tmp)",
        OK("nothing created, no warning", "r == []"),
    )
row(
    RT + ".NamedTemporaryFile",
    "100 at once (back-pressure, not failure)",
    "await scenarios.tempfiles_many(tmp, 100)",
    OK("100 distinct files, all removed on close", "r is True"),
)
row(
    RT + ".NamedTemporaryFile",
    "suffix with a NUL",
    f"await {rt}.NamedTemporaryFile(suffix='a\\0b', dir=tmp)",
    ValueError,
)
row(
    RT + ".NamedTemporaryFile",
    "suffix with a slash into a missing directory",
    f"await {rt}.NamedTemporaryFile(suffix='/x/y', dir=tmp)",
    FileNotFoundError,
)
row(
    RT + ".AsyncTemporaryFileWrapper.close",
    "twice",
    "(await ntf.close(), await ntf.close())",
    OK("None twice", "r == (None, None)"),
)
row(
    RT + ".AsyncTemporaryFileWrapper.close",
    "the file was removed behind its back",
    "await scenarios.named_removed_under(ntf)",
    OK("None (as 3.12+: already gone is fine)", "r is None"),
)
row(
    RT + ".AsyncTemporaryFileWrapper.aclose",
    "twice",
    "(await ntf.aclose(), await ntf.aclose())",
    OK("None twice", "r == (None, None)"),
)
row(
    RT + ".AsyncTemporaryFileWrapper",
    "read after close",
    "await scenarios.closed_then(ntf, 'read')",
    ValueError,
)
S = RT + ".AsyncSpooledTemporaryFile"
row(
    RT + ".SpooledTemporaryFile",
    "max_size is a str (fails at the first write, as tempfile)",
    f"await (await {rt}.SpooledTemporaryFile(max_size='x')).write(b'a')",
    TypeError,
)
row(
    RT + ".SpooledTemporaryFile",
    "unknown encoding",
    f"await {rt}.SpooledTemporaryFile(mode='w', encoding='nope')",
    LookupError,
)
row(
    RT + ".SpooledTemporaryFile",
    "mode unknown letter (fails at the rollover, as tempfile)",
    f"await (await {rt}.SpooledTemporaryFile(1, 'rzb')).write(b'xx')",
    ValueError,
)
row(
    RT + ".SpooledTemporaryFile",
    "dir missing (fails at the rollover)",
    f"await (await {rt}.SpooledTemporaryFile(1, dir=missing)).write(b'xx')",
    FileNotFoundError,
)
row(
    RT + ".SpooledTemporaryFile",
    "loop is not the running loop",
    f"await {rt}.SpooledTemporaryFile(loop=asyncio.new_event_loop())",
    ValueError,
)
for sp, where in (("sp", "in memory"), ("spr", "rolled over")):
    row(S + ".write", f"str to a binary spool ({where})", f"await {sp}.write('x')", TypeError)
    row(S + ".write", f"None ({where})", f"await {sp}.write(None)", TypeError)
    row(
        S + ".writelines", f"an int in the list ({where})", f"await {sp}.writelines([5])", TypeError
    )
    row(S + ".read", f"size is a str ({where})", f"await {sp}.read('x')", TypeError)
    row(S + ".read1", f"size is a str ({where})", f"await {sp}.read1('x')", TypeError)
    row(S + ".readinto", f"read-only buffer ({where})", f"await {sp}.readinto(ro)", TypeError)
    row(S + ".readline", f"size is a str ({where})", f"await {sp}.readline('x')", TypeError)
    row(S + ".readlines", f"hint is a str ({where})", f"await {sp}.readlines('x')", TypeError)
    row(S + ".seek", f"whence 7 ({where})", f"await {sp}.seek(0, 7)", ValueError)
    row(S + ".seek", f"negative position ({where})", f"await {sp}.seek(-1)", (ValueError, OSError))
    row(S + ".seek", f"offset is a str ({where})", f"await {sp}.seek('x')", TypeError)
    row(S + ".truncate", f"size is a str ({where})", f"await {sp}.truncate('x')", TypeError)
    row(
        S + ".truncate",
        f"negative size ({where})",
        f"await {sp}.truncate(-1)",
        (ValueError, OSError),
    )
for sp, where in (("spc", "closed in memory"), ("sprc", "closed after the rollover")):
    for fn in ("readable", "writable", "seekable", "isatty"):
        row(f"{S}.{fn}", f"after close ({where})", f"{sp}.{fn}()", ValueError)
    for fn, args in (
        ("read", ""), ("read1", ""), ("readinto", "bytearray(4)"), ("readline", ""),
        ("readlines", ""), ("seek", "0"), ("tell", ""), ("truncate", ""), ("flush", ""),
        ("write", "b'x'"), ("writelines", "[b'x']"),
    ):  # fmt: skip
        row(f"{S}.{fn}", f"after close ({where})", f"await {sp}.{fn}({args})", ValueError)
    row(f"{S}.fileno", f"after close ({where})", f"await {sp}.fileno()", ValueError)
    row(
        f"{S}.rollover",
        f"after close ({where})",
        f"await {sp}.rollover()",
        ValueError if sp == "spc" else OK("None (already rolled over, as tempfile)", "r is None"),
    )
    row(f"{S}.close", f"twice ({where})", f"await {sp}.close()", OK("None", "r is None"))
    row(f"{S}.aclose", f"twice ({where})", f"await {sp}.aclose()", OK("None", "r is None"))
row(S + ".rollover", "an argument", "await sp.rollover(1)", TypeError)
row(
    S + ".rollover",
    "twice",
    "(await sp.rollover(), await sp.rollover())",
    OK("None twice (the second does nothing)", "r == (None, None)"),
)
row(
    S + ".rollover",
    "into a directory removed meanwhile",
    "await scenarios.spool_rollover_dir_gone(tmp)",
    FileNotFoundError,
)
row(S + ".fileno", "an argument", "await sp.fileno(1)", TypeError)
TD = RT + ".AsyncTemporaryDirectory"
row(
    RT + ".TemporaryDirectory",
    "dir missing",
    f"await {rt}.TemporaryDirectory(dir=missing)",
    FileNotFoundError,
)
row(
    RT + ".TemporaryDirectory",
    "dir is a file",
    f"await {rt}.TemporaryDirectory(dir=path)",
    NotADirectoryError,
)
row(
    RT + ".TemporaryDirectory",
    "dir has an embedded NUL",
    f"await {rt}.TemporaryDirectory(dir='a\\0b')",
    ValueError,
)
row(
    RT + ".TemporaryDirectory",
    "suffix is an int",
    f"await {rt}.TemporaryDirectory(suffix=5, dir=tmp)",
    TypeError,
)
row(
    RT + ".TemporaryDirectory",
    "prefix bytes, dir str",
    f"await {rt}.TemporaryDirectory(prefix=b'x', dir=tmp)",
    TypeError,
)
row(
    RT + ".TemporaryDirectory",
    "loop is not the running loop",
    f"await {rt}.TemporaryDirectory(dir=tmp, loop=asyncio.new_event_loop())",
    ValueError,
)
row(
    TD + ".cleanup",
    "twice",
    "(await td.cleanup(), await td.cleanup())",
    OK("None twice", "r == (None, None)"),
)
row(
    TD + ".cleanup",
    "removed behind its back",
    "await scenarios.tempdir_gone(td)",
    OK("None (as tempfile)", "r is None"),
)
row(
    TD + ".cleanup",
    "a read-only subdirectory inside (as tempfile: made writable, removed)",
    "await scenarios.tempdir_readonly_inside(td)",
    OK("removed", "r is False"),
)
row(
    TD + ".cleanup",
    "a file inside replaced by a directory with a socket",
    "await scenarios.tempdir_odd_entries(td)",
    OK("removed", "r is False"),
)
row(TD + ".cleanup", "an argument", "await td.cleanup(1)", TypeError)
row(
    TD + ".close",
    "twice",
    "(await td.close(), await td.close())",
    OK("None twice", "r == (None, None)"),
)

# ------------------------------------------------------------------ fd objects
group("aio")
row(
    "ringio.aio.pread",
    "fileno() returns a number beyond int32",
    "aio.pread(scenarios.FakeFile(2**32 + 3), bytearray(8), 0)",
    OverflowError,
)
row(
    "ringio.aio.pread",
    "fileno() returns -1",
    "aio.pread(scenarios.FakeFile(-1), bytearray(8), 0)",
    ValueError,
)
row(
    "ringio.aio.pread",
    "fileno() returns a str",
    "aio.pread(scenarios.FakeFile('3'), bytearray(8), 0)",
    TypeError,
)
row("ringio.aio.pread", "fd is a bool", "aio.pread(True, bytearray(8), 0)", TypeError)
