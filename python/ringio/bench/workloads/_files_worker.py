"""Child process of the ``files`` workload: measures one contender, prints JSON.

Run as ``python -m ringio.bench.workloads._files_worker SPEC_JSON``. Every contender
gets the same shape of code a user of that library would write, files opened once
before the timed part, and a fresh buffer per read (what ``read()`` APIs return).
"""

from __future__ import annotations

import asyncio
import os
import random
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..engines import LOOP_SUFFIX
from ..worker import WorkerSkipped, import_peer, worker_main

KiB = 1024
MiB = 1024 * 1024


def thread_count() -> int:
    """Threads of this process now (what the linux_aio experiment reports)."""
    return len(os.listdir("/proc/self/task"))


def proc_status() -> dict[str, int]:
    """VmRSS/VmHWM/VmSize/VmPeak from /proc/self/status, in bytes."""
    wanted = {"VmRSS", "VmHWM", "VmSize", "VmPeak"}
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in wanted:
                out[key] = int(rest.split()[0]) * 1024
    return out


def cpu_seconds() -> float:
    """The process's CPU time, every thread's, in µs resolution (os.times() counts
    10 ms clock ticks)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------------------------
# Contenders. Each builds a small object with the operations a workload needs.
# Async ones: `read(i, size, offset) -> bytes` on file i; sync ones: `read_many`.
# ---------------------------------------------------------------------------------


class AsyncFiles:
    """Async contender over a list of paths: open, read, write, fsync, close."""

    #: Run on ringio.EventLoop instead of asyncio's default loop.
    on_ringio_loop = False

    def run(self, coro: Any) -> Any:
        """Runs `coro` on a fresh loop of the contender's kind."""
        if self.on_ringio_loop:
            import ringio

            return ringio.run(coro)
        return asyncio.run(coro)

    async def open(self, paths: list[str], write: bool = False, direct: bool = False) -> None:
        raise NotImplementedError

    async def read(self, i: int, size: int, offset: int) -> bytes:
        raise NotImplementedError

    async def read_offsets(self, i: int, size: int, offsets: list[int]) -> None:
        """One task's share of the random reads, as its user writes the loop: the
        peers' own call straight in the loop body where a contender overrides this."""
        read = self.read
        for off in offsets:
            await read(i, size, off)

    async def write(self, i: int, data: bytes, offset: int) -> None:
        raise NotImplementedError

    async def fsync(self, i: int) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Closes the files (the contender stays usable for another open)."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Tears down the contender's context or pool, if any."""

    def worker_handle(self, i: int) -> Any:
        """An independent handle on file i for one concurrent worker (aiofiles needs it:
        its file objects have a position, so concurrent seek+read must not share one)."""
        return None


class RingioFiles(AsyncFiles):
    """ringio through the engine adapter: fds, reads at offsets, batched submits."""

    def __init__(self, engine: str, depth: int) -> None:
        self.engine, self.depth = engine, max(depth, 64)
        self.ctx: Any = None
        self.fds: list[int] = []

    async def open(self, paths: list[str], write: bool = False, direct: bool = False) -> None:
        if self.ctx is None:  # contexts bind to the running loop, so made here
            from ..engines import async_context

            self.ctx = async_context(self.engine, self.depth)
        flags = (os.O_RDWR | os.O_CREAT | os.O_TRUNC) if write else os.O_RDONLY
        if direct:
            flags |= os.O_DIRECT
        self.fds = [os.open(p, flags, 0o644) for p in paths]

    async def read(self, i: int, size: int, offset: int) -> bytes:
        return await self.ctx.read(self.fds[i], size, offset)

    async def readinto(self, i: int, buf: Any, offset: int) -> int:
        return await self.ctx.readinto(self.fds[i], buf, offset)

    async def write(self, i: int, data: bytes, offset: int) -> None:
        await self.ctx.write(self.fds[i], data, offset)

    async def fsync(self, i: int) -> None:
        await self.ctx.fsync(self.fds[i])

    async def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    async def stop(self) -> None:
        self.ctx.close()
        self.ctx = None


