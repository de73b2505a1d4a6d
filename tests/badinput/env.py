"""The fixtures a bad-input case's call expression sees, and the runner that
evaluates one case: in this process, or in a child so that a crash fails one case.

A case's ``call`` is a Python expression (``await`` allowed) evaluated with the names
below in scope; docs/bad-input.md shows the same text, so what a reader sees is what
ran. Every name is made fresh for each case and torn down after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import ringio
import ringio._engines as engines
import ringio.compat.aiofiles
import ringio.compat.aiofiles.os
import ringio.compat.aiofiles.ospath
import ringio.compat.aiofiles.tempfile
import ringio.compat.aiofiles.threadpool
import ringio.loop
import ringio.os
import ringio.tempfile
from ringio import aio, uring
from ringio.compat import caio, linux_aio, linux_aio_bind

from . import scenarios
from .table import CASES, OK, Case

#: Content of ``path``: non-repeating, so a read at the wrong offset shows.
PAYLOAD = bytes((i * 7 + i // 256) % 251 for i in range(8192))
#: How long one async case may take before it counts as a hang.
CASE_TIMEOUT = 10.0


def free_fd() -> int:
    """An fd number that is not open now (numbers are reused, so never a closed
    one that a later open could take back: pick one far above what the case opens)."""
    for n in range(900, 1000):
        try:
            os.fstat(n)
        except OSError:
            return n
    raise RuntimeError("no free fd number between 900 and 1000")


class Env(dict[str, Any]):
    """The names a case's expression sees; closes what it opened."""

    def __init__(self) -> None:
        super().__init__()
        self._cleanup: list[Callable[[], Any]] = []

    def later(self, fn: Callable[[], Any]) -> None:
        self._cleanup.append(fn)

    def fd(self, *args: Any) -> int:
        fd = os.open(*args)
        self.later(lambda: _quiet(os.close, fd))
        return fd

    def sock(self, s: socket.socket) -> socket.socket:
        self.later(s.close)
        return s

    def close(self) -> None:
        for fn in reversed(self._cleanup):
            _quiet(fn)
        self._cleanup.clear()


