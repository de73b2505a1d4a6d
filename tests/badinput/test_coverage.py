"""Every public callable of ringio has bad-input rows (tests/badinput/table.py), or
is exempted below with the reason.

Found by introspection: the names of each public module (its ``__all__``, plus
``EXTRA``: names aiofiles' modules have outside their ``__all__``), every public
method of the public classes among them (methods inherited from ringio
classes included), and each class itself (its constructor). Not counted, by rule:
names starting with ``_`` (private, and the dunder protocol methods, which the rows
drive through the public calls: ``async with``, ``await``, iteration); properties
and other data descriptors (they read state and take no argument); exception
classes (raised, not called).

An object reachable under several public names (``ringio.EventLoop`` is
``ringio.loop.EventLoop``; ``ringio.aio.Completion`` is ``ringio.uring.Completion``)
is covered by a row under any of them, within one surface: ringio's own modules,
and each emulation in ``ringio.compat`` apart (``ringio.compat.aiofiles.os.stat``
is ``ringio.os.stat``, but it promises aiofiles' behaviour, so it needs rows of its
own). Every row's API must name a public object too, so a renamed API cannot leave
rows that test nothing under a stale name.
"""

from __future__ import annotations

import importlib
import inspect
import types
from typing import Any

from .table import CASES

PUBLIC_MODULES = [
    "ringio",
    "ringio.aio",
    "ringio.uring",
    "ringio.os",
    "ringio.os.path",
    "ringio.tempfile",
    "ringio.loop",
    "ringio.watcher",
    "ringio.compat.caio",
    "ringio.compat.linux_aio",
    "ringio.compat.linux_aio_bind",
    "ringio.compat.aiofiles",
    "ringio.compat.aiofiles.base",
    "ringio.compat.aiofiles.os",
    "ringio.compat.aiofiles.ospath",
    "ringio.compat.aiofiles.tempfile",
    "ringio.compat.aiofiles.tempfile.temptypes",
    "ringio.compat.aiofiles.threadpool",
    "ringio.compat.aiofiles.threadpool.binary",
    "ringio.compat.aiofiles.threadpool.text",
    "ringio.compat.aiofiles.threadpool.utils",
]

#: Public names outside a module's ``__all__`` (as in aiofiles 25.1, whose
#: ``threadpool.wrap`` etc. programs use; ``install``/``uninstall`` are ringio's).
EXTRA: dict[str, tuple[str, ...]] = {
    "ringio.compat.aiofiles": ("install", "uninstall"),
    "ringio.compat.aiofiles.threadpool": ("wrap", "sync_open"),
    "ringio.compat.aiofiles.tempfile": ("wrap",),
}

_MADE_BY_OPEN = "not constructed directly: made by ringio.open (rows there and per method)"
_AIOFILES_WRAPPER = (
    "an aiofiles wrapper class: not constructed directly (made by "
    "ringio.compat.aiofiles.open/tempfile, rows there); its methods forward to the "
    "ringio object's (rows per method)"
)

