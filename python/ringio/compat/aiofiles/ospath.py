"""``aiofiles.ospath`` (``aiofiles.os.path``) over ringio: :mod:`ringio.os.path`,
which has the same functions, arguments (``loop``, ``executor``) and results."""

from __future__ import annotations

from ringio.os.path import (
    abspath,
    exists,
    getatime,
    getctime,
    getmtime,
    getsize,
    isdir,
    isfile,
    islink,
    ismount,
    samefile,
    sameopenfile,
)

__all__ = [
    "abspath",
    "exists",
    "getatime",
    "getctime",
    "getmtime",
    "getsize",
    "isdir",
    "isfile",
    "islink",
    "ismount",
    "samefile",
    "sameopenfile",
]
