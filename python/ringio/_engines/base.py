"""The one interface every file engine implements, on one asyncio loop.

An engine runs operations for the loop it was made on. ``uring`` and ``aio`` hand
them to the kernel (no threads); ``thread`` is the visible fallback where the
kernel refuses both. Every method raises what the matching ``os`` function raises
(``OSError`` subclasses with errno, filename and, for fd operations, ``fd``).

Cancellation: cancelling the awaiting task cancels the operation's future at
once. An operation still queued never reaches the kernel; one the kernel has
keeps its buffers until its completion arrives (io_uring also cancels it in the
kernel). Whether it took effect is visible in the file (a write may have landed).

To learn what a cancelled op really did, pass an ``Outcome`` (``outcome=``) to
the data methods: after the ``CancelledError``, ``await outcome.result()`` waits
for the op's completion and returns its byte count, or None when nothing happened
(never submitted, cancelled in the kernel, failed, or served inline).
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import errno
import fcntl
import functools
import os
import select
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, ClassVar, TypeVar

from .. import _core
from .._proactor import check_loop
from .inline import open_inline, stat_inline
from .many import check_many, deliver, lane_buffer, read_span, reads_in_place, split_target

T = TypeVar("T")

#: Calls with no kernel async form, run on the engine's small fallback pool
#: (listed in docs/files.md).
FALLBACK_POOL_WORKERS = 4


def check_offset(offset: int) -> None:
    """preadv2/pwritev2 (which CPython's os.preadv uses) and io_uring read -1 as
    "at the file position"; os.pread refuses a negative offset, and so do we."""
    if offset < 0:
        raise OSError(errno.EINVAL, f"{os.strerror(errno.EINVAL)}: negative offset {offset}")


class NowaitHint:
    """Per-file memory of whether inline RWF_NOWAIT attempts are worth making, of
    whether the file is on a memory filesystem (its inline reads are plain reads: see
    ``_core.on_memory_filesystem``), and of whether the kernel queue reads the file
    correctly (None: not checked yet)."""

    __slots__ = ("memory", "queue_reads", "read", "write")

    def __init__(self, read: bool = True, write: bool = True, memory: bool = False) -> None:
        self.read = read
        self.write = write
        self.memory = memory
        self.queue_reads: bool | None = None


class Outcome:
    """What a data op really did, learnt after its awaiting task was cancelled.

    The caller makes one (per file, reused) and passes it as ``outcome=``; the
    engine arms it with a way to wait for the op's completion whenever the op goes
    through a queue or a thread (an inline RWF_NOWAIT attempt cannot be cancelled
    half-way). The caller resets it before each op.
    """

    __slots__ = ("_settle",)

    def __init__(self) -> None:
        self._settle: Callable[[], Awaitable[int | None]] | None = None

    def reset(self) -> None:
        self._settle = None

    def arm(self, settle: Callable[[], Awaitable[int | None]]) -> None:
        self._settle = settle

    @property
    def armed(self) -> bool:
        return self._settle is not None

    async def result(self) -> int | None:
        """Waits for the op's completion: its result (>= 0), or None if it did nothing.

        If this wait is itself cancelled, the outcome stays armed: call it again."""
        settle = self._settle
        if settle is None:
            return None
        res = await settle()
        self._settle = None
        return res


# A terminal reports POLLOUT with room for at least WAKEUP_CHARS bytes.
_TTY_ROOM = 256


def write_what_fits(fd: int, data: Any) -> int | None:
    """After POLLOUT: writes only what fits now, never waiting inside the syscall
    (a blocking write of more would wait until all fit, forever if the same loop is
    the reader). Pipes and sockets take a part with RWF_NOWAIT; None when another
    writer took the room first."""
    try:
        return os.pwritev(fd, [data], -1, os.RWF_NOWAIT)
    except BlockingIOError:
        return None
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    # Terminals refuse RWF_NOWAIT.
    return os.write(fd, memoryview(data).cast("B")[:_TTY_ROOM])


def read_what_is_there(fd: int, buf: Any) -> int | None:
    """After POLLIN: reads what the fd holds now, never waiting inside the syscall
    (another reader of the same pipe or socket may have taken it since the poll,
    and a blocking read would then stop the loop's thread). None when nothing is
    there. Pipes and sockets do it with RWF_NOWAIT; files that refuse it
    (terminals) with O_NONBLOCK set for this one call."""
    try:
        return os.preadv(fd, [buf], -1, os.RWF_NOWAIT)
    except BlockingIOError:
        return None
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    blocking = os.get_blocking(fd)
    if blocking:
        os.set_blocking(fd, False)
    try:
        return os.readv(fd, [buf])
    except BlockingIOError:
        return None
    finally:
        if blocking:
            os.set_blocking(fd, True)


async def _settle_thread(
    cf: concurrent.futures.Future[int], loop: asyncio.AbstractEventLoop
) -> int | None:
    if cf.cancelled():
        return None  # never started
    try:
        return await asyncio.shield(asyncio.wrap_future(cf, loop=loop))
    except Exception:
        return None


class FileEngine(abc.ABC):
    name: ClassVar[str]
    # Whether reads of cached data are served inline (preadv2 with RWF_NOWAIT) before
    # anything is queued: files then serve such reads without a coroutine either.
    inline_reads: ClassVar[bool] = False

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # What loop.create_future() gives, without its Python frame where the loop
        # does not override it (futures are made per op).
        if type(loop).create_future is asyncio.BaseEventLoop.create_future:
            self._new_future: Callable[[], asyncio.Future[Any]] = functools.partial(
                asyncio.Future, loop=loop
            )
        else:
            self._new_future = loop.create_future
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self.closed = False
        # Open while the engine is: the files' gates (``_core.ReadGate``) hang from
        # it, so closing the engine stops their native inline reads at once.
        self.gate = _core.ReadGate(open=True)
        # The thread that made the engine: the only one that may close it (see
        # ringio._engines.get).
        self.owner = threading.get_ident()
        # Whether only `owner` can use it (an io_uring ring of its own): a loop run
        # in another thread then gets another engine there.
        self.thread_bound = False
        # The engine's own NowaitHint per fd, for callers that pass none.
        self._fd_hints: dict[int, NowaitHint] = {}

    def _check_open(self) -> None:
        # Paths that never reach a proactor or the pool (inline reads, argument
        # checks before a call) must say so themselves.
        if self.closed:
            # The engine of a closed loop, used from the next one: say that first.
            self._check_loop()
            raise ValueError("I/O operation on closed engine")

    def _check_loop(self) -> None:
        """Refuses use from another loop than the engine's: its futures, pool
        results and readiness callbacks complete on its own loop only."""
        check_loop(self.loop)

    async def _wait_ready(self, fd: int, events: int) -> bool:
        """Waits on the loop's own readiness notification (no thread, and a
        cancelled wait consumes nothing); False where the fd cannot be watched
        (regular files are always ready)."""
        self._check_loop()
        fut = self.loop.create_future()
        add, remove = (
            (self.loop.add_reader, self.loop.remove_reader)
            if events & select.POLLIN
            else (self.loop.add_writer, self.loop.remove_writer)
        )
        try:
            add(fd, lambda: fut.done() or fut.set_result(None))
        except (PermissionError, ValueError):
            return False
        try:
            await fut
        finally:
            remove(fd)
        return True

    # -- per-fd knowledge ---------------------------------------------------------
    def nowait_hint(self, fd: int) -> NowaitHint:
        """The hint a read uses when its caller passes none (raw engine users;
        ``ringio.open`` keeps one per file object instead).

        An O_DIRECT file gets ``read=False``: an inline ``preadv2(RWF_NOWAIT)`` on it
        does not say EAGAIN, it waits for the device, which would serialise every
        read on the loop's thread. The file's flags are read once per fd
        (``fcntl(F_GETFL)``) and cached; ``close()`` through this engine forgets
        them. An fd number closed elsewhere and reused for a file of the other kind
        keeps the old answer until then: that costs speed (a needless queue round
        trip, or a read waiting for the device, as one does where the number was a
        tmpfs file's, whose reads are plain), never a wrong result. The hint says
        whether the fd is a regular file of tmpfs or ramfs (``memory``: its reads
        are plain inline calls), and remembers a file that refuses RWF_NOWAIT
        (EOPNOTSUPP). Writes are not tried inline without a caller's hint
        (``write`` is False). Its
        ``queue_reads`` stays None: whether the kernel queue reads a file correctly
        (the uring engine's FUSE check) is a matter of correctness, so it is not
        cached where a reused fd number could inherit it."""
        hint = self._fd_hints.get(fd)
        if hint is None:
            try:
                direct = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)
            except OSError:
                return NowaitHint(read=True, write=False)  # the read reports EBADF
            hint = self._fd_hints[fd] = NowaitHint(
                read=not direct, write=False, memory=not direct and _core.on_memory_filesystem(fd)
            )
        return hint

    def forget_fd(self, fd: int) -> None:
        """Drops what the engine cached about `fd` (call when it is closed)."""
        self._fd_hints.pop(fd, None)

    # -- data -------------------------------------------------------------------
    @abc.abstractmethod
    async def pread(
        self, fd: int, buf: Any, offset: int, hint: NowaitHint | None = None,
        *, outcome: Outcome | None = None,
    ) -> int:
        """Reads into `buf` at `offset`; returns the byte count (0 at end of file)."""

    def start_direct_read(
        self, fd: int, target: Any, offset: int, hint: NowaitHint, off_align: int,
        mem_align: int,
    ) -> Coroutine[Any, Any, Any] | None:
        """An O_DIRECT read started now, by an engine that can: a
        ``ringio._core.Started`` (a native awaitable that is a coroutine to asyncio,
        with no frame) awaiting its op's future. `target` is a writable buffer to
        read into at `offset` (the count is the result), which `offset`, its length
        and its address must align with (`off_align`, `mem_align`); or ``pread``'s
        size, whose bytes are read through an aligned bounce buffer of the read's
        own (the bytes are the result). None, with nothing started, where that does
        not hold or the engine cannot start it here and now: the caller then takes
        its general path.

        The device reads such a block whether or not anyone waits (the kernel does
        not recall an O_DIRECT read once issued), so a cancelled awaiter cancels the
        future only: the read completes into its buffer, which the engine keeps
        alive until it has. This engine: None."""
        return None

    @abc.abstractmethod
    async def pwrite(
        self, fd: int, data: Any, offset: int, hint: NowaitHint | None = None,
        *, outcome: Outcome | None = None,
    ) -> int:
        """Writes `data` at `offset`; returns the byte count (possibly short)."""

    async def pread_bytes(
        self, fd: int, n: int, offset: int, hint: NowaitHint | None = None
    ) -> bytes:
        """Reads up to `n` bytes at `offset` into a new bytes object (short at EOF)."""
        buf = bytearray(n)
        got = await self.pread(fd, buf, offset, hint)
        del buf[got:]
        return bytes(buf)

    async def pread_many(
        self, fd: int, n: int, offsets: Iterable[int], hint: NowaitHint | None = None,
        *, depth: int = 32, align: tuple[int, int] | None = None,
    ) -> list[bytes]:
        """Reads up to `n` bytes at each of `offsets` with up to `depth` reads in
        flight; returns the data in the order of `offsets` (short or empty at the
        end of the file). `align` (offset alignment, memory alignment) is for
        O_DIRECT files: each read then covers whole blocks, into an aligned buffer,
        and the bytes asked for are cut out of it. The first error is raised and
        the reads in flight are cancelled (see ``ringio._engines.many``)."""
        offs = check_many(n, offsets, depth)
        self._check_open()
        return await self._read_many(fd, n, offs, None, hint, depth, align)

    async def preadinto_many(
        self, fd: int, buffer: Any, offsets: Iterable[int], hint: NowaitHint | None = None,
        *, depth: int = 32, align: tuple[int, int] | None = None,
    ) -> list[int]:
        """Like ``pread_many``, into `buffer` cut in ``len(offsets)`` equal parts (read
        `k` fills part `k`); returns the byte count of each read. On O_DIRECT files
        the reads go straight into the parts when those and the offsets are
        aligned, else through aligned lane buffers."""
        offs = check_many(0, offsets, depth)
        out, n = split_target(buffer, len(offs))
        try:
            self._check_open()
            return await self._read_many(fd, n, offs, out, hint, depth, align)
        finally:
            # The caller's buffer is exported only as long as reads in flight hold
            # their part of it, not for as long as this frame (kept by a traceback
            # after a cancel) lives.
            out.release()

    async def _read_many(
        self, fd: int, n: int, offs: list[int], out: memoryview | None,
        hint: NowaitHint | None, depth: int, align: tuple[int, int] | None,
    ) -> list[Any]:
        # This generic form runs `depth` tasks over pread; the kernel engines start
        # each lane's next read from the completion itself (``many.ManyReads``).
        results: list[Any] = [b"" if out is None else 0] * len(offs)
        in_place = reads_in_place(out, n, offs, align)
        a = align[0] if align else 0
        todo = iter(range(len(offs)))
        # A lane's failure reaches `gather` and the cancels below a loop turn or two
        # later; a lane that resumes in between would start another read.
        failed = False

        async def lane() -> None:
            nonlocal failed
            mv = None if in_place else memoryview(lane_buffer(n, align)).cast("B")
            try:
                for i in todo:
                    if failed:
                        return
                    if mv is None:
                        assert out is not None
                        results[i] = await self.pread(fd, out[i * n : i * n + n], offs[i], hint)
                    else:
                        start, length, skip = read_span(offs[i], n, a)
                        got = await self.pread(fd, mv[:length], start, hint)
                        deliver(results, i, got - skip, n, mv, skip, out)
            except BaseException:
                failed = True
                raise

        tasks = [self.loop.create_task(lane()) for _ in range(min(depth, len(offs)))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:
                t.cancel()
            raise
        return results

    @abc.abstractmethod
    async def preadv(
        self, fd: int, buffers: Sequence[Any], offset: int, *, outcome: Outcome | None = None
    ) -> int: ...

    @abc.abstractmethod
    async def pwritev(
        self, fd: int, buffers: Sequence[Any], offset: int, *, outcome: Outcome | None = None
    ) -> int: ...

    @abc.abstractmethod
    async def read(self, fd: int, buf: Any, *, outcome: Outcome | None = None) -> int:
        """Reads at the file position (pipes, FIFOs, character devices)."""

    @abc.abstractmethod
    async def write(self, fd: int, data: Any, *, outcome: Outcome | None = None) -> int:
        """Writes at the file position (pipes, FIFOs, character devices)."""

    @abc.abstractmethod
    async def fsync(self, fd: int) -> None: ...

    @abc.abstractmethod
    async def fdatasync(self, fd: int) -> None: ...

    # -- files and paths ----------------------------------------------------------
    @abc.abstractmethod
    async def open(
        self, path: Any, flags: int, mode: int = 0o666, *, dir_fd: int | None = None
    ) -> int:
        """Opens `path` with O_CLOEXEC added; returns the fd."""

    @abc.abstractmethod
    async def close(self, fd: int) -> None: ...

    @abc.abstractmethod
    async def stat(
        self, path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True
    ) -> os.stat_result: ...

    @abc.abstractmethod
    async def fstat(self, fd: int) -> os.stat_result: ...

    @abc.abstractmethod
    async def ftruncate(self, fd: int, length: int) -> None: ...

    @abc.abstractmethod
    async def rename(
        self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None, flags: int = 0,
    ) -> None:
        """renameat2; `flags` 0 replaces an existing `dst` (os.replace semantics)."""

    @abc.abstractmethod
    async def unlink(self, path: Any, *, dir_fd: int | None = None) -> None: ...

    @abc.abstractmethod
    async def rmdir(self, path: Any, *, dir_fd: int | None = None) -> None: ...

    @abc.abstractmethod
    async def mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None: ...

    @abc.abstractmethod
    async def link(
        self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None, follow_symlinks: bool = True,
    ) -> None: ...

    @abc.abstractmethod
    async def symlink(self, src: Any, dst: Any, *, dir_fd: int | None = None) -> None: ...

    @abc.abstractmethod
    async def poll(self, fd: int, events: int) -> int:
        """Waits until `fd` is ready for `events` (select.POLLIN...); returns the mask."""

    # -- the rest -----------------------------------------------------------------
    async def run_sync(self, func: Callable[..., T], *args: Any) -> T:
        """Runs a call that has no kernel async form on the engine's fallback pool."""
        return await self.loop.run_in_executor(self._fallback_pool(), func, *args)

    async def _tracked(self, outcome: Outcome | None, func: Any, *args: Any) -> int:
        """run_sync, but an `outcome` can learn the call's result after a cancel
        (a call already running in a thread finishes regardless)."""
        if outcome is None:
            return await self.run_sync(func, *args)
        cf = self._fallback_pool().submit(func, *args)
        outcome.arm(lambda: _settle_thread(cf, self.loop))
        return await asyncio.wrap_future(cf, loop=self.loop)

    def _fallback_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        self._check_open()
        self._check_loop()
        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    FALLBACK_POOL_WORKERS, thread_name_prefix=f"ringio-{self.name}-fallback"
                )
            return self._pool

    def close_engine(self) -> None:
        """Stops the engine; operations in the kernel finish first."""
        self.closed = True
        self.gate.open = False
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


class PoolPathOps:
    """Path and metadata calls as blocking ``os`` calls on the engine's fallback
    pool: what the aio and thread engines do where kernel AIO has no form."""

    run_sync: Callable[..., Any]

    async def open(
        self, path: Any, flags: int, mode: int = 0o666, *, dir_fd: int | None = None
    ) -> int:
        fd = open_inline(path, flags, dir_fd)
        if fd is not None:
            return fd
        return await self.run_sync(lambda: os.open(path, flags | os.O_CLOEXEC, mode, dir_fd=dir_fd))

    async def stat(
        self, path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True
    ) -> os.stat_result:
        st = stat_inline(path, dir_fd, follow_symlinks)
        if st is not None:
            return st
        return await self.run_sync(
            lambda: os.stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
        )

    async def ftruncate(self, fd: int, length: int) -> None:
        await self.run_sync(os.ftruncate, fd, length)

    async def rename(
        self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None, flags: int = 0,
    ) -> None:
        if flags:
            raise ValueError("rename flags need the uring engine")
        await self.run_sync(
            lambda: os.replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        )

    async def unlink(self, path: Any, *, dir_fd: int | None = None) -> None:
        await self.run_sync(lambda: os.unlink(path, dir_fd=dir_fd))

    async def rmdir(self, path: Any, *, dir_fd: int | None = None) -> None:
        await self.run_sync(lambda: os.rmdir(path, dir_fd=dir_fd))

    async def mkdir(self, path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        await self.run_sync(lambda: os.mkdir(path, mode, dir_fd=dir_fd))

    async def link(
        self, src: Any, dst: Any, *, src_dir_fd: int | None = None,
        dst_dir_fd: int | None = None, follow_symlinks: bool = True,
    ) -> None:
        await self.run_sync(
            lambda: os.link(
                src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd,
                follow_symlinks=follow_symlinks,
            )
        )

    async def symlink(self, src: Any, dst: Any, *, dir_fd: int | None = None) -> None:
        await self.run_sync(lambda: os.symlink(src, dst, dir_fd=dir_fd))