#: Public names without rows of their own, and why.
EXEMPT: dict[str, str] = {
    # Classes whose instances are made by a public call that has the rows.
    "ringio.AsyncBufferedFile": _MADE_BY_OPEN,
    "ringio.AsyncFileIO": _MADE_BY_OPEN,
    "ringio.AsyncTextFile": _MADE_BY_OPEN,
    "ringio.AlignedBuffer": "the class behind ringio.aligned(), which has the rows",
    "ringio.EngineInfo": "a record returned by ringio.engine(): fields only",
    "ringio.Conn": "a handle the Watcher puts in OpResult.conn: no methods, not constructed",
    "ringio.OpResult": "a record returned by Watcher.wait_io: properties only",
    "ringio.RingBuffer": "made by the Watcher for read results (RingBuffer.tobytes has rows)",
    "ringio.aio.Op": "made by the op functions (ringio.aio.pread etc., rows there)",
    "ringio.aio.Completion": "made by Context.get_events/reap (Completion.result has rows)",
    "ringio.os.ScandirIterator": "made by ringio.os.scandir (rows there; close has rows)",
    "ringio.tempfile.AsyncSpooledTemporaryFile": "made by SpooledTemporaryFile (rows there)",
    "ringio.tempfile.AsyncTemporaryDirectory": "made by TemporaryDirectory (rows there)",
    "ringio.loop.EventLoop": (
        "constructed with no argument (ringio.new_event_loop(), which has rows); its "
        "methods have rows"
    ),
    "ringio.compat.linux_aio.AIOEvent": "made by AIOContext.get_events (rows there)",
    "ringio.compat.linux_aio.AIOBlock": "abstract base of the blocks (rows per block class)",
    "ringio.compat.linux_aio.RWBlock": "abstract base of the blocks (rows per block class)",
    "ringio.compat.linux_aio.NonRWBlock": "abstract base of the blocks (rows per block class)",
    "ringio.compat.linux_aio.VectorBlock": "abstract base of the blocks (rows per block class)",
    "ringio.compat.linux_aio.NonVectorBlock": "abstract base of the blocks (rows per block class)",
    "ringio.compat.linux_aio.VectorBlock.BUF_TYPE": "a type alias (typing), not an API",
    "ringio.compat.linux_aio.WriteVBlock": "the same constructor as ReadVBlock (rows there)",
    "ringio.compat.linux_aio.FDsyncBlock": "the same constructor as FsyncBlock (rows there)",
    "ringio.compat.linux_aio_bind.IOCBCMD": "an IntEnum: its from_param has rows",
    "ringio.compat.linux_aio_bind.IOCBFlag": "an IntFlag: its from_param has rows",
    "ringio.compat.linux_aio_bind.IOCBRWFlag": "an IntFlag: its from_param has rows",
    "ringio.compat.linux_aio_bind.IOCBPriorityClass": "an IntEnum: its from_param has rows",
    "ringio.loop.LoopRing.add_file_proactor": (
        "the loop's ring seam, called by ringio's own LoopRingProactor (rows: the file "
        "ops on ringio.EventLoop)"
    ),
    "ringio.compat.aiofiles.base.AiofilesContextManager": (
        "what aiofiles.open() and the tempfile constructors return (rows there: await, "
        "async with, never awaited)"
    ),
    "ringio.compat.aiofiles.base.AsyncBase": _AIOFILES_WRAPPER,
    "ringio.compat.aiofiles.base.AsyncIndirectBase": _AIOFILES_WRAPPER,
}
for _m, _names in {
    "ringio.compat.aiofiles.threadpool.binary": (
        "AsyncBufferedIOBase", "AsyncBufferedReader", "AsyncFileIO",
        "AsyncIndirectBufferedIOBase", "AsyncIndirectBufferedReader", "AsyncIndirectFileIO",
    ),
    "ringio.compat.aiofiles.threadpool.text": ("AsyncTextIOWrapper", "AsyncTextIndirectIOWrapper"),
    "ringio.compat.aiofiles.tempfile.temptypes": (
        "AsyncSpooledTemporaryFile", "AsyncTemporaryDirectory",
    ),
}.items():  # fmt: skip
    for _n in _names:
        EXEMPT[f"{_m}.{_n}"] = _AIOFILES_WRAPPER

#: Exempt by where a method is defined (methods a public class inherits from there).
INHERITED_FROM: dict[str, str] = {
    "asyncio": (
        "inherited unchanged from CPython's asyncio event loop: covered by CPython's own "
        "asyncio test suite, run on ringio's loop in tests/loop/test_cpython_asyncio.py"
    ),
    "selectors": "selectors.BaseSelector's helpers, inherited unchanged from CPython",
    "enum": "enum's own machinery, inherited unchanged from CPython",
    "builtins": "int's own methods (the enum's values), inherited unchanged from CPython",
    "typing": "typing's machinery",
    "collections.abc": "collections.abc mixin methods, inherited unchanged from CPython",
    "_collections_abc": "collections.abc mixin methods, inherited unchanged from CPython",
    "ringio.compat.aiofiles.threadpool.utils": (
        "an aiofiles wrapper method made by threadpool.utils (delegate_to_executor, "
        "proxy_method_directly): it forwards to the ringio object's method of the same "
        "name, which has rows; rows under threadpool.binary/text check that the "
        "forwarding keeps the exception"
    ),
}

