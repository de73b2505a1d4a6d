"""Temporary files and directories for asyncio on ringio's file engine: the surface
of ``aiofiles.tempfile`` (25.1) with the semantics of the standard ``tempfile``.

``TemporaryFile``, ``NamedTemporaryFile``, ``SpooledTemporaryFile`` and
``TemporaryDirectory`` take the stdlib's arguments (plus aiofiles' ``loop`` and
``executor``) and return an object that is both awaitable and an async context
manager::

    async with ringio.tempfile.NamedTemporaryFile("w+", suffix=".txt") as f:
        await f.write("hello")
        print(f.name)            # deleted when the block exits

    async with ringio.tempfile.TemporaryDirectory() as path:
        ...                      # removed, with its contents, on exit

Files are created as the stdlib creates them, but by the engine (io_uring OPENAT on
the uring engine): ``TemporaryFile`` opens the directory with ``O_TMPFILE`` (an
unnamed inode; on filesystems without it, a mkstemp-style name is created and
unlinked at once), ``NamedTemporaryFile`` tries random names with
``O_CREAT|O_EXCL|O_NOFOLLOW``; both with mode 0o600. Directories are made with
MKDIRAT, mode 0o700, and removed by walking them by fd (UNLINKAT relative to the
open directory, never following a symlink). Listing a directory has no kernel async
form, so that step runs on the engine's fallback pool.

The file objects are ringio's own (``AsyncBufferedFile``, ``AsyncFileIO``,
``AsyncTextFile``): ``tell`` and ``seek`` are coroutines, as everywhere in ringio.
``loop`` must be None or the running loop; ``executor`` is accepted and unused (no
thread pool is involved).
"""

from __future__ import annotations

import asyncio
import errno
import io
import os
import shutil
import sys
import tempfile as _std
import warnings
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterable
from concurrent.futures import Executor
from typing import Any, Generic, TypeVar

from . import _engines
from ._io import AsyncBufferedFile, AsyncFileIO, AsyncTextFile, _open, _parse_mode

__all__ = [
    "AsyncSpooledTemporaryFile",
    "AsyncTemporaryDirectory",
    "AsyncTemporaryFileWrapper",
    "NamedTemporaryFile",
    "SpooledTemporaryFile",
    "TemporaryDirectory",
    "TemporaryFile",
]

T = TypeVar("T")
AnyFile = AsyncFileIO | AsyncBufferedFile | AsyncTextFile
PathArg = str | bytes | os.PathLike[str] | os.PathLike[bytes]

# The stdlib's flags (tempfile._bin_openflags on POSIX): never follow a symlink
# planted at the chosen name, never reuse an existing file.
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
# Cleared when the kernel turns out to read O_TMPFILE as O_DIRECTORY (< 3.11), as
# the stdlib does; a filesystem without O_TMPFILE only costs a failed open per call.
_o_tmpfile_works = hasattr(os, "O_TMPFILE")
# mkdtemp returns an absolute path from Python 3.12 on (gh-51574).
_MKDTEMP_ABSPATH = sys.version_info >= (3, 12)


def _engine(loop: asyncio.AbstractEventLoop | None) -> _engines.FileEngine:
    running = asyncio.get_running_loop()
    if loop is not None and loop is not running:
        raise ValueError("loop must be the running event loop (or None)")
    return _engines.get(running)


class _Pending(Generic[T]):
    """What the constructors return: ``await`` it for the object, or use it with
    ``async with`` (the object's own ``__aexit__`` runs at the end). Awaiting it
    twice gives the same object."""

    __slots__ = ("_coro", "_obj")

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self._coro = coro
        self._obj: Any = None

    def __await__(self) -> Generator[Any, None, T]:
        if self._obj is None:
            self._obj = yield from self._coro.__await__()
        return self._obj  # type: ignore[no-any-return]

    async def __aenter__(self) -> Any:
        obj = await self
        return await obj.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self._obj.__aexit__(*exc)

    def __del__(self) -> None:
        # Never awaited: close the coroutine quietly rather than warn about it.
        if self._obj is None:
            self._coro.close()


