"""After each bad-input case, the same API must still work in the same process:
one quick good call per group. Each returns None, or what went wrong."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import ringio
from ringio import aio, uring
from ringio.compat import caio, linux_aio

from .env import PAYLOAD, Env


def _expect(got: Any, want: Any) -> str | None:
    return None if got == want else f"got {got!r:.100}, want {want!r:.100}"


def h_aio(env: Env) -> str | None:
    with aio.Context(4) as ctx:
        buf = bytearray(100)
        ctx.submit([aio.pread(env["fd"], buf, 10)])
        [done] = ctx.get_events(1, timeout=5)
        return _expect((done.result(), bytes(buf)), (100, PAYLOAD[10:110]))


def h_uring(env: Env) -> str | None:
    with uring.Ring(4) as ring:
        buf = bytearray(100)
        ring.submit([uring.pread(env["fd"], buf, 10), uring.statx(env["path"])])
        got = ring.get_events(2, timeout=5)
        return _expect(sorted(c.result() for c in got), [0, 100]) or _expect(
            bytes(buf), PAYLOAD[10:110]
        )


def h_aligned(env: Env) -> str | None:
    b = ringio.aligned(4096)
    return _expect(
        (len(b), b.address % 4096, ringio.dio_alignment(env["fd"]) is not None), (4096, 0, True)
    )


async def _files(env: Env) -> str | None:
    path = env["newpath"]
    async with ringio.open(path, "wb") as f:
        await f.write(b"hello")
    async with ringio.open(path, "rb") as f:
        got = await f.read()
    async with ringio.open(path, encoding="utf-8") as f:
        text = await f.read()
    st = await ringio.os.stat(path)
    await ringio.os.remove(path)
    return _expect(
        (got, text, st.st_size, await ringio.os.path.exists(path)), (b"hello", "hello", 5, False)
    )


def h_files(env: Env) -> str | None:
    return asyncio.run(asyncio.wait_for(_files(env), 10))


async def _actx(env: Env) -> str | None:
    async with aio.AsyncContext(4) as actx:
        return _expect(await actx.read(env["fd"], 10, 5), PAYLOAD[5:15])


def h_aioasync(env: Env) -> str | None:
    return asyncio.run(asyncio.wait_for(_actx(env), 10))


def h_linux_aio(env: Env) -> str | None:
    with linux_aio.AIOContext(4) as ctx:
        buf = bytearray(10)
        ctx.submit(linux_aio.ReadBlock(env["fd"], buf, offset=5))
        [ev] = ctx.get_events(1, 1, 5_000_000_000)
        return _expect((ev.response, bytes(buf)), (10, PAYLOAD[5:15]))


async def _caio(env: Env) -> str | None:
    async with caio.AsyncioContext(4) as ctx:
        return _expect(await ctx.read(10, env["fd"], 5), PAYLOAD[5:15])


def h_caio(env: Env) -> str | None:
    return asyncio.run(asyncio.wait_for(_caio(env), 10))


def h_watcher(env: Env) -> str | None:
    a, b = env["s1"], env["s2"]
    with ringio.Watcher(4096, nbufs=4) as w:
        w.write("w", a, b"ping")
        w.read_full("r", b, bytearray(4))
        got: dict[str, Any] = {}
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            for r in w.wait_io(1):
                got[r.context] = (r.error, bytes(r.buffer) if r.context == "r" else r.size)
        return _expect(got, {"w": (None, 4), "r": (None, b"ping")})


async def _loop(env: Env) -> str | None:
    loop = asyncio.get_running_loop()
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    try:
        await loop.sock_sendall(a, b"ping")
        got = await asyncio.wait_for(loop.sock_recv(b, 4), 5)
        recv = asyncio.ensure_future(loop.sock_recv(b, 4))  # not ready: a ring read
        await asyncio.sleep(0.01)
        await loop.sock_sendall(a, b"pong")
        got += await asyncio.wait_for(recv, 5)
    finally:
        a.close()
        b.close()
    return _expect(got, b"pingpong")


def h_loop(env: Env) -> str | None:
    return ringio.run(_loop(env))


async def _aiofiles(env: Env) -> str | None:
    import ringio.compat.aiofiles as aiofiles

    path = env["newpath"]
    async with aiofiles.open(path, "w") as f:
        await f.write("hello")
    async with aiofiles.open(path) as f:
        text = await f.read()
    st = await aiofiles.os.stat(path)
    async with aiofiles.tempfile.TemporaryFile() as t:
        await t.write(b"abc")
        await t.seek(0)
        tdata = await t.read()
    return _expect((text, st.st_size, tdata), ("hello", 5, b"abc"))


def h_aiofiles(env: Env) -> str | None:
    return asyncio.run(asyncio.wait_for(_aiofiles(env), 10))


async def _tempfile(env: Env) -> str | None:
    import ringio.tempfile as rt

    tmp = env["tmp"]
    async with rt.TemporaryFile(dir=tmp) as f:
        await f.write(b"abc")
        await f.seek(0)
        a = await f.read()
    async with rt.NamedTemporaryFile(dir=tmp) as f:
        name = f.name
        await f.write(b"abc")
        named_exists = os.path.exists(name)
    async with rt.SpooledTemporaryFile(2, dir=tmp) as f:
        await f.write(b"abc")
        await f.seek(0)
        b = await f.read()
    async with rt.TemporaryDirectory(dir=tmp) as d:
        open(os.path.join(d, "x"), "w").close()
    left = sorted(n for n in os.listdir(tmp) if n != "data.bin")
    return _expect(
        (a, named_exists, os.path.exists(name), b, left), (b"abc", True, False, b"abc", [])
    )


def h_tempfile(env: Env) -> str | None:
    return asyncio.run(asyncio.wait_for(_tempfile(env), 10))


def h_selector(env: Env) -> str | None:
    from ringio.loop import RingSelector

    a, b = env["s1"], env["s2"]
    sel = RingSelector(8)
    try:
        sel.register(b, 1, "data")
        a.sendall(b"x")
        ready = sel.select(5)
        return _expect([(k.data, ev) for k, ev in ready], [("data", 1)])
    finally:
        sel.close()


HEALTH: dict[str, Callable[[Env], str | None]] = {
    "aio": h_aio,
    "aioasync": h_aioasync,
    "uring": h_uring,
    "aligned": h_aligned,
    "open": h_files,
    "filebin": h_files,
    "fileraw": h_files,
    "filetext": h_files,
    "filedirect": h_files,
    "os": h_files,
    "caio": h_caio,
    "linux_aio": h_linux_aio,
    "watcher": h_watcher,
    "loop": h_loop,
    "runner": h_loop,
    "selector": h_selector,
    "aiofiles": h_aiofiles,
    "tempfile": h_tempfile,
}

_ = os  # os is used by the expressions' namespace only
