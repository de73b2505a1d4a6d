"""Run a command with some syscalls refused by a seccomp filter, as Docker's default
profile refuses io_uring: ``python tools/seccomp_deny.py io_uring [aio] -- CMD...``.

The filter makes the named syscalls fail with EPERM in this process and its
children; nothing else on the machine is affected.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

SYSCALLS = {  # x86_64 numbers
    "io_uring": [425, 426, 427],  # io_uring_setup, io_uring_enter, io_uring_register
    "aio": [206, 207, 208, 209, 210],  # io_setup, io_destroy, io_getevents, io_submit, io_cancel
}
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_RET_K = 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1


def deny(numbers: list[int]) -> None:
    if platform.machine() != "x86_64":
        raise SystemExit("seccomp_deny.py knows x86_64 syscall numbers only")
    prog = [(BPF_LD_W_ABS, 0, 0, 0)]  # A = seccomp_data.nr
    for i, nr in enumerate(numbers):
        # if A == nr: jump to the ERRNO return (after the remaining compares and ALLOW)
        prog.append((BPF_JEQ_K, len(numbers) - i, 0, nr))
    prog.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    prog.append((BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


if __name__ == "__main__":
    sep = sys.argv.index("--")
    deny([nr for group in sys.argv[1:sep] for nr in SYSCALLS[group]])
    os.execvp(sys.argv[sep + 1], sys.argv[sep + 1 :])
