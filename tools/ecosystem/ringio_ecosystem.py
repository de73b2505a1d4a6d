"""pytest plugin: run a third-party test suite on ringio's event loop.

Loaded with ``-p ringio_ecosystem`` (``tools/ecosystem/run.py`` puts this directory
on ``PYTHONPATH``). At import it makes ringio the default loop: ``ringio.install()``
(so ``asyncio.run``, ``asyncio.Runner`` without a loop factory, anyio's pytest
plugin and ``asyncio.new_event_loop()`` make ``ringio.EventLoop``s), and
``asyncio.DefaultEventLoopPolicy`` is ringio's policy, so a test that resets the
policy with ``set_event_loop_policy(None)`` still gets ringio. Loops built
explicitly (``asyncio.SelectorEventLoop()``, uvloop) are not redirected.

Each test is recorded as having made a ringio loop, a stock asyncio loop
(``BaseEventLoop`` that is not ringio's), both or neither; the summary at the end
gives the counts, and ``RINGIO_ECOSYSTEM_JSON`` names a file to write them (and
the ids of the tests that made a stock loop) to.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

import ringio

# RINGIO_ECOSYSTEM_LOOP=asyncio leaves asyncio's own loop in place (the same
# run as a reference: which failures are the environment's, not ringio's).
if os.environ.get("RINGIO_ECOSYSTEM_LOOP", "ringio") == "ringio":
    asyncio.DefaultEventLoopPolicy = ringio.EventLoopPolicy  # type: ignore[misc]
    ringio.install()

_made: dict[str, int] = {"ringio": 0, "stock": 0}
_per_test: dict[str, int] = {"ringio": 0, "stock": 0, "both": 0, "none": 0}
_stock_tests: list[str] = []  # the tests that made a stock asyncio loop

_base_init = asyncio.BaseEventLoop.__init__


def _counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
    _made["ringio" if isinstance(self, ringio.EventLoop) else "stock"] += 1
    _base_init(self, *args, **kwargs)


asyncio.BaseEventLoop.__init__ = _counting_init  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    # Markers of plugins the suites' own configs expect but these runs do not
    # load (pytest-codspeed's benchmark).
    config.addinivalue_line("markers", "benchmark: pytest-codspeed benchmark (not run here)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    before = dict(_made)
    try:
        return (yield)
    finally:
        r = _made["ringio"] > before["ringio"]
        s = _made["stock"] > before["stock"]
        _per_test["both" if r and s else "ringio" if r else "stock" if s else "none"] += 1
        if s:
            _stock_tests.append(item.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(
        "ringio ecosystem: tests that made a ringio loop: {ringio}, a stock asyncio loop: "
        "{stock}, both: {both}, none: {none}".format(**_per_test)
    )
    out = os.environ.get("RINGIO_ECOSYSTEM_JSON")
    if out:
        with open(out, "w") as f:
            json.dump({**_per_test, "stock_tests": _stock_tests}, f, indent=1)
