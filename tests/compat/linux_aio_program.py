"""A small program written against linux_aio 0.4.1 / linux_aio_bind 1.0.0, kept exactly
as such a program would be: it imports `linux_aio` and `linux_aio_bind` by name.

tests/compat/test_linux_aio.py runs it with those names aliased to ringio.compat. It
also runs as-is with the real libraries: ``python linux_aio_program.py DIR``.
"""

import os
import select
import socket
import sys

from linux_aio import (
    AIOContext,
    FDsyncBlock,
    FsyncBlock,
    PollBlock,
    ReadBlock,
    ReadVBlock,
    WriteBlock,
    WriteVBlock,
)
from linux_aio_bind import IOCBCMD, IOCBPriorityClass, IOCBRWFlag

GREETING = "hello, kernel aio\n"
PARTS = (b"alpha ", b"beta ", b"gamma\n")


def main(workdir):
    path = os.path.join(workdir, "program.txt")
    report = {}

    with AIOContext(8) as ctx, open(path, "w+") as fp:
        # write, then read back
        write = WriteBlock(fp, GREETING)
        write.rw_flag |= IOCBRWFlag.DSYNC
        assert ctx.submit(write) == 1
        events = ctx.get_events(1, 1)
        assert len(events) == 1 and events[0].aio_block is write
        report["written"] = events[0].response

        read = ReadBlock(fp, bytearray(64))
        read.set_priority(IOCBPriorityClass.BE, 4)
        assert ctx.submit(read) == 1
        (event,) = ctx.get_events(1, 1)
        report["read_back"] = event.stripped_buffer()

        # vectored write after the greeting, vectored read of the same bytes
        writev = WriteVBlock(fp, PARTS, offset=len(GREETING))
        readv = ReadVBlock(fp, [bytearray(len(p)) for p in PARTS], offset=len(GREETING))
        assert ctx.submit(writev) == 1
        report["writev"] = ctx.get_events(1, 1)[0].response
        assert ctx.submit(readv) == 1
        (event,) = ctx.get_events(1, 1)
        report["readv"] = [bytes(b) for b in event.buffer]

        # fsync, then the same block turned into an fdsync
        fsync = FsyncBlock(fp)
        fdsync = fsync.change_cmd(IOCBCMD.FDSYNC)
        assert isinstance(fdsync, FDsyncBlock)
        assert ctx.submit(fdsync) == 1
        (event,) = ctx.get_events(1, 1)
        report["fdsync"] = (event.response, event.buffer)
        try:
            ctx.submit(fsync)
        except ValueError:
            report["retired"] = True

        # poll: not ready within 10 ms, then ready once the peer writes
        left, right = socket.socketpair()
        with left, right:
            poll = PollBlock(left, select.EPOLLIN)
            assert ctx.submit(poll) == 1
            report["early"] = ctx.get_events(1, 1, 10_000_000)
            right.send(b"ping")
            (event,) = ctx.get_events(1, 1)
            report["poll"] = event.response & select.EPOLLIN
            report["poll_block"] = event.aio_block is poll

    report["closed"] = ctx.closed
    return report


if __name__ == "__main__":
    print(main(sys.argv[1]))
