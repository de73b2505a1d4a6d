"""Security defaults: no fd ringio creates leaks into a child process (O_CLOEXEC),
and nothing ringio creates is more permissive than the standard library's default.

Two checks of close-on-exec: fcntl(F_GETFD) on each fd ringio made (found as the
fds that appeared while it ran), and a real child (subprocess with close_fds=False,
so only FD_CLOEXEC keeps an fd out) that lists the fds it inherited."""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ringio
import ringio._engines as engines
import ringio.os as ros
from ringio import aio, uring


def fds() -> set[int]:
    """Open fds (the listing's own directory fd shows in it: drop what is closed)."""
    out = set()
    for n in os.listdir("/proc/self/fd"):
        try:
            os.fstat(int(n))
        except OSError:
            continue
        out.add(int(n))
    return out


def describe(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


def inherited_by_child(candidates: set[int]) -> set[int]:
    """The fds among `candidates` that an exec'd child sees open."""
    code = "import os,sys; print(' '.join(os.listdir('/proc/self/fd')))"
    out = subprocess.run(
        [sys.executable, "-c", code], close_fds=False, capture_output=True, text=True, check=True
    ).stdout
    return {int(n) for n in out.split()} & candidates


def assert_cloexec(new: set[int], what: str) -> None:
    assert new, f"{what}: expected ringio to have opened fds"
    missing = {
        fd: describe(fd) for fd in new if not fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    }
    assert not missing, f"{what}: fds without FD_CLOEXEC: {missing}"
    leaked = inherited_by_child(new)
    assert not leaked, f"{what}: a child inherited {[describe(fd) for fd in leaked]}"


def test_ring_and_aio_context_fds_are_cloexec():
    before = fds()
    ring = uring.Ring(8)
    ctx = aio.Context(8)
    try:
        assert_cloexec(fds() - before, "Ring + aio.Context")
    finally:
        ring.close()
        ctx.close()


def test_ring_with_sqpoll_and_single_issuer_are_cloexec():
    before = fds()
    rings = [uring.Ring(8, single_issuer=True)]
    try:
        rings.append(uring.Ring(8, sqpoll_idle=10))
    except OSError:
        pass  # SQPOLL may need privileges on older kernels
    try:
        assert_cloexec(fds() - before, "Ring(single_issuer / sqpoll)")
    finally:
        for r in rings:
            r.close()


def test_openat_op_is_cloexec_even_without_the_flag(tmp_path: Path):
    (tmp_path / "f").write_bytes(b"x")
    with uring.Ring(4) as ring:
        op = uring.openat(str(tmp_path / "f"), os.O_RDONLY)  # no O_CLOEXEC asked
        ring.submit([op])
        [done] = ring.get_events(1, timeout=5)
        fd = done.result()
    try:
        assert_cloexec({fd}, "uring.openat")
    finally:
        os.close(fd)


@pytest.mark.parametrize("engine_name", ["uring", "aio", "thread"])
def test_engine_and_open_fds_are_cloexec(engine_name: str, tmp_path: Path, monkeypatch):
    from tests.engines.conftest import available

    if why := available(engine_name):
        pytest.skip(why)
    monkeypatch.setenv("RINGIO_ENGINE", engine_name)
    engines.reset()
    (tmp_path / "f").write_bytes(b"data")
    (tmp_path / "h").write_bytes(b"")
    before = fds()

    async def main() -> None:
        async with (
            ringio.open(tmp_path / "f", "rb") as f,
            ringio.open(tmp_path / "g", "w") as g,
            ringio.open(tmp_path / "h", "rb", buffering=0) as h,
        ):
            assert await f.read() == b"data"
            await g.write("x")
            await h.read()
            await ros.stat(tmp_path / "f")
            assert_cloexec(fds() - before, f"engine {engine_name} + ringio.open")

    try:
        asyncio.run(main())
    finally:
        engines.reset()


def test_event_loop_fds_are_cloexec():
    before = fds()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _r, w = await asyncio.open_connection("127.0.0.1", port)
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        recv = asyncio.ensure_future(loop.sock_recv(a, 4))  # a ring read in flight
        await asyncio.sleep(0.01)
        assert_cloexec(fds() - before, "ringio.EventLoop")
        b.send(b"ping")
        assert await recv == b"ping"
        w.close()
        server.close()
        a.close()
        b.close()

    ringio.run(main())


def test_watcher_fds_and_accepted_sockets_are_cloexec():
    listener = socket.create_server(("127.0.0.1", 0))
    before = fds() - {listener.fileno()}
    with ringio.Watcher(4096, nbufs=4) as w:
        w.accept("a", listener)
        client = socket.create_connection(listener.getsockname())
        conn = None
        deadline = time.monotonic() + 5
        while conn is None and time.monotonic() < deadline:
            for r in w.wait_io(0.5):
                assert r.error is None, r.error
                conn = r.conn
        assert conn is not None, "no connection accepted"
        new = fds() - before - {client.fileno()}
        assert conn.fileno() in new
        assert_cloexec(new, "Watcher + an accepted socket")
        client.close()
        w.free(conn)
    listener.close()


# ------------------------------------------------------------------ modes


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000])
@pytest.mark.parametrize("engine_name", ["uring", "aio", "thread"])
def test_default_modes_honour_the_umask_like_the_stdlib(
    engine_name: str, umask: int, tmp_path: Path, monkeypatch
):
    """ringio.open (w, a, x, w+), ringio.os.mkdir/makedirs and uring.openat/mkdirat
    with their default modes create exactly what open()/os.mkdir would."""
    from tests.engines.conftest import available

    if why := available(engine_name):
        pytest.skip(why)
    monkeypatch.setenv("RINGIO_ENGINE", engine_name)
    engines.reset()
    old = os.umask(umask)
    try:
        for m in ("w", "a", "x", "wb+"):
            with open(tmp_path / f"std-{m}", m):
                pass

        async def main() -> None:
            for m in ("w", "a", "x", "wb+"):
                async with ringio.open(tmp_path / f"rio-{m}", m):
                    pass
            await ros.mkdir(tmp_path / "rio-dir")
            await ros.makedirs(tmp_path / "rio-deep" / "a")

        asyncio.run(main())
        os.mkdir(tmp_path / "std-dir")
        os.makedirs(tmp_path / "std-deep" / "a")
        with uring.Ring(4) as ring:
            ring.submit(
                [
                    uring.openat(str(tmp_path / "ur-file"), os.O_WRONLY | os.O_CREAT),
                    uring.mkdirat(str(tmp_path / "ur-dir")),
                ]
            )
            for c in ring.get_events(2, timeout=5):
                res = c.result()
                if c.op.command == "openat":
                    os.close(res)
    finally:
        os.umask(old)
        engines.reset()
    file_mode = 0o666 & ~umask
    dir_mode = 0o777 & ~umask
    for m in ("w", "a", "x", "wb+"):
        assert _mode(tmp_path / f"rio-{m}") == _mode(tmp_path / f"std-{m}") == file_mode
    assert _mode(tmp_path / "ur-file") == file_mode
    for d in ("rio-dir", "rio-deep", "rio-deep/a", "ur-dir"):
        assert _mode(tmp_path / d) == dir_mode, d
    assert _mode(tmp_path / "std-dir") == dir_mode


def test_unix_sockets_and_fds_created_are_not_world_accessible():
    """The sockets/eventfds/rings ringio creates are anonymous inodes or socketpairs:
    no filesystem name anyone else could open. Check their /proc link targets."""
    before = fds()
    ring = uring.Ring(4)
    ctx = aio.Context(4)
    w = ringio.Watcher(4096, nbufs=1)
    try:
        for fd in fds() - before:
            target = describe(fd)
            assert target.startswith(("anon_inode:", "socket:", "pipe:")), (fd, target)
    finally:
        ring.close()
        ctx.close()
        w.close()
