"""Stateful fuzzing: random block sequences through the linux_aio compat layer and
the same ops through ringio.aio directly must leave identical files and return
identical results."""

from __future__ import annotations

import os
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ringio import aio
from ringio.compat import linux_aio

SIZE = 1 << 16
offsets = st.integers(min_value=0, max_value=SIZE + 512)
payloads = st.binary(min_size=1, max_size=2048)


class CompatVersusDirect(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.fd_compat = os.open(os.path.join(self.dir.name, "c"), os.O_RDWR | os.O_CREAT, 0o600)
        self.fd_direct = os.open(os.path.join(self.dir.name, "d"), os.O_RDWR | os.O_CREAT, 0o600)
        self.compat = linux_aio.AIOContext(64)
        self.direct = aio.Context(64)
        self.pending = 0

    def both(self, block, op) -> None:
        n_compat = self.compat.submit(block)
        n_direct = self.direct.submit([op])
        assert n_compat == n_direct == 1
        [ev] = self.compat.get_events(1, 1)
        [c] = self.direct.get_events(1, timeout=5)
        assert ev.aio_block is block
        assert ev.response == c.res, (ev.response, c.res)

    @rule(data=payloads, offset=offsets)
    def write(self, data: bytes, offset: int) -> None:
        self.both(
            linux_aio.WriteBlock(self.fd_compat, data, offset),
            aio.pwrite(self.fd_direct, data, offset),
        )

    @rule(parts=st.lists(payloads, min_size=1, max_size=8), offset=offsets)
    def writev(self, parts: list[bytes], offset: int) -> None:
        self.both(
            linux_aio.WriteVBlock(self.fd_compat, parts, offset),
            aio.pwritev(self.fd_direct, parts, offset),
        )

    @rule(length=st.integers(min_value=1, max_value=4096), offset=offsets)
    def read(self, length: int, offset: int) -> None:
        a, b = bytearray(length), bytearray(length)
        self.both(
            linux_aio.ReadBlock(self.fd_compat, a, offset),
            aio.pread(self.fd_direct, b, offset),
        )
        assert a == b

    @rule(
        lengths=st.lists(st.integers(min_value=1, max_value=512), min_size=1, max_size=8),
        offset=offsets,
    )
    def readv(self, lengths: list[int], offset: int) -> None:
        a = [bytearray(n) for n in lengths]
        b = [bytearray(n) for n in lengths]
        self.both(
            linux_aio.ReadVBlock(self.fd_compat, a, offset),
            aio.preadv(self.fd_direct, b, offset),
        )
        assert a == b

    @rule()
    def fsync(self) -> None:
        self.both(linux_aio.FsyncBlock(self.fd_compat), aio.fsync(self.fd_direct))

    @rule()
    def fdsync(self) -> None:
        self.both(linux_aio.FDsyncBlock(self.fd_compat), aio.fdsync(self.fd_direct))

    @precondition(lambda self: True)
    @rule(length=st.integers(min_value=0, max_value=SIZE))
    def truncate_both(self, length: int) -> None:
        os.ftruncate(self.fd_compat, length)
        os.ftruncate(self.fd_direct, length)

    @invariant()
    def same_files(self) -> None:
        size = os.fstat(self.fd_direct).st_size
        assert os.fstat(self.fd_compat).st_size == size
        assert os.pread(self.fd_compat, size, 0) == os.pread(self.fd_direct, size, 0)

    def teardown(self) -> None:
        self.compat.close()
        self.direct.close()
        os.close(self.fd_compat)
        os.close(self.fd_direct)
        self.dir.cleanup()


TestCompatVersusDirect = CompatVersusDirect.TestCase
TestCompatVersusDirect.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
