"""Process-level faults: fork, interpreter exit, threads, fd inheritance, disk full."""

from __future__ import annotations

import errno
import fcntl
import os
import select
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from ringio import aio, uring


def run_child(fn) -> int:
    """Runs `fn` in a forked child; returns its exit status (0 = fn returned True)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            code = 0 if fn() else 3
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


KINDS = {"aio": lambda n: aio.Context(n), "uring": lambda n: uring.Ring(n)}


@pytest.mark.parametrize("kind", KINDS)
def test_a_forked_child_cannot_use_its_parents_context_but_can_make_its_own(kind, data_file):
    fd, payload = data_file

    def make():
        return KINDS[kind](8)

    parent_ctx = make()
    buf = bytearray(4)
    parent_ctx.submit([aio.pread(fd, buf, 0)])

    def child():
        try:
            parent_ctx.submit([aio.pread(fd, bytearray(4), 0)])
            return False
        except RuntimeError as e:
            assert "fork" in str(e)
        own = make()
        b = bytearray(4)
        own.submit([aio.pread(fd, b, 4)])
        own.get_events(1, timeout=5)
        own.close()
        return bytes(b) == payload[4:8]

    assert run_child(child) == 0
    # The parent's context is untouched by the child.
    assert parent_ctx.get_events(1, timeout=5)[0].res == 4 and buf == payload[:4]
    parent_ctx.close()


def test_a_forked_child_dropping_its_parents_ring_keeps_its_own_registered_ring(data_file):
    # The parent's ring is registered with the parent's thread; the child's first
    # ring takes an index in the child's own (new) table, maybe the same number.
    # Dropping the inherited ring in the child must not give that index back.
    fd, payload = data_file
    parent_ring = uring.Ring(8, single_issuer=True, eventfd=False)
    if not parent_ring.setup["registered_fd"]:
        pytest.skip("no registered ring fd here")
    holder = [parent_ring]
    del parent_ring

    def child():
        # Rings until the child's table is full: one of them has the parent's
        # ring's index, whatever it is.
        own = [uring.Ring(8, single_issuer=True, eventfd=False) for _ in range(17)]
        assert own[0].setup["registered_fd"] and not own[-1].setup["registered_fd"]
        holder.clear()  # the inherited ring's last reference
        for k, r in enumerate(own):
            b = bytearray(4)
            r.submit([uring.pread(fd, b, 4 * k)])
            [c] = r.get_events(1, timeout=5)
            if (c.res, bytes(b)) != (4, payload[4 * k : 4 * k + 4]):
                return False
            r.close()
        return True

    assert run_child(child) == 0
    # The parent's ring still works, by its registered index.
    b = bytearray(4)
    holder[0].submit([uring.pread(fd, b, 8)])
    assert holder[0].get_events(1, timeout=5)[0].res == 4 and b == payload[8:12]
    holder[0].close()


def test_a_child_that_exits_with_the_parents_ops_in_flight_does_not_disturb_them():
    a, b = socket.socketpair()
    with a, b:
        ring = uring.Ring(8)
        buf = bytearray(5)
        ring.submit([uring.read(a, buf)])
        assert run_child(lambda: True) == 0  # the child drops its copy of the ring
        b.send(b"hello")
        [c] = ring.get_events(1, timeout=5)
        assert c.res == 5 and buf == b"hello"
        ring.close()


def test_interpreter_exit_with_ops_in_flight_is_clean(tmp_path: Path):
    script = textwrap.dedent(
        """
        import os, select, socket
        from ringio import aio, uring
        a, b = socket.socketpair()
        ring = uring.Ring(8)
        ring.submit([uring.read(a, bytearray(100)), uring.poll(a, select.POLLIN)])
        ctx = aio.Context(8)
        ctx.submit([aio.poll(a, select.POLLIN)])
        keep = (a, b, ring, ctx)
        print("exiting with", ring.in_flight + ctx.in_flight, "ops in flight", flush=True)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "exiting with 3 ops in flight" in out.stdout
    assert "Traceback" not in out.stderr and "panicked" not in out.stderr


def test_many_threads_submitting_to_one_context(data_file):
    fd, payload = data_file
    ctx = aio.Context(512)
    errors: list[BaseException] = []
    results: list[tuple[int, bytearray]] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        try:
            for i in range(50):
                off = ((k * 50 + i) * 64) % (len(payload) - 64)
                buf = bytearray(64)
                ctx.submit([aio.pread(fd, buf, off)])
                with lock:
                    results.append((off, buf))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = 0
    while got < 400:
        got += len(ctx.get_events(1, timeout=5))
    ctx.close()
    assert not errors and len(results) == 400
    assert all(buf == payload[off : off + 64] for off, buf in results)


def test_kernel_fds_are_close_on_exec():
    ring, ctx = uring.Ring(4), aio.Context(4)
    try:
        for fd in (ring.fileno(), ctx.fileno()):
            assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        ring_fds = [int(n) for n in os.listdir("/proc/self/fd") if _is_ring(n)]
        assert ring_fds and all(fcntl.fcntl(f, fcntl.F_GETFD) & fcntl.FD_CLOEXEC for f in ring_fds)
    finally:
        ring.close()
        ctx.close()


def _is_ring(fd_name: str) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd_name}") == "anon_inode:[io_uring]"
    except FileNotFoundError:  # listdir's own directory fd, already closed
        return False


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("kind", KINDS)
def test_disk_full_surfaces_on_the_right_op_and_earlier_data_reads_back(kind, small_tmpfs):
    fd = os.open(small_tmpfs / "fill", os.O_RDWR | os.O_CREAT, 0o600)
    chunk = bytes(range(256)) * 256  # 64 KiB
    acknowledged = 0
    try:
        with KINDS[kind](64) as ctx:
            for i in range(64):  # 4 MiB > 1 MiB
                ctx.submit([aio.pwrite(fd, chunk, i * len(chunk))])
                [c] = ctx.get_events(1, timeout=5)
                if c.res < 0:
                    assert c.error.errno == errno.ENOSPC and c.error.fd == fd
                    break
                acknowledged += c.res
                if c.res < len(chunk):
                    continue  # a short write at the edge; the next one fails
            else:
                pytest.fail("1 MiB tmpfs never reported ENOSPC")
        data = os.pread(fd, acknowledged, 0)
        assert len(data) == acknowledged and acknowledged > 0
        assert data == (chunk * 64)[:acknowledged]
    finally:
        os.close(fd)


def test_poll_on_a_closed_fd_completes_with_an_error():
    with uring.Ring(4) as ring:  # made first, so that it cannot reuse the closed number
        a, b = socket.socketpair()
        fd = a.detach()
        os.close(fd)
        b.close()
        ring.submit([uring.poll(fd, select.POLLIN)])
        [c] = ring.get_events(1, timeout=5)
        assert c.res < 0 or c.res & select.POLLNVAL
