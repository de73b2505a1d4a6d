"""ringio.compat.linux_aio / linux_aio_bind against the kernel: real files in tmp_path,
sockets from socket.socketpair()."""

from __future__ import annotations

import errno
import os
import runpy
import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringio.compat import linux_aio, linux_aio_bind
from ringio.compat.linux_aio import (
    AIOContext,
    AIOEvent,
    FDsyncBlock,
    FsyncBlock,
    PollBlock,
    ReadBlock,
    ReadVBlock,
    WriteBlock,
    WriteVBlock,
)
from ringio.compat.linux_aio_bind import (
    IOCBCMD,
    IOPRIO_CLASS_SHIFT,
    IOCBFlag,
    IOCBPriorityClass,
    IOCBRWFlag,
    gen_io_priority,
)

PROGRAM = Path(__file__).with_name("linux_aio_program.py")
SECOND_NS = 1_000_000_000


@pytest.fixture
def ctx() -> Iterator[AIOContext]:
    with AIOContext(32) as c:
        yield c


@pytest.fixture
def fd(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path / "data", os.O_RDWR | os.O_CREAT, 0o600)
    yield fd
    os.close(fd)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair()
    with left, right:
        yield left, right


@pytest.fixture
def aliased() -> Iterator[None]:
    """`linux_aio` and `linux_aio_bind` resolve to the compat modules, then are restored."""
    names = ("linux_aio", "linux_aio_bind")
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules["linux_aio"] = linux_aio
    sys.modules["linux_aio_bind"] = linux_aio_bind
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def one_event(ctx: AIOContext, timeout_ns: int = 5 * SECOND_NS) -> AIOEvent:
    events = ctx.get_events(1, 1, timeout_ns)
    assert len(events) == 1
    return events[0]


# ---------------------------------------------------------------------------
# every block type through the kernel


def test_write_block_writes_content_at_offset(ctx: AIOContext, fd: int) -> None:
    content = os.urandom(100)
    block = WriteBlock(fd, content, offset=10)
    assert ctx.submit(block) == 1
    event = one_event(ctx)
    assert event.aio_block is block
    assert (event.response, event.response2) == (len(content), 0)
    assert event.buffer is content
    assert os.pread(fd, 200, 10) == content


def test_write_block_encodes_str_content(ctx: AIOContext, fd: int) -> None:
    text = "grüße\n"
    block = WriteBlock(fd, text)
    ctx.submit(block)
    assert one_event(ctx).response == len(text.encode())
    assert os.pread(fd, 64, 0) == text.encode()


def test_write_block_length_writes_a_prefix(ctx: AIOContext, fd: int) -> None:
    content = bytearray(os.urandom(32))
    block = WriteBlock(fd, content, length=7)
    assert block.length == 7
    ctx.submit(block)
    assert one_event(ctx).response == 7
    assert os.pread(fd, 64, 0) == content[:7]


def test_read_block_reads_file(ctx: AIOContext, fd: int) -> None:
    data = os.urandom(40).replace(b"\0", b"x")
    os.pwrite(fd, data, 0)
    block = ReadBlock(fd, bytearray(64))
    ctx.submit(block)
    event = one_event(ctx)
    assert event.aio_block is block
    assert event.response == len(data)
    assert event.buffer[: len(data)] == data
    assert event.stripped_buffer() == data


def test_read_block_offset_and_length(ctx: AIOContext, fd: int) -> None:
    data = os.urandom(40)
    os.pwrite(fd, data, 0)
    buf = bytearray(16)
    block = ReadBlock(fd, buf, offset=3, length=5)
    ctx.submit(block)
    assert one_event(ctx).response == 5
    assert buf == data[3:8] + bytes(11)


def test_read_block_str_buffer_is_sized_by_its_encoding(ctx: AIOContext, fd: int) -> None:
    data = os.urandom(20)
    os.pwrite(fd, data, 0)
    block = ReadBlock(fd, "8 chars!")
    assert block.length == 8
    ctx.submit(block)
    event = one_event(ctx)
    assert event.response == 8
    assert event.buffer == data[:8]


def test_read_block_of_empty_bytes_reads_nothing(ctx: AIOContext, fd: int) -> None:
    os.pwrite(fd, b"data", 0)
    block = ReadBlock(fd, b"")
    ctx.submit(block)
    assert one_event(ctx).response == 0


