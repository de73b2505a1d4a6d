"""The ``rand_read`` family of the ``files`` workload: random reads of one file at
several queue depths, each contender as its users write the loop, timed for ops/s and
CPU µs per read."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..worker import WorkerSkipped
from ._files_contenders import (
    AiofilesFiles,
    AsyncFiles,
    RingioFiles,
    RingioOpenFiles,
    cpu_seconds,
    make_contender,
)


def _offsets(file_size: int, ops: int, block: int, seed: int = 42) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(file_size // block) * block for _ in range(ops)]


def rand_read(spec: dict[str, Any]) -> dict[str, Any]:
    """4 KiB random reads at several queue depths; ops/s and CPU µs per read, per depth.

    Each depth reads the `ops` offsets, again and again until `min_seconds` have
    passed (0: once): a fixed count that a slow peer needs seconds for lasts a few
    milliseconds for the fast ones, too short to measure on a shared machine. One
    untimed pass over the offsets comes first (warm-up: code paths, allocator)."""
    path, block, ops = spec["path"], spec["block"], spec["ops"]
    direct = spec.get("direct", False)
    min_seconds = spec.get("min_seconds", 0.0)
    size = os.path.getsize(path)
    rates: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for depth in spec["depths"]:
        offsets = _offsets(size, ops, block)
        c = make_contender(spec["contender"], depth)
        if isinstance(c, AsyncFiles):
            rate, cpu_us = c.run(
                _rand_read_async(c, path, block, offsets, depth, direct, min_seconds)
            )
        else:
            if direct:
                raise WorkerSkipped("O_DIRECT variant only for ringio")
            c.open([path])
            rate, cpu_us = _rate_sync(
                lambda c=c, offsets=offsets, depth=depth: c.read_stream(0, block, offsets, depth),
                ops, min_seconds, warm_up=not direct,
            )  # fmt: skip
            c.close()
            c.stop()
        rates[str(depth)], cpu[str(depth)] = rate, cpu_us
    return {"ops_per_s": rates, "cpu_us": cpu}


async def _rand_read_async(
    c: AsyncFiles, path: str, block: int, offsets: list[int], depth: int, direct: bool,
    min_seconds: float,
) -> tuple[float, float]:  # fmt: skip
    if direct and not isinstance(c, (RingioFiles, RingioOpenFiles)):
        raise WorkerSkipped("O_DIRECT variant only for ringio")
    await c.open([path], direct=direct)
    if isinstance(c, RingioOpenFiles) and c.many.endswith("_many"):
        return await _rand_read_many(c, block, offsets, depth, min_seconds)
    workers: list[Callable[[list[int]], Awaitable[Any]]] = []
    for _ in range(depth):
        if isinstance(c, AiofilesFiles):
            f = await c.worker_handle_async(0)

            async def seek_read(offs: list[int], f: Any = f) -> None:
                for off in offs:
                    await c.read(0, block, off, f)

            workers.append(seek_read)
        elif isinstance(c, RingioOpenFiles) and c.many == "preadinto":
            f, into = c.files[0], c.ringio.aligned(block)

            async def file_read_into(offs: list[int], f: Any = f, buf: Any = into) -> None:
                preadinto = f.preadinto
                for off in offs:
                    await preadinto(buf, off)

            workers.append(file_read_into)
        elif direct and isinstance(c, RingioFiles):
            import ringio

            buf = ringio.aligned(block)

            async def read_into(offs: list[int], buf: Any = buf) -> None:
                for off in offs:
                    await c.readinto(0, buf, off)

            workers.append(read_into)
        else:
            workers.append(lambda offs: c.read_offsets(0, block, offs))
    shares = [offsets[w::depth] for w in range(depth)]
    result = await _rate(
        lambda: asyncio.gather(*(workers[w](shares[w]) for w in range(depth))),
        len(offsets), min_seconds, warm_up=not direct,
    )  # fmt: skip
    await c.close()
    await c.stop()
    return result


async def _rand_read_many(
    c: RingioOpenFiles, block: int, offsets: list[int], depth: int, min_seconds: float
) -> tuple[float, float]:
    """One pread_many (or preadinto_many, into one aligned buffer reused per call)
    per chunk of offsets, `depth` reads in flight."""
    f, chunk = c.files[0], c.MANY_CHUNK
    out = memoryview(c.ringio.aligned(block * chunk))

    async def all_offsets() -> None:
        for k in range(0, len(offsets), chunk):
            part = offsets[k : k + chunk]
            if c.many == "preadinto_many":
                await f.preadinto_many(out[: block * len(part)], part, depth=depth)
            else:
                await f.pread_many(block, part, depth=depth)

    result = await _rate(all_offsets, len(offsets), min_seconds)
    await c.close()
    await c.stop()
    return result


class _Meter:
    """Counts ops from its creation: ops/s and the process's CPU µs per op."""

    def __init__(self) -> None:
        self.ops, self.t0, self.c0 = 0, time.perf_counter(), cpu_seconds()

    def add(self, ops: int, min_seconds: float) -> tuple[float, float] | None:
        """Counts `ops` more; the figures once `min_seconds` have passed, else None."""
        self.ops += ops
        elapsed = time.perf_counter() - self.t0
        if elapsed < min_seconds:
            return None
        return self.ops / elapsed, (cpu_seconds() - self.c0) * 1e6 / self.ops


async def _rate(
    run_once: Callable[[], Awaitable[Any]], ops: int, min_seconds: float, warm_up: bool = False
) -> tuple[float, float]:
    """(ops/s, CPU µs per op) of `run_once` (`ops` reads a run), run again until
    `min_seconds` have passed (at least once), after one untimed run if `warm_up`."""
    if warm_up:
        await run_once()
    meter = _Meter()
    while True:
        await run_once()
        if (figures := meter.add(ops, min_seconds)) is not None:
            return figures


def _rate_sync(
    run_once: Callable[[], Any], ops: int, min_seconds: float, warm_up: bool = False
) -> tuple[float, float]:
    """`_rate` for a blocking contender, timed the same way."""
    if warm_up:
        run_once()
    meter = _Meter()
    while True:
        run_once()
        if (figures := meter.add(ops, min_seconds)) is not None:
            return figures
