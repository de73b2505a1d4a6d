"""Fixtures shared by every area's tests."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

# A shell without job control starts its background commands with SIGINT ignored, and
# an ignored disposition survives exec: every child a test starts would then be deaf to
# Ctrl-C, and the Ctrl-C tests would fail for how the suite was launched. A Python
# handler does not survive exec, so with one installed here the children start with
# SIGINT at its default and Python gives them KeyboardInterrupt, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def io_uring_fd_count() -> int:
    """The io_uring instances this process has open."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:[io_uring]":
                count += 1
        except OSError:  # an fd of the listing itself, closed meanwhile
            pass
    return count


@pytest.fixture
def data_file(tmp_path: Path) -> Iterator[tuple[int, bytes]]:
    """An fd open read-write on a 64 KiB file of known, non-repeating content."""
    payload = bytes((i * 7 + i // 256) % 251 for i in range(65536))
    path = tmp_path / "data.bin"
    path.write_bytes(payload)
    fd = os.open(path, os.O_RDWR)
    yield fd, payload
    os.close(fd)


@pytest.fixture
def empty_file(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path / "empty.bin", os.O_RDWR | os.O_CREAT, 0o600)
    yield fd
    os.close(fd)


def user_thread_count() -> int:
    """Threads of this process, not counting io_uring's kernel workers (iou-*),
    which the kernel starts for operations that would block."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().startswith("iou-"):
                    continue
        except FileNotFoundError:
            continue
        count += 1
    return count