def test_file_object_and_file_setter(ctx: AIOContext, tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"from a file object")
    with open(path, "rb") as fp, open(os.devnull, "rb") as other:
        block = ReadBlock(other, bytearray(32))
        block.file = fp
        assert block.file is fp
        assert block.fileno == fp.fileno()
        ctx.submit(block)
        assert one_event(ctx).stripped_buffer() == b"from a file object"


def test_vectored_write_and_read_across_many_buffers(ctx: AIOContext, fd: int) -> None:
    sizes = [1 + (i * 37) % 61 for i in range(200)]
    chunks = [os.urandom(n) for n in sizes]
    write = WriteVBlock(fd, chunks, offset=5)
    ctx.submit(write)
    event = one_event(ctx)
    assert event.response == sum(sizes)
    assert event.buffer == tuple(chunks)
    assert os.pread(fd, sum(sizes), 5) == b"".join(chunks)

    targets = [bytearray(n) for n in sizes]
    read = ReadVBlock(fd, targets, offset=5)
    ctx.submit(read)
    event = one_event(ctx)
    assert event.aio_block is read
    assert event.response == sum(sizes)
    assert list(map(bytes, event.buffer)) == chunks
    with pytest.raises(NotImplementedError):
        event.stripped_buffer()


def test_vector_buffer_setter_replaces_buffers(ctx: AIOContext, fd: int) -> None:
    os.pwrite(fd, b"abcdefgh", 0)
    block = ReadVBlock(fd, [bytearray(1)])
    new = (bytearray(3), bytearray(5))
    block.buffer = new
    assert block.buffer == new
    ctx.submit(block)
    assert one_event(ctx).response == 8
    assert new == (bytearray(b"abc"), bytearray(b"defgh"))


@pytest.mark.parametrize("block_type", [FsyncBlock, FDsyncBlock])
def test_sync_blocks_complete_with_zero(ctx: AIOContext, fd: int, block_type: type) -> None:
    os.write(fd, b"to be flushed")
    block = block_type(fd)
    assert block.cmd is (IOCBCMD.FSYNC if block_type is FsyncBlock else IOCBCMD.FDSYNC)
    assert ctx.submit(block) == 1
    event = one_event(ctx)
    assert (event.response, event.response2) == (0, 0)
    assert event.buffer is None
    assert event.stripped_buffer() is None


def test_reused_block_is_submitted_with_its_current_settings(ctx: AIOContext, fd: int) -> None:
    block = WriteBlock(fd, b"ab")
    ctx.submit(block)
    block.offset = 4
    ctx.submit(block)
    events = ctx.get_events(2, 2, 5 * SECOND_NS)
    assert [e.aio_block for e in events] == [block, block]
    assert os.pread(fd, 16, 0) == b"ab\0\0ab"


def test_partial_submit_returns_the_short_count(ctx: AIOContext, fd: int) -> None:
    bad = os.open(os.devnull, os.O_RDONLY)
    os.close(bad)
    good = WriteBlock(fd, b"good")
    assert ctx.submit(good, WriteBlock(bad, b"never")) == 1
    assert one_event(ctx).aio_block is good
    assert os.pread(fd, 16, 0) == b"good"


# ---------------------------------------------------------------------------
# poll


def test_poll_ready_socket_completes_with_mask(ctx: AIOContext, pair) -> None:
    left, right = pair
    right.send(b"x")
    block = PollBlock(left, select.EPOLLIN)
    ctx.submit(block)
    event = one_event(ctx)
    assert event.aio_block is block
    assert event.response & select.EPOLLIN
    assert event.buffer is None


def test_poll_default_masks_include_out(ctx: AIOContext, pair) -> None:
    block = PollBlock(pair[0])
    assert block.event_masks == select.EPOLLIN | select.EPOLLOUT | select.EPOLLPRI
    ctx.submit(block)
    assert one_event(ctx).response & select.EPOLLOUT


def test_poll_completes_when_peer_writes(ctx: AIOContext, pair) -> None:
    left, right = pair
    block = PollBlock(left, select.EPOLLIN)
    ctx.submit(block)
    assert ctx.get_events(1, 1, 20_000_000) == ()
    right.send(b"x")
    assert one_event(ctx).response & select.EPOLLIN