async def _sanitize(
    eng: _engines.FileEngine, prefix: Any, suffix: Any, dir: Any
) -> tuple[Any, Any, Any, type]:
    """The stdlib's defaults and str/bytes rules for prefix, suffix and dir."""
    if dir is None and _std.tempdir is None:
        # The first gettempdir() probes candidate directories by writing files in
        # them: once per process, off the loop.
        await eng.run_sync(_std.gettempdir)
    return _std._sanitize_params(prefix, suffix, dir)  # type: ignore[attr-defined,no-any-return]


async def _creating(
    make: Coroutine[Any, Any, T], undo: Callable[[T], None]
) -> T:
    """Awaits `make`, which creates something on disk; if the caller is cancelled
    meanwhile, `make` still runs to the end and `undo` removes what it made, so a
    cancelled constructor leaves no file and no fd behind."""
    task = asyncio.ensure_future(make)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:

        def done(t: asyncio.Future[T]) -> None:
            if not t.cancelled() and t.exception() is None:
                undo(t.result())

        task.add_done_callback(done)
        raise


async def _mkstemp(
    eng: _engines.FileEngine, dir: Any, pre: Any, suf: Any, output_type: type
) -> tuple[int, Any]:
    """tempfile._mkstemp_inner through the engine: random names, O_CREAT|O_EXCL."""
    dir = os.path.abspath(dir)
    names = _std._get_candidate_names()  # type: ignore[attr-defined]
    for _ in range(_std.TMP_MAX):
        name = next(names)
        if output_type is bytes:
            name = os.fsencode(name)
        file = os.path.join(dir, pre + name + suf)
        sys.audit("tempfile.mkstemp", file)
        try:
            fd = await eng.open(file, _OPEN_FLAGS, 0o600)
        except FileExistsError:
            continue
        return fd, file
    raise FileExistsError(errno.EEXIST, "No usable temporary file name found")


def _close_and_unlink(made: tuple[int, Any]) -> None:
    fd, name = made
    try:
        os.close(fd)
    finally:
        if name is not None:
            _unlink_quietly(name)


def _unlink_quietly(name: Any) -> None:
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass


async def _wrap_fd(
    fd: int, mode: str, buffering: int, encoding: str | None, errors: str | None,
    newline: str | None,
) -> AnyFile:  # fmt: skip
    """The ringio file object over a new temporary file's fd (closed on failure)."""
    made = os.fstat(fd)
    try:
        return await _open(fd, mode, buffering, encoding, errors, newline, True, None, False)
    except BaseException:
        # _open closes the fd when it fails after taking it, but not when it refuses
        # an argument first (a bad buffering, an encoding in binary mode...): close
        # it then, as the stdlib's constructors do. Only if the number still is our
        # file: once closed, it may have been reused meanwhile.
        try:
            st = os.fstat(fd)
        except OSError:
            pass
        else:
            if (st.st_dev, st.st_ino) == (made.st_dev, made.st_ino):
                os.close(fd)
        raise


def _set_name(f: AnyFile, name: Any) -> None:
    # As the stdlib does on the raw FileIO: a text or buffered file's name is its
    # raw file's.
    buffered = f.buffer if isinstance(f, AsyncTextFile) else f
    raw = buffered.raw if isinstance(buffered, AsyncBufferedFile) else buffered
    raw.name = name


# -- TemporaryFile -------------------------------------------------------------------


async def _temporary_file(
    mode: str, buffering: int, encoding: str | None, newline: str | None, suffix: Any,
    prefix: Any, dir: Any, errors: str | None, loop: asyncio.AbstractEventLoop | None,
) -> AnyFile:  # fmt: skip
    global _o_tmpfile_works
    eng = _engine(loop)
    _parse_mode(mode)  # a bad mode fails before anything is created, as in the stdlib
    prefix, suffix, dir, output_type = await _sanitize(eng, prefix, suffix, dir)
    if _o_tmpfile_works:
        flags = (_OPEN_FLAGS | os.O_TMPFILE) & ~os.O_CREAT
        try:
            fd = await _creating(eng.open(dir, flags, 0o600), lambda fd: os.close(fd))
        except IsADirectoryError:
            # Before Linux 3.11, O_TMPFILE reads as O_DIRECTORY: never again.
            _o_tmpfile_works = False
        except OSError:
            pass  # this filesystem has no O_TMPFILE (EOPNOTSUPP): a named file
        else:
            return await _wrap_fd(fd, mode, buffering, encoding, errors, newline)

    async def make() -> tuple[int, Any]:
        fd, name = await _mkstemp(eng, dir, prefix, suffix, output_type)
        try:
            await eng.unlink(name)
        except BaseException:
            os.close(fd)
            raise
        return fd, None

    fd, _ = await _creating(make(), _close_and_unlink)
    return await _wrap_fd(fd, mode, buffering, encoding, errors, newline)


