"""A tiny FUSE file system whose one file fails with EIO past a given offset.

It speaks the kernel's FUSE protocol on /dev/fuse directly (no libfuse), so the EIO
tests need nothing but CONFIG_FUSE_FS and root. Run as a child process:

    python fuse_eio.py MOUNTPOINT SIZE BAD_FROM

mounts a file system with one file, ``data``, of SIZE bytes: reads and writes of the
range [0, BAD_FROM) behave like a normal file (byte i is i % 251 at first), any read or
write touching [BAD_FROM, SIZE) fails with EIO, and once a write has failed every
fsync fails with EIO, as a disk that lost a write reports it. The file is opened with
FOPEN_DIRECT_IO, so every read and write reaches this process (no page cache).
The process prints ``ready`` once mounted and serves until the mount goes away.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

# linux/fuse.h
LOOKUP, FORGET, GETATTR, SETATTR = 1, 2, 3, 4
OPEN, READ, WRITE, STATFS, RELEASE, FSYNC = 14, 15, 16, 17, 18, 20
GETXATTR, LISTXATTR, FLUSH, INIT, OPENDIR, READDIR, RELEASEDIR = 22, 23, 25, 26, 27, 28, 29
ACCESS, INTERRUPT, DESTROY, BATCH_FORGET = 34, 36, 38, 42
NO_REPLY = {FORGET, BATCH_FORGET, INTERRUPT}
FOPEN_DIRECT_IO = 1

IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid extlen pad
OUT_HEADER = struct.Struct("<IiQ")  # len error unique
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")  # fuse_attr, 88 bytes
ROOT, DATA = 1, 2


def pattern(n: int) -> bytes:
    """The file's initial content: byte i is i % 251, so misplaced bytes show."""
    return bytes(range(251)) * (n // 251) + bytes(range(n % 251))


class FailingFS:
    def __init__(self, size: int, bad_from: int) -> None:
        self.size = size
        self.bad_from = bad_from
        self.content = bytearray(pattern(min(size, bad_from)))
        self.write_failed = False

    def attr(self, node: int) -> bytes:
        if node == ROOT:
            mode, size, nlink = 0o40755, 0, 2
        else:
            mode, size, nlink = 0o100644, self.size, 1
        uid, gid = os.getuid(), os.getgid()
        return ATTR.pack(
            node, size, (size + 511) // 512, 0, 0, 0, 0, 0, 0, mode, nlink, uid, gid, 0, 4096, 0
        )

    def handle(self, opcode: int, node: int, body: bytes) -> tuple[int, bytes]:
        if opcode == INIT:
            _major, minor = struct.unpack_from("<II", body)
            # fuse_init_out: major minor max_readahead flags max_background
            # congestion_threshold max_write time_gran max_pages map_alignment flags2
            # max_stack_depth request_timeout unused[11]
            out = struct.pack(
                "<IIIIHHIIHHIIH22x", 7, min(minor, 31), 0, 0, 16, 12, 128 * 1024, 1, 0, 0, 0, 0, 0
            )
            return 0, out
        if opcode == LOOKUP:
            name = body.split(b"\0", 1)[0]
            if node != ROOT or name != b"data":
                return -errno.ENOENT, b""
            # fuse_entry_out: nodeid generation entry_valid attr_valid (+nsecs) attr
            return 0, struct.pack("<QQQQII", DATA, 1, 3600, 3600, 0, 0) + self.attr(DATA)
        if opcode in (GETATTR, SETATTR):
            return 0, struct.pack("<QII", 3600, 0, 0) + self.attr(node)
        if opcode in (OPEN, OPENDIR):
            flags = FOPEN_DIRECT_IO if opcode == OPEN else 0
            return 0, struct.pack("<QIi", 1, flags, 0)
        if opcode == READ:
            _fh, offset, size = struct.unpack_from("<QQI", body)
            end = min(offset + size, self.size)
            if end > self.bad_from and offset < self.size:
                return -errno.EIO, b""
            return 0, bytes(self.content[offset:end])
        if opcode == WRITE:
            _fh, offset, size = struct.unpack_from("<QQI", body)
            data = body[40 : 40 + size]
            if offset + size > self.bad_from:
                self.write_failed = True
                return -errno.EIO, b""
            self.content[offset : offset + size] = data
            return 0, struct.pack("<II", size, 0)
        if opcode == FSYNC:
            return (-errno.EIO if self.write_failed else 0), b""
        if opcode in (RELEASE, RELEASEDIR, FLUSH, ACCESS, DESTROY):
            return 0, b""
        if opcode == READDIR:
            return 0, b""
        if opcode == STATFS:
            return 0, struct.pack("<QQQQQIIII24x", 0, 0, 0, 0, 0, 4096, 255, 4096, 0)
        if opcode in (GETXATTR, LISTXATTR):
            return -errno.ENOSYS, b""
        return -errno.ENOSYS, b""


def mount(mountpoint: str) -> int:
    fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"fd={fd},rootmode=40000,user_id={os.getuid()},group_id={os.getgid()}"
    ms_nosuid, ms_nodev = 2, 4
    if (
        libc.mount(b"ringio-eio", mountpoint.encode(), b"fuse", ms_nosuid | ms_nodev, opts.encode())
        != 0
    ):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), mountpoint)
    return fd


def serve(fd: int, fs: FailingFS) -> None:
    while True:
        try:
            req = os.read(fd, 1 << 20 | 4096)
        except OSError as e:
            if e.errno in (errno.EINTR, errno.ENOENT, errno.EAGAIN):
                continue  # ENOENT: the request was interrupted before we read it
            return  # ENODEV: unmounted
        if not req:
            return
        _len, opcode, unique, node, *_ = IN_HEADER.unpack_from(req)
        if opcode in NO_REPLY:
            continue
        error, body = fs.handle(opcode, node, req[IN_HEADER.size :])
        reply = OUT_HEADER.pack(OUT_HEADER.size + len(body), error, unique) + body
        try:
            os.write(fd, reply)
        except OSError:
            pass  # the request was interrupted meanwhile
        if opcode == DESTROY:
            return


def main() -> None:
    mountpoint, size, bad_from = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    fd = mount(mountpoint)
    print("ready", flush=True)
    serve(fd, FailingFS(size, bad_from))


if __name__ == "__main__":
    main()
