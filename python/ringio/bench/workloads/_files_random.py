"""The ``rand_read`` family of the ``files`` workload: random reads of one file at
several queue depths, each contender as its users write the loop, timed for ops/s and
CPU µs per read."""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..worker import WorkerSkipped
from ._files_contenders import (
    AiofilesFiles,
    AsyncFiles,
    PreadFiles,
    RingioFiles,
    RingioOpenFiles,
    cpu_seconds,
    make_contender,
    thread_count,
)

# The in-process pairing (`pread_in_process`): pairs of one pass over the offsets
# by the plain loop and one by the contender, the two in turn, at least this many,
# and for at least twice the run's `min_seconds`.
MIN_PAIRS = 20


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
    in_process: dict[str, float] = {}
    pair = spec.get("pread_in_process", False) and not direct
    for depth in spec["depths"]:
        offsets = _offsets(size, ops, block)
        c = make_contender(spec["contender"], depth)
        if isinstance(c, AsyncFiles):
            rate, cpu_us, ratio = c.run(
                _rand_read_async(c, path, block, offsets, depth, direct, min_seconds, pair)
            )
            if ratio is not None:
                in_process[str(depth)] = ratio
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
    result: dict[str, Any] = {"ops_per_s": rates, "cpu_us": cpu}
    if in_process:
        result["pread_ratio_in_process"] = in_process
    return result


async def _rand_read_async(
    c: AsyncFiles, path: str, block: int, offsets: list[int], depth: int, direct: bool,
    min_seconds: float, pair: bool = False,
) -> tuple[float, float, float | None]:  # fmt: skip
    """(ops/s, CPU µs per read) of `depth` tasks reading `offsets`; with `pair`,
    also their rate over the plain os.pread loop's in this process (see
    `_ratio_in_process`), else None."""
    if direct and not isinstance(c, (RingioFiles, RingioOpenFiles)):
        raise WorkerSkipped("O_DIRECT variant only for ringio")
    await c.open([path], direct=direct)
    if isinstance(c, RingioOpenFiles) and c.many.endswith("_many"):
        return (*await _rand_read_many(c, block, offsets, depth, min_seconds), None)
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

    def every_offset() -> Awaitable[Any]:
        return asyncio.gather(*(workers[w](shares[w]) for w in range(depth)))

    rate, cpu_us = await _rate(every_offset, len(offsets), min_seconds, warm_up=not direct)
    ratio = None
    if pair and thread_count() == 1:
        ratio = await _ratio_in_process(every_offset, path, block, offsets, 2 * min_seconds)
    await c.close()
    await c.stop()
    return rate, cpu_us, ratio


async def _ratio_in_process(
    mine: Callable[[], Awaitable[Any]], path: str, block: int, offsets: list[int],
    min_seconds: float,
) -> float:  # fmt: skip
    """The median, over pairs of passes over `offsets`, of the plain os.pread loop's
    time divided by the contender's (`mine`, the pass the run timed), the two run in
    turn in this process, the one that goes first alternating from pair to pair: at
    least `MIN_PAIRS` pairs and `min_seconds`.

    Runs seconds apart, even in one process, move with the host by more than a
    tenth here; two passes a few milliseconds apart share its state, so their ratio
    keeps the difference between the two codes. Only while the process has one
    thread: with a second one, glibc brackets every pread with the
    asynchronous-cancellation calls, and the plain loop would run slower here than
    in its own process."""
    plain = PreadFiles()  # the os.pread contender, every cached-read ratio's baseline
    plain.open([path])
    try:
        plain.read_stream(0, block, offsets, 1)  # both warm
        await mine()
        ratios: list[float] = []
        start = time.perf_counter()
        while len(ratios) < MIN_PAIRS or time.perf_counter() - start < min_seconds:
            if len(ratios) % 2:
                t0 = time.perf_counter()
                plain.read_stream(0, block, offsets, 1)
                t1 = time.perf_counter()
                await mine()
                t2 = time.perf_counter()
                ratios.append((t1 - t0) / (t2 - t1))
            else:
                t0 = time.perf_counter()
                await mine()
                t1 = time.perf_counter()
                plain.read_stream(0, block, offsets, 1)
                t2 = time.perf_counter()
                ratios.append((t2 - t1) / (t1 - t0))
        return statistics.median(ratios)
    finally:
        plain.close()
        plain.stop()


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