def _quiet(fn: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(Exception):
        fn(*args)


def base_env() -> Env:
    """The plain fixtures every group has: files, fds, sockets, buffers."""
    env = Env()
    tmp = tempfile.mkdtemp(prefix="ringio-badinput-")
    env.later(lambda: shutil.rmtree(tmp, ignore_errors=True))
    path = os.path.join(tmp, "data.bin")
    with open(path, "wb") as f:
        f.write(PAYLOAD)
    s1, s2 = socket.socketpair()
    listener = socket.create_server(("127.0.0.1", 0))
    closed_sock = socket.socket()
    closed_sock.close()
    rpipe, wpipe = os.pipe()
    env.later(lambda: _quiet(os.close, rpipe))
    env.later(lambda: _quiet(os.close, wpipe))
    env.update(
        aio=aio,
        uring=uring,
        ringio=ringio,
        os=os,
        socket=socket,
        errno=errno,
        linux_aio=linux_aio,
        lab=linux_aio_bind,
        caio=caio,
        aiofiles=ringio.compat.aiofiles,
        asyncio=asyncio,
        scenarios=scenarios,
        time=time,
        tmp=tmp,
        path=path,
        missing=os.path.join(tmp, "missing"),
        newpath=os.path.join(tmp, "new"),
        fd=env.fd(path, os.O_RDWR),
        rofd=env.fd(path, os.O_RDONLY),
        wofd=env.fd(path, os.O_WRONLY),
        dirfd=env.fd(tmp, os.O_RDONLY | os.O_DIRECTORY),
        badfd=free_fd(),
        rpipe=rpipe,
        wpipe=wpipe,
        s1=env.sock(s1),
        s2=env.sock(s2),
        listener=env.sock(listener),
        unconnected=env.sock(socket.socket()),
        closed_sock=closed_sock,
        udp=env.sock(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
        pyfile=None,
        buf=bytearray(16),
        ro=b"abcd",
        rmv=memoryview(b"abcd"),
        nc=memoryview(bytearray(16))[::2],
        big=2**63 - 1,
        huge=2**64,
    )
    pyfile = open(path, "rb")
    env.later(pyfile.close)
    env["pyfile"] = pyfile
    env["udp"].bind(("127.0.0.1", 0))
    return env


async def open_group_objects(env: Env, group: str) -> None:
    """The objects of async groups, made inside the running loop."""
    path = env["path"]
    if group in ("filebin", "fileraw", "filetext", "filedirect"):
        mode, kw = {
            "filebin": ("rb+", {}),
            "fileraw": ("rb+", {"buffering": 0}),
            "filetext": ("r+", {"encoding": "latin-1"}),
            "filedirect": ("rb+", {"direct": True}),
        }[group]
        f = await ringio.open(path, mode, **kw)
        env["f"] = f
        env.later(lambda: None)  # closed in run_async, inside the loop
        fr = await ringio.open(path, mode.replace("+", ""), **kw)
        fw = await ringio.open(env["newpath"], mode.replace("r", "w").replace("+", ""), **kw)
        fc = await ringio.open(path, mode, **kw)
        await fc.close()
        env.update(fr=fr, fw=fw, fc=fc)
    elif group == "aioasync":
        env["actx"] = aio.AsyncContext(8)
    elif group == "caio":
        env["cctx"] = caio.AsyncioContext(4)
    elif group == "loop":
        env["loop"] = asyncio.get_running_loop()
        for name in ("s1", "s2", "listener", "udp"):
            env[name].setblocking(False)
    elif group == "tempfile":
        tmp = env["tmp"]
        rt = ringio.tempfile
        env["ntf"] = await rt.NamedTemporaryFile(dir=tmp)
        env["sp"] = await rt.SpooledTemporaryFile(1 << 20, dir=tmp)
        await env["sp"].write(b"hello")
        env["spr"] = await rt.SpooledTemporaryFile(4, dir=tmp)
        await env["spr"].write(b"hello")  # past max_size: rolled over to a file
        env["spc"] = await rt.SpooledTemporaryFile(dir=tmp)
        await env["spc"].close()
        env["sprc"] = await rt.SpooledTemporaryFile(dir=tmp)
        await env["sprc"].rollover()
        await env["sprc"].close()
        env["td"] = await rt.TemporaryDirectory(dir=tmp)


async def close_group_objects(env: Env) -> None:
    for name in ("f", "fr", "fw"):
        f = env.get(name)
        if f is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(f.close(), CASE_TIMEOUT)
    actx = env.get("actx")
    if actx is not None:
        actx.close()
    for name in ("ntf", "sp", "spr", "td"):
        obj = env.get(name)
        if obj is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(obj.close(), CASE_TIMEOUT)
    while scenarios.OPENED:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(scenarios.OPENED.pop().close(), CASE_TIMEOUT)


def sync_group_objects(env: Env, group: str) -> None:
    if group == "aio":
        env["ctx"] = aio.Context(8)
        env.later(env["ctx"].close)
        closed = aio.Context(1)
        closed.close()
        env["closed_ctx"] = closed
    elif group == "uring":
        env["ring"] = uring.Ring(8)
        env.later(env["ring"].close)
        closed = uring.Ring(2)
        closed.close()
        env["closed_ring"] = closed
    elif group == "linux_aio":
        env["lctx"] = linux_aio.AIOContext(8)
        env.later(env["lctx"].close)
    elif group == "watcher":
        env["w"] = ringio.Watcher(4096, nbufs=4)
        env.later(env["w"].close)
        closed = ringio.Watcher(4096, nbufs=1)
        closed.close()
        env["closed_w"] = closed


async def _await_all(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) or asyncio.isfuture(value) else value


def _compile(case: Case) -> Any:
    # The call may use `await`: compile it as the body of an async function.
    src = f"async def __case__():\n    return {case.call}\n"
    return compile(src, f"<case {case.id}>", "exec")


def evaluate(case: Case, env: Env) -> tuple[BaseException | None, Any]:
    """Runs the case's call: (exception raised or None, result)."""
    code = _compile(case)
    ns = dict(env)
    exec(code, ns)
    fn = ns["__case__"]

    async def body() -> Any:
        if case.group in ASYNC_GROUPS:
            await open_group_objects(env, case.group)
            ns.update(env)
            fn.__globals__.update(env)
        try:
            return await asyncio.wait_for(_await_all(await fn()), CASE_TIMEOUT)
        finally:
            await close_group_objects(env)

    try:
        if case.group == "loop":
            result = ringio.run(body())
        else:
            result = asyncio.run(body())
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        return e, None
    return None, result


ASYNC_GROUPS = {
    "aioasync",
    "filebin",
    "fileraw",
    "filetext",
    "filedirect",
    "open",
    "os",
    "path",
    "caio",
    "loop",
    "aiofiles",
    "tempfile",
}


def verdict(
    case: Case, exc: BaseException | None, result: Any, env: Env | None = None
) -> str | None:
    """None if the outcome is the expected one, else what went wrong."""
    if isinstance(case.expect, OK):
        if exc is not None:
            return f"expected {case.expect.what}, got {type(exc).__name__}: {exc}"
        try:
            good = eval(
                case.expect.check,
                {"r": result, "PAYLOAD": PAYLOAD, "errno": errno, "ringio": ringio},
            )
        except Exception as e:
            return f"result check {case.expect.check!r} raised {e!r} on {result!r:.200}"
        return None if good else f"expected {case.expect.what}, got {result!r:.200}"
    if exc is None:
        return f"expected {case.expect_name}, got a result: {result!r:.200}"
    exp_type, exp_errno, exp_filename = (*case.expect, None)[:3]
    if not isinstance(exc, exp_type):
        return f"expected {case.expect_name}, got {type(exc).__name__}: {exc}"
    if exp_errno is not None and getattr(exc, "errno", None) != exp_errno:
        return f"expected {case.expect_name}, got errno {getattr(exc, 'errno', None)}: {exc}"
    if exp_filename is not None:
        want = eval(exp_filename, dict(env or {}))
        if getattr(exc, "filename", None) != want:
            return f"expected filename {want!r}, got {getattr(exc, 'filename', None)!r}: {exc}"
    return None


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def set_engine(engine: str | None) -> None:
    if engine is None:
        os.environ.pop("RINGIO_ENGINE", None)
    else:
        os.environ["RINGIO_ENGINE"] = engine
    engines.reset()


def run_case(case: Case, engine: str | None) -> str | None:
    """Runs one case, then the health check of its API; None if both are right."""
    set_engine(engine)
    before = open_fds()
    env = base_env()
    try:
        if case.group not in ASYNC_GROUPS:
            sync_group_objects(env, case.group)
        exc, result = evaluate(case, env)
        problem = verdict(case, exc, result, env)
        # The traceback holds the case's frames and so its objects: drop it, so that
        # the fd check below sees what the objects release when they are gone.
        del exc, result
    finally:
        env.close()
        env.clear()
    if problem:
        return problem
    from .health import HEALTH  # late: health imports env

    env = base_env()
    try:
        problem = HEALTH[case.group](env)
    finally:
        env.close()
        env.clear()
        engines.reset()
        gc.collect()
    if problem:
        return f"the case passed but the health check failed: {problem}"
    leaked = open_fds() - before
    # /proc listing itself may show one transient fd: only count fds still open.
    leaked = {n for n in leaked if _is_open(n) and not _kernel_queue(n)}
    if leaked:
        return f"fds left open after the case: {sorted(leaked)} ({_describe(leaked)})"
    return None


def _is_open(n: int) -> bool:
    try:
        os.fstat(n)
    except OSError:
        return False
    return True


def _kernel_queue(n: int) -> bool:
    """An io_uring or eventfd fd: a closed Ring/engine keeps them until the object
    is collected (reported separately: see docs/security.md), not a leak of the case."""
    try:
        return os.readlink(f"/proc/self/fd/{n}") in (
            "anon_inode:[io_uring]",
            "anon_inode:[eventfd]",
        )
    except OSError:
        return False


def _describe(fds: set[int]) -> str:
    out = []
    for n in sorted(fds):
        try:
            out.append(os.readlink(f"/proc/self/fd/{n}"))
        except OSError:
            out.append("?")
    return ", ".join(out)


def run_isolated(case: Case, engine: str | None, timeout: float = 60.0) -> str | None:
    """Runs the case in a child interpreter: a segfault or a hang fails this case only."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [sys.executable, "-m", "tests.badinput.env", case.id, engine or ""]
    try:
        proc = subprocess.run(
            cmd, cwd=root, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return f"hung: no answer within {timeout:.0f} s"
    if proc.returncode < 0:
        return f"crashed with signal {-proc.returncode}: {proc.stderr[-2000:]}"
    if proc.returncode != 0:
        return (proc.stdout + proc.stderr)[-2000:] or f"exit status {proc.returncode}"
    return None


def main(argv: list[str]) -> int:
    case = next(c for c in CASES if c.id == argv[0])
    problem = run_case(case, argv[1] or None)
    if problem:
        print(problem)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
