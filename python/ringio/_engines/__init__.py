"""Which engine runs, per asyncio loop: io_uring, else kernel AIO, else threads.

The choice is made once per process at first use, by asking the kernel:
``RINGIO_ENGINE=uring|aio|thread`` forces one. ``ringio.engine()`` reports which
runs and why each better one was refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import weakref

from .. import _core
from .base import FileEngine, NowaitHint, Outcome
from .kernel import AioFileEngine, UringFileEngine
from .thread import ThreadEngine

__all__ = [
    "ENGINES", "EngineInfo", "FileEngine", "NowaitHint", "Outcome", "engine_info", "get", "reset",
]

ENGINES: dict[str, type[FileEngine]] = {
    "uring": UringFileEngine,
    "aio": AioFileEngine,
    "thread": ThreadEngine,
}
PREFERENCE = ("uring", "aio", "thread")


@dataclasses.dataclass(frozen=True)
class EngineInfo:
    """The engine ringio uses in this process, and why."""

    name: str
    reason: str
    refused: dict[str, str]


_URING_REFUSAL: list[OSError | None] = []  # the process's one probe, once made


def uring_refusal() -> OSError | None:
    """The OSError with which io_uring_setup refuses this process (a seccomp profile
    such as Docker's default, ``kernel.io_uring_disabled``), or None. Probed once
    per process; the file engines' choice and ``ringio.new_event_loop`` share it."""
    if not _URING_REFUSAL:
        try:
            _core.uring.Ring(2).close()
        except OSError as e:
            _URING_REFUSAL.append(e)
        else:
            _URING_REFUSAL.append(None)
    return _URING_REFUSAL[0]


def _usable(name: str) -> str | None:
    """None if the kernel lets us use engine `name`, else the reason it refused."""
    try:
        if name == "uring":
            with open("/proc/sys/kernel/io_uring_disabled") as f:
                disabled = f.read().strip()
            if disabled == "2":
                return "kernel.io_uring_disabled = 2"
        elif name == "aio":
            _core.aio.probe()  # cached; a context closed here would cost ~30 ms
    except FileNotFoundError:
        pass  # no such sysctl (before Linux 6.6): io_uring_setup alone decides
    except OSError as e:
        return f"{'io_uring_setup' if name == 'uring' else 'io_setup'} failed: {e}"
    if name == "uring" and (refusal := uring_refusal()) is not None:
        return f"io_uring_setup failed: {refusal}"
    return None


_info: EngineInfo | None = None

# A loop's engine is kept on the loop itself (the attribute below) where the loop
# has a __dict__: the pair is then garbage like any reference cycle once the loop
# is unreachable, so ringio keeps no loop alive. Loops without one (uvloop's) go
# in `_by_loop` instead, dropped by the sweep once the loop is closed.
_ATTR = "_ringio_file_engine"
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FileEngine] = (
    weakref.WeakKeyDictionary()
)
# Every live engine (weakly), for the sweep and reset(). Threads make engines
# concurrently: the registry's lock guards these two containers.
_live: weakref.WeakSet[FileEngine] = weakref.WeakSet()
_lock = threading.Lock()


class _ThreadEngines:
    """The engines made in one thread, held in that thread's threading.local: when
    the thread ends, CPython clears its locals in that same thread, so the engines
    of loops it closed are closed by their own thread (an io_uring ring made with
    SINGLE_ISSUER can only be shut down cleanly there)."""

    def __init__(self) -> None:
        self.engines: weakref.WeakSet[FileEngine] = weakref.WeakSet()

    def __del__(self) -> None:
        try:
            for engine in list(self.engines):
                _close_if_done(engine)
        except Exception:  # at interpreter exit, modules may be gone
            pass


_local = threading.local()


def _close_if_done(engine: FileEngine) -> None:
    """Closes `engine` (in its own thread) if its loop is closed."""
    if engine.closed or not engine.loop.is_closed():
        return
    try:
        engine.close_engine()
    except Exception:  # a failed release must not fail the caller
        pass  # what the kernel still holds is leaked, never freed under it
    _forget(engine)


def _forget(engine: FileEngine) -> None:
    loop = engine.loop
    if getattr(loop, _ATTR, None) is engine:
        try:
            delattr(loop, _ATTR)
        except AttributeError:
            pass
    with _lock:
        if _by_loop.get(loop) is engine:
            del _by_loop[loop]


def engine_info() -> EngineInfo:
    global _info
    if _info is None:
        forced = os.environ.get("RINGIO_ENGINE", "").strip().lower()
        if forced and forced not in ENGINES:
            raise ValueError(
                f"RINGIO_ENGINE={forced!r}: expected one of {', '.join(PREFERENCE)}"
            )
        refused: dict[str, str] = {}
        for name in PREFERENCE:
            if forced and name != forced:
                if PREFERENCE.index(name) < PREFERENCE.index(forced):
                    refused[name] = "not chosen: RINGIO_ENGINE=" + forced
                continue
            why = None if name == "thread" else _usable(name)
            if why is None:
                reason = (
                    "forced by RINGIO_ENGINE" if forced else "the best engine this kernel allows"
                )
                _info = EngineInfo(name, reason, refused)
                break
            if forced:
                raise RuntimeError(f"RINGIO_ENGINE={forced} is unavailable here: {why}")
            refused[name] = why
    assert _info is not None
    return _info


def get(loop: asyncio.AbstractEventLoop | None = None) -> FileEngine:
    """The engine of `loop` (default: the running loop), made on first use.

    A thread never closes another thread's engine. The uring engine's own ring
    (SINGLE_ISSUER) works only in the thread that made it: a loop run later in
    another thread gets another engine there (files opened before keep theirs).
    The engine of a closed loop is closed by its own thread (when it makes its
    next engine, or when it ends), or else released with its loop by the garbage
    collector."""
    if loop is None:
        loop = asyncio.get_running_loop()
    engine = getattr(loop, _ATTR, None)
    if engine is None:
        with _lock:
            engine = _by_loop.get(loop)
    if engine is None or engine.closed or (
        engine.thread_bound and engine.owner != threading.get_ident()
    ):
        engine = _make(loop)
    return engine


def _make(loop: asyncio.AbstractEventLoop) -> FileEngine:
    mine = getattr(_local, "engines", None)
    if mine is None:
        mine = _local.engines = _ThreadEngines()
    _sweep(mine)
    engine = ENGINES[engine_info().name](loop)
    mine.engines.add(engine)
    try:
        setattr(loop, _ATTR, engine)
    except AttributeError:  # no __dict__ (uvloop)
        with _lock:
            _by_loop[loop] = engine
    with _lock:
        _live.add(engine)
    return engine


def _sweep(mine: _ThreadEngines) -> None:
    """Closes this thread's engines of closed loops. Those of other threads are
    only dropped from `_by_loop` (the garbage collector releases them; the core
    then leaks, never frees, what the kernel might still use)."""
    for engine in list(mine.engines):
        _close_if_done(engine)
    with _lock:
        for loop in [loop for loop in _by_loop if loop.is_closed()]:
            del _by_loop[loop]


def reset() -> None:
    """Forgets the engine choice (re-reads RINGIO_ENGINE): closes this thread's
    engines and forgets every other one (released with its loop)."""
    global _info
    me = threading.get_ident()
    with _lock:
        engines = list(_live)
    for engine in engines:
        if engine.owner == me and not engine.closed:
            try:
                engine.close_engine()
            except Exception:
                pass
        _forget(engine)
    _info = None
