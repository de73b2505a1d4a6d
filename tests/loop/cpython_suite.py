"""Runs CPython's own ``test.test_asyncio`` on ringio's event loop.

``python tests/loop/cpython_suite.py [--json OUT] [--modules m1,m2] [-v]``

How the suite is pointed at ringio: before the test modules are imported,
``asyncio.SelectorEventLoop``, ``asyncio.EventLoop`` (3.13+), the default policy
class and the loop factory of asyncio's own default policy class (which 3.14's
policy machinery instantiates by its private name) are replaced by ringio's
(a stock selector passed to ``SelectorEventLoop(...)`` is swapped for a
`RingSelector`), so every test that builds "the" loop — through the policy,
``asyncio.run``, ``new_event_loop()``, ``EventLoop()`` or ``SelectorEventLoop()`` —
gets ``ringio.EventLoop``. Every selector event loop built is counted, per test: a
test that built a stock asyncio loop (the patching missed a way in) is reported in
``tests_on_a_stock_loop``, and the pytest wrapper fails on it. Test classes that
exist only to repeat the suite on another selector (poll, select) or another loop
(proactor) are dropped; the epoll variants are the ones that run on ringio.

Exclusions are listed in ``EXCLUDED`` with their reason and reported as skips.
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.unix_events
import json
import selectors
import signal
import sys
import time
import unittest

import ringio
from ringio.loop import RingSelector
from ringio.loop import _asyncio_compat as compat
from ringio.loop._selector import select_count

# The modules that exercise an event loop. Not applicable, and not run:
# test_selector_events (BaseSelectorEventLoop against a mock selector),
# test_proactor_events / test_windows_events / test_windows_utils (Windows).
MODULES = (
    "test_base_events",
    "test_buffered_proto",
    "test_context",
    "test_events",
    "test_futures",
    "test_futures2",
    "test_locks",
    "test_pep492",
    "test_protocols",
    "test_queues",
    "test_runners",
    "test_sendfile",
    "test_server",
    "test_sock_lowlevel",
    "test_ssl",
    "test_sslproto",
    "test_streams",
    "test_subprocess",
    "test_taskgroups",
    "test_tasks",
    "test_threads",
    "test_timeouts",
    "test_transports",
    "test_unix_events",
    "test_waitfor",
)

# Classes that re-run a mixin on a loop or selector other than the one under test.
_OTHER_LOOP_CLASSES = ("PollEventLoopTests", "SelectEventLoopTests", "KqueueEventLoopTests")

# test id (module.Class.method, or a prefix ending in '.') -> why it is excluded.
EXCLUDED: dict[str, str] = {
    # 3.14 (and 3.13 after 3.13.0): reaches into asyncio's _SelectorSocketTransport
    # (`_read_ready_cb`, and a wrapper around its `_sock` whose send() takes half,
    # to force that class's delayed-write path, gh-115514). ringio's transport has
    # neither (its sends are native, on the ring): the check raises AttributeError
    # inside resume_writing(), the test's future is never resolved, and it hangs.
    "test_ssl.TestSSL.test_remote_shutdown_receives_trailing_data_on_slow_socket": (
        "tests asyncio's _SelectorSocketTransport internals (_read_ready_cb, _sock)"
    ),
}

_STOCK_SELECTORS = tuple(
    getattr(selectors, name)
    for name in ("EpollSelector", "PollSelector", "SelectSelector", "DevpollSelector")
    if hasattr(selectors, name)
)


class _SuiteLoop(ringio.EventLoop):
    """ringio's loop under the name tests call: a stock selector passed in (the
    suite's "epoll" variants) is replaced by a RingSelector."""

    created = 0

    def __init__(self, selector: selectors.BaseSelector | None = None) -> None:
        _SuiteLoop.created += 1
        if selector is None or type(selector) in _STOCK_SELECTORS:
            if selector is not None:
                selector.close()
            selector = RingSelector()
        super().__init__(selector)


class _SuitePolicy(ringio.EventLoopPolicy):
    _loop_factory = _SuiteLoop


class _Census:
    """Unix selector event loops built that are not ringio's (``stock``). The bare
    ``BaseSelectorEventLoop`` that test_base_events' sendfile tests build to test
    that base class itself is not one."""

    stock = 0
    stock_kinds: set[str] = set()


def _count_stock_loops() -> None:
    base = asyncio.selector_events.BaseSelectorEventLoop
    unix_loop = asyncio.unix_events._UnixSelectorEventLoop  # type: ignore[attr-defined]
    init = base.__init__

    def counting_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(self, unix_loop) and not isinstance(self, ringio.EventLoop):
            _Census.stock += 1
            _Census.stock_kinds.add(type(self).__qualname__)
        init(self, *args, **kwargs)

    base.__init__ = counting_init  # type: ignore[method-assign]