def test_cancel_not_ready_poll_returns_its_event(ctx: AIOContext, pair) -> None:
    block = PollBlock(pair[0], select.EPOLLIN)
    ctx.submit(block)
    event = ctx.cancel(block)
    assert isinstance(event, AIOEvent)
    assert event.aio_block is block
    assert event.response == 0  # what the kernel reports for a cancelled poll
    # ...and, as the kernel does, the completion is also delivered by get_events.
    again = one_event(ctx)
    assert (again.aio_block, again.response) == (block, 0)
    with pytest.raises(ValueError):
        ctx.get_events(1, 1)  # nothing is left in flight


def test_cancel_keeps_other_completions_for_get_events(ctx: AIOContext, pair, fd) -> None:
    poll = PollBlock(pair[0], select.EPOLLIN)
    write = WriteBlock(fd, b"w")
    ctx.submit(poll, write)
    assert ctx.cancel(poll).aio_block is poll
    events = ctx.get_events(2, 2, 5 * SECOND_NS)
    assert {e.aio_block for e in events} == {poll, write}


def test_cancel_refuses_blocks_the_kernel_cannot_cancel(ctx: AIOContext, fd: int) -> None:
    never_submitted = WriteBlock(fd, b"x")
    with pytest.raises(OSError) as info:
        ctx.cancel(never_submitted)
    assert info.value.errno == errno.EINVAL

    done = WriteBlock(fd, b"y")
    ctx.submit(done)
    one_event(ctx)
    with pytest.raises(OSError) as info:
        ctx.cancel(done)
    assert info.value.errno == errno.EINVAL


def test_poll_event_masks_setter_does_not_change_the_request(ctx: AIOContext, pair) -> None:
    # Kept from linux_aio: the mask submitted is the constructor's.
    block = PollBlock(pair[0], select.EPOLLIN)
    block.event_masks = select.EPOLLOUT
    assert block.event_masks == select.EPOLLOUT
    ctx.submit(block)
    assert ctx.get_events(1, 1, 20_000_000) == ()  # EPOLLOUT would be ready at once
    ctx.cancel(block)


# ---------------------------------------------------------------------------
# change_cmd


def test_change_cmd_retires_the_old_block(ctx: AIOContext, fd: int) -> None:
    os.pwrite(fd, b"contents", 0)
    write = WriteBlock(fd, bytearray(b"xx"), offset=2)
    read = write.change_cmd(IOCBCMD.PREAD)
    assert isinstance(read, ReadBlock)
    assert (read.cmd, read.fileno, read.file, read.offset, read.length) == (
        IOCBCMD.PREAD,
        fd,
        fd,
        2,
        2,
    )
    for misuse in (lambda: ctx.submit(write), lambda: ctx.cancel(write)):
        with pytest.raises(ValueError, match="transformed into another AIOBlock"):
            misuse()
    with pytest.raises(AttributeError):
        read.buffer  # noqa: B018 - linux_aio leaves it unset
    read.buffer = bytearray(4)
    ctx.submit(read)
    event = one_event(ctx)
    assert (event.aio_block, event.buffer) == (read, b"nten")


def test_change_cmd_read_write_keeps_the_request_buffer(ctx: AIOContext, fd: int) -> None:
    buf = bytearray(b"kept")
    read = ReadBlock(fd, buf, offset=1)
    write = read.change_cmd(IOCBCMD.PWRITE)
    ctx.submit(write)
    assert one_event(ctx).response == 4
    assert os.pread(fd, 8, 0) == b"\0kept"


def test_change_cmd_to_same_command_returns_the_block(fd: int) -> None:
    block = FsyncBlock(fd)
    assert block.change_cmd(IOCBCMD.FSYNC) is block


def test_change_cmd_to_sync_clears_flags_and_buffer(ctx: AIOContext, fd: int) -> None:
    efd = os.eventfd(0)
    try:
        block = WriteBlock(
            fd,
            b"data",
            offset=3,
            rw_flags=IOCBRWFlag.DSYNC,
            res_fd=efd,
            priority_class=IOCBPriorityClass.BE,
            priority_value=1,
        )
        assert block.flag == IOCBFlag.RESFD | IOCBFlag.IOPRIO
        sync = block.change_cmd(IOCBCMD.FDSYNC)
        assert isinstance(sync, FDsyncBlock)
        assert sync.flag == 0
        ctx.submit(sync)
        assert one_event(ctx).response == 0
    finally:
        os.close(efd)


