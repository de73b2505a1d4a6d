"""Threads and the GIL: the kernel may do buffered AIO inside io_submit."""

from __future__ import annotations

import socket
import threading

from ringio import aio


def test_submit_releases_the_gil_while_the_kernel_blocks_in_io_submit():
    # Buffered AIO on a socket runs synchronously inside io_submit: it returns only
    # when data arrives. The data comes from a Python thread, which must be able
    # to run meanwhile.
    a, b = socket.socketpair()
    with a, b, aio.Context(4) as ctx:
        timer = threading.Timer(0.2, b.send, (b"12345678",))
        timer.start()
        buf = bytearray(8)
        assert ctx.submit([aio.pread(a, buf)]) == 1
        timer.join()
        [c] = ctx.get_events(1, timeout=5)
        assert c.res == 8 and buf == b"12345678"


def test_close_from_another_thread_waits_for_a_submit_in_progress():
    a, b = socket.socketpair()
    with a, b:
        ctx = aio.Context(4)
        buf = bytearray(4)
        submitted = threading.Event()

        def submitter():
            ctx.submit([aio.pread(a, buf)])  # blocks in io_submit until data comes
            submitted.set()

        t = threading.Thread(target=submitter)
        t.start()
        closer = threading.Thread(target=ctx.close)
        closer.start()
        closer.join(0.2)
        assert closer.is_alive()  # close waits for the submit in progress
        b.send(b"data")
        t.join(5)
        closer.join(5)
        assert submitted.is_set() and ctx.closed and buf == b"data"
