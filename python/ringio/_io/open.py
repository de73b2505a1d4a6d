"""``ringio.open()``: mode parsing and argument checks as the builtin ``open()``
does them, and the assembly of the raw, buffered and text layers.
"""

from __future__ import annotations

import codecs
import errno
import locale
import os
import stat
import sys
import warnings
from collections.abc import Generator
from typing import Any

from .. import _engines
from .._core import (
    dio_alignment,
    on_memory_filesystem,
)
from .base import DIO_FALLBACK, default_buffer_size
from .buffered import AsyncBufferedFile
from .raw import AsyncFileIO
from .text import AsyncTextFile

AnyFile = AsyncFileIO | AsyncBufferedFile | AsyncTextFile


class _Opening:
    """What ``ringio.open()`` returns: await it, or use it with ``async with``."""

    __slots__ = ("_args", "_file")

    def __init__(self, args: tuple[Any, ...]) -> None:
        self._args = args
        self._file: Any = None

    def __await__(self) -> Generator[Any, None, Any]:
        return _open(*self._args).__await__()

    async def __aenter__(self) -> Any:
        self._file = await _open(*self._args)
        return self._file

    async def __aexit__(self, *exc: object) -> None:
        await self._file.close()

    def __getattr__(self, name: str) -> Any:
        # Only reached for what the opener lacks: a file method used on the opener.
        raise NotAwaitedError(
            f"'{type(self).__name__}' object has no attribute {name!r}: ringio.open() "
            "returns an awaitable, not the file; use `f = await ringio.open(...)` or "
            "`async with ringio.open(...) as f`",
            name=name, obj=self,
        )  # fmt: skip


class NotAwaitedError(AttributeError):
    """A file attribute asked of what ``ringio.open()`` returns before it was awaited."""


def open(
    file: str | bytes | os.PathLike[Any] | int,
    mode: str = "r",
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: Any = None,
    *,
    direct: bool = False,
) -> Any:
    """Opens a file like the builtin ``open()``, for asyncio.

    ``f = await ringio.open(...)`` or ``async with ringio.open(...) as f``. The
    result is an ``AsyncTextFile``, ``AsyncBufferedFile`` or (``buffering=0``)
    ``AsyncFileIO``; every method that may do I/O is a coroutine. ``direct=True``
    opens with O_DIRECT (binary only); unaligned buffers, offsets and sizes go
    through aligned bounce buffers.
    """
    return _Opening((file, mode, buffering, encoding, errors, newline, closefd, opener, direct))


def _parse_mode(mode: str) -> tuple[str, str, bool]:
    """(raw mode like FileIO's, kind 'r'/'w'/'a'/'x', binary) or ValueError/TypeError."""
    if not isinstance(mode, str):
        raise TypeError(f"open() argument 'mode' must be str, not {type(mode).__name__}")
    modes = set(mode)
    if modes - set("axrwb+t") or len(mode) > len(modes):
        raise ValueError(f"invalid mode: {mode!r}")
    kinds = [k for k in "xrwa" if k in modes]
    if "t" in modes and "b" in modes:
        raise ValueError("can't have text and binary mode at once")
    if len(kinds) != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    kind = kinds[0]
    # FileIO's own mode string: "w+" files report "rb+" (readable and writable,
    # no longer truncating), as the builtin's do.
    raw = ("r" if kind == "w" and "+" in modes else kind) + "b" + ("+" if "+" in modes else "")
    return raw, kind, "b" in modes


def _check_text_args(
    encoding: str | None, errors: str | None, newline: str | None, buffering: int,
    direct: bool,
) -> str:
    """Validates the text layer's arguments as io.open does; returns the encoding."""
    if newline not in (None, "", "\n", "\r", "\r\n"):
        raise ValueError(f"illegal newline value: {newline}")
    if buffering == 0:
        raise ValueError("can't have unbuffered text I/O")
    if direct:
        raise ValueError("direct=True needs binary mode")
    if encoding is None:
        encoding = "locale"
        if sys.flags.warn_default_encoding:
            warnings.warn("'encoding' argument not specified", EncodingWarning, 3)
    if encoding == "locale":
        encoding = locale.getpreferredencoding(False)
    if not codecs.lookup(encoding)._is_text_encoding:
        raise LookupError(
            f"{encoding!r} is not a text encoding; use codecs.open() to handle arbitrary codecs"
        )
    if errors is not None:
        codecs.lookup_error(errors)
    return encoding


