"""Asynchronous ``os.path`` queries on ringio's file engine: the surface of
``aiofiles.os.path`` (25.1), built on the engine's stat (io_uring STATX where the
engine is io_uring) with the semantics of ``os.path``: ``exists``/``isfile``/
``isdir`` are False for a broken symlink, a missing path or one the caller may not
search, and ``islink`` looks at the link itself (lstat).

Every function also accepts the aiofiles keywords ``loop`` (the running loop) and
``executor`` (used only by the calls that fall back to a pool).
"""

from __future__ import annotations

import asyncio
import operator
import os
import stat as statmod
from concurrent.futures import Executor
from typing import Any, AnyStr

from ._common import PathArg, engine_for, fallback, fspath, kernel

__all__ = [
    "abspath",
    "exists",
    "getatime",
    "getctime",
    "getmtime",
    "getsize",
    "isdir",
    "isfile",
    "islink",
    "ismount",
    "samefile",
    "sameopenfile",
]

Loop = asyncio.AbstractEventLoop


async def _stat(
    func: str, path: Any, loop: Loop | None, follow_symlinks: bool = True
) -> os.stat_result:
    # ringio.os.stat would do, but importing it here would be circular.
    p = fspath(func, path, allow_fd=True)
    engine = engine_for(loop)
    if isinstance(p, int):
        if p < 0:
            return os.stat(p)  # fails at once; see ringio.os.stat
        return await kernel(engine.fstat(p), p)
    return await kernel(engine.stat(p, follow_symlinks=follow_symlinks), p)


async def exists(
    path: PathArg | int, *, loop: Loop | None = None, executor: Executor | None = None
) -> bool:
    """``os.path.exists``: False for a broken symlink and on any OSError."""
    try:
        await _stat("stat", path, loop)
    except (OSError, ValueError):
        return False
    return True


async def isfile(
    path: PathArg | int, *, loop: Loop | None = None, executor: Executor | None = None
) -> bool:
    """``os.path.isfile``: a regular file, after following symlinks."""
    try:
        st = await _stat("stat", path, loop)
    except (OSError, ValueError):
        return False
    return statmod.S_ISREG(st.st_mode)


async def isdir(
    s: PathArg | int, *, loop: Loop | None = None, executor: Executor | None = None
) -> bool:
    """``os.path.isdir``: a directory, after following symlinks."""
    try:
        st = await _stat("stat", s, loop)
    except (OSError, ValueError):
        return False
    return statmod.S_ISDIR(st.st_mode)


async def islink(
    path: PathArg, *, loop: Loop | None = None, executor: Executor | None = None
) -> bool:
    """``os.path.islink``: lstat says the path itself is a symlink."""
    try:
        st = await _stat("lstat", path, loop, follow_symlinks=False)
    except (OSError, ValueError, AttributeError):
        return False
    return statmod.S_ISLNK(st.st_mode)


async def ismount(
    path: PathArg, *, loop: Loop | None = None, executor: Executor | None = None
) -> bool:
    """``os.path.ismount``: ``path`` and its (resolved) parent are on different
    devices or are the same inode. Two engine lstats; the parent is resolved with
    ``os.path.realpath`` on the fallback pool (it reads links)."""
    try:
        s1 = await _stat("lstat", path, loop, follow_symlinks=False)
    except (OSError, ValueError):
        return False
    if statmod.S_ISLNK(s1.st_mode):
        return False  # a symlink is never a mount point
    p = os.fspath(path)
    parent = os.path.join(p, b".." if isinstance(p, bytes) else "..")
    parent = await fallback(engine_for(loop), executor, os.path.realpath, parent)
    try:
        s2 = await _stat("lstat", parent, loop, follow_symlinks=False)
    except (OSError, ValueError):
        return False
    return s1.st_dev != s2.st_dev or s1.st_ino == s2.st_ino


async def getsize(
    filename: PathArg | int, *, loop: Loop | None = None, executor: Executor | None = None
) -> int:
    """``os.path.getsize``: st_size; raises OSError as os.stat does."""
    return (await _stat("stat", filename, loop)).st_size


async def getmtime(
    filename: PathArg | int, *, loop: Loop | None = None, executor: Executor | None = None
) -> float:
    """``os.path.getmtime``: st_mtime in seconds."""
    return (await _stat("stat", filename, loop)).st_mtime


async def getatime(
    filename: PathArg | int, *, loop: Loop | None = None, executor: Executor | None = None
) -> float:
    """``os.path.getatime``: st_atime in seconds."""
    return (await _stat("stat", filename, loop)).st_atime


async def getctime(
    filename: PathArg | int, *, loop: Loop | None = None, executor: Executor | None = None
) -> float:
    """``os.path.getctime``: st_ctime in seconds."""
    return (await _stat("stat", filename, loop)).st_ctime


async def samefile(
    f1: PathArg | int, f2: PathArg | int, *, loop: Loop | None = None,
    executor: Executor | None = None,
) -> bool:
    """``os.path.samefile``: both stats have the same device and inode."""
    s1 = await _stat("stat", f1, loop)
    s2 = await _stat("stat", f2, loop)
    return os.path.samestat(s1, s2)


async def sameopenfile(
    fp1: int, fp2: int, *, loop: Loop | None = None, executor: Executor | None = None
) -> bool:
    """``os.path.sameopenfile``: both fds' fstats have the same device and inode."""
    s1 = await _fstat(fp1, loop)
    s2 = await _fstat(fp2, loop)
    return os.path.samestat(s1, s2)


async def _fstat(fd: Any, loop: Loop | None) -> os.stat_result:
    if not hasattr(fd, "__index__") or isinstance(fd, str | bytes) or fd < 0:
        # Fails at once with os.fstat's own exception (a bad type or fd).
        return os.fstat(fd)
    try:
        return await engine_for(loop).fstat(operator.index(fd))
    except OSError as e:
        e.filename = None  # os.fstat names no file in its errors
        raise


async def abspath(
    path: AnyStr | os.PathLike[AnyStr], *, loop: Loop | None = None,
    executor: Executor | None = None,
) -> AnyStr:
    """``os.path.abspath``. An absolute path is normalised at once (no system
    call); a relative one needs the current directory, read on the fallback pool."""
    p = os.fspath(path)
    if os.path.isabs(p):
        return os.path.normpath(p)
    return await fallback(engine_for(loop), executor, os.path.abspath, p)