def TemporaryFile(
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
    *,
    errors: str | None = None,
) -> _Pending[AnyFile]:
    """An unnamed temporary file (``tempfile.TemporaryFile``): it has no directory
    entry and vanishes when closed. Its ``name`` is the fd, as in the stdlib."""
    return _Pending(
        _temporary_file(mode, buffering, encoding, newline, suffix, prefix, dir, errors, loop)
    )


# -- NamedTemporaryFile --------------------------------------------------------------


class AsyncTemporaryFileWrapper:
    """A named temporary file (``tempfile._TemporaryFileWrapper``): ``file`` is the
    ringio file object, ``name`` the path; every other attribute is the file's.

    ``close()`` closes the file and, if ``delete`` and ``delete_on_close``, removes
    it; leaving ``async with`` removes it if ``delete``. If the wrapper is collected
    without either, the file is removed then (as the stdlib's ``__del__`` does)."""

    def __init__(
        self, file: AnyFile, name: Any, delete: bool = True, delete_on_close: bool = True
    ) -> None:
        self.file = file
        self.name = name
        self.delete = delete
        self.delete_on_close = delete_on_close
        self._close_called = False
        self._cleanup_called = False
        self._finalizer = weakref.finalize(self, _unlink_quietly, name) if delete else None

    def __getattr__(self, attr: str) -> Any:
        # Only reached for what the wrapper lacks: the file's own surface.
        return getattr(self.__dict__["file"], attr)

    def __repr__(self) -> str:
        return f"<ringio AsyncTemporaryFileWrapper name={self.name!r} file={self.file!r}>"

    async def __aenter__(self) -> AsyncTemporaryFileWrapper:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._cleanup()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self.file.__aiter__()

    async def close(self) -> None:
        """Closes the file; removes it if ``delete`` and ``delete_on_close``."""
        if self._close_called:
            return
        self._close_called = True
        try:
            await self.file.close()
        finally:
            if self.delete and self.delete_on_close:
                await self._cleanup()

    async def aclose(self) -> None:
        """Same as ``close()``."""
        await self.close()

    async def _cleanup(self) -> None:
        if self._cleanup_called:
            return
        self._cleanup_called = True
        try:
            if not self._close_called:
                self._close_called = True
                await self.file.close()
        finally:
            if self._finalizer is not None:
                self._finalizer.detach()
                try:
                    await _engines.get().unlink(self.name)
                except FileNotFoundError:
                    pass  # removed by someone else: what we wanted (as 3.12+)


async def _named_temporary_file(
    mode: str, buffering: int, encoding: str | None, newline: str | None, suffix: Any,
    prefix: Any, dir: Any, delete: bool, delete_on_close: bool, errors: str | None,
    loop: asyncio.AbstractEventLoop | None,
) -> AsyncTemporaryFileWrapper:  # fmt: skip
    eng = _engine(loop)
    _parse_mode(mode)
    prefix, suffix, dir, output_type = await _sanitize(eng, prefix, suffix, dir)
    fd, name = await _creating(
        _mkstemp(eng, dir, prefix, suffix, output_type), _close_and_unlink
    )
    try:
        f = await _wrap_fd(fd, mode, buffering, encoding, errors, newline)
    except BaseException:
        _unlink_quietly(name)  # _open closed the fd
        raise
    _set_name(f, name)
    return AsyncTemporaryFileWrapper(f, name, bool(delete), bool(delete_on_close))


