"""An asyncio event loop on io_uring (``docs/loop.md``).

::

    import ringio
    ringio.run(main())                      # or
    asyncio.run(main(), loop_factory=ringio.new_event_loop)   # Python 3.12+
    ringio.install()                        # the default policy (CPython < 3.16)
"""

from __future__ import annotations

from ._asyncio_compat import HAS_POLICIES
from ._loop import EventLoop, install, new_event_loop, run
from ._ring import LoopRing
from ._selector import RingSelector

__all__ = ["EventLoop", "LoopRing", "RingSelector", "install", "new_event_loop", "run"]

if HAS_POLICIES:  # CPython 3.11 to 3.15: see _asyncio_compat
    from ._loop import EventLoopPolicy as EventLoopPolicy

    __all__.append("EventLoopPolicy")
