"""Type stubs for ringio's native core (Rust, PyO3): what every area shares.

Each engine and client of a ring has its submodule: ``uring``, ``aio``, ``loop``,
``net``.
"""

import asyncio
import contextvars
import os
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
from typing import Any, Literal, TypeVar, final

from typing_extensions import Buffer

from . import aio as aio
from . import loop as loop
from . import net as net
from . import uring as uring

FdLike = int | Any  # an int fd, or any object with fileno()

class PartialSubmitError(OSError):
    """The kernel accepted only the first `submitted` ops of a batch; `op` is the
    first it refused."""

    submitted: int
    op: Op
    fd: int

@final
class Op:
    """One I/O operation; made by pread(), pwrite(), preadv(), ... Immutable."""

    @property
    def command(
        self,
    ) -> str: ...
    @property
    def fd(self) -> int: ...
    @property
    def file(self) -> Any: ...
    @property
    def offset(self) -> int: ...
    @property
    def rw_flags(self) -> int: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def resfd(self) -> int | None: ...
    @property
    def events(self) -> int: ...
    @property
    def data(self) -> Any: ...
    @property
    def buffer(self) -> Any: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def state(self) -> Literal["idle", "in_flight", "done"]: ...
    @property
    def result(self) -> int | None: ...
    @property
    def res2(self) -> int: ...
    def statx_result(self) -> dict[str, Any] | None: ...

@final
class Completion:
    """A reaped completion: the op and the kernel's result fields."""

    @property
    def op(self) -> Op: ...
    @property
    def data(self) -> Any: ...
    @property
    def res(self) -> int: ...
    @property
    def res2(self) -> int: ...
    @property
    def error(self) -> OSError | None: ...
    def result(self) -> int: ...

def pread(
    fd: FdLike, buf: Buffer, offset: int = 0, *, rw_flags: int = 0,
    priority: int | None = None, resfd: int | None = None, data: Any = None,
) -> Op: ...
def pwrite(
    fd: FdLike, buf: Buffer, offset: int = 0, *, rw_flags: int = 0,
    priority: int | None = None, resfd: int | None = None, data: Any = None,
) -> Op: ...
def preadv(
    fd: FdLike, buffers: Iterable[Buffer], offset: int = 0, *, rw_flags: int = 0,
    priority: int | None = None, resfd: int | None = None, data: Any = None,
) -> Op: ...
def pwritev(
    fd: FdLike, buffers: Iterable[Buffer], offset: int = 0, *, rw_flags: int = 0,
    priority: int | None = None, resfd: int | None = None, data: Any = None,
) -> Op: ...
def fsync(
    fd: FdLike, *, priority: int | None = None, resfd: int | None = None, data: Any = None
) -> Op: ...
def fdsync(
    fd: FdLike, *, priority: int | None = None, resfd: int | None = None, data: Any = None
) -> Op: ...
def poll(
    fd: FdLike, events: int, *, priority: int | None = None, resfd: int | None = None,
    data: Any = None,
) -> Op: ...
def noop(fd: FdLike, *, data: Any = None) -> Op: ...
def read(
    fd: FdLike, buf: Buffer, *, rw_flags: int = 0, priority: int | None = None, data: Any = None
) -> Op: ...
def write(
    fd: FdLike, buf: Buffer, *, rw_flags: int = 0, priority: int | None = None, data: Any = None
) -> Op: ...

PathLike = str | bytes | Any

def openat(
    path: PathLike, flags: int, mode: int = 0o666, *, dir_fd: int | None = None, data: Any = None
) -> Op: ...
def close(fd: FdLike, *, data: Any = None) -> Op: ...
def statx(
    path: PathLike, *, dir_fd: int | None = None, flags: int = 0, mask: int = ...,
    data: Any = None,
) -> Op: ...
def ftruncate(fd: FdLike, length: int, *, data: Any = None) -> Op: ...
def fallocate(fd: FdLike, offset: int, length: int, mode: int = 0, *, data: Any = None) -> Op: ...
def renameat(
    src: PathLike, dst: PathLike, *, src_dir_fd: int | None = None,
    dst_dir_fd: int | None = None, flags: int = 0, data: Any = None,
) -> Op: ...
def unlinkat(
    path: PathLike, *, dir_fd: int | None = None, rmdir: bool = False, data: Any = None
) -> Op: ...
def mkdirat(
    path: PathLike, mode: int = 0o777, *, dir_fd: int | None = None, data: Any = None
) -> Op: ...
def symlinkat(
    src: PathLike, dst: PathLike, *, dir_fd: int | None = None, data: Any = None
) -> Op: ...
def linkat(
    src: PathLike, dst: PathLike, *, src_dir_fd: int | None = None,
    dst_dir_fd: int | None = None, follow_symlinks: bool = True, data: Any = None,
) -> Op: ...