def patch_asyncio() -> None:
    asyncio.SelectorEventLoop = _SuiteLoop  # type: ignore[misc]
    asyncio.unix_events.SelectorEventLoop = _SuiteLoop  # type: ignore[misc]
    if compat.PY313:
        asyncio.EventLoop = _SuiteLoop  # type: ignore[misc]
        asyncio.unix_events.EventLoop = _SuiteLoop  # type: ignore[misc]
    if compat.PY314:
        # 3.14's policy machinery makes `unix_events._DefaultEventLoopPolicy()`,
        # whose loop factory is bound at class creation; the public name warns.
        asyncio.unix_events._DefaultEventLoopPolicy = _SuitePolicy  # type: ignore[attr-defined]
    else:
        asyncio.DefaultEventLoopPolicy = _SuitePolicy  # type: ignore[misc]
        asyncio.unix_events.DefaultEventLoopPolicy = _SuitePolicy  # type: ignore[misc]
    asyncio.unix_events._UnixDefaultEventLoopPolicy._loop_factory = _SuiteLoop  # type: ignore[attr-defined]
    compat.set_policy(None)
    _count_stock_loops()


def _is_excluded(test_id: str) -> str | None:
    for key, reason in EXCLUDED.items():
        if test_id == key or (key.endswith(".") and test_id.startswith(key)):
            return reason
    return None


def _iter_tests(suite: unittest.TestSuite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _iter_tests(item)
        else:
            yield item


def build_suite(modules: tuple[str, ...]) -> tuple[unittest.TestSuite, list[str]]:
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    excluded: list[str] = []
    for name in modules:
        mod = __import__(f"test.test_asyncio.{name}", fromlist=["*"])
        for test in _iter_tests(loader.loadTestsFromModule(mod)):
            cls = type(test)
            if cls.__name__ in _OTHER_LOOP_CLASSES or cls.__name__.startswith("Proactor"):
                continue
            test_id = f"{name}.{cls.__name__}.{test._testMethodName}"
            reason = _is_excluded(test_id)
            if reason is not None:
                excluded.append(test_id)
                setattr(test, test._testMethodName, unittest.skip(reason)(lambda: None))
            suite.addTest(test)
    return suite, excluded


class _Result(unittest.TextTestResult):
    """Also counts the tests during which a ringio loop was built (the rest use
    asyncio's mock ``TestLoop`` or no loop at all: futures, locks, handles...), and
    lists those during which a stock asyncio selector loop was built."""

    on_ringio = 0
    on_stock: list[str] = []

    def startTest(self, test: unittest.TestCase) -> None:
        # Keyed by test: unittest may report a test (a class-level skip or error,
        # 3.12+) whose startTest went to another result object.
        self.__dict__.setdefault("_before", {})[test.id()] = (_SuiteLoop.created, _Census.stock)
        super().startTest(test)

    def stopTest(self, test: unittest.TestCase) -> None:
        before = self.__dict__.get("_before", {}).pop(test.id(), None)
        if before is not None:
            if _SuiteLoop.created != before[0]:
                _Result.on_ringio += 1
            if _Census.stock != before[1]:
                _Result.on_stock.append(test.id().removeprefix("test.test_asyncio."))
        super().stopTest(test)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="write counts and failing test ids here")
    parser.add_argument("--modules", help="comma-separated subset of MODULES")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    # test_runners' interrupt tests send themselves SIGINT and need Python's own
    # handler. A process whose parent ignored SIGINT (a background job of a
    # non-interactive shell, nohup) starts with it ignored, and Python leaves it so:
    # test_interrupt_call_soon then spins for ever on a mock loop that records
    # every call (10 GB in two minutes).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    modules = tuple(args.modules.split(",")) if args.modules else MODULES
    patch_asyncio()
    suite, excluded = build_suite(modules)
    runner = unittest.TextTestRunner(
        stream=sys.stderr, verbosity=2 if args.verbose else 1, resultclass=_Result
    )
    t0 = time.monotonic()
    result = runner.run(suite)
    elapsed = time.monotonic() - t0

    def ids(pairs: list) -> list[str]:
        return sorted(t.id().removeprefix("test.test_asyncio.") for t, _ in pairs)

    failed = ids(result.failures) + ids(result.errors) + ids(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    summary = {
        "ran": result.testsRun,
        "failed": len(failed),
        "skipped": skipped,
        "excluded": len(excluded),
        "passed": result.testsRun - len(failed) - skipped - len(result.expectedFailures),
        "expected_failures": len(result.expectedFailures),
        "failures": failed,
        "seconds": round(elapsed, 1),
        "python": sys.version.split()[0],
        # Evidence that the suite ran on ringio: loops built, ring selects made.
        "ringio_loops_created": _SuiteLoop.created,
        "tests_on_a_ringio_loop": _Result.on_ringio,
        "stock_loops_created": _Census.stock,
        "stock_loop_kinds": sorted(_Census.stock_kinds),
        "tests_on_a_stock_loop": sorted(_Result.on_stock),
        "ring_selects": select_count(),
        "skip_reasons": sorted({str(reason) for _, reason in result.skipped}),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