class RingioOpenFiles(AsyncFiles):
    """ringio.open: the file object users switch to from aiofiles; reads with
    ``f.pread(n, offset)`` (no shared position, so one object serves every task).
    With `many` (``pread_many``/``preadinto_many``), random reads are one call per
    chunk of offsets, keeping the queue depth with no task per slot."""

    #: Offsets per pread_many/preadinto_many call in the random-read workloads.
    MANY_CHUNK = 4096

    def __init__(self, engine: str, many: str = "") -> None:
        self.many = many
        os.environ["RINGIO_ENGINE"] = engine
        import ringio
        import ringio._engines

        ringio._engines.reset()
        self.ringio = ringio
        self.files: list[Any] = []

    async def open(self, paths: list[str], write: bool = False, direct: bool = False) -> None:
        mode = "wb" if write else "rb"
        self.files = [await self.ringio.open(p, mode, direct=direct) for p in paths]

    async def read(self, i: int, size: int, offset: int) -> bytes:
        return await self.files[i].pread(size, offset)

    async def read_offsets(self, i: int, size: int, offsets: list[int]) -> None:
        pread = self.files[i].pread
        for off in offsets:
            await pread(size, off)

    async def write(self, i: int, data: bytes, offset: int) -> None:
        await self.files[i].write(data)  # sequential: the position is already there

    async def fsync(self, i: int) -> None:
        await self.files[i].fsync()

    async def close(self) -> None:
        for f in self.files:
            await f.close()
        self.files = []


class AiofilesFiles(AsyncFiles):
    """aiofiles: a thread-pool hop per call; file objects have a position (seek + read)."""

    def __init__(self) -> None:
        self.aiofiles = import_peer("aiofiles")
        import_peer("aiofiles.os")
        self.files: list[Any] = []
        self.paths: list[str] = []
        self.extra: list[Any] = []

    async def open(self, paths: list[str], write: bool = False, direct: bool = False) -> None:
        self.paths = paths
        self.files = [await self.aiofiles.open(p, "wb" if write else "rb") for p in paths]

    async def read(self, i: int, size: int, offset: int, f: Any = None) -> bytes:
        f = f or self.files[i]
        await f.seek(offset)
        return await f.read(size)

    async def write(self, i: int, data: bytes, offset: int) -> None:
        # Sequential writes only: the file position is already at `offset`.
        await self.files[i].write(data)

    async def fsync(self, i: int) -> None:
        f = self.files[i]
        await f.flush()
        # aiofiles has no fsync; its users wrap os.fsync the same way.
        await self.aiofiles.os.wrap(os.fsync)(f.fileno())

    async def worker_handle_async(self, i: int) -> Any:
        f = await self.aiofiles.open(self.paths[i], "rb")
        self.extra.append(f)
        return f

    async def close(self) -> None:
        for f in self.files + self.extra:
            await f.close()
        self.files, self.extra = [], []


class AiofileFiles(AsyncFiles):
    """aiofile over one explicit caio backend context (linux_aio, thread_aio, ...)."""

    def __init__(self, backend: str, depth: int) -> None:
        self.aiofile = import_peer("aiofile")
        self.caio_mod = import_peer(f"caio.{backend}_asyncio")
        if self.caio_mod is None:  # caio sets a backend it could not build to None
            raise WorkerSkipped(f"caio has no {backend} backend here")
        self.backend, self.depth = backend, max(depth, 64)
        self.ctx: Any = None
        self.files: list[Any] = []

    async def open(self, paths: list[str], write: bool = False, direct: bool = False) -> None:
        if self.ctx is None:
            try:
                self.ctx = self.caio_mod.AsyncioContext(self.depth)
            except Exception as exc:  # e.g. io_uring refused by the kernel
                raise WorkerSkipped(f"caio {self.backend} context: {exc}") from exc
        mode = "wb" if write else "rb"
        self.files = [self.aiofile.AIOFile(p, mode, context=self.ctx) for p in paths]
        for f in self.files:
            await f.open()

    async def read(self, i: int, size: int, offset: int) -> bytes:
        return await self.files[i].read(size, offset)

    async def read_offsets(self, i: int, size: int, offsets: list[int]) -> None:
        read = self.files[i].read
        for off in offsets:
            await read(size, off)

    async def write(self, i: int, data: bytes, offset: int) -> None:
        await self.files[i].write(data, offset)

    async def fsync(self, i: int) -> None:
        await self.files[i].fsync()

    async def close(self) -> None:
        for f in self.files:
            await f.close()
        self.files = []

    async def stop(self) -> None:
        self.ctx.close()
        self.ctx = None