@final
class AlignedBuffer:
    """A zero-filled, fixed-size writable buffer aligned for O_DIRECT."""

    def __init__(self, nbytes: int, alignment: int | None = None) -> None: ...
    @property
    def alignment(self) -> int: ...
    @property
    def address(self) -> int: ...
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

def dio_alignment(fd: int) -> tuple[int, int] | None:
    """O_DIRECT's (memory, offset) alignment for `fd` in bytes, from
    ``statx(STATX_DIOALIGN)`` (Linux 6.1+); None when the kernel or the filesystem
    does not say. Raises OSError for a bad fd."""
def fs_type(fd: int) -> int: ...
def on_memory_filesystem(fd: int) -> bool:
    """Whether `fd` is a regular file of tmpfs or ramfs, whose reads and writes wait
    for no device (False for an fd that fstatfs or fstat refuses)."""

# ---------------------------------------------------------------- line iteration

LINES_BYTES: int
LINES_LF: int
LINES_CR: int
LINES_CRLF: int
LINES_UNIVERSAL: int

@final
class LineCursor:
    """A read position in a chunk a file lends to line iteration (bytes for
    LINES_BYTES, decoded str for the others)."""

    def __init__(self, chunk: bytes | str, pos: int, kind: int) -> None: ...
    def take(self) -> int: ...
    @property
    def pos(self) -> int: ...
    @property
    def chunk(self) -> bytes | str: ...
    def next_line(self) -> bytes | str | None: ...

@final
class LineIter:
    """``async for`` over a ringio file's lines: ``__anext__`` returns the iterator
    itself, already complete, for a line in the file's lent chunk (``_cursor``), else
    the file's ``_next_line()`` coroutine."""

    def __init__(self, file: Any, /) -> None: ...
    def __aiter__(self) -> LineIter: ...
    def __anext__(self) -> Awaitable[Any]: ...
    def __await__(self) -> Generator[Any, None, Any]: ...
    def __iter__(self) -> LineIter: ...
    def __next__(self) -> Any: ...

def pread_nowait(
    fd: int,
    n: int,
    offset: int,
    memory: bool = False,
    *,
    head: bytes | None = None,
    head_from: int = 0,
) -> bytes | None:
    """``preadv2(fd, n, offset, RWF_NOWAIT)`` into a new bytes: None where the data
    is not all cached (the caller then goes through the kernel queue); raises the
    kernel's OSError otherwise. A file of a memory filesystem (tmpfs, ramfs), which
    refuses RWF_NOWAIT, is read without it; `memory` says the caller knows it is one
    (one call instead of three). With `head`, the result starts with
    ``head[head_from:]`` and the bytes read follow (ValueError where `head_from` is
    past its end)."""
def preadinto_nowait(fd: int, buffer: Buffer, offset: int, memory: bool = False) -> int | None:
    """``pread_nowait`` into a writable buffer: the byte count when the cache held
    all of it (less only at the end of the file), else None."""

_T = TypeVar("_T")

@final
class Ready(Coroutine[Any, Any, _T]):
    """An awaitable whose result exists when it is made: ``await`` returns it at
    the first ``send``, with no Future. It has ``send``, ``throw`` and ``close``, so
    ``asyncio.create_task`` takes it as a coroutine; in a running loop it is also a
    done future (``asyncio.isfuture``), which ``asyncio.gather`` and the other
    helpers take with no task made for it."""

    def __init__(self, value: _T, /) -> None: ...
    def __await__(self) -> Generator[Any, None, _T]: ...
    def __iter__(self) -> Ready[_T]: ...
    def __next__(self) -> Any: ...
    def send(self, value: object, /) -> Any: ...
    def throw(
        self, exc: BaseException | type[BaseException], value: object = ..., tb: object = ..., /
    ) -> Any: ...
    def close(self) -> None: ...
    # The done future's side (a running loop's; see src/ready_future.rs).
    _asyncio_future_blocking: bool | None
    def done(self) -> bool: ...
    def cancelled(self) -> bool: ...
    def result(self) -> _T: ...
    def exception(self) -> BaseException | None: ...
    def get_loop(self) -> asyncio.AbstractEventLoop: ...
    def add_done_callback(
        self, fn: Callable[[Ready[_T]], object], /, *, context: contextvars.Context | None = None
    ) -> None: ...
    def remove_done_callback(self, fn: Callable[[Ready[_T]], object], /) -> int: ...
    def cancel(self, msg: Any | None = None) -> bool: ...

