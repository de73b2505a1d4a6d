"""A drop-in for ``aiofiles`` 25.1 on ringio: the same modules, functions, classes
and signatures, with the I/O done by ringio's engine (io_uring, kernel AIO)
instead of a thread pool.

Alias it before the program imports ``aiofiles``::

    import ringio.compat.aiofiles
    ringio.compat.aiofiles.install()      # sys.modules["aiofiles"] and submodules
    import aiofiles                       # now ringio's

``install()`` returns what it replaced; ``uninstall(saved)`` puts it back.
docs/compat-aiofiles.md lists the (few) differences.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from . import tempfile
from .threadpool import (
    open,
    stderr,
    stderr_bytes,
    stdin,
    stdin_bytes,
    stdout,
    stdout_bytes,
)

__all__ = [
    "open",
    "stderr",
    "stderr_bytes",
    "stdin",
    "stdin_bytes",
    "stdout",
    "stdout_bytes",
    "tempfile",
]

#: aiofiles' module names and the modules here that stand in for them.
MODULES = {
    "aiofiles": __name__,
    "aiofiles.base": f"{__name__}.base",
    "aiofiles.os": f"{__name__}.os",
    "aiofiles.ospath": f"{__name__}.ospath",
    "aiofiles.tempfile": f"{__name__}.tempfile",
    "aiofiles.tempfile.temptypes": f"{__name__}.tempfile.temptypes",
    "aiofiles.threadpool": f"{__name__}.threadpool",
    "aiofiles.threadpool.binary": f"{__name__}.threadpool.binary",
    "aiofiles.threadpool.text": f"{__name__}.threadpool.text",
    "aiofiles.threadpool.utils": f"{__name__}.threadpool.utils",
}


def install() -> dict[str, ModuleType | None]:
    """Makes ``import aiofiles`` (and its submodules) import this package; returns
    the modules it replaced (None where there was none), for ``uninstall``."""
    saved = {name: sys.modules.get(name) for name in MODULES}
    for name, ours in MODULES.items():
        sys.modules[name] = importlib.import_module(ours)
    return saved


def uninstall(saved: dict[str, ModuleType | None]) -> None:
    """Undoes ``install()``: puts back the modules it returned."""
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module
