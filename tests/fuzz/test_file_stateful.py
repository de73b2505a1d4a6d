"""Stateful fuzzing: random sequences of seek/read/readline/write/truncate/pread/
pwrite/tell on a ringio file and on the stdlib's io file side by side must give
the same bytes and positions, on every engine."""

from __future__ import annotations

import asyncio
import os
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import ringio
import ringio._engines as engines

SIZE = 4096
sizes = st.integers(min_value=-1, max_value=600)
offsets = st.integers(min_value=0, max_value=SIZE + 100)
payload = st.binary(min_size=0, max_size=300).map(lambda b: b.replace(b"\r", b"\n"))
text_payload = st.text(
    alphabet=st.sampled_from("ab\n\r\u00e9\u20ac\U0001f600 "), min_size=0, max_size=100
)


class BinaryFileMachine(RuleBasedStateMachine):
    """`buffering` is set per engine/test by the subclasses below."""

    buffering = -1

    @initialize(initial=st.binary(min_size=0, max_size=SIZE))
    def open_both(self, initial: bytes) -> None:
        self.loop = asyncio.new_event_loop()
        self.dir = tempfile.TemporaryDirectory()
        ours, ref = (os.path.join(self.dir.name, n) for n in ("ours", "ref"))
        for p in (ours, ref):
            with open(p, "wb") as f:
                f.write(initial)
        self.ref = open(ref, "r+b", buffering=0)
        self.ours = self.run(ringio.open(ours, "r+b", buffering=self.buffering))

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    @rule(n=sizes)
    def read(self, n: int) -> None:
        assert self.run(self.ours.read(n)) == self.ref.read(n)

    @rule(n=sizes)
    def readline(self, n: int) -> None:
        assert self.run(self.ours.readline(n)) == self.ref.readline(n)

    @rule(data=payload)
    def write(self, data: bytes) -> None:
        assert self.run(self.ours.write(data)) == self.ref.write(data)

    @rule(offset=offsets, whence=st.sampled_from([os.SEEK_SET, os.SEEK_CUR, os.SEEK_END]))
    def seek(self, offset: int, whence: int) -> None:
        if whence != os.SEEK_SET:
            offset -= 50  # relative seeks may go back
        try:
            expected = self.ref.seek(offset, whence)
        except OSError as e:
            with pytest.raises(type(e)):
                self.run(self.ours.seek(offset, whence))
            return
        assert self.run(self.ours.seek(offset, whence)) == expected

    @rule(size=st.one_of(st.none(), st.integers(min_value=0, max_value=SIZE)))
    def truncate(self, size: int | None) -> None:
        assert self.run(self.ours.truncate(size)) == self.ref.truncate(size)

    @rule(n=st.integers(min_value=0, max_value=600), offset=offsets)
    def pread(self, n: int, offset: int) -> None:
        assert self.run(self.ours.pread(n, offset)) == os.pread(self.ref.fileno(), n, offset)

    @rule(data=payload, offset=offsets)
    def pwrite(self, data: bytes, offset: int) -> None:
        assert self.run(self.ours.pwrite(data, offset)) == os.pwrite(
            self.ref.fileno(), data, offset
        )

    @rule()
    def flush(self) -> None:
        self.run(self.ours.flush())

    @invariant()
    def same_position(self) -> None:
        if hasattr(self, "ours"):
            assert self.run(self.ours.tell()) == self.ref.tell()

    def teardown(self) -> None:
        if hasattr(self, "ours"):
            self.run(self.ours.flush())
            ours = os.pread(self.ours.fileno(), SIZE * 4, 0)
            ref = os.pread(self.ref.fileno(), SIZE * 4, 0)
            self.run(self.ours.close())
            self.ref.close()
            self.loop.close()
            self.dir.cleanup()
            assert ours == ref


class TextFileMachine(RuleBasedStateMachine):
    @initialize(initial=text_payload, newline=st.sampled_from([None, "", "\n", "\r", "\r\n"]))
    def open_both(self, initial: str, newline: str | None) -> None:
        self.loop = asyncio.new_event_loop()
        self.dir = tempfile.TemporaryDirectory()
        ours, ref = (os.path.join(self.dir.name, n) for n in ("ours", "ref"))
        for p in (ours, ref):
            with open(p, "w", encoding="utf-8", newline="") as f:
                f.write(initial)
        kw = {"encoding": "utf-8", "newline": newline}
        self.ref = open(ref, "r+", **kw)
        self.ours = self.loop.run_until_complete(ringio.open(ours, "r+", **kw))

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    @rule(n=st.integers(min_value=-1, max_value=50))
    def read(self, n: int) -> None:
        assert self.run(self.ours.read(n)) == self.ref.read(n)

    @rule(n=st.integers(min_value=-1, max_value=50))
    def readline(self, n: int) -> None:
        assert self.run(self.ours.readline(n)) == self.ref.readline(n)

    @rule(data=text_payload)
    def write_at_end(self, data: str) -> None:
        # Text writes after reads differ by design (see docs/files.md): seek first.
        self.ref.seek(0, os.SEEK_END)
        self.run(self.ours.seek(0, os.SEEK_END))
        assert self.run(self.ours.write(data)) == self.ref.write(data)

    @rule()
    def rewind(self) -> None:
        self.ref.seek(0)
        self.run(self.ours.seek(0))

    @rule()
    def tell_round_trip(self) -> None:
        cookie = self.run(self.ours.tell())
        rest = self.run(self.ours.read(5))
        self.run(self.ours.seek(cookie))
        assert self.run(self.ours.read(5)) == rest
        self.run(self.ours.seek(cookie))

    def teardown(self) -> None:
        if hasattr(self, "ours"):
            self.run(self.ours.close())
            self.ref.close()
            ours = open(os.path.join(self.dir.name, "ours"), "rb").read()
            ref = open(os.path.join(self.dir.name, "ref"), "rb").read()
            self.loop.close()
            self.dir.cleanup()
            assert ours == ref


FUZZ = settings(max_examples=40, stateful_step_count=25, deadline=None)


@pytest.fixture(params=["uring", "aio", "thread"])
def forced_engine(request, monkeypatch):
    if request.param != "thread" and engines._usable(request.param):
        pytest.skip(f"{request.param} unavailable")
    monkeypatch.setenv("RINGIO_ENGINE", request.param)
    engines.reset()
    yield request.param
    engines.reset()


@pytest.mark.parametrize("buffering", [0, -1, 7], ids=["unbuffered", "buffered", "tiny-buffer"])
def test_binary_file_matches_io(forced_engine, buffering):
    machine = type("Machine", (BinaryFileMachine,), {"buffering": buffering})
    machine.TestCase.settings = FUZZ
    machine.TestCase().runTest()


def test_text_file_matches_io(forced_engine):
    TextFileMachine.TestCase.settings = FUZZ
    TextFileMachine.TestCase().runTest()

