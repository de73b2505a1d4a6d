"""ringio's engines behind one tiny adapter, so new engines plug in by name.

Every engine module exposes an ``AsyncContext(maxevents)`` with the same awaitable
methods as ``ringio.aio.AsyncContext`` (read, readinto, write, readv, writev,
fsync). When ``ringio.uring`` or ``ringio.thread`` land, they appear here without
any change to the workloads.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

# Engine name -> the module that implements it. Order is the display order.
ENGINE_MODULES: dict[str, str] = {
    "uring": "ringio.uring",
    "aio": "ringio.aio",
    "thread": "ringio.thread",
}


def unavailable_reason(name: str) -> str | None:
    """None when engine `name` can run here, else a short reason for the notice."""
    module = ENGINE_MODULES.get(name)
    if module is None:
        return f"unknown engine (known: {', '.join(ENGINE_MODULES)})"
    try:
        if importlib.util.find_spec(module) is None:
            return "not available in this ringio build yet"
    except ImportError as exc:
        return f"cannot import ringio: {exc}"
    return None


def contender_name(engine: str) -> str:
    """How an engine appears in tables: ``ringio[aio]``."""
    return f"ringio[{engine}]"


def async_context(engine: str, maxevents: int) -> Any:
    """An async context manager for `engine` (e.g. ``aio.AsyncContext(maxevents)``).

    Must be called with a running event loop.
    """
    module = importlib.import_module(ENGINE_MODULES[engine])
    return module.AsyncContext(maxevents)


def sync_context(engine: str, maxevents: int) -> Any:
    """The engine's synchronous context (``aio.Context``), or raise if it has none."""
    module = importlib.import_module(ENGINE_MODULES[engine])
    if not hasattr(module, "Context"):
        raise NotImplementedError(f"engine {engine!r} has no synchronous Context")
    return module.Context(maxevents)


def select_engines(requested: list[str], notice: Any) -> list[str]:
    """The requested engines that can run, with a one-line notice for each other."""
    chosen = []
    for name in requested:
        reason = unavailable_reason(name)
        if reason:
            notice(f"engine {name}: skipped ({reason})")
        else:
            chosen.append(name)
    return chosen
