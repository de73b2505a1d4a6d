"""io_uring, synchronously: a ring, one small helper per operation, and a probe.

::

    from ringio import uring
    with uring.Ring(256) as ring:
        buf = bytearray(4096)
        ring.submit([uring.pread(fd, buf, 0), uring.statx("/etc/hostname")])
        for done in ring.get_events(2, timeout=5):
            print(done.op.command, done.result())

Ops are the same objects as ``ringio.aio``'s (``pread``, ``pwrite``, ``preadv``,
``pwritev``, ``fsync``, ``fdsync``, ``poll``), plus what only io_uring has:
``read``/``write`` at the file position (pipes, sockets, FIFOs), ``openat``,
``close``, ``statx``, ``ftruncate``, ``fallocate``, ``renameat``, ``unlinkat``,
``mkdirat``, ``symlinkat`` and ``linkat``. Unlike kernel AIO, io_uring can cancel
any in-flight op (``Ring.cancel``), and buffered I/O is truly asynchronous.
"""

from __future__ import annotations

import os
from typing import Any

from . import _core
from ._core import (
    Completion,
    Op,
    close,
    fallocate,
    fdsync,
    fsync,
    ftruncate,
    linkat,
    mkdirat,
    noop,
    openat,
    poll,
    pread,
    preadv,
    pwrite,
    pwritev,
    read,
    renameat,
    statx,
    symlinkat,
    unlinkat,
    write,
)

Ring = _core.uring.Ring

__all__ = [
    "AT_EMPTY_PATH",
    "AT_SYMLINK_NOFOLLOW",
    "Completion",
    "Op",
    "Ring",
    "close",
    "fallocate",
    "fdsync",
    "fstat",
    "fsync",
    "ftruncate",
    "linkat",
    "mkdirat",
    "noop",
    "openat",
    "poll",
    "pread",
    "preadv",
    "probe",
    "pwrite",
    "pwritev",
    "read",
    "renameat",
    "stat_result",
    "statx",
    "symlinkat",
    "unlinkat",
    "write",
]

AT_EMPTY_PATH = 0x1000
AT_SYMLINK_NOFOLLOW = 0x100


def probe() -> dict[str, bool]:
    """The io_uring opcodes the running kernel supports. Raises the kernel's
    OSError where io_uring itself is refused (seccomp, kernel.io_uring_disabled)."""
    return dict(_core.uring.probe())


def fstat(fd: Any, *, data: Any = None) -> Op:
    """statx of an open fd (AT_EMPTY_PATH); read the result with stat_result(op)."""
    if isinstance(fd, int):
        fileno = fd
    elif hasattr(fd, "fileno"):
        fileno = fd.fileno()
    else:  # as the other op helpers: a TypeError, not an AttributeError
        raise TypeError(f"expected an int fd or an object with fileno(), not {type(fd).__name__!r}")
    if isinstance(fileno, bool) or not isinstance(fileno, int):
        raise TypeError(f"fd must be an int, not {type(fileno).__name__!r}")
    if fileno < 0:
        # statx(AT_EMPTY_PATH) would take -100 (AT_FDCWD) as the current directory.
        raise ValueError(f"fd must be >= 0, not {fileno}")
    return statx("", dir_fd=fileno, flags=AT_EMPTY_PATH, data=data)


def stat_result(op: Op) -> os.stat_result:
    """The ``os.stat_result`` of a completed statx op (same fields as os.stat)."""
    if not isinstance(op, Op):
        raise TypeError(f"stat_result() takes a statx op, not {type(op).__name__!r}")
    f = op.statx_result()
    if f is None:
        raise ValueError("the statx op has not completed successfully")

    def seconds(ts: tuple[int, int]) -> float:
        return ts[0] + ts[1] * 1e-9

    def nanoseconds(ts: tuple[int, int]) -> int:
        return ts[0] * 1_000_000_000 + ts[1]

    dev = os.makedev(*f["dev"])
    return os.stat_result(
        (
            f["mode"],
            f["ino"],
            dev,
            f["nlink"],
            f["uid"],
            f["gid"],
            f["size"],
            int(seconds(f["atime"])),
            int(seconds(f["mtime"])),
            int(seconds(f["ctime"])),
            seconds(f["atime"]),
            seconds(f["mtime"]),
            seconds(f["ctime"]),
            nanoseconds(f["atime"]),
            nanoseconds(f["mtime"]),
            nanoseconds(f["ctime"]),
            f["blksize"],
            f["blocks"],
            os.makedev(*f["rdev"]),
        )
    )