def NamedTemporaryFile(
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    delete: bool = True,
    delete_on_close: bool = True,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
    *,
    errors: str | None = None,
) -> _Pending[AsyncTemporaryFileWrapper]:
    """A temporary file with a name in ``dir`` (``tempfile.NamedTemporaryFile``,
    Python 3.12 semantics for ``delete_on_close``): ``delete=False`` keeps it."""
    return _Pending(
        _named_temporary_file(
            mode, buffering, encoding, newline, suffix, prefix, dir, delete,
            delete_on_close, errors, loop,
        )
    )


# -- SpooledTemporaryFile ------------------------------------------------------------


class AsyncSpooledTemporaryFile:
    """Data kept in memory until it grows past ``max_size`` (or ``fileno()`` or
    ``rollover()`` is called), then moved to a ``TemporaryFile`` made by the engine
    (``tempfile.SpooledTemporaryFile``). Every method that may do I/O is a coroutine;
    ``fileno()`` too, since it rolls the data over to a file."""

    def __init__(
        self, max_size: int, mode: str, buffering: int, encoding: str | None,
        newline: str | None, suffix: Any, prefix: Any, dir: Any, errors: str | None,
    ) -> None:  # fmt: skip
        self._file: Any
        if "b" in mode:
            self._file = io.BytesIO()
        else:
            encoding = io.text_encoding(encoding)
            self._file = io.TextIOWrapper(
                io.BytesIO(), encoding=encoding, errors=errors, newline=newline
            )
        self._max_size = max_size
        self._rolled = False
        self._TemporaryFileArgs: dict[str, Any] = {
            "mode": mode, "buffering": buffering, "suffix": suffix, "prefix": prefix,
            "encoding": encoding, "newline": newline, "dir": dir, "errors": errors,
        }  # fmt: skip

    def __repr__(self) -> str:
        return f"<ringio AsyncSpooledTemporaryFile rolled={self._rolled} file={self._file!r}>"

    async def __aenter__(self) -> AsyncSpooledTemporaryFile:
        if self._file.closed:
            raise ValueError("Cannot enter context with closed file")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _check(self) -> None:
        if self._rolled:
            return
        if self._max_size and self._file.tell() > self._max_size:
            await self.rollover()

    async def rollover(self) -> None:
        """Moves the data to a real temporary file (once; later calls do nothing)."""
        if self._rolled:
            return
        mem = self._file
        new = await TemporaryFile(**self._TemporaryFileArgs)
        try:
            pos = mem.tell()
            if isinstance(new, AsyncTextFile):
                await new.buffer.write(mem.detach().getvalue())
            else:
                await new.write(mem.getvalue())
            # A text position is a tell() cookie; ringio's are CPython's, so the
            # in-memory wrapper's cookie means the same in the file.
            await new.seek(pos, 0)
        except BaseException:
            await new.close()
            raise
        self._file = new
        del self._TemporaryFileArgs
        self._rolled = True

    # -- plain: no I/O ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return bool(self._file.closed)

    @property
    def encoding(self) -> str:
        return self._file.encoding  # type: ignore[no-any-return]

    @property
    def errors(self) -> str:
        return self._file.errors  # type: ignore[no-any-return]

    @property
    def mode(self) -> str:
        try:
            return self._file.mode  # type: ignore[no-any-return]
        except AttributeError:
            return self._TemporaryFileArgs["mode"]  # type: ignore[no-any-return]

    @property
    def name(self) -> Any:
        try:
            return self._file.name
        except AttributeError:
            return None

    @property
    def newlines(self) -> Any:
        return self._file.newlines

    def readable(self) -> bool:
        return bool(self._file.readable())

    def writable(self) -> bool:
        return bool(self._file.writable())

    def seekable(self) -> bool:
        return bool(self._file.seekable())

    def isatty(self) -> bool:
        return bool(self._file.isatty())

    # -- coroutines ------------------------------------------------------------------
    async def _call(self, name: str, *args: Any) -> Any:
        res = getattr(self._file, name)(*args)
        if self._rolled:
            res = await res
        return res

    async def fileno(self) -> int:
        """Rolls over to a file first, then returns its fd."""
        await self.rollover()
        return int(self._file.fileno())

    async def close(self) -> None:
        await self._call("close")

    async def aclose(self) -> None:
        """Same as ``close()``."""
        await self.close()

    async def flush(self) -> None:
        await self._call("flush")

    async def read(self, *args: Any) -> Any:
        return await self._call("read", *args)

    async def read1(self, *args: Any) -> Any:
        return await self._call("read1", *args)

    async def readinto(self, b: Any) -> Any:
        return await self._call("readinto", b)

    async def readline(self, *args: Any) -> Any:
        return await self._call("readline", *args)

    async def readlines(self, *args: Any) -> Any:
        return await self._call("readlines", *args)

    async def seek(self, *args: Any) -> int:
        return await self._call("seek", *args)  # type: ignore[no-any-return]

    async def tell(self) -> int:
        return await self._call("tell")  # type: ignore[no-any-return]

    async def truncate(self, size: int | None = None) -> int:
        if size is None:
            return await self._call("truncate")  # type: ignore[no-any-return]
        if size > self._max_size:  # as the stdlib: even with max_size 0
            await self.rollover()
        return await self._call("truncate", size)  # type: ignore[no-any-return]

    async def write(self, s: Any) -> int:
        rv = await self._call("write", s)
        await self._check()
        return rv  # type: ignore[no-any-return]

    async def writelines(self, lines: Iterable[Any]) -> None:
        await self._call("writelines", lines)
        await self._check()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[Any]:
        # Re-reads self._file per line: a rollover in the middle changes it.
        while line := await self.readline():
            yield line