#: Row APIs that label a variant rather than name an object.
LABELS = ("ringio.open(direct=True).",)


def _surface(module: str) -> str:
    parts = module.split(".")
    if parts[:2] != ["ringio", "compat"] or len(parts) < 3:
        return "ringio"
    return "linux_aio" if parts[2].startswith("linux_aio") else parts[2]


def _static(owner: Any, name: str) -> tuple[Any, str]:
    """The attribute as stored (no binding) and the module that defines it."""
    cls = owner if isinstance(owner, type) else type(owner)
    if not isinstance(owner, type) and name in getattr(owner, "__dict__", {}):
        return owner.__dict__[name], cls.__module__
    for klass in cls.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            where = getattr(value, "__module__", None) or klass.__module__
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            return value, where
    raise AttributeError(name)


def _key(surface: str, obj: Any) -> tuple[str, int]:
    return surface, id(obj)


def _is_data(value: Any) -> bool:
    return (
        isinstance(value, property)
        or inspect.isdatadescriptor(value)
        or inspect.isgetsetdescriptor(value)
        or inspect.ismemberdescriptor(value)
        or not callable(value)
    )


def public_callables() -> dict[str, tuple[tuple[str, int], str | None]]:
    """public name -> (coverage key, reason it is exempt by rule or None)."""
    out: dict[str, tuple[tuple[str, int], str | None]] = {}
    for modname in PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        surface = _surface(modname)
        names = set(getattr(mod, "__all__", ())) | set(EXTRA.get(modname, ()))
        for n in sorted(names):
            obj = getattr(mod, n)
            full = f"{modname}.{n}"
            if isinstance(obj, types.ModuleType) or _is_data(obj):
                continue
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            out[full] = (_key(surface, obj), None)
            if not inspect.isclass(obj):
                continue
            for attr in dir(obj):
                if attr.startswith("_"):
                    continue
                value, where = _static(obj, attr)
                if _is_data(value) and not inspect.isclass(value):
                    continue
                if isinstance(value, type) and issubclass(value, BaseException):
                    continue
                rule = next(
                    (why for base, why in INHERITED_FROM.items()
                     if where == base or where.startswith(base + ".")),
                    None,
                )  # fmt: skip
                if rule is None and not where.startswith("ringio"):
                    rule = f"inherited from {where} unchanged"
                out[f"{full}.{attr}"] = (_key(surface, value), rule)
    return out


def _resolve(api: str) -> tuple[str, int] | None:
    parts = api.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        modname = obj.__name__
        rest = parts[i:]
        break
    else:
        return None
    for j, name in enumerate(rest):
        try:
            if isinstance(obj, types.ModuleType) or j < len(rest) - 1:
                obj = getattr(obj, name)
            else:
                obj, _ = _static(obj, name)
        except AttributeError:
            return None
    return _key(_surface(modname), obj)


def test_every_row_names_a_public_api():
    bad = sorted({c.api for c in CASES if not c.api.startswith(LABELS) and _resolve(c.api) is None})
    assert not bad, f"rows under APIs that name no public object: {bad}"


def test_every_public_callable_has_rows_or_a_reason():
    covered = {k for c in CASES if (k := _resolve(c.api)) is not None}
    found = public_callables()
    exempt = {found[n][0] for n in EXEMPT if n in found}  # under any of its names
    missing = []
    for name, (key, rule) in found.items():
        if key in covered or rule is not None or key in exempt:
            continue
        missing.append(name)
    assert not missing, (
        f"{len(missing)} public callables have no bad-input rows (add rows to "
        f"tests/badinput/table.py, or an exemption with the reason to "
        f"tests/badinput/test_coverage.py): " + ", ".join(missing)
    )


def test_exemptions_are_current():
    """An exemption for a name that is gone, or that has rows now, is stale."""
    found = public_callables()
    covered = {k for c in CASES if (k := _resolve(c.api)) is not None}
    stale = [n for n in EXEMPT if n not in found]
    stale += [n for n in EXEMPT if n in found and found[n][0] in covered]
    assert not stale, f"stale exemptions: {stale}"
