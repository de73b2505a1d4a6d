"""The one seam between ``ringio.EventLoop`` and what rides its ring.

File engines and ``ringio.Watcher`` share a running ``ringio.EventLoop``'s
io_uring instead of making rings of their own. They sit below the loop in the
package's layers (``tests/test_layers.py``), so they never import ``ringio.loop``:
the loop registers itself here when ``ringio.loop`` is imported (``ringio``'s
``__init__`` always imports it), and they ask this module. With nothing
registered every loop is foreign: engines use a ring of their own and a
``Watcher`` refuses to share.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["LoopRing", "loop_ring", "owns", "register"]


class LoopRing(Protocol):
    """What layers below the loop see of ``ringio.loop.LoopRing``, the loop's ring.

    ``LoopRingProactor`` stages file ops on it; a loop-bound ``Watcher`` takes
    ``watcher_ring()``.
    """

    settled_waiters: dict[Any, Any]

    @property
    def ops_in_flight(self) -> int:
        """Ops in flight on the ring other than the selector's polls."""
        ...

    def add_file_proactor(self, proactor: Any) -> None:
        """Registers a file proactor: it gets its ring (``use_ring``), the
        completions the core did not settle (``complete``) and ``after_select``."""
        ...

    def cancel_op(self, op: Any) -> None:
        """Cancels a queued or in-flight op (its callback still runs)."""
        ...

    def watcher_ring(self) -> Any:
        """The native ring a loop-bound Watcher shares (the loop must run in this thread)."""
        ...


class _Hook(Protocol):
    def owns(self, loop: object) -> bool: ...
    def ring_of(self, loop: object) -> LoopRing | None: ...


_hook: _Hook | None = None


def register(hook: _Hook) -> None:
    """Called once by ``ringio.loop``: ``hook.owns(loop)`` says whether ``loop`` is
    a ringio loop, ``hook.ring_of(loop)`` gives its ring (None: it has none)."""
    global _hook
    _hook = hook


def owns(loop: object) -> bool:
    """Whether ``loop`` is a ``ringio.EventLoop`` (with or without a ring)."""
    return _hook is not None and _hook.owns(loop)


def loop_ring(loop: object) -> LoopRing | None:
    """The ring of ``loop`` if it is a ``ringio.EventLoop`` running on one, else None."""
    if _hook is None:
        return None
    return _hook.ring_of(loop)
