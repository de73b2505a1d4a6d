"""Calls the kernel engines make inline, without their queue or pool, where they
cannot wait: the kernel answers them from memory."""

from __future__ import annotations

import os
import stat
from typing import Any

from .. import _core

# Filesystems that answer getattr from the inode in memory, asking no device or
# server (statfs.f_type): ext2/3/4, xfs, btrfs, tmpfs, ramfs, f2fs, overlayfs, zfs,
# procfs, sysfs. An fstat of a file open there cannot wait, so the kernel engines
# make it inline; io_uring always hands STATX to a kernel worker (a thread wake-up:
# 58 µs against 1 µs for the call here, 2026-11-26). NFS, CIFS, Ceph, 9p and FUSE
# may ask their server: there fstat goes through the queue (or the pool).
_LOCAL_FILESYSTEMS = frozenset(
    {0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x858458F6, 0xF2F52010, 0x794C7630,
     0x2FC12FC1, 0x9FA0, 0x62656572}
)  # fmt: skip


def fstat_inline(fd: int) -> os.stat_result | None:
    """``os.fstat(fd)`` where it cannot wait (a local filesystem), else None; None
    also for an fd that fstatfs refuses (the queued call then raises the kernel's
    error as before)."""
    try:
        if _core.fs_type(fd) not in _LOCAL_FILESYSTEMS:
            return None
    except OSError:
        return None
    return os.fstat(fd)


def stat_inline(path: Any, dir_fd: int | None, follow_symlinks: bool) -> os.stat_result | None:
    """``os.stat(path, ...)`` where it cannot wait: every step of the path in the
    dentry cache (an ``O_PATH`` open with ``RESOLVE_CACHED``) and a local filesystem;
    else None, for errors too (the queued call raises them as ``os.stat`` does). io_uring
    hands STATX to a kernel worker (58 µs here, 2026-11-26); this is four syscalls."""
    fd = _open_path_cached(path, dir_fd, follow_symlinks)
    if fd is None:
        return None
    try:
        return fstat_inline(fd)
    finally:
        os.close(fd)


def _open_path_cached(path: Any, dir_fd: int | None, follow_symlinks: bool) -> int | None:
    """``_core.open_path_cached``, with None also for arguments it refuses: the
    engine's own call says what is wrong with them."""
    try:
        return _core.open_path_cached(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
    except (OSError, TypeError, ValueError):
        return None


# Opens that may write (O_TRUNC frees blocks, O_CREAT adds a name, O_TMPFILE an
# inode): always through the engine, as io_uring's own inline attempt refuses them.
_MAY_WRITE = os.O_CREAT | os.O_TRUNC | getattr(os, "O_TMPFILE", 0)


def open_inline(path: Any, flags: int, dir_fd: int | None) -> int | None:
    """``os.open(path, flags | O_CLOEXEC)`` where it cannot wait, else None (errors
    included: the engine's call raises them as ``os.open`` does).

    It cannot wait for a regular file on a local filesystem whose path is all in
    the dentry cache, opened without ``O_CREAT``/``O_TRUNC``: an ``O_PATH`` open
    with ``RESOLVE_CACHED`` finds it, ``fstat`` says it is a regular file (a FIFO's
    or a device's open may wait, and an ``O_PATH`` open runs neither), and the file
    is reopened through ``/proc/self/fd``, which opens that inode, not the path
    again, and given the ``O_PATH`` fd's number (the lowest free one, as ``os.open``
    gives). Seven syscalls (~8 µs); through the aio engine's pool an open took
    109 µs (2026-11-26), and io_uring's OPENAT costs a loop turn."""
    if flags & _MAY_WRITE:
        return None
    opath = _open_path_cached(path, dir_fd, not flags & os.O_NOFOLLOW)
    if opath is None:
        return None
    fd = -1
    try:
        st = fstat_inline(opath)
        if st is None or not stat.S_ISREG(st.st_mode):
            os.close(opath)
            return None
        fd = os.open(f"/proc/self/fd/{opath}", flags | os.O_CLOEXEC)
        # The file takes the O_PATH fd's number (dup3 closes that one first): the
        # lowest free number, the one os.open would have returned.
        os.dup2(fd, opath, inheritable=False)
    except OSError:
        for number in (opath, fd):
            if number >= 0:
                os.close(number)
        return None  # no /proc, O_DIRECT refused, ...: the engine's call says why
    os.close(fd)
    return opath
