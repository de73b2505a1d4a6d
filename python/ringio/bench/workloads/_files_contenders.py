"""The contenders of the ``files`` workload, and the process figures it reports.

Each contender is the code a user of that library would write for open, read, write,
fsync and close: async ones read with ``read(i, size, offset)`` on file i, sync ones
with ``read_many``/``read_stream``. ``make_contender`` builds one from the name the
parent passes.
"""

from __future__ import annotations

import asyncio
import os
import resource
from collections.abc import Awaitable
from typing import Any

from ..engines import LOOP_SUFFIX
from ..worker import WorkerSkipped, import_peer


def thread_count() -> int:
    """Threads of this process now, cheaply (it is read every round): io_uring's
    kernel workers included (see ``io_worker_count``)."""
    return len(os.listdir("/proc/self/task"))


def io_worker_count() -> int:
    """io_uring's kernel workers in this process now (``iou-wrk-*``, ``iou-sqp-*``):
    the kernel starts them in the process for ops it cannot do inline (an OPENAT);
    they run no user code, and stay for seconds once idle."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                count += f.read().startswith(("iou-wrk-", "iou-sqp-"))
        except OSError:
            pass  # the thread ended in between
    return count


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

    def read(self, i: int, size: int, offset: int) -> Awaitable[bytes]:
        # The file's own awaitable, as a user hands f.pread(...) to gather: already
        # complete where the page cache holds the bytes.
        return self.files[i].pread(size, offset)

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
        if method not in ("pread_many", "preadinto_many", "preadinto"):
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