def test_change_cmd_sync_to_write_needs_a_new_buffer(ctx: AIOContext, fd: int) -> None:
    write = FDsyncBlock(fd).change_cmd(IOCBCMD.PWRITE)
    assert isinstance(write, WriteBlock)
    write.buffer = b"content2"
    assert write.length == 8
    ctx.submit(write)
    assert one_event(ctx).stripped_buffer() == b"content2"
    assert os.pread(fd, 16, 0) == b"content2"


def test_change_cmd_unknown_command_raises(fd: int) -> None:
    with pytest.raises(ValueError, match="Unknown command"):
        FsyncBlock(fd).change_cmd(4)


# ---------------------------------------------------------------------------
# priority and res_fd


def test_priority_setters(ctx: AIOContext, fd: int) -> None:
    os.pwrite(fd, b"prio", 0)
    block = ReadBlock(fd, bytearray(8), priority_class=IOCBPriorityClass.RT, priority_value=1)
    assert (block.priority_class, block.priority_value) == (IOCBPriorityClass.RT, 1)
    assert block.flag & IOCBFlag.IOPRIO
    block.set_priority(IOCBPriorityClass.IDLE, 2)
    assert (block.priority_class, block.priority_value) == (IOCBPriorityClass.IDLE, 2)
    block.priority_value = 3
    block.priority_class = IOCBPriorityClass.BE
    assert (block.priority_class, block.priority_value) == (IOCBPriorityClass.BE, 3)
    ctx.submit(block)
    assert one_event(ctx).stripped_buffer() == b"prio"


def test_priority_setter_sets_ioprio_flag(fd: int) -> None:
    block = WriteBlock(fd, b"x")
    assert block.flag == 0
    block.priority_value = 0
    assert block.flag == IOCBFlag.IOPRIO


def test_invalid_priority_class_is_refused_by_the_kernel(ctx: AIOContext, fd: int) -> None:
    block = ReadBlock(fd, bytearray(4))
    block.set_priority(7, 0)
    with pytest.raises(OSError) as info:
        ctx.submit(block)
    assert info.value.errno == errno.EINVAL


def test_gen_io_priority_composes_class_and_level() -> None:
    for cls in IOCBPriorityClass:
        assert gen_io_priority(cls, 5) >> IOPRIO_CLASS_SHIFT == cls
        assert gen_io_priority(cls, 5) & ((1 << IOPRIO_CLASS_SHIFT) - 1) == 5


def test_res_fd_signals_the_eventfd(ctx: AIOContext, fd: int) -> None:
    efd = os.eventfd(0, os.EFD_NONBLOCK)
    try:
        block = WriteBlock(fd, b"x", res_fd=efd)
        assert (block.res_fd, block.flag) == (efd, IOCBFlag.RESFD)
        ctx.submit(block)
        one_event(ctx)
        assert os.eventfd_read(efd) == 1
    finally:
        os.close(efd)


def test_res_fd_zero_means_none(fd: int) -> None:
    block = WriteBlock(fd, b"x", res_fd=0)
    assert block.res_fd is None
    assert not block.flag & IOCBFlag.RESFD


# ---------------------------------------------------------------------------
# get_events


def test_get_events_timeout_returns_empty_after_the_timeout(ctx: AIOContext, pair) -> None:
    ctx.submit(PollBlock(pair[0], select.EPOLLIN))
    start = time.monotonic()
    assert ctx.get_events(1, 1, 100_000_000) == ()
    assert time.monotonic() - start >= 0.09


def test_get_events_timeout_zero_waits_without_limit(ctx: AIOContext, pair) -> None:
    left, right = pair
    ctx.submit(PollBlock(left, select.EPOLLIN))
    timer = threading.Timer(0.3, right.send, (b"late",))
    timer.start()
    try:
        start = time.monotonic()
        events = ctx.get_events(1, 1)  # timeout_ns=0: block until it completes
        assert time.monotonic() - start >= 0.25
        assert events[0].response & select.EPOLLIN
    finally:
        timer.join()


def test_get_events_without_timeout_refuses_to_wait_forever(ctx: AIOContext) -> None:
    with pytest.raises(ValueError, match="never end"):
        ctx.get_events(1, 1)