@final
class Started(Coroutine[Any, Any, _T]):
    """The awaitable of an operation started when the method was called: it awaits
    the operation's asyncio future as ``return await future`` would, with no
    coroutine frame. It has ``send``, ``throw`` and ``close``, so
    ``asyncio.create_task`` takes it as a coroutine; ``close`` and ``throw`` leave
    the operation and its future alone."""

    def __init__(self, future: asyncio.Future[_T], /) -> None: ...
    def __await__(self) -> Generator[Any, None, _T]: ...
    def __iter__(self) -> Started[_T]: ...
    def __next__(self) -> Any: ...
    def send(self, value: object, /) -> Any: ...
    def throw(
        self, exc: BaseException | type[BaseException], value: object = ..., tb: object = ..., /
    ) -> Any: ...
    def close(self) -> None: ...

def pread_ready(fd: int, n: int, offset: int, memory: bool = False) -> Ready[bytes] | None:
    """``pread_nowait``'s bytes as a ``Ready``, or None where they are not all cached."""

def preadinto_ready(
    fd: int, buffer: Buffer, offset: int, memory: bool = False
) -> Ready[int] | None:
    """``preadinto_nowait``'s count as a ``Ready``, or None where the bytes are not
    all cached."""

@final
class ReadGate:
    """Whether a file (or engine) lets ``InlineRead`` serve reads natively now, and
    the fd and memory-filesystem flag such a read uses. It passes when it and every
    gate above it (``parent``) are open."""

    open: bool
    def __init__(
        self, fd: int = -1, memory: bool = False, parent: ReadGate | None = None, *,
        open: bool = False,
    ) -> None: ...
    @property
    def fd(self) -> int: ...
    @property
    def memory(self) -> bool: ...
    @property
    def parent(self) -> ReadGate | None: ...
    @property
    def passes(self) -> bool: ...

@final
class InlineRead:
    """A file method (a class attribute, bound as a function is) whose cached reads
    are one native call: ``(file, target, offset)`` is read inline through
    ``file._gate`` when it passes, handed to ``queued`` when the page cache lacks
    the data, and to ``full`` (the Python method) otherwise. ``kind``: ``"pread"``
    (target is a size) or ``"preadinto"`` (a writable buffer)."""

    __wrapped__: Callable[..., Any]
    def __init__(
        self, full: Callable[..., Any], queued: Callable[..., Any], kind: str, /
    ) -> None: ...
    def __get__(self, obj: object, owner: type | None = None) -> Callable[..., Any]: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

def open_path_cached(
    path: str | bytes | os.PathLike[str] | os.PathLike[bytes],
    *,
    dir_fd: int | None = None,
    follow_symlinks: bool = True,
) -> int | None:
    """An O_PATH fd of `path` when its lookup needs no I/O (openat2 RESOLVE_CACHED),
    else None (errors included); the caller closes it."""

def writable_address(buffer: Buffer) -> tuple[int, int]:
    """The address and byte length of a writable, C-contiguous buffer (TypeError for
    others): for O_DIRECT alignment checks."""

def copy_into(target: Buffer, source: Buffer, start: int) -> int:
    """Copies ``source[start:start + len(target)]`` (less where ``source`` ends first)
    into the start of the writable buffer ``target``; returns the byte count."""

def copy_whole_into(target: Buffer, source: Buffer, start: int) -> int:
    """As ``copy_into`` where ``source`` holds all of ``len(target)`` bytes from
    ``start``; else -1, with nothing copied (an empty ``target`` too)."""

def _enter_count() -> int:
    """io_uring_enter calls the process made through ringio's wait path (tests)."""

def _aio_spare_count() -> int:
    """Kernel AIO contexts the process keeps for its next engines (tests)."""
