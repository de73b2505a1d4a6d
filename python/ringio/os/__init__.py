"""Asynchronous ``os`` functions on ringio's file engine: the surface of
``aiofiles.os`` (25.1), without a thread per call where the kernel can do it.

Each function takes the arguments of its ``os`` namesake, returns what it returns and
raises what it raises (the same ``OSError`` subclasses, with ``filename``). On the
io_uring engine, ``stat``, ``rename``/``replace``, ``remove``/``unlink``, ``rmdir``,
``mkdir``, ``link`` and ``symlink`` are io_uring operations (STATX, RENAMEAT,
UNLINKAT, MKDIRAT, LINKAT, SYMLINKAT), and ``makedirs``, ``renames`` and
``removedirs`` are composed of them. The calls the kernel has no asynchronous form
for (``listdir``, ``scandir``, ``readlink``, ``access``, ``getcwd``, ``statvfs``,
``sendfile``) run on the engine's small fallback pool. docs/os.md lists which path
each call takes on each engine.

Like aiofiles' wrappers, every function also accepts the keywords ``loop`` (which
must be the running loop) and ``executor`` (an executor for the fallback-pool calls
in place of the engine's pool; kernel operations ignore it).
"""

from __future__ import annotations

import asyncio
import operator
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import Executor
from functools import wraps
from types import TracebackType
from typing import Any, TypeVar

from . import path
from ._common import PathArg, check_dir_fd, engine_for, fallback, fspath, kernel

