//! SQEs that more than one client builds, one small function per operation (as
//! liburing's `io_uring_prep_*`), over the io-uring crate's typed opcode builders.
//! Each sets the operation's own fields; the caller sets user_data, and the
//! fixed-file flag where its fd is a slot of the file table.

use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

/// A send of `len` bytes at `ptr`. MSG_NOSIGNAL: a peer that has gone makes the
/// send fail with EPIPE instead of raising SIGPIPE, which would kill a process
/// that did not ignore it (Python ignores it, an embedding program may not).
pub fn send(fd: types::Fd, ptr: *const u8, len: u32) -> squeue::Entry {
    opcode::Send::new(fd, ptr, len)
        .flags(libc::MSG_NOSIGNAL)
        .build()
}

/// A sendmsg of `msg` (its iovecs, and an address for a datagram), with
/// MSG_NOSIGNAL as for [`send`].
pub fn sendmsg(fd: types::Fd, msg: *const libc::msghdr) -> squeue::Entry {
    opcode::SendMsg::new(fd, msg)
        .flags(libc::MSG_NOSIGNAL as u32)
        .build()
}

/// A send of all `len` bytes at `ptr` that ends while it is submitted: with
/// MSG_DONTWAIT the kernel does not wait for room in the socket buffer (it fails
/// the request, REQ_F_NOWAIT, instead of arming a poll), and with MSG_WAITALL a
/// send that took fewer bytes fails too; its CQE then carries the bytes it did
/// send (the send ops' fail handler), or -EAGAIN when it sent none. Linked
/// (`IO_LINK`) to [`link_check`], whose CQE the kernel posts only when this send
/// failed: a full send posts one CQE, any other outcome two. MSG_NOSIGNAL as for
/// [`send`].
pub fn send_all_now(fd: types::Fd, ptr: *const u8, len: u32) -> squeue::Entry {
    opcode::Send::new(fd, ptr, len)
        .flags(libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT | libc::MSG_WAITALL)
        .build()
        .flags(squeue::Flags::IO_LINK)
}

/// A sendmsg of `msg` that ends while it is submitted, as [`send_all_now`].
pub fn sendmsg_all_now(fd: types::Fd, msg: *const libc::msghdr) -> squeue::Entry {
    opcode::SendMsg::new(fd, msg)
        .flags((libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT | libc::MSG_WAITALL) as u32)
        .build()
        .flags(squeue::Flags::IO_LINK)
}

/// The NOP linked behind a [`send_all_now`]: skipped without a CQE when the send
/// sent everything, cancelled (a CQE with -ECANCELED) when it failed.
pub fn link_check() -> squeue::Entry {
    opcode::Nop::new()
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
}

/// A multishot receive: each CQE carries one buffer of the provided-buffer group
/// `bgid`, until the kernel ends it (a CQE without `MORE`).
pub fn recv_multishot(fd: types::Fd, bgid: u16) -> squeue::Entry {
    opcode::RecvMulti::new(fd, bgid).build()
}

/// A read of up to `len` bytes at `ptr` from `fd`'s current position (an
/// eventfd's counter, for instance).
pub fn read(fd: types::Fd, ptr: *mut u8, len: u32) -> squeue::Entry {
    opcode::Read::new(fd, ptr, len).build()
}

/// Cancels the op whose SQE carried `target` as its user_data.
pub fn cancel(target: u64) -> squeue::Entry {
    opcode::AsyncCancel::new(target).build()
}

/// Cancels every op on `fd`, a slot of the fixed-file table when `fixed` (the
/// link timeouts of those ops go with them).
pub fn cancel_all_on(fd: RawFd, fixed: bool) -> squeue::Entry {
    let builder = if fixed {
        types::CancelBuilder::fd(types::Fixed(fd as u32))
    } else {
        types::CancelBuilder::fd(types::Fd(fd))
    };
    opcode::AsyncCancel2::new(builder.all()).build()
}

/// Cancels every op on the ring (before the ring is closed).
pub fn cancel_everything() -> squeue::Entry {
    opcode::AsyncCancel2::new(types::CancelBuilder::any()).build()
}
