"""Cached 4 KiB reads through ``ringio.open`` against the plain synchronous loops, in
one process: prints reads/s (the best of three 0.3 s runs, after one untimed pass)
as JSON.

    python tools/cached_reads.py FILE ENGINE      # ENGINE: uring, aio or thread

``os.pread`` at random offsets is the yardstick of ``pread`` (one task, and 64
tasks: ``pread.qd64``). The floors below ``pread``, at the same offsets: ``nowait``,
the read a non-blocking one must be, ``preadv2(RWF_NOWAIT)`` into a new bytes
object, in a plain loop (``ringio._core.pread_nowait``: one native call, no await);
``os.preadv.nowait``, the same syscall from ``os.preadv`` into one bytearray; and
``await.ready``, ``await ringio._core.pread_ready(...)`` in a coroutine (the read and
a complete awaitable, no file object); ``open(FILE, "rb")``'s ``read(4096)``/``readinto(buf)`` loop
from start to end that of ``read``/``readinto`` (buffered, and ``raw.read``:
``buffering=0``). Read FILE once before (``cat FILE > /dev/null``) so that it is
cached. To compare two builds, run it with ``PYTHONPATH=TREE/python`` for each in
interleaved rounds, as docs/files.md did.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable

BLOCK = 4096


def best_rate(run: Callable[[], None], ops: int) -> float:
    run()
    best = 0.0
    for _ in range(3):
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.3:
            run()
            n += ops
        best = max(best, n / (time.perf_counter() - t0))
    return best


async def best_rate_async(run: Callable[[], Awaitable[None]], ops: int) -> float:
    await run()
    best = 0.0
    for _ in range(3):
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.3:
            await run()
            n += ops
        best = max(best, n / (time.perf_counter() - t0))
    return best


def main(path: str, engine: str) -> dict[str, float]:
    os.environ["RINGIO_ENGINE"] = engine
    import ringio

    size = os.path.getsize(path)
    rng = random.Random(42)
    offsets = [rng.randrange(size // BLOCK) * BLOCK for _ in range(3000)]
    passes = size // BLOCK + 1  # reads per pass: the last one returns nothing
    out: dict[str, float] = {}

    fd = os.open(path, os.O_RDONLY)
    try:

        def plain_pread() -> None:
            for off in offsets:
                os.pread(fd, BLOCK, off)

        out["os.pread"] = best_rate(plain_pread, len(offsets))
        from ringio._core import pread_nowait, pread_ready

        def nowait() -> None:
            for off in offsets:
                pread_nowait(fd, BLOCK, off)

        into = [bytearray(BLOCK)]

        def os_preadv_nowait() -> None:
            for off in offsets:
                try:
                    os.preadv(fd, into, off, os.RWF_NOWAIT)
                except BlockingIOError:  # a page evicted meanwhile (as pread_nowait's None)
                    pass

        async def await_ready() -> None:
            for off in offsets:
                ready = pread_ready(fd, BLOCK, off)
                if ready is not None:  # None: evicted meanwhile (the file is read first)
                    await ready

        out["nowait"] = best_rate(nowait, len(offsets))
        out["os.preadv.nowait"] = best_rate(os_preadv_nowait, len(offsets))
        out["await.ready"] = asyncio.run(best_rate_async(await_ready, len(offsets)))
    finally:
        os.close(fd)
    with open(path, "rb") as f:
        buf = bytearray(BLOCK)

        def plain_read() -> None:
            f.seek(0)
            while f.read(BLOCK):
                pass

        def plain_readinto() -> None:
            f.seek(0)
            while f.readinto(buf):
                pass

        out["open.read"] = best_rate(plain_read, passes)
        out["open.readinto"] = best_rate(plain_readinto, passes)

    async def ringio_reads() -> None:
        async with ringio.open(path, "rb") as f:

            async def one_task() -> None:
                pread = f.pread
                for off in offsets:
                    await pread(BLOCK, off)

            async def tasks_64() -> None:
                async def share(offs: list[int]) -> None:
                    pread = f.pread
                    for off in offs:
                        await pread(BLOCK, off)

                await asyncio.gather(*(share(offsets[i::64]) for i in range(64)))

            async def read_pass() -> None:
                await f.seek(0)
                read = f.read
                while await read(BLOCK):
                    pass

            async def readinto_pass() -> None:
                await f.seek(0)
                readinto = f.readinto
                while await readinto(buf):
                    pass

            out["pread"] = await best_rate_async(one_task, len(offsets))
            out["pread.qd64"] = await best_rate_async(tasks_64, len(offsets))
            out["read"] = await best_rate_async(read_pass, passes)
            out["readinto"] = await best_rate_async(readinto_pass, passes)
        async with ringio.open(path, "rb", buffering=0) as raw:

            async def raw_pass() -> None:
                await raw.seek(0)
                read = raw.read
                while await read(BLOCK):
                    pass

            out["raw.read"] = await best_rate_async(raw_pass, passes)

    asyncio.run(ringio_reads())
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
