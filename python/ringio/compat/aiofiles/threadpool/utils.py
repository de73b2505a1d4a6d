"""``aiofiles.threadpool.utils`` over ringio: the class decorators that give the
wrappers their methods. Same names and lists as aiofiles; the methods forward to
the ringio object in ``self._file`` (awaiting it where ringio's method is a
coroutine) instead of running the sync method in a thread."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

C = TypeVar("C", bound=type)

__all__ = [
    "cond_delegate_to_executor",
    "delegate_to_executor",
    "proxy_method_directly",
    "proxy_property_directly",
]


def delegate_to_executor(*attrs: str) -> Callable[[C], C]:
    """Adds coroutine methods ``attrs`` (aiofiles: run in the executor)."""

    def cls_builder(cls: C) -> C:
        for attr_name in attrs:
            setattr(cls, attr_name, _make_delegate_method(attr_name))
        return cls

    return cls_builder


def proxy_method_directly(*attrs: str) -> Callable[[C], C]:
    """Adds plain methods ``attrs`` that call the file's at once."""

    def cls_builder(cls: C) -> C:
        for attr_name in attrs:
            setattr(cls, attr_name, _make_proxy_method(attr_name))
        return cls

    return cls_builder


def proxy_property_directly(*attrs: str) -> Callable[[C], C]:
    """Adds read-only properties ``attrs`` that read the file's."""

    def cls_builder(cls: C) -> C:
        for attr_name in attrs:
            setattr(cls, attr_name, _make_proxy_property(attr_name))
        return cls

    return cls_builder


def cond_delegate_to_executor(*attrs: str) -> Callable[[C], C]:
    """aiofiles: coroutine methods that use the executor only once a spooled file
    has rolled over. Here the same as ``delegate_to_executor``: ringio's spooled
    file decides itself whether there is I/O to await."""
    return delegate_to_executor(*attrs)


def _make_delegate_method(attr_name: str) -> Callable[..., Any]:
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        res = getattr(self._file, attr_name)(*args, **kwargs)
        if inspect.isawaitable(res):
            res = await res
        return res

    method.__name__ = method.__qualname__ = attr_name
    return method


def _make_proxy_method(attr_name: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._file, attr_name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = attr_name
    return method


def _make_proxy_property(attr_name: str) -> property:
    def proxy_property(self: Any) -> Any:
        return getattr(self._file, attr_name)

    return property(proxy_property)
