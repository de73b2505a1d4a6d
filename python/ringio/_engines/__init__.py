"""Which engine runs, per asyncio loop: io_uring, else kernel AIO, else threads.

The choice is made once per process at first use, by asking the kernel:
``RINGIO_ENGINE=uring|aio|thread`` forces one. ``ringio.engine()`` reports which
runs and why each better one was refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
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
            _core.Ring(2).close()
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
            _core._aio_probe()  # cached; a context closed here would cost ~30 ms
    except FileNotFoundError:
        pass  # no such sysctl (before Linux 6.6): io_uring_setup alone decides
    except OSError as e:
        return f"{'io_uring_setup' if name == 'uring' else 'io_setup'} failed: {e}"
    if name == "uring" and (refusal := uring_refusal()) is not None:
        return f"io_uring_setup failed: {refusal}"
    return None


_info: EngineInfo | None = None
_engines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FileEngine] = (
    weakref.WeakKeyDictionary()
)


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
    """The engine of `loop` (default: the running loop), made on first use."""
    if loop is None:
        loop = asyncio.get_running_loop()
    engine = _engines.get(loop)
    if engine is None or engine.closed:
        _sweep()
        engine = ENGINES[engine_info().name](loop)
        _engines[loop] = engine
    return engine


def _sweep() -> None:
    """Closes the engines of loops that have been closed."""
    for loop, engine in list(_engines.items()):
        if loop.is_closed():
            engine.close_engine()
            del _engines[loop]


def reset() -> None:
    """Forgets the engine choice (re-reads RINGIO_ENGINE) and closes every engine."""
    global _info
    for engine in list(_engines.values()):
        engine.close_engine()
    _engines.clear()
    _info = None