async def _open(
    file: Any, mode: str, buffering: int, encoding: str | None, errors: str | None,
    newline: str | None, closefd: bool, opener: Any, direct: bool,
) -> AnyFile:  # fmt: skip
    if not isinstance(file, int):
        file = os.fspath(file)
    if not isinstance(file, (str, bytes, int)):
        raise TypeError(f"invalid file: {file!r}")
    if not isinstance(buffering, int):
        raise TypeError(f"'{type(buffering).__name__}' object cannot be interpreted as an integer")
    if encoding is not None and not isinstance(encoding, str):
        raise TypeError(f"open() argument 'encoding' must be str or None, not {type(encoding).__name__}")  # noqa: E501
    if errors is not None and not isinstance(errors, str):
        raise TypeError(f"open() argument 'errors' must be str or None, not {type(errors).__name__}")  # noqa: E501
    raw_mode, kind, binary = _parse_mode(mode)
    updating = "+" in mode
    if binary:
        if encoding is not None:
            raise ValueError("binary mode doesn't take an encoding argument")
        if errors is not None:
            raise ValueError("binary mode doesn't take an errors argument")
        if newline is not None:
            raise ValueError("binary mode doesn't take a newline argument")
        if buffering == 1:
            warnings.warn(
                "line buffering (buffering=1) isn't supported in binary mode, the default "
                "buffer size will be used", RuntimeWarning, 2,
            )  # fmt: skip
    else:
        if newline is not None and not isinstance(newline, str):
            raise TypeError(f"open() argument 'newline' must be str or None, not {type(newline).__name__}")  # noqa: E501
        try:
            encoding = _check_text_args(encoding, errors, newline, buffering, direct)
        except (ValueError, LookupError):
            # io.open has already made the FileIO when the text layer refuses these,
            # so an fd it was handed is closed (with closefd=True): do the same.
            if isinstance(file, int) and file >= 0 and closefd:
                try:
                    os.close(file)
                except OSError:
                    pass
            raise
    if isinstance(file, int) and file < 0:
        raise ValueError("negative file descriptor")
    if not isinstance(file, int) and not closefd:
        raise ValueError("Cannot use closefd=False with file name")

    readable = kind == "r" or updating
    writable = kind != "r" or updating
    flags = (os.O_RDWR if readable and writable else os.O_RDONLY if readable else os.O_WRONLY)
    if kind == "w":
        flags |= os.O_CREAT | os.O_TRUNC
    elif kind == "a":
        flags |= os.O_CREAT | os.O_APPEND
    elif kind == "x":
        flags |= os.O_CREAT | os.O_EXCL
    if direct:
        flags |= os.O_DIRECT

    eng = _engines.get()
    if isinstance(file, int):
        fd = file
        if direct:
            fl = os.get_blocking(fd)  # validates the fd
            del fl
    elif opener is not None:
        fd = opener(file, flags | os.O_CLOEXEC)
        if not isinstance(fd, int):
            raise TypeError("expected integer from opener")
        if fd < 0:
            raise ValueError(f"opener returned {fd}")
    else:
        try:
            fd = await eng.open(file, flags, 0o666)
        except OSError as e:
            if e.filename is None:
                e.filename = file
            raise
    try:
        try:
            st = await eng.fstat(fd)
        except OSError as e:
            if isinstance(file, int):
                raise OSError(e.errno, os.strerror(e.errno)) from None
            raise
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), file)
        # Seekable like FileIO decides it: whether lseek works on the fd.
        try:
            pos = os.lseek(fd, 0, os.SEEK_CUR)
            seekable = True
        except OSError:
            pos, seekable = 0, False
        if kind == "a" and seekable:
            pos = st.st_size
        is_tty = os.isatty(fd)
        line_buffering = False
        if buffering == 1 or (buffering < 0 and is_tty):
            buffering = -1
            line_buffering = True
        if buffering < 0:
            buffering = default_buffer_size(st.st_blksize)
        if direct and buffering:
            align = max((dio_alignment(fd) or (DIO_FALLBACK, DIO_FALLBACK))[1], 1)
            buffering = -(-buffering // align) * align
        raw = AsyncFileIO(
            fd, file, raw_mode, readable=readable, writable=writable, append=kind == "a",
            closefd=closefd, seekable=seekable, pos=pos, direct=direct, isatty=is_tty,
            engine=eng,
            memory=stat.S_ISREG(st.st_mode) and not direct and on_memory_filesystem(fd),
        )  # fmt: skip
        if not buffering:
            return raw
        buffered = AsyncBufferedFile(raw, buffering)
        if binary:
            return buffered
        assert encoding is not None
        return AsyncTextFile(buffered, encoding, errors, newline, line_buffering, mode)
    except BaseException:
        if closefd or not isinstance(file, int):
            try:
                os.close(fd)
            except OSError:
                pass
        raise
