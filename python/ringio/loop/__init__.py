"""An asyncio event loop on io_uring (``docs/loop.md``).

::

    import ringio
    ringio.run(main())                      # or
    asyncio.run(main(), loop_factory=ringio.new_event_loop)   # Python 3.12+
    ringio.install()                        # make it the default policy
"""

from __future__ import annotations

from ._loop import EventLoop, EventLoopPolicy, install, new_event_loop, run
from ._selector import RingSelector

__all__ = ["EventLoop", "EventLoopPolicy", "RingSelector", "install", "new_event_loop", "run"]
