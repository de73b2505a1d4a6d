"""Child process for the echo workload: ringio.Watcher running gaio's three echo
benchmarks (the peer program is bench/peers/gaio). One JSON line back.

* ``echo64k``: an echo server Watcher (its own thread) and a client Watcher keeping
  one 64 KiB write and one read submitted, re-submitting each on completion -> MB/s.
* ``conns``: N clients each connect, write 1 KiB and read it back; the server
  echoes -> seconds to completion.
* ``idle``: N idle connections, one pending read each, server ends in this
  process, client ends in a child process -> RSS per connection.

``on_loop`` (echo64k): the client and the server each run on a ``ringio.EventLoop``
and await ``wait_io_async``, with a Watcher that shares the loop's ring (``"shared"``)
or has its own ring, woken through its eventfd (``"eventfd"``), instead of a Watcher
with its own ring driven by ``wait_io``.
"""

from __future__ import annotations

import gc
import resource
import socket
import subprocess
import sys
import time
from typing import Any

from ringio.bench.worker import worker_main


def _listener() -> socket.socket:
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(4096)
    return ls


def _raise_nofile(need: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(need, soft), hard), hard))


def _nodelay(sock: socket.socket) -> None:
    """TCP_NODELAY, as Go's net sets on every TCP connection it dials or accepts (the
    gaio peer's sockets have it). Without it a 64 KiB write leaves as one MSS-sized
    segment plus a 53-byte tail that Nagle holds back until the first is acknowledged,
    so the reader sees the message in two pieces."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _serve(seconds: float, bufsize: int) -> None:
    """The echo server (its own process, as gaio's server runs on its own goroutines
    in parallel with the client). ``bufsize`` > 0: as the gaio peer's server, each
    connection reads into its own buffer, writes what it read, then reads again.
    ``bufsize`` 0: buffer-ring reads, each ring buffer written straight back (zero
    copy; the pending write pins it) with the next read already submitted.
    Prints its port, runs until stdin closes or `seconds` pass (both checked every
    50 ms, not per round: a select() per wait_io would be a syscall per op that the
    gaio server does not make)."""
    import select

    import ringio

    ls = _listener()
    own = bufsize > 0
    op_accept = ringio.OP_ACCEPT
    with ringio.Watcher(bufsize=65536, nbufs=1024) as w:
        wait_io, read, write = w.wait_io, w.read, w.write
        for _ in range(64):
            w.accept("acc", ls)
        print(ls.getsockname()[1], flush=True)
        end = time.monotonic() + seconds
        check = 0.0
        while True:
            now = time.monotonic()
            if now >= check:
                if now >= end or select.select([sys.stdin], [], [], 0)[0]:
                    break
                check = now + 0.05
            for r in wait_io(0.05):
                ctx = r.context
                if ctx == "r":
                    if r.error is not None:
                        w.free(r.conn)
                    elif own:
                        buf, size = r.buffer, r.size
                        # As gaio's res.Buffer[:res.Size]; slicing costs two objects
                        # in Python, so the whole buffer goes when it is full.
                        write(buf, r.conn, buf if size == len(buf) else memoryview(buf)[:size])
                    else:
                        write("w", r.conn, r.buffer)
                        read("r", r.conn)
                elif r.operation == op_accept:
                    w.accept("acc", ls)
                    _nodelay(r.conn)
                    read("r", r.conn, bytearray(bufsize) if own else None)
                elif r.error is not None:
                    w.free(r.conn)
                elif own:
                    read("r", r.conn, ctx)
    ls.close()


def _serve_on_loop(seconds: float, bufsize: int, share: bool) -> None:
    """`_serve` on a ringio.EventLoop, awaited, the Watcher on the loop's ring
    (`share`) or its own; stopped by stdin closing (a reader on the loop) or after
    `seconds`."""
    import asyncio

    import ringio

    ls = _listener()
    own = bufsize > 0
    op_accept = ringio.OP_ACCEPT

    async def serve(w: ringio.Watcher) -> None:
        read, write = w.read, w.write
        while True:
            for r in await w.wait_io_async():
                ctx = r.context
                if ctx == "r":
                    if r.error is not None:
                        w.free(r.conn)
                    elif own:
                        buf, size = r.buffer, r.size
                        write(buf, r.conn, buf if size == len(buf) else memoryview(buf)[:size])
                    else:
                        write("w", r.conn, r.buffer)
                        read("r", r.conn)
                elif r.operation == op_accept:
                    w.accept("acc", ls)
                    _nodelay(r.conn)
                    read("r", r.conn, bytearray(bufsize) if own else None)
                elif r.error is not None:
                    w.free(r.conn)
                elif own:
                    read("r", r.conn, ctx)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        with ringio.Watcher(bufsize=65536, nbufs=1024, loop=share) as w:
            for _ in range(64):
                w.accept("acc", ls)
            print(ls.getsockname()[1], flush=True)
            task = asyncio.ensure_future(serve(w))
            loop.add_reader(sys.stdin.fileno(), task.cancel)
            loop.call_later(seconds, task.cancel)
            try:
                await task
            except asyncio.CancelledError:
                pass
            loop.remove_reader(sys.stdin.fileno())

    ringio.run(main())
    ls.close()


class _EchoServer:
    def __init__(self, seconds: float, bufsize: int, on_loop: str = "") -> None:
        module = __spec__.name if __spec__ else __name__
        cmd = f"serve-loop-{on_loop}" if on_loop else "serve"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, cmd, str(seconds), str(bufsize)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError(f"echo server did not start: {line!r}")
        self.addr = ("127.0.0.1", int(line))
        self.error: BaseException | None = None

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def echo64k(spec: dict[str, Any]) -> dict[str, Any]:
    import ringio

    size, messages = spec.get("msg_size", 65536), spec["messages"]
    on_loop = spec.get("on_loop", "")
    server = _EchoServer(spec.get("timeout", 60), spec.get("server_bufsize", size), on_loop)
    if on_loop:
        try:
            share = on_loop == "shared"
            echo = _echo64k_on_loop(server.addr, size, messages, spec, share)
            read, elapsed = ringio.run(echo)
        finally:
            server.close()
        return {
            "messages": messages,
            "msg_size": size,
            "bytes": read,
            "seconds": elapsed,
            "mb_per_s": read / elapsed / 1e6,
        }
    try:
        with ringio.Watcher() as w:
            conn = socket.create_connection(server.addr)
            _nodelay(conn)
            tx = bytes(i & 0xFF for i in range(size))
            rx = bytearray(size)
            target = size * messages
            written = read = 0
            start = time.perf_counter()
            w.write("w", conn, tx)
            w.read("r", conn, rx)
            deadline = time.monotonic() + spec.get("timeout", 60)
            while read < target:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"echo64k: {read} of {target} bytes")
                for r in w.wait_io(1.0):
                    if r.error is not None:
                        raise r.error
                    if r.context == "w":
                        written += r.size
                        if written < target:
                            w.write("w", conn, tx)
                    else:
                        read += r.size
                        if read < target:
                            w.read("r", conn, rx)
            elapsed = time.perf_counter() - start
            w.free(conn)
    finally:
        server.close()
    if server.error is not None:
        raise server.error
    return {
        "messages": messages,
        "msg_size": size,
        "bytes": read,
        "seconds": elapsed,
        "mb_per_s": read / elapsed / 1e6,
    }


async def _echo64k_on_loop(
    addr: tuple[str, int], size: int, messages: int, spec: dict[str, Any], share: bool
) -> tuple[int, float]:
    """echo64k's client on the running ringio.EventLoop, its Watcher on the loop's
    ring (`share`) or its own."""
    import ringio

    with ringio.Watcher(loop=share) as w:
        conn = socket.create_connection(addr)
        _nodelay(conn)
        tx = bytes(i & 0xFF for i in range(size))
        rx = bytearray(size)
        target = size * messages
        written = read = 0
        start = time.perf_counter()
        w.write("w", conn, tx)
        w.read("r", conn, rx)
        deadline = time.monotonic() + spec.get("timeout", 60)
        while read < target:
            if time.monotonic() > deadline:
                raise TimeoutError(f"echo64k: {read} of {target} bytes")
            for r in await w.wait_io_async():
                if r.error is not None:
                    raise r.error
                if r.context == "w":
                    written += r.size
                    if written < target:
                        w.write("w", conn, tx)
                else:
                    read += r.size
                    if read < target:
                        w.read("r", conn, rx)
        elapsed = time.perf_counter() - start
        w.free(conn)
    return read, elapsed


def conns(spec: dict[str, Any]) -> dict[str, Any]:
    import ringio

    n, size = spec["conns"], spec.get("conn_size", 1024)
    _raise_nofile(3 * n + 200)
    server = _EchoServer(spec.get("timeout", 60), spec.get("server_bufsize", size))
    payload = bytes(size)
    try:
        with ringio.Watcher(bufsize=4096, nbufs=4096) as w:
            start = time.perf_counter()
            clients = []
            for i in range(n):
                c = socket.socket()
                _nodelay(c)
                clients.append(c)
                w.connect(i, c, server.addr)
                w.write(i, c, payload)
                w.read_full(i, c, bytearray(size))
            done = failed = 0
            deadline = time.monotonic() + spec.get("timeout", 60)
            while done + failed < n:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"conns: {done} of {n} done")
                for r in w.wait_io(1.0):
                    if r.error is not None:
                        failed += 1
                        w.free(r.conn)
                    elif r.operation == ringio.OP_READ:
                        done += 1
                        w.free(r.conn)
            elapsed = time.perf_counter() - start
    finally:
        server.close()
    if failed:
        raise RuntimeError(f"{failed} of {n} connections failed")
    return {"conns": n, "msg_size": size, "seconds": elapsed, "conns_per_s": n / elapsed}


_IDLE_CLIENT = """
import resource, socket, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
addr = (sys.argv[1], int(sys.argv[2]))
conns = [socket.create_connection(addr) for _ in range(int(sys.argv[3]))]
print("ready", flush=True)
sys.stdin.read()
"""


def _heap_in_use() -> int | None:
    """Bytes malloc has handed out and not had back (glibc's mallinfo2: arena plus
    mmap'd blocks); None without glibc. Unlike RSS it does not depend on how much
    freed heap the process held before: a per-connection figure from it is the
    memory the connections themselves took from malloc."""
    import ctypes

    class _MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks "
            "fordblks keepcost".split()
        ]

    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    info = fn()
    return int(info.uordblks + info.hblkhd)


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("VmRSS not found")


def idle(spec: dict[str, Any]) -> dict[str, Any]:
    import ringio

    n = spec["idle_conns"]
    direct = spec.get("direct", False)
    _raise_nofile(2 * n + 200)
    gc.collect()
    w = ringio.Watcher()
    ls = _listener()
    for _ in range(256):
        w.accept("acc", ls, direct=direct)
    w.wait_io(0)
    gc.collect()
    after_listen = _rss_kib()
    heap_after_listen = _heap_in_use()
    child = subprocess.Popen(
        [sys.executable, "-c", _IDLE_CLIENT, *map(str, ls.getsockname()), str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        accepted = 0
        deadline = time.monotonic() + spec.get("timeout", 60)
        while accepted < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"idle: {accepted} of {n} accepted")
            for r in w.wait_io(1.0):
                if r.operation == ringio.OP_ACCEPT and r.error is None:
                    accepted += 1
                    if accepted + 256 <= n:
                        w.accept("acc", ls, direct=direct)
                    w.read(None, r.conn)  # one pending read, no buffer of its own
                elif r.error is not None:
                    raise r.error
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("idle client failed")
        w.wait_io(0.2)
        del r
        gc.collect()
        after = _rss_kib()
        heap_after = _heap_in_use()
        result = {
            "conns": n,
            "rss_after_listen_kib": after_listen,
            "rss_after_kib": after,
            "rss_delta_kib": after - after_listen,
            "rss_per_conn_bytes": (after - after_listen) * 1024 / n,
            "heap_per_conn_bytes": (
                (heap_after - heap_after_listen) / n
                if heap_after is not None and heap_after_listen is not None
                else None
            ),
            "pending_reads": w.pending,
            "direct": direct,
        }
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(30)
        w.close()
        ls.close()
    return result


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        _serve(float(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    if sys.argv[1].startswith("serve-loop-"):
        share = sys.argv[1] == "serve-loop-shared"
        _serve_on_loop(float(sys.argv[2]), int(sys.argv[3]), share)
        sys.exit(0)
    worker_main({"echo64k": echo64k, "conns": conns, "idle": idle})