def test_get_events_min_zero_returns_what_is_ready(ctx: AIOContext, fd: int) -> None:
    assert ctx.get_events(0, 100) == ()
    ctx.submit(WriteBlock(fd, b"x"))
    deadline = time.monotonic() + 5
    events: tuple[AIOEvent, ...] = ()
    while not events and time.monotonic() < deadline:
        events = ctx.get_events(0, 100)
    assert len(events) == 1


def test_get_events_max_jobs_caps_the_batch(ctx: AIOContext, fd: int) -> None:
    blocks = [WriteBlock(fd, b"x", offset=i) for i in range(5)]
    assert ctx.submit(*blocks) == 5
    first = ctx.get_events(2, 2, 5 * SECOND_NS)
    rest = ctx.get_events(3, 3, 5 * SECOND_NS)
    assert len(first) == 2
    assert {e.aio_block for e in first + rest} == set(blocks)


def test_get_events_bad_ranges(ctx: AIOContext) -> None:
    with pytest.raises(OSError) as info:
        ctx.get_events(2, 1)
    assert info.value.errno == errno.EINVAL
    with pytest.raises(OSError) as info:
        ctx.get_events(-1, 1)
    assert info.value.errno == errno.EINVAL
    with pytest.raises(ValueError):
        ctx.get_events(0, -1)


# ---------------------------------------------------------------------------
# the context


def test_context_manager_closes() -> None:
    with AIOContext(2) as c:
        assert not c.closed
    assert c.closed


def test_close_is_idempotent_and_closed_context_refuses_work(fd: int) -> None:
    c = AIOContext(2)
    c.close()
    c.close()
    assert c.closed
    for call in (
        lambda: c.submit(WriteBlock(fd, b"x")),
        lambda: c.get_events(0, 1),
        lambda: c.cancel(WriteBlock(fd, b"x")),
    ):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno == errno.EINVAL


def test_close_with_a_pending_poll_returns(pair) -> None:
    c = AIOContext(2)
    c.submit(PollBlock(pair[0], select.EPOLLIN))
    c.close()  # io_destroy cancels the poll rather than waiting for data
    assert c.closed


def test_context_larger_than_the_system_allows_raises_eagain() -> None:
    limit = int(Path("/proc/sys/fs/aio-max-nr").read_text())
    with pytest.raises(OSError) as info:
        AIOContext(limit + 1)
    assert info.value.errno == errno.EAGAIN


@pytest.mark.parametrize("max_jobs", [0, -1])
def test_context_of_no_jobs_raises_einval(max_jobs: int) -> None:
    with pytest.raises(OSError) as info:
        AIOContext(max_jobs)
    assert info.value.errno == errno.EINVAL


def test_empty_submit_returns_zero(ctx: AIOContext) -> None:
    assert ctx.submit() == 0


# ---------------------------------------------------------------------------
# bad input


def test_closed_fd_is_refused_with_ebadf(ctx: AIOContext, tmp_path: Path) -> None:
    fd = os.open(tmp_path / "gone", os.O_RDWR | os.O_CREAT)
    os.close(fd)
    with pytest.raises(OSError) as info:
        ctx.submit(WriteBlock(fd, b"x"))
    assert info.value.errno == errno.EBADF


def test_closed_socket_is_refused_with_ebadf(ctx: AIOContext) -> None:
    left, right = socket.socketpair()
    right.close()
    left.close()
    block = PollBlock(left, select.EPOLLIN)  # fileno() of a closed socket is -1
    with pytest.raises(OSError) as info:
        ctx.submit(block)
    assert info.value.errno == errno.EBADF


def test_closed_file_object_raises_value_error(tmp_path: Path) -> None:
    fp = open(tmp_path / "f", "wb")
    fp.close()
    with pytest.raises(ValueError):
        WriteBlock(fp, b"x")


def test_file_without_fileno_raises_attribute_and_type_error() -> None:
    with pytest.raises(AttributeError, match="fileno"):
        PollBlock(object())
    with pytest.raises(TypeError):
        FsyncBlock("not a file")


@pytest.mark.parametrize("buffer", [memoryview(bytearray(4)), [1, 2], 5])
def test_unsupported_buffer_types_raise(fd: int, buffer: object) -> None:
    with pytest.raises(NotImplementedError, match="Unknown buffer type"):
        WriteBlock(fd, buffer)
    with pytest.raises(TypeError):
        ReadBlock(fd, buffer)


