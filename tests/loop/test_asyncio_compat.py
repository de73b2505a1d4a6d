"""The private asyncio APIs ringio relies on (``ringio/loop/_asyncio_compat.py``), on
the running CPython, and ringio's entry points under ``-W error`` and without the
event-loop policy system (which CPython 3.16 removes). ``make test-versions`` runs
this file on 3.11 to 3.14."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import textwrap

import pytest

import ringio
from ringio.loop import _asyncio_compat as compat


def test_server_attach_detach_take_what_the_switch_passes():
    # The version switch: 3.13 added the transport parameter.
    for name in compat.SERVER_METHODS:
        params = list(inspect.signature(getattr(asyncio.base_events.Server, name)).parameters)
        assert params == (["self", "transport"] if compat.PY313 else ["self"]), (name, params)


def test_private_names_exist_on_this_version():
    for name in (
        "set_nodelay",
        "check_ssl_socket",
        "format_callback_source",
        "set_result_unless_cancelled",
        "get_running_loop_or_none",
    ):
        assert callable(getattr(compat, name)), name
    assert compat.MIN_SCHEDULED_TIMER_HANDLES > 0
    assert 0 < compat.MIN_CANCELLED_TIMER_HANDLES_FRACTION < 1
    assert compat.SendfileMode.TRY_NATIVE
    assert issubclass(compat.FlowControlMixin, asyncio.Transport)
    slots = set(asyncio.Handle.__slots__)
    assert set(compat.HANDLE_SLOTS) | {compat.HANDLE_CONTEXT} <= slots
    assert set(compat.TIMER_HANDLE_SLOTS) <= set(asyncio.TimerHandle.__slots__)
    loop = ringio.new_event_loop()
    try:
        for name in compat.LOOP_ATTRIBUTES:
            assert hasattr(loop, name), name
        for name in compat.LOOP_METHODS:
            assert callable(getattr(loop, name)), name
        handle = loop.call_soon(lambda: None)
        assert handle._callback is not None and handle._args == ()
        timer = loop.call_later(10, lambda: None)
        assert timer._when > 0 and timer._scheduled
        timer.cancel()
    finally:
        loop.close()


def test_policy_switch_matches_the_version():
    has = sys.version_info < (3, 16)
    assert compat.HAS_POLICIES is has
    assert hasattr(ringio, "EventLoopPolicy") is has
    assert ("EventLoopPolicy" in ringio.__all__) is has


async def _echo_once(port_holder: list[int]) -> bytes:
    async def handle(reader, writer):
        writer.write(await reader.read(100))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping")
        data = await reader.read(100)
        writer.close()
        await writer.wait_closed()
        port_holder.append(port)
        return data


def test_start_server_echo_on_ringio_loop(run, loop):
    # 3.13+: a server's accepted transports must attach themselves with the
    # transport, or every connection fails inside asyncio and the client hangs.
    ports: list[int] = []
    assert run(_echo_once(ports), timeout=10) == b"ping"
    assert ports


@pytest.mark.skipif(not compat.PY313, reason="Server.close_clients() is new in 3.13")
def test_server_knows_its_ring_transports(run):
    async def main():
        accepted = asyncio.Event()
        server = await asyncio.start_server(lambda r, w: accepted.set(), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await accepted.wait()
        assert len(server._clients) == 1
        server.close()
        server.close_clients()  # closes the ring transport: the client sees EOF
        assert await reader.read() == b""
        await server.wait_closed()
        assert len(server._clients) == 0
        writer.close()

    run(main(), timeout=10)


_ENTRY_POINTS = """
import asyncio, sys
import ringio

async def main(x):
    await asyncio.sleep(0)
    return x

assert ringio.run(main(1)) == 1
loop = ringio.new_event_loop()
assert isinstance(loop, ringio.EventLoop)
assert loop.run_until_complete(main(2)) == 2
loop.close()
if sys.version_info >= (3, 12):
    assert asyncio.run(main(3), loop_factory=ringio.new_event_loop) == 3
with asyncio.Runner(loop_factory=ringio.new_event_loop) as runner:
    assert runner.run(main(4)) == 4
    assert isinstance(runner.get_loop(), ringio.EventLoop)

async def on_ringio():
    return type(asyncio.get_running_loop())

if HAS_POLICIES:
    ringio.install()
    assert asyncio.run(on_ringio()) is ringio.EventLoop
else:
    assert not hasattr(ringio, "EventLoopPolicy")
    try:
        ringio.install()
    except RuntimeError as e:
        assert "loop_factory=ringio.new_event_loop" in str(e), e
    else:
        raise AssertionError("install() without policies did not raise")
print("entry points ok")
"""

# What CPython 3.16 removes (the policy system), taken away before ringio is
# imported: the public names, the module __getattr__ shims that serve them with a
# DeprecationWarning on 3.14, and 3.14's private non-warning equivalents.
_REMOVE_POLICIES = """
import asyncio, asyncio.events, asyncio.unix_events
for mod in (asyncio, asyncio.events, asyncio.unix_events):
    for name in ("AbstractEventLoopPolicy", "DefaultEventLoopPolicy",
                 "get_event_loop_policy", "set_event_loop_policy",
                 "_AbstractEventLoopPolicy", "_DefaultEventLoopPolicy",
                 "_set_event_loop_policy", "__getattr__"):
        mod.__dict__.pop(name, None)
"""


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", "-X", "dev", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_entry_points_warning_free():
    # -X dev shows every warning; -W error makes any of them fatal.
    proc = _run_python("HAS_POLICIES = True\n" + _ENTRY_POINTS)
    if sys.version_info >= (3, 16):
        proc = _run_python("HAS_POLICIES = False\n" + _ENTRY_POINTS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "entry points ok" in proc.stdout


def test_import_warning_free():
    proc = _run_python("import ringio, ringio.compat.aiofiles, ringio.compat.caio, ringio.os")
    assert proc.returncode == 0, proc.stderr[-4000:]


def test_entry_points_without_the_policy_api():
    # Ready for CPython 3.16: run on the newest interpreter make test-versions has.
    code = (
        _REMOVE_POLICIES
        + "HAS_POLICIES = False\n"
        + textwrap.dedent(
            """
            from ringio.loop import _asyncio_compat
            assert not _asyncio_compat.HAS_POLICIES
            """
        )
        + _ENTRY_POINTS
    )
    proc = _run_python(code)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "entry points ok" in proc.stdout


class _Awaitable:
    """An awaitable that is not a coroutine: asyncio.run runs it from 3.14 on."""

    def __await__(self):
        yield from asyncio.sleep(0).__await__()
        return 7


def _outcome(runner) -> object:
    try:
        return runner(_Awaitable())
    except BaseException as e:  # the outcome is what is compared
        return type(e)


def test_run_takes_what_asyncio_run_takes():
    ours, theirs = _outcome(ringio.run), _outcome(asyncio.run)
    assert ours == theirs
    assert ours == (7 if sys.version_info >= (3, 14) else ValueError)