class SyncFiles:
    """Synchronous contender: submits a batch of reads and waits for all of them."""

    def open(self, paths: list[str], write: bool = False) -> None:
        raise NotImplementedError

    def read_many(self, reqs: list[tuple[int, int, int]]) -> list[bytes]:
        """Reads every (file index, size, offset); returns the data."""
        raise NotImplementedError

    def read_stream(self, i: int, size: int, offsets: list[int], depth: int) -> int:
        """Reads `size` at each offset keeping `depth` in flight; returns bytes read."""
        total = 0
        for k in range(0, len(offsets), depth):
            total += sum(
                len(b) for b in self.read_many([(i, size, o) for o in offsets[k : k + depth]])
            )
        return total

    def write(self, i: int, data: bytes, offset: int) -> None:
        raise NotImplementedError

    def fsync(self, i: int) -> None:
        os.fsync(self.fds[i])

    def close(self) -> None:
        """Closes the files (the contender stays usable for another open)."""
        for fd in self.fds:
            os.close(fd)

    def stop(self) -> None:
        """Tears down the contender's context, if any."""

    fds: list[int]


class OpenFiles(SyncFiles):
    """The built-in open(): one blocking call per read, nothing in flight."""

    def open(self, paths: list[str], write: bool = False) -> None:
        self.files = [open(p, "wb" if write else "rb") for p in paths]
        self.fds = [f.fileno() for f in self.files]

    def read_many(self, reqs: list[tuple[int, int, int]]) -> list[bytes]:
        out = []
        for i, size, offset in reqs:
            f = self.files[i]
            f.seek(offset)
            out.append(f.read(size))
        return out

    def write(self, i: int, data: bytes, offset: int) -> None:
        self.files[i].write(data)

    def fsync(self, i: int) -> None:
        self.files[i].flush()
        os.fsync(self.fds[i])

    def read_stream(self, i: int, size: int, offsets: list[int], depth: int) -> int:
        # As users write it: seek and read in a plain loop (blocking: depth 1).
        f = self.files[i]
        seek, read = f.seek, f.read
        total = 0
        for off in offsets:
            seek(off)
            total += len(read(size))
        return total

    def close(self) -> None:
        for f in self.files:
            f.close()


class PreadFiles(SyncFiles):
    """A plain ``os.pread`` loop: the floor for cached reads from Python."""

    def open(self, paths: list[str], write: bool = False) -> None:
        flags = (os.O_RDWR | os.O_CREAT | os.O_TRUNC) if write else os.O_RDONLY
        self.fds = [os.open(p, flags, 0o644) for p in paths]

    def read_many(self, reqs: list[tuple[int, int, int]]) -> list[bytes]:
        fds, pread = self.fds, os.pread
        return [pread(fds[i], size, offset) for i, size, offset in reqs]

    def read_stream(self, i: int, size: int, offsets: list[int], depth: int) -> int:
        # The plain loop users write (blocking: depth 1), no list per batch.
        fd, pread = self.fds[i], os.pread
        total = 0
        for off in offsets:
            total += len(pread(fd, size, off))
        return total

    def write(self, i: int, data: bytes, offset: int) -> None:
        os.pwrite(self.fds[i], data, offset)