def test_read_into_bytes_raises_type_error(fd: int) -> None:
    with pytest.raises(TypeError, match="writable"):
        ReadBlock(fd, b"immutable")
    with pytest.raises(TypeError, match="writable"):
        ReadVBlock(fd, [bytearray(2), b"immutable"])


def test_read_into_bytes_after_change_cmd_raises_at_submit(ctx: AIOContext, fd: int) -> None:
    content = b"immutable"
    os.pwrite(fd, b"overwrite?", 0)
    read = WriteBlock(fd, content).change_cmd(IOCBCMD.PREAD)
    with pytest.raises(TypeError, match="writable"):
        ctx.submit(read)
    assert content == b"immutable"
    assert ctx.get_events(0, 1) == ()


def test_length_beyond_the_buffer_raises(ctx: AIOContext, fd: int) -> None:
    with pytest.raises(ValueError, match="does not fit"):
        ReadBlock(fd, bytearray(4), length=5)
    block = ReadBlock(fd, bytearray(4))
    block.length = 4096
    with pytest.raises(ValueError, match="does not fit"):
        ctx.submit(block)


def test_negative_offset_is_refused_with_einval(ctx: AIOContext, fd: int) -> None:
    block = WriteBlock(fd, b"x")
    block.offset = -1
    with pytest.raises(OSError) as info:
        ctx.submit(block)
    assert info.value.errno == errno.EINVAL


def test_too_many_iovecs_are_refused_with_einval(ctx: AIOContext, fd: int) -> None:
    with pytest.raises(OSError) as info:
        ctx.submit(WriteVBlock(fd, [b"x"] * 1025))
    assert info.value.errno == errno.EINVAL


def test_submit_of_a_non_block_raises_type_error(ctx: AIOContext) -> None:
    with pytest.raises(TypeError, match="AIOBlock"):
        ctx.submit(b"not a block")


def test_resizing_a_buffer_before_its_completion_is_reaped_is_refused(
    ctx: AIOContext, fd: int
) -> None:
    # The kernel may write into a read buffer until the completion is reaped, so
    # ringio pins it; linux_aio let it be reallocated under the kernel.
    os.pwrite(fd, b"12345678", 0)
    buf = bytearray(8)
    ctx.submit(ReadBlock(fd, buf))
    with pytest.raises(BufferError):
        buf.extend(b"more")
    assert one_event(ctx).buffer == b"12345678"
    buf.extend(b"more")  # released once reaped
    assert buf == b"12345678more"


# ---------------------------------------------------------------------------
# linux_aio_bind


def test_bind_enums_match_the_kernel_abi() -> None:
    assert [c.name for c in IOCBCMD] == [
        "PREAD",
        "PWRITE",
        "FSYNC",
        "FDSYNC",
        "POLL",
        "PREADV",
        "PWRITEV",
    ]
    assert [f.name for f in IOCBFlag] == ["RESFD", "IOPRIO"]
    assert [p.name for p in IOCBPriorityClass] == ["NONE", "RT", "BE", "IDLE"]
    for flag in IOCBRWFlag:
        if hasattr(os, f"RWF_{flag.name}"):
            assert flag == getattr(os, f"RWF_{flag.name}")


def test_bind_raw_syscall_layer_explains_its_absence() -> None:
    with pytest.raises(AttributeError, match=r"ringio\.aio"):
        linux_aio_bind.io_submit  # noqa: B018


# ---------------------------------------------------------------------------
# a linux_aio program, unchanged


def test_linux_aio_program_runs_unchanged(aliased: None, tmp_path: Path) -> None:
    program = runpy.run_path(str(PROGRAM))
    report = program["main"](str(tmp_path))
    greeting, parts = program["GREETING"], program["PARTS"]
    assert report == {
        "written": len(greeting.encode()),
        "read_back": greeting.encode(),
        "writev": sum(map(len, parts)),
        "readv": list(parts),
        "fdsync": (0, None),
        "retired": True,
        "early": (),
        "poll": select.EPOLLIN,
        "poll_block": True,
        "closed": True,
    }
    assert (tmp_path / "program.txt").read_bytes() == greeting.encode() + b"".join(parts)


def test_aliasing_fixture_restored_the_import_names() -> None:
    assert sys.modules.get("linux_aio") is not linux_aio
    assert sys.modules.get("linux_aio_bind") is not linux_aio_bind
