"""Child process of the ``files`` workload: measures one contender, prints JSON.

Run as ``python -m ringio.bench.workloads._files_worker SPEC_JSON``. Every contender
gets the same shape of code a user of that library would write, files opened once
before the timed part, and a fresh buffer per read (what ``read()`` APIs return).

The workloads' families live in sibling modules (contenders, random reads, lines,
small sequential reads); small-file reads and sequential I/O, which share the
contenders' plain calls, are here.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from ..worker import worker_main
from ._files_contenders import (
    AsyncFiles,
    cpu_seconds,
    io_worker_count,
    make_contender,
    proc_status,
    thread_count,
)
from ._files_lines import lines
from ._files_random import rand_read
from ._files_seq import small_seq

KiB = 1024
MiB = 1024 * 1024


def small_files(spec: dict[str, Any]) -> dict[str, Any]:
    """The linux_aio README experiment: every `interval`, read N small files whole."""
    paths: list[str] = spec["paths"]
    sizes: list[int] = spec["sizes"]
    reads, interval = spec["reads"], spec["interval"]
    c = make_contender(spec["contender"], len(paths))
    n = len(paths)
    peak_threads = thread_count()
    if isinstance(c, AsyncFiles):

        async def main() -> tuple[float, float, int]:
            nonlocal peak_threads
            await c.open(paths)
            t0, c0 = time.perf_counter(), cpu_seconds()
            for _ in range(reads):
                await asyncio.gather(*(c.read(i, sizes[i], 0) for i in range(n)))
                peak_threads = max(peak_threads, thread_count())
                await asyncio.sleep(interval)
            wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
            status.update(proc_status())  # before the pool threads go away
            status["io_workers"] = io_worker_count()
            await c.close()
            await c.stop()
            return wall, cpu, peak_threads

        status: dict[str, int] = {}
        wall, cpu, peak_threads = c.run(main())
    else:
        c.open(paths)
        reqs = [(i, sizes[i], 0) for i in range(n)]
        t0, c0 = time.perf_counter(), cpu_seconds()
        for _ in range(reads):
            c.read_many(reqs)
            peak_threads = max(peak_threads, thread_count())
            time.sleep(interval)
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        status = proc_status()
        status["io_workers"] = io_worker_count()
        c.close()
        c.stop()
    return {
        "runtime_s": wall,
        # User threads: io_uring's kernel workers, still there at the end (they stay
        # for seconds once idle), are counted apart.
        "threads": max(1, peak_threads - status["io_workers"]),
        "io_workers": status["io_workers"],
        "rss_mb": status["VmHWM"] / MiB,
        "vsz_mb": status["VmPeak"] / MiB,
        "cpu_pct": 100 * cpu / wall,
    }


def sequential(spec: dict[str, Any]) -> dict[str, Any]:
    """Sequential 1 MiB writes (then fsync) and reads of one file; MB/s each."""
    path, chunk, total = spec["path"], spec["chunk"], spec["total"]
    data = os.urandom(chunk)
    n = total // chunk
    c = make_contender(spec["contender"], 8)
    if isinstance(c, AsyncFiles):

        async def main() -> tuple[float, float]:
            await c.open([path], write=True)
            t0 = time.perf_counter()
            for k in range(n):
                await c.write(0, data, k * chunk)
            await c.fsync(0)
            tw = time.perf_counter() - t0
            await c.close()
            await c.open([path])
            t0 = time.perf_counter()
            for k in range(n):
                await c.read(0, chunk, k * chunk)
            tr = time.perf_counter() - t0
            await c.close()
            await c.stop()
            return tw, tr

        tw, tr = asyncio.run(main())
    else:
        c.open([path], write=True)
        t0 = time.perf_counter()
        for k in range(n):
            c.write(0, data, k * chunk)
        c.fsync(0)
        tw = time.perf_counter() - t0
        c.close()
        c.open([path])
        t0 = time.perf_counter()
        for k in range(n):
            c.read_many([(0, chunk, k * chunk)])
        tr = time.perf_counter() - t0
        c.close()
        c.stop()
    mb = n * chunk / 1e6
    return {"write_mb_s": mb / tw, "read_mb_s": mb / tr}


if __name__ == "__main__":
    worker_main(
        {
            "small_files": small_files,
            "rand_read": rand_read,
            "sequential": sequential,
            "lines": lines,
            "small_seq": small_seq,
        }
    )
