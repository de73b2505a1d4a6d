//! One SQE per Driver request: the opcode, its fields and the pointers the kernel
//! will follow, from the op's description. The pointers (buffers, paths, statx
//! buffers) live in the op, which the Driver keeps until the final CQE.

use std::io;

use io_uring::{opcode, squeue, types};

use crate::engine::Request;
use crate::op::OpCode;

/// The most a single read or write transfers (the kernel's MAX_RW_COUNT).
const MAX_RW_COUNT: usize = 0x7fff_f000;

/// The SQE that carries out `req` (its user_data is set by the caller).
pub(super) fn encode(req: &Request<'_>) -> io::Result<squeue::Entry> {
    let op = req.op;
    let fd = types::Fd(op.fd);
    let offset = op.offset as u64; // -1 (u64::MAX): at the file position
    let prio = op.ioprio.unwrap_or(0);
    let len = req.len.min(MAX_RW_COUNT) as u32;
    if op.resfd.is_some() {
        // A per-op eventfd is kernel AIO's; io_uring signals its own.
        return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
    }
    let fs = op.fs.as_deref();
    let path = |p: &Option<std::ffi::CString>| p.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    let einval = || io::Error::from_raw_os_error(libc::EINVAL);
    Ok(match op.code {
        OpCode::Read => opcode::Read::new(fd, req.buf, len)
            .offset(offset)
            .rw_flags(op.rw_flags)
            .ioprio(prio)
            .build(),
        OpCode::Write => opcode::Write::new(fd, req.buf, len)
            .offset(offset)
            .rw_flags(op.rw_flags)
            .ioprio(prio)
            .build(),
        OpCode::Readv => opcode::Readv::new(fd, req.iovecs.as_ptr(), req.iovecs.len() as u32)
            .offset(offset)
            .rw_flags(op.rw_flags)
            .ioprio(prio)
            .build(),
        OpCode::Writev => opcode::Writev::new(fd, req.iovecs.as_ptr(), req.iovecs.len() as u32)
            .offset(offset)
            .rw_flags(op.rw_flags)
            .ioprio(prio)
            .build(),
        OpCode::Fsync => opcode::Fsync::new(fd).build(),
        OpCode::Fdsync => opcode::Fsync::new(fd)
            .flags(types::FsyncFlags::DATASYNC)
            .build(),
        OpCode::Poll => opcode::PollAdd::new(fd, op.poll_events).build(),
        OpCode::Noop => opcode::Nop::new().build(),
        OpCode::Close => opcode::Close::new(fd).build(),
        OpCode::OpenAt => {
            let a = fs.ok_or_else(einval)?;
            opcode::OpenAt::new(types::Fd(a.dirfd), path(&a.path))
                .flags(a.flags)
                .mode(a.mode)
                .build()
        }
        OpCode::Statx => {
            let a = fs.ok_or_else(einval)?;
            let buf = a.statx.as_ref().ok_or_else(einval)?;
            opcode::Statx::new(types::Fd(a.dirfd), path(&a.path), buf.as_mut_ptr().cast())
                .flags(a.flags)
                .mask(a.mode)
                .build()
        }
        OpCode::Ftruncate => {
            let a = fs.ok_or_else(einval)?;
            opcode::Ftruncate::new(fd, a.length).build()
        }
        OpCode::Fallocate => {
            let a = fs.ok_or_else(einval)?;
            opcode::Fallocate::new(fd, a.length)
                .offset(offset)
                .mode(a.flags)
                .build()
        }
        OpCode::RenameAt => {
            let a = fs.ok_or_else(einval)?;
            opcode::RenameAt::new(
                types::Fd(a.dirfd),
                path(&a.path),
                types::Fd(a.dirfd2),
                path(&a.path2),
            )
            .flags(a.flags as u32)
            .build()
        }
        OpCode::UnlinkAt => {
            let a = fs.ok_or_else(einval)?;
            opcode::UnlinkAt::new(types::Fd(a.dirfd), path(&a.path))
                .flags(a.flags)
                .build()
        }
        OpCode::MkdirAt => {
            let a = fs.ok_or_else(einval)?;
            opcode::MkDirAt::new(types::Fd(a.dirfd), path(&a.path))
                .mode(a.mode)
                .build()
        }
        OpCode::SymlinkAt => {
            let a = fs.ok_or_else(einval)?;
            opcode::SymlinkAt::new(types::Fd(a.dirfd2), path(&a.path), path(&a.path2)).build()
        }
        OpCode::LinkAt => {
            let a = fs.ok_or_else(einval)?;
            opcode::LinkAt::new(
                types::Fd(a.dirfd),
                path(&a.path),
                types::Fd(a.dirfd2),
                path(&a.path2),
            )
            .flags(a.flags)
            .build()
        }
    })
}
