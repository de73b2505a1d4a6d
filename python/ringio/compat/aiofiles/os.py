"""``aiofiles.os`` over ringio: :mod:`ringio.os`, which has the same functions,
arguments (``loop``, ``executor``), results and exceptions, done by the engine
(io_uring operations where the kernel has them) instead of a thread per call."""

from __future__ import annotations

from ringio.os import (
    access,
    getcwd,
    link,
    listdir,
    makedirs,
    mkdir,
    readlink,
    remove,
    removedirs,
    rename,
    renames,
    replace,
    rmdir,
    scandir,
    sendfile,
    stat,
    statvfs,
    symlink,
    unlink,
    wrap,
)

from . import ospath as path

__all__ = [
    "access",
    "getcwd",
    "link",
    "listdir",
    "makedirs",
    "mkdir",
    "path",
    "readlink",
    "remove",
    "removedirs",
    "rename",
    "renames",
    "replace",
    "rmdir",
    "scandir",
    "sendfile",
    "stat",
    "statvfs",
    "symlink",
    "unlink",
    "wrap",
]
