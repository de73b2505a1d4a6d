"""Every private asyncio API ringio relies on, by CPython version, in one place.

ringio's loop subclasses ``asyncio.SelectorEventLoop`` and keeps asyncio's own
transports, servers and handles; where it reaches below the public API it does so
through this module (or, for attributes its native core reads, lists them here),
so that a new CPython release is checked in one file. ``tests/loop/
test_asyncio_compat.py`` checks each entry on the running interpreter, and ``make
test-versions`` runs it on 3.11 to 3.14.

What changed between versions, and what ringio does about it:

* 3.13: ``Server._attach(transport)`` and ``Server._detach(transport)`` take the
  transport (the server keeps a set of its clients for ``close_clients()``); 3.11
  and 3.12 take nothing. `server_attach`/`server_detach` call the right one.
* 3.14: the event-loop policy system is deprecated (``asyncio.DefaultEventLoopPolicy``,
  ``set_event_loop_policy``... warn; CPython's main branch, 3.16, removed it).
  `DEFAULT_POLICY` and `set_policy` are asyncio's own non-warning names while the
  system exists, and None where it does not (`HAS_POLICIES` is False): then
  ``ringio.EventLoopPolicy`` is absent and ``ringio.install()`` raises.
"""

from __future__ import annotations

import asyncio
import sys
from asyncio import base_events, constants, events, format_helpers, futures, transports
from typing import Any

PY312 = sys.version_info >= (3, 12)
PY313 = sys.version_info >= (3, 13)
PY314 = sys.version_info >= (3, 14)

# ------------------------------------------------------------------ Server

if PY313:

    def server_attach(server: Any, transport: Any) -> None:
        server._attach(transport)

    def server_detach(server: Any, transport: Any) -> None:
        server._detach(transport)

else:

    def server_attach(server: Any, transport: Any) -> None:
        server._attach()

    def server_detach(server: Any, transport: Any) -> None:
        server._detach()


# ----------------------------------------------------------------- policies


def _policy_api() -> tuple[Any, Any]:
    if not PY314:
        policy = getattr(asyncio, "DefaultEventLoopPolicy", None)
        set_policy = getattr(asyncio, "set_event_loop_policy", None)
        return (policy, set_policy) if policy and set_policy else (None, None)
    # 3.14 and 3.15: the public names warn (DeprecationWarning, removal in 3.16);
    # these are the classes and function they stand for.
    unix_events = sys.modules.get("asyncio.unix_events")
    policy = getattr(unix_events, "_DefaultEventLoopPolicy", None)
    set_policy = getattr(events, "_set_event_loop_policy", None)
    if policy is None or set_policy is None:
        return None, None
    return policy, set_policy


DEFAULT_POLICY, set_policy = _policy_api()
# False where asyncio has no policy system (CPython 3.16).
HAS_POLICIES = DEFAULT_POLICY is not None

# ----------------------------------------------- other private names, by module

# Used from Python (imported from here by the loop and the transport).
set_nodelay = base_events._set_nodelay
check_ssl_socket = base_events._check_ssl_socket
MIN_SCHEDULED_TIMER_HANDLES = base_events._MIN_SCHEDULED_TIMER_HANDLES
MIN_CANCELLED_TIMER_HANDLES_FRACTION = base_events._MIN_CANCELLED_TIMER_HANDLES_FRACTION
format_callback_source = format_helpers._format_callback_source
set_result_unless_cancelled = futures._set_result_unless_cancelled
FlowControlMixin = transports._FlowControlMixin
SendfileMode = constants._SendfileMode
get_running_loop_or_none = events._get_running_loop


def report_callback_error(handle: asyncio.Handle, exc: BaseException) -> None:
    """The except branch of asyncio's ``Handle._run``, for ``LoopCore.run_ready``,
    which runs asyncio's own handles natively."""
    cb = format_callback_source(handle._callback, handle._args)
    context = {"message": f"Exception in callback {cb}", "exception": exc, "handle": handle}
    if handle._source_traceback:
        context["source_traceback"] = handle._source_traceback
    handle._loop.call_exception_handler(context)


# Attributes of asyncio's objects that ringio reads or writes directly: the loop's
# ``call_soon`` fills Handles itself, and the native core (src/loopcore/) runs
# asyncio's ready queue and timer heap. Each must exist on every supported version.
HANDLE_SLOTS = ("_callback", "_args", "_cancelled", "_loop", "_source_traceback", "_repr")
HANDLE_CONTEXT = "_context"  # a slot since 3.7
TIMER_HANDLE_SLOTS = ("_scheduled", "_when")
LOOP_ATTRIBUTES = (
    "_ready",
    "_scheduled",
    "_stopping",
    "_debug",
    "_closed",
    "_clock_resolution",
    "_timer_cancelled_count",
    "_transports",
)
LOOP_METHODS = ("_run_once", "_process_events", "_ensure_fd_no_transport")
SERVER_METHODS = ("_attach", "_detach")
