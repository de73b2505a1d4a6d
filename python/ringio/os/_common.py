"""What ringio.os and ringio.os.path share: the engine of the running loop, the
fallback pool, and argument checks that make errors read as the os module's."""

from __future__ import annotations

import asyncio
import functools
import operator
import os
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from .. import _engines
from .._engines import FileEngine

T = TypeVar("T")

PathArg = str | bytes | os.PathLike[str] | os.PathLike[bytes]


def engine_for(loop: asyncio.AbstractEventLoop | None) -> FileEngine:
    """The running loop's engine. `loop` is accepted for aiofiles compatibility;
    an engine's operations complete on its own loop, so it must be the running one."""
    running = asyncio.get_running_loop()
    if loop is not None and loop is not running:
        raise ValueError("loop must be the running event loop (or None)")
    return _engines.get(running)


async def fallback(
    engine: FileEngine, executor: Executor | None, func: Callable[..., T], *args: Any,
    **kwargs: Any,
) -> T:
    """Runs a call with no kernel async form: on the engine's fallback pool, or on
    `executor` when the caller passed one (as aiofiles lets them)."""
    call = functools.partial(func, *args, **kwargs)
    if executor is None:
        return await engine.run_sync(call)
    return await engine.loop.run_in_executor(executor, call)


def fspath(func: str, value: Any, argname: str = "path", allow_fd: bool = False) -> Any:
    """`value` as the os module takes it (str, bytes, or an fd where `allow_fd`),
    refused with the os module's exceptions and messages. Checked here so that the
    kernel engines, which take paths in Rust, fail exactly as os does."""
    if allow_fd and not isinstance(value, str | bytes) and hasattr(value, "__index__"):
        return operator.index(value)
    try:
        path = os.fspath(value)
    except TypeError:
        kinds = "string, bytes, os.PathLike or integer" if allow_fd else (
            "string, bytes or os.PathLike"
        )
        raise TypeError(
            f"{func}: {argname} should be {kinds}, not {type(value).__name__}"
        ) from None
    if (b"\0" if isinstance(path, bytes) else "\0") in path:
        raise ValueError("embedded null byte")
    return path


def check_dir_fd(value: Any) -> int | None:
    """A dir_fd argument: None or an integer, as os requires."""
    if value is None:
        return None
    if not hasattr(value, "__index__"):
        raise TypeError(f"argument should be integer or None, not {type(value).__name__}")
    return operator.index(value)


async def kernel(call: Awaitable[T], filename: Any, filename2: Any = None) -> T:
    """Awaits an engine call, giving its OSError the filenames os would report
    (the io_uring engine leaves them unset for some errors, e.g. an empty path)."""
    try:
        return await call
    except OSError as e:
        if e.filename is None and filename is not None:
            e.filename = filename
            if filename2 is not None and e.filename2 is None:
                e.filename2 = filename2
        raise