async def _spooled(
    max_size: int, mode: str, buffering: int, encoding: str | None, newline: str | None,
    suffix: Any, prefix: Any, dir: Any, errors: str | None,
    loop: asyncio.AbstractEventLoop | None,
) -> AsyncSpooledTemporaryFile:  # fmt: skip
    _engine(loop)  # the same loop check as the other constructors
    return AsyncSpooledTemporaryFile(
        max_size, mode, buffering, encoding, newline, suffix, prefix, dir, errors
    )


def SpooledTemporaryFile(
    max_size: int = 0,
    mode: str = "w+b",
    buffering: int = -1,
    encoding: str | None = None,
    newline: str | None = None,
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
    *,
    errors: str | None = None,
) -> _Pending[AsyncSpooledTemporaryFile]:
    """``tempfile.SpooledTemporaryFile``: in memory until larger than ``max_size``
    (0: no limit), then a ``TemporaryFile``."""
    return _Pending(
        _spooled(
            max_size, mode, buffering, encoding, newline, suffix, prefix, dir, errors, loop
        )
    )


# -- TemporaryDirectory --------------------------------------------------------------


def _entries(fd: int) -> list[tuple[str, bool]]:
    # Runs on the fallback pool: no kernel async getdents.
    with os.scandir(fd) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