class LibaioFiles(SyncFiles):
    """vpelletier's libaio (ctypes over libaio.so.1): AIOBlock + submit + getEvents."""

    def __init__(self, depth: int) -> None:
        self.libaio = import_peer("libaio")
        self.ctx = self.libaio.AIOContext(max(depth, 64))

    def open(self, paths: list[str], write: bool = False) -> None:
        self.files = [open(p, "r+b" if write else "rb") for p in paths]
        if write:
            for f in self.files:
                f.truncate(0)
        self.fds = [f.fileno() for f in self.files]

    def read_many(self, reqs: list[tuple[int, int, int]]) -> list[bytes]:
        lib = self.libaio
        blocks = [
            lib.AIOBlock(lib.AIOBLOCK_MODE_READ, self.files[i], [bytearray(size)], offset)
            for i, size, offset in reqs
        ]
        self.ctx.submit(blocks)
        done: list[Any] = []
        while len(done) < len(blocks):
            done += self.ctx.getEvents(min_nr=len(blocks) - len(done))
        return [bytes(b.buffer_list[0][:res]) for b, res, _res2 in done]

    def read_stream(self, i: int, size: int, offsets: list[int], depth: int) -> int:
        lib, f = self.libaio, self.files[i]
        pending = iter(offsets)
        total = 0

        def block(offset: int) -> Any:
            return lib.AIOBlock(lib.AIOBLOCK_MODE_READ, f, [bytearray(size)], offset)

        first = [block(o) for o, _ in zip(pending, range(depth), strict=False)]
        inflight = self.ctx.submit(first)
        while inflight:
            events = self.ctx.getEvents(min_nr=1, nr=depth)
            inflight -= len(events)
            nxt = []
            for _block, res, _res2 in events:
                total += res
                o = next(pending, None)
                if o is not None:
                    nxt.append(block(o))
            if nxt:
                inflight += self.ctx.submit(nxt)
        return total

    def write(self, i: int, data: bytes, offset: int) -> None:
        lib = self.libaio
        self.ctx.submit(
            [lib.AIOBlock(lib.AIOBLOCK_MODE_WRITE, self.files[i], [bytearray(data)], offset)]
        )
        self.ctx.getEvents(min_nr=1)

    def close(self) -> None:
        for f in self.files:
            f.close()

    def stop(self) -> None:
        self.ctx.close()


class LinuxAioFiles(SyncFiles):
    """linux_aio 0.4.1 (ctypes over the raw syscalls): ReadBlock + submit + get_events."""

    def __init__(self, depth: int) -> None:
        self.la = import_peer("linux_aio")
        self.depth = max(depth, 64)
        self.ctx = self.la.AIOContext(self.depth)

    def open(self, paths: list[str], write: bool = False) -> None:
        flags = (os.O_RDWR | os.O_CREAT | os.O_TRUNC) if write else os.O_RDONLY
        self.fds = [os.open(p, flags, 0o644) for p in paths]

    def read_many(self, reqs: list[tuple[int, int, int]]) -> list[bytes]:
        blocks = [
            self.la.ReadBlock(self.fds[i], bytearray(size), offset) for i, size, offset in reqs
        ]
        self.ctx.submit(*blocks)
        out: list[bytes] = []
        while len(out) < len(blocks):
            for ev in self.ctx.get_events(len(blocks) - len(out), len(blocks)):
                out.append(bytes(ev.buffer[: ev.response]))
        return out

    def read_stream(self, i: int, size: int, offsets: list[int], depth: int) -> int:
        fd, la = self.fds[i], self.la
        pending = iter(offsets)
        total = 0
        # linux_aio finds the block from the event through a raw pointer, so every block
        # must stay referenced until its event is reaped (else: use after free).
        inflight: dict[int, Any] = {}

        def submit(blocks: list[Any]) -> None:
            for b in blocks:
                inflight[id(b)] = b
            self.ctx.submit(*blocks)

        submit(
            [
                la.ReadBlock(fd, bytearray(size), o)
                for o, _ in zip(pending, range(depth), strict=False)
            ]
        )
        while inflight:
            nxt = []
            for ev in self.ctx.get_events(1, depth):
                del inflight[id(ev.aio_block)]
                total += ev.response
                o = next(pending, None)
                if o is not None:
                    nxt.append(la.ReadBlock(fd, bytearray(size), o))
            if nxt:
                submit(nxt)
        return total

    def write(self, i: int, data: bytes, offset: int) -> None:
        block = self.la.WriteBlock(self.fds[i], bytearray(data), offset)  # referenced until reaped
        self.ctx.submit(block)
        self.ctx.get_events(1, 1)
        del block

    def stop(self) -> None:
        self.ctx.close()