__all__ = [
    "ScandirIterator",
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

T = TypeVar("T")
Loop = asyncio.AbstractEventLoop

# os.link without dir_fds calls link(2), which does not follow symlinks on Linux,
# until CPython 3.14 (gh-81793) made it call linkat(AT_SYMLINK_FOLLOW).
_LINK_IGNORES_FOLLOW = sys.version_info < (3, 14)


def wrap(func: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """``func`` as a coroutine function that runs it on the engine's fallback pool
    (or on ``executor=``), like ``aiofiles.os.wrap``. For blocking calls only: the
    pool is small and shared by the calls that have no kernel async form."""

    @wraps(func)
    async def run(
        *args: Any, loop: Loop | None = None, executor: Executor | None = None, **kwargs: Any
    ) -> T:
        return await fallback(engine_for(loop), executor, func, *args, **kwargs)

    return run


# -- kernel operations on io_uring ------------------------------------------------


async def stat(
    path: PathArg | int, *, dir_fd: int | None = None, follow_symlinks: bool = True,
    loop: Loop | None = None, executor: Executor | None = None,
) -> os.stat_result:
    """``os.stat``: io_uring STATX of a path (or of an open fd)."""
    p = fspath("stat", path, allow_fd=True)
    dfd = check_dir_fd(dir_fd)
    engine = engine_for(loop)
    if isinstance(p, int):
        if dfd is not None:
            raise ValueError("stat: can't specify dir_fd without matching path")
        if p < 0:
            # Fails at once without blocking; and statx(AT_EMPTY_PATH) would take
            # -100 (AT_FDCWD) for the current directory where os refuses it.
            return os.stat(p)
        return await kernel(engine.fstat(p), p)
    return await kernel(engine.stat(p, dir_fd=dfd, follow_symlinks=bool(follow_symlinks)), p)


async def rename(
    src: PathArg, dst: PathArg, *, src_dir_fd: int | None = None,
    dst_dir_fd: int | None = None, loop: Loop | None = None,
    executor: Executor | None = None,
) -> None:
    """``os.rename``: io_uring RENAMEAT (on Linux, rename replaces ``dst``)."""
    await _rename("rename", src, dst, src_dir_fd, dst_dir_fd, loop)


async def replace(
    src: PathArg, dst: PathArg, *, src_dir_fd: int | None = None,
    dst_dir_fd: int | None = None, loop: Loop | None = None,
    executor: Executor | None = None,
) -> None:
    """``os.replace``: io_uring RENAMEAT."""
    await _rename("replace", src, dst, src_dir_fd, dst_dir_fd, loop)


async def _rename(
    func: str, src: Any, dst: Any, src_dir_fd: Any, dst_dir_fd: Any, loop: Loop | None
) -> None:
    s, d = fspath(func, src, "src"), fspath(func, dst, "dst")
    sfd, dfd = check_dir_fd(src_dir_fd), check_dir_fd(dst_dir_fd)
    engine = engine_for(loop)
    await kernel(engine.rename(s, d, src_dir_fd=sfd, dst_dir_fd=dfd), s, d)


async def remove(
    path: PathArg, *, dir_fd: int | None = None, loop: Loop | None = None,
    executor: Executor | None = None,
) -> None:
    """``os.remove``: io_uring UNLINKAT."""
    await _unlink("remove", path, dir_fd, loop)


async def unlink(
    path: PathArg, *, dir_fd: int | None = None, loop: Loop | None = None,
    executor: Executor | None = None,
) -> None:
    """``os.unlink``: io_uring UNLINKAT."""
    await _unlink("unlink", path, dir_fd, loop)


async def _unlink(func: str, path: Any, dir_fd: Any, loop: Loop | None) -> None:
    p, dfd = fspath(func, path), check_dir_fd(dir_fd)
    await kernel(engine_for(loop).unlink(p, dir_fd=dfd), p)


async def rmdir(
    path: PathArg, *, dir_fd: int | None = None, loop: Loop | None = None,
    executor: Executor | None = None,
) -> None:
    """``os.rmdir``: io_uring UNLINKAT with AT_REMOVEDIR."""
    p, dfd = fspath("rmdir", path), check_dir_fd(dir_fd)
    await kernel(engine_for(loop).rmdir(p, dir_fd=dfd), p)


async def mkdir(
    path: PathArg, mode: int = 0o777, *, dir_fd: int | None = None,
    loop: Loop | None = None, executor: Executor | None = None,
) -> None:
    """``os.mkdir``: io_uring MKDIRAT (``mode`` is masked by the umask, as in os)."""
    p, dfd = fspath("mkdir", path), check_dir_fd(dir_fd)
    m = operator.index(mode)
    await kernel(engine_for(loop).mkdir(p, m, dir_fd=dfd), p)


async def link(
    src: PathArg, dst: PathArg, *, src_dir_fd: int | None = None,
    dst_dir_fd: int | None = None, follow_symlinks: bool = True,
    loop: Loop | None = None, executor: Executor | None = None,
) -> None:
    """``os.link``: io_uring LINKAT.

    Whether a symlink ``src`` is followed is as in os of the running Python: before
    3.14, os calls link(2) when no dir_fd is given, which on Linux links the symlink
    itself whatever ``follow_symlinks`` says (CPython gh-81793); from 3.14 on, and
    with a dir_fd, ``follow_symlinks=True`` links the file the symlink names."""
    s, d = fspath("link", src, "src"), fspath("link", dst, "dst")
    sfd, dfd = check_dir_fd(src_dir_fd), check_dir_fd(dst_dir_fd)
    follow = bool(follow_symlinks)
    if _LINK_IGNORES_FOLLOW and sfd is None and dfd is None:
        follow = False
    engine = engine_for(loop)
    await kernel(
        engine.link(s, d, src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=follow), s, d
    )


async def symlink(
    src: PathArg, dst: PathArg, target_is_directory: bool = False, *,
    dir_fd: int | None = None, loop: Loop | None = None,
    executor: Executor | None = None,
) -> None:
    """``os.symlink``: io_uring SYMLINKAT. ``target_is_directory`` only matters on
    Windows; it is accepted and ignored, as os does on Linux."""
    s, d = fspath("symlink", src, "src"), fspath("symlink", dst, "dst")
    dfd = check_dir_fd(dir_fd)
    await kernel(engine_for(loop).symlink(s, d, dir_fd=dfd), s, d)


# -- composed of the kernel operations (same algorithms as os) ----------------------


async def makedirs(
    name: PathArg, mode: int = 0o777, exist_ok: bool = False, *,
    loop: Loop | None = None, executor: Executor | None = None,
) -> None:
    """``os.makedirs``: MKDIRAT for each missing directory, leaf last. As in os,
    intermediate directories get the default mode and only the leaf gets ``mode``."""
    head, tail = os.path.split(name)
    if not tail:
        head, tail = os.path.split(head)
    if head and tail and not await path.exists(head, loop=loop):
        try:
            await makedirs(head, exist_ok=exist_ok, loop=loop)
        except FileExistsError:
            pass  # another task or process made it meanwhile: what we wanted
        if tail == (b"." if isinstance(tail, bytes) else "."):
            return  # xxx/newdir/. exists once xxx/newdir does
    try:
        await mkdir(name, mode, loop=loop)
    except OSError:
        # Not only EEXIST: the kernel may report EACCES or EROFS first for a
        # directory that does exist.
        if not exist_ok or not await path.isdir(name, loop=loop):
            raise


async def removedirs(
    name: PathArg, *, loop: Loop | None = None, executor: Executor | None = None
) -> None:
    """``os.removedirs``: removes the leaf directory, then each empty parent, stopping
    quietly at the first that cannot be removed."""
    await rmdir(name, loop=loop)
    head, tail = os.path.split(name)
    if not tail:
        head, tail = os.path.split(head)
    while head and tail:
        try:
            await rmdir(head, loop=loop)
        except OSError:
            break
        head, tail = os.path.split(head)


async def renames(
    old: PathArg, new: PathArg, *, loop: Loop | None = None,
    executor: Executor | None = None,
) -> None:
    """``os.renames``: makes the parents ``new`` needs, renames, then prunes the
    parents of ``old`` that are left empty."""
    head, tail = os.path.split(new)
    if head and tail and not await path.exists(head, loop=loop):
        await makedirs(head, loop=loop)
    await rename(old, new, loop=loop)
    head, tail = os.path.split(old)
    if head and tail:
        try:
            await removedirs(head, loop=loop)
        except OSError:
            pass


# -- no kernel async form: the engine's fallback pool --------------------------------


async def readlink(
    path: PathArg, *, dir_fd: int | None = None, loop: Loop | None = None,
    executor: Executor | None = None,
) -> str | bytes:
    """``os.readlink`` (fallback pool: io_uring has no readlinkat)."""
    return await fallback(engine_for(loop), executor, os.readlink, path, dir_fd=dir_fd)


async def listdir(
    path: PathArg | int | None = None, *, loop: Loop | None = None,
    executor: Executor | None = None,
) -> list[Any]:
    """``os.listdir`` (fallback pool: no kernel async getdents)."""
    return await fallback(engine_for(loop), executor, os.listdir, path)


class ScandirIterator(Iterator["os.DirEntry[Any]"]):
    """What :func:`scandir` returns: an iterator over ``os.DirEntry`` objects with
    the context-manager and ``close()`` of ``os.scandir``'s iterator. The directory
    was read on the fallback pool, so iterating never blocks the loop."""

    def __init__(self, entries: Iterable[os.DirEntry[Any]]) -> None:
        self._entries: Iterator[os.DirEntry[Any]] = iter(entries)

    def __iter__(self) -> ScandirIterator:
        return self

    def __next__(self) -> os.DirEntry[Any]:
        return next(self._entries)

    def close(self) -> None:
        self._entries = iter(())

    def __enter__(self) -> ScandirIterator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _scandir_all(path: Any) -> list[os.DirEntry[Any]]:
    with os.scandir(path) as it:
        return list(it)


async def scandir(
    path: PathArg | int | None = None, *, loop: Loop | None = None,
    executor: Executor | None = None,
) -> ScandirIterator:
    """``os.scandir``, read whole on the fallback pool. Unlike aiofiles, which
    returns os's lazy iterator (its getdents calls then block the loop), the entries
    are read before this returns; ``DirEntry.is_dir()`` etc. use the d_type the
    kernel gave and only stat where the filesystem gave none."""
    entries = await fallback(engine_for(loop), executor, _scandir_all, path)
    return ScandirIterator(entries)


async def access(
    path: PathArg | int, mode: int, *, dir_fd: int | None = None,
    effective_ids: bool = False, follow_symlinks: bool = True,
    loop: Loop | None = None, executor: Executor | None = None,
) -> bool:
    """``os.access`` (fallback pool: io_uring has no faccessat)."""
    return await fallback(
        engine_for(loop), executor, os.access, path, mode, dir_fd=dir_fd,
        effective_ids=effective_ids, follow_symlinks=follow_symlinks,
    )


async def getcwd(*, loop: Loop | None = None, executor: Executor | None = None) -> str:
    """``os.getcwd`` (fallback pool)."""
    return await fallback(engine_for(loop), executor, os.getcwd)


async def statvfs(
    path: PathArg | int, *, loop: Loop | None = None, executor: Executor | None = None
) -> os.statvfs_result:
    """``os.statvfs`` (fallback pool: no kernel async statfs)."""
    return await fallback(engine_for(loop), executor, os.statvfs, path)


async def sendfile(
    out_fd: int, in_fd: int, offset: int | None, count: int, *,
    loop: Loop | None = None, executor: Executor | None = None,
) -> int:
    """``os.sendfile`` (fallback pool; like os, it may send fewer than ``count``
    bytes and raises BlockingIOError on a non-blocking ``out_fd`` that is full)."""
    return await fallback(engine_for(loop), executor, os.sendfile, out_fd, in_fd, offset, count)