async def _rmtree_at(
    eng: _engines.FileEngine, dir_fd: int | None, name: Any, ignore_errors: bool
) -> None:
    """Removes directory `name` (relative to `dir_fd`) and everything in it, by fd
    like shutil.rmtree: nothing is reached through a symlink. Missing entries are
    fine; a PermissionError gets the directory chmod 0o700 and one more try, as
    TemporaryDirectory's cleanup does."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        try:
            fd = await eng.open(name, flags, dir_fd=dir_fd)
        except PermissionError:
            os.chmod(name, 0o700, dir_fd=dir_fd)
            fd = await eng.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    except OSError as e:
        if e.errno not in (errno.ENOTDIR, errno.ELOOP):
            if ignore_errors:
                return
            raise
        # Replaced by a file or a symlink since it was listed: remove the entry.
        await _remove(eng, eng.unlink, dir_fd, name, ignore_errors)
        return
    try:
        for entry, is_dir in await eng.run_sync(_entries, fd):
            if is_dir:
                await _rmtree_at(eng, fd, entry, ignore_errors)
            else:
                await _remove(eng, eng.unlink, fd, entry, ignore_errors)
    finally:
        await eng.close(fd)
    await _remove(eng, eng.rmdir, dir_fd, name, ignore_errors)


async def _remove(
    eng: _engines.FileEngine, op: Callable[..., Awaitable[None]], dir_fd: int | None,
    name: Any, ignore_errors: bool,
) -> None:  # fmt: skip
    try:
        try:
            await op(name, dir_fd=dir_fd)
        except PermissionError:
            # The parent is not writable (the caller made it so): as the stdlib.
            if dir_fd is None:
                os.chmod(os.path.dirname(name) or ".", 0o700)
            else:
                os.fchmod(dir_fd, 0o700)
            await op(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError:
        if not ignore_errors:
            raise


def _finalize_dir(name: Any, warn_message: str, ignore_errors: bool) -> None:
    # Collected without cleanup(): nothing to await with, so shutil as the stdlib.
    shutil.rmtree(name, ignore_errors=True) if ignore_errors else _quiet_rmtree(name)
    warnings.warn(warn_message, ResourceWarning, stacklevel=2)


def _quiet_rmtree(name: Any) -> None:
    try:
        shutil.rmtree(name)
    except FileNotFoundError:
        pass


class AsyncTemporaryDirectory:
    """A temporary directory (``tempfile.TemporaryDirectory``): ``name`` is its
    path; ``cleanup()`` (or ``close()``, or leaving ``async with``) removes it and
    everything in it, unless made with ``delete=False``."""

    def __init__(self, name: Any, ignore_cleanup_errors: bool, delete: bool) -> None:
        self.name = name
        self._ignore_cleanup_errors = ignore_cleanup_errors
        self._delete = delete
        self._finalizer = weakref.finalize(
            self, _finalize_dir, name, f"Implicitly cleaning up {self!r}",
            ignore_cleanup_errors,
        )  # fmt: skip
        if not delete:
            self._finalizer.detach()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    async def __aenter__(self) -> Any:
        return self.name

    async def __aexit__(self, *exc: object) -> None:
        if self._delete:
            await self.cleanup()

    async def cleanup(self) -> None:
        """Removes the directory and its contents (once; later calls do nothing
        unless the directory exists again)."""
        eng = _engines.get()
        if self._finalizer.detach() is not None or await _exists(eng, self.name):
            await _rmtree_at(eng, None, self.name, self._ignore_cleanup_errors)

    async def close(self) -> None:
        """Same as ``cleanup()`` (aiofiles' name for it)."""
        await self.cleanup()


async def _exists(eng: _engines.FileEngine, path: Any) -> bool:
    try:
        await eng.stat(path)
    except (OSError, ValueError):
        return False
    return True


async def _mkdtemp(
    suffix: Any, prefix: Any, dir: Any, loop: asyncio.AbstractEventLoop | None
) -> Any:
    eng = _engine(loop)
    prefix, suffix, dir, output_type = await _sanitize(eng, prefix, suffix, dir)

    async def make() -> Any:
        names = _std._get_candidate_names()  # type: ignore[attr-defined]
        for _ in range(_std.TMP_MAX):
            name = next(names)
            if output_type is bytes:
                name = os.fsencode(name)
            file = os.path.join(dir, prefix + name + suffix)
            sys.audit("tempfile.mkdtemp", file)
            try:
                await eng.mkdir(file, 0o700)
            except FileExistsError:
                continue
            return os.path.abspath(file) if _MKDTEMP_ABSPATH else file
        raise FileExistsError(errno.EEXIST, "No usable temporary directory name found")

    return await _creating(make(), _quiet_rmtree)


async def _temporary_directory(
    suffix: Any, prefix: Any, dir: Any, ignore_cleanup_errors: bool, delete: bool,
    loop: asyncio.AbstractEventLoop | None,
) -> AsyncTemporaryDirectory:  # fmt: skip
    name = await _mkdtemp(suffix, prefix, dir, loop)
    return AsyncTemporaryDirectory(name, bool(ignore_cleanup_errors), bool(delete))


def TemporaryDirectory(
    suffix: Any = None,
    prefix: Any = None,
    dir: Any = None,
    loop: asyncio.AbstractEventLoop | None = None,
    executor: Executor | None = None,
    *,
    ignore_cleanup_errors: bool = False,
    delete: bool = True,
) -> _Pending[AsyncTemporaryDirectory]:
    """A temporary directory made with mode 0o700. ``async with`` gives its path
    (as the stdlib's ``with`` does); ``await`` gives the ``AsyncTemporaryDirectory``."""
    return _Pending(
        _temporary_directory(suffix, prefix, dir, ignore_cleanup_errors, delete, loop)
    )
