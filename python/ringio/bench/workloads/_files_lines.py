"""The ``lines`` family of the ``files`` workload: iterating a text file line by line,
with the built-in open(), aiofiles, aiofile's LineReader and ringio.open."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from ..worker import WorkerSkipped, import_peer
from ._files_contenders import RingioOpenFiles


def lines(spec: dict[str, Any]) -> dict[str, Any]:
    """Iterating a text file line by line, as text or (mode 'rb') bytes; lines/s and MB/s.

    Timed from the open to the close (an asyncio contender's loop is made and torn
    down outside: on a small file that cost more than the lines; so is ringio's
    engine, which each loop makes at its first file op: 0.4 ms with the ring).
    open() and ringio.open make whole passes (open, every line, close) until
    `min_seconds` have passed, the first pass included: one pass over the quick
    mode's 20 MB took 15-30 ms, short enough that one busy moment of this shared
    machine moved a round by a third. aiofiles and aiofile read ~1 MB/s: they stop
    after `peer_seconds`, and their rates are over what they read by then."""
    path, contender = spec["path"], spec["contender"]
    mode = spec.get("mode", "r")
    peer_seconds = spec.get("peer_seconds", 1e9)
    min_seconds = spec.get("min_seconds", 0.0)
    if contender.startswith("aiofile[") and mode != "r":
        raise WorkerSkipped("aiofile's LineReader reads text")

    def timed(count: int, nbytes: int, t0: float) -> tuple[int, int, float]:
        return count, nbytes, time.perf_counter() - t0

    if contender == "open()":
        t0 = time.perf_counter()
        count, passes = 0, 0
        while not passes or time.perf_counter() - t0 < min_seconds:
            with open(path, mode) as f:
                for _line in f:
                    count += 1
            passes += 1
        count, nbytes, wall = timed(count, os.path.getsize(path) * passes, t0)
    elif contender == "aiofiles":
        aiofiles = import_peer("aiofiles")

        async def main() -> tuple[int, int, float]:
            n, t0 = 0, time.perf_counter()
            deadline = t0 + peer_seconds
            async with aiofiles.open(path, mode) as f:
                async for _line in f:
                    n += 1
                    if not n & 255 and time.perf_counter() > deadline:
                        return timed(n, -1, t0)  # a prefix: its size is counted below
            return timed(n, os.path.getsize(path), t0)

        count, nbytes, wall = asyncio.run(main())
    elif contender.startswith("ringio.open["):
        c = RingioOpenFiles(contender[12:-1])

        async def main() -> tuple[int, int, float]:
            c.ringio._engines.get()  # the loop's engine, made with it
            n, passes, t0 = 0, 0, time.perf_counter()
            while not passes or time.perf_counter() - t0 < min_seconds:
                async with c.ringio.open(path, mode) as f:
                    async for _line in f:
                        n += 1
                passes += 1
            return timed(n, os.path.getsize(path) * passes, t0)

        count, nbytes, wall = asyncio.run(main())
    elif contender.startswith("aiofile["):
        aiofile = import_peer("aiofile")
        caio_mod = import_peer(f"caio.{contender[8:-1]}_asyncio")

        async def main() -> tuple[int, int, float]:
            n, t0 = 0, time.perf_counter()
            deadline = t0 + peer_seconds
            ctx = caio_mod.AsyncioContext(64)
            nbytes = os.path.getsize(path)
            async with aiofile.AIOFile(path, "r", context=ctx) as afp:
                async for _line in aiofile.LineReader(afp):
                    n += 1
                    if not n & 255 and time.perf_counter() > deadline:
                        nbytes = -1  # a prefix: its size is counted below
                        break
            ctx.close()
            return timed(n, nbytes, t0)

        count, nbytes, wall = asyncio.run(main())
    else:
        raise WorkerSkipped(f"no line iteration for {contender}")
    if nbytes < 0:  # the lines read, as the file's bytes (the lines are alike)
        nbytes = int(os.path.getsize(path) * count / _count_lines(path))
    return {"lines_per_s": count / wall, "mb_s": nbytes / 1e6 / wall, "lines": count}


def _count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
