"""Child process of the ``vectored`` workload: COUNT separate calls vs one vectored call.

Run as ``python -m ringio.bench.workloads._vectored_worker SPEC_JSON``. The "set-up" is
building the list of buffers a vectored call takes (memoryview slices of the payload
for writes, fresh bytearrays for reads); with ``setup=inside`` it is timed, with
``outside`` it is built beforehand. Separate calls slice or allocate as they go, as
code without vectored I/O does, so their figure does not depend on ``setup``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from ..worker import WorkerSkipped, import_peer, worker_main


def _bufs_for(op: str, payload: memoryview, size: int, count: int) -> list[Any]:
    if op == "write":
        return [payload[k * size : (k + 1) * size] for k in range(count)]
    return [bytearray(size) for _ in range(count)]


# Each contender: separate(op, fd, payload, size, count) and vectored(op, fd, bufs);
# both include the fsync for writes. Sync ones return nothing; async ones are coroutines.


class OsContender:
    """os.pwrite/os.pread loops vs os.writev/os.readv (after a seek to 0)."""

    def separate(self, op: str, fd: int, payload: memoryview, size: int, count: int) -> None:
        if op == "write":
            for k in range(count):
                os.pwrite(fd, payload[k * size : (k + 1) * size], k * size)
            os.fsync(fd)
        else:
            for k in range(count):
                os.pread(fd, size, k * size)

    def vectored(self, op: str, fd: int, bufs: list[Any]) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        if op == "write":
            os.writev(fd, bufs)
            os.fsync(fd)
        else:
            os.readv(fd, bufs)


class RingioSyncContender:
    """ringio's synchronous API: COUNT pwrite/pread ops in one submit vs one pwritev/preadv."""

    def __init__(self, engine: str, count: int) -> None:
        from ..engines import sync_context

        try:
            self.ctx = sync_context(engine, max(count, 64))
        except NotImplementedError as exc:
            raise WorkerSkipped(str(exc)) from exc
        self.aio = import_peer(f"ringio.{engine}")

    def _wait(self, n: int) -> None:
        done = 0
        while done < n:
            for c in self.ctx.get_events(n - done, n):
                c.result()  # raises OSError if the op failed
                done += 1

    def separate(self, op: str, fd: int, payload: memoryview, size: int, count: int) -> None:
        if op == "write":
            ops = [self.aio.pwrite(fd, payload[k * size : (k + 1) * size], k * size)
                   for k in range(count)]  # fmt: skip
        else:
            ops = [self.aio.pread(fd, bytearray(size), k * size) for k in range(count)]
        self.ctx.submit(ops)
        self._wait(count)
        if op == "write":
            os.fsync(fd)

    def vectored(self, op: str, fd: int, bufs: list[Any]) -> None:
        make = self.aio.pwritev if op == "write" else self.aio.preadv
        self.ctx.submit([make(fd, bufs, 0)])
        self._wait(1)
        if op == "write":
            os.fsync(fd)


class RingioAsyncContender:
    """AsyncContext: a per-buffer `await write/read` loop vs one `writev/readv`."""

    def __init__(self, engine: str, count: int) -> None:
        self.engine, self.count = engine, count
        self.actx: Any = None

    async def start(self) -> None:
        from ..engines import async_context

        self.actx = async_context(self.engine, max(self.count, 64))

    async def separate(self, op: str, fd: int, payload: memoryview, size: int, count: int):
        a = self.actx
        if op == "write":
            for k in range(count):
                await a.write(fd, payload[k * size : (k + 1) * size], k * size)
            await a.fsync(fd)
        else:
            for k in range(count):
                await a.read(fd, size, k * size)

    async def vectored(self, op: str, fd: int, bufs: list[Any]) -> None:
        if op == "write":
            await self.actx.writev(fd, bufs, 0)
            await self.actx.fsync(fd)
        else:
            await self.actx.readv(fd, bufs, 0)

    async def stop(self) -> None:
        self.actx.close()


class AiofilesContender:
    """aiofiles has no vectored call: its users loop per buffer, or join and write once."""

    def __init__(self, path: str) -> None:
        self.aiofiles = import_peer("aiofiles")
        import_peer("aiofiles.os")
        self.path = path
        self.f: Any = None

    async def start(self) -> None:
        self.f = await self.aiofiles.open(self.path, "r+b")
        self.fsync = self.aiofiles.os.wrap(os.fsync)

    async def separate(self, op: str, fd: int, payload: memoryview, size: int, count: int):
        f = self.f
        await f.seek(0)
        if op == "write":
            for k in range(count):
                await f.write(payload[k * size : (k + 1) * size])
            await f.flush()
            await self.fsync(f.fileno())
        else:
            for _ in range(count):
                await f.read(size)

    async def vectored(self, op: str, fd: int, bufs: list[Any]) -> None:
        f = self.f
        await f.seek(0)
        if op == "write":
            await f.write(b"".join(bufs))
            await f.flush()
            await self.fsync(f.fileno())
        else:
            data = await f.read(sum(len(b) for b in bufs))
            # Scatter into the buffers, as a readv would have.
            pos = 0
            for b in bufs:
                b[:] = data[pos : pos + len(b)]
                pos += len(b)

    async def stop(self) -> None:
        await self.f.close()


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Every (size x count, op, setup) point: median MB/s of separate and vectored."""
    path, contender, repeats = spec["path"], spec["contender"], spec["repeats"]
    shapes = [tuple(s) for s in spec["shapes"]]
    max_count = max(c for _, c in shapes)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    total = max(s * c for s, c in shapes)
    os.pwrite(fd, os.urandom(total), 0)  # the read half reads what is there
    os.fsync(fd)

    if contender == "os":
        c: Any = OsContender()
    elif contender.endswith(".Context"):
        c = RingioSyncContender(contender[len("ringio[") : -len("].Context")], max_count)
    elif contender.startswith("ringio["):
        c = RingioAsyncContender(contender[len("ringio[") : -1], max_count)
    elif contender == "aiofiles":
        c = AiofilesContender(path)
    else:
        raise WorkerSkipped(f"unknown contender {contender}")
    is_async = hasattr(c, "start")

    points: list[dict[str, Any]] = []

    async def run_all() -> None:
        if is_async:
            await c.start()
        for size, count in shapes:
            payload = memoryview(os.urandom(size * count))
            for op in ("write", "read"):
                for setup in ("inside", "outside"):
                    sep: list[float] = []
                    vec: list[float] = []
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        r = c.separate(op, fd, payload, size, count)
                        if is_async:
                            await r
                        sep.append(time.perf_counter() - t0)

                        if setup == "outside":
                            bufs = _bufs_for(op, payload, size, count)
                        t0 = time.perf_counter()
                        if setup == "inside":
                            bufs = _bufs_for(op, payload, size, count)
                        r = c.vectored(op, fd, bufs)
                        if is_async:
                            await r
                        vec.append(time.perf_counter() - t0)
                    mb = size * count / 1e6
                    s_mb, v_mb = mb / statistics.median(sep), mb / statistics.median(vec)
                    points.append({
                        "size": size, "count": count, "op": op, "setup": setup,
                        "separate_mb_s": s_mb, "vectored_mb_s": v_mb,
                        "vectored_over_separate": v_mb / s_mb,
                    })  # fmt: skip
        if is_async:
            await c.stop()

    asyncio.run(run_all())
    os.close(fd)
    return {"points": points}


HANDLERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"measure": measure}

if __name__ == "__main__":
    worker_main(HANDLERS)