def make_contender(name: str, depth: int = 64) -> AsyncFiles | SyncFiles:
    """`name` as the parent passes it: ringio[aio], aiofile[thread_aio], libaio, ..."""
    if name.endswith(LOOP_SUFFIX):
        c = make_contender(name.removesuffix(LOOP_SUFFIX), depth)
        if not isinstance(c, AsyncFiles):
            raise WorkerSkipped(f"{name}: not an asyncio contender")
        c.on_ringio_loop = True
        return c
    if name.startswith("ringio.open[") and "]." in name:
        engine, method = name[12:].split("].", 1)
        if method not in ("pread_many", "preadinto_many"):
            raise WorkerSkipped(f"unknown contender {name}")
        return RingioOpenFiles(engine, method)
    if name.startswith("ringio.open[") and name.endswith("]"):
        return RingioOpenFiles(name[12:-1])
    if name == "os.pread":
        return PreadFiles()
    if name.startswith("ringio[") and name.endswith("]"):
        return RingioFiles(name[7:-1], depth)
    if name.startswith("aiofile[") and name.endswith("]"):
        return AiofileFiles(name[8:-1], depth)
    if name == "aiofiles":
        return AiofilesFiles()
    if name == "libaio":
        return LibaioFiles(depth)
    if name == "linux_aio":
        return LinuxAioFiles(depth)
    if name == "open()":
        return OpenFiles()
    raise WorkerSkipped(f"unknown contender {name}")


# ---------------------------------------------------------------------------------
# Experiments
# ---------------------------------------------------------------------------------


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
            await c.close()
            await c.stop()
            return wall, cpu, peak_threads

        status: dict[str, int] = {}
        wall, cpu, peak_threads = asyncio.run(main())
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
        c.close()
        c.stop()
    return {
        "runtime_s": wall,
        "threads": peak_threads,
        "rss_mb": status["VmHWM"] / MiB,
        "vsz_mb": status["VmPeak"] / MiB,
        "cpu_pct": 100 * cpu / wall,
    }


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
    if isinstance(c, RingioOpenFiles) and c.many:
        return await _rand_read_many(c, block, offsets, depth, min_seconds)
    workers: list[Callable[[list[int]], Awaitable[Any]]] = []
    for _ in range(depth):
        if isinstance(c, AiofilesFiles):
            f = await c.worker_handle_async(0)

            async def seek_read(offs: list[int], f: Any = f) -> None:
                for off in offs:
                    await c.read(0, block, off, f)

            workers.append(seek_read)
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


def lines(spec: dict[str, Any]) -> dict[str, Any]:
    """Iterating a text file line by line, as text or (mode 'rb') bytes; lines/s and MB/s.

    Timed from the open to the close (an asyncio contender's loop is made and torn
    down outside: on a small file that cost more than the lines). aiofiles and
    aiofile read ~1 MB/s: they stop after `peer_seconds`, and their rates are over
    what they read by then."""
    path, contender = spec["path"], spec["contender"]
    mode = spec.get("mode", "r")
    peer_seconds = spec.get("peer_seconds", 1e9)
    if contender.startswith("aiofile[") and mode != "r":
        raise WorkerSkipped("aiofile's LineReader reads text")

    def timed(count: int, nbytes: int, t0: float) -> tuple[int, int, float]:
        return count, nbytes, time.perf_counter() - t0

    if contender == "open()":
        t0 = time.perf_counter()
        count = 0
        with open(path, mode) as f:
            for _line in f:
                count += 1
        count, nbytes, wall = timed(count, os.path.getsize(path), t0)
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
            n, t0 = 0, time.perf_counter()
            async with c.ringio.open(path, mode) as f:
                async for _line in f:
                    n += 1
            return timed(n, os.path.getsize(path), t0)

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


if __name__ == "__main__":
    worker_main(
        {
            "small_files": small_files,
            "rand_read": rand_read,
            "sequential": sequential,
            "lines": lines,
        }
    )
