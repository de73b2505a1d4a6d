"""An echo server on ringio.Watcher (gaio's model): no task per connection.

    python examples/watcher_echo.py [PORT]        # Ctrl-C stops it

Prints "listening on HOST:PORT" when ready. Each connection's data is echoed
from the Watcher's buffer ring without a copy; idle connections are closed after
30 s (a linked kernel timeout on the read).
"""

from __future__ import annotations

import socket
import sys
import time

import ringio

IDLE_SECONDS = 30.0


def serve(port: int) -> None:
    listener = socket.create_server(("127.0.0.1", port))
    print("listening on {}:{}".format(*listener.getsockname()), flush=True)
    with listener, ringio.Watcher() as w:
        w.accept("accept", listener)  # one accept wanted (a multishot accept in the kernel)
        while True:
            for res in w.wait_io():  # blocks with the GIL released; Ctrl-C interrupts
                if res.operation == ringio.OP_ACCEPT:
                    w.accept("accept", listener)  # want the next one too
                    if not res.error:
                        w.read_timeout("read", res.conn, None, time.monotonic() + IDLE_SECONDS)
                elif res.context == "read":
                    if res.error:  # EOF, reset, or the idle timeout
                        w.free(res.conn)
                    else:
                        w.write("write", res.conn, res.buffer)
                        w.read_timeout("read", res.conn, None, time.monotonic() + IDLE_SECONDS)
                elif res.context == "write" and res.error:
                    w.free(res.conn)


if __name__ == "__main__":
    try:
        serve(int(sys.argv[1]) if len(sys.argv) > 1 else 8007)
    except KeyboardInterrupt:
        print("stopped", flush=True)
