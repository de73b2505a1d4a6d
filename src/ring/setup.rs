//! Setting a ring up: the one ladder of flags every ring of ringio climbs down, and
//! the probe of the opcodes the running kernel supports.

use std::io;

use io_uring::{opcode, IoUring};

#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub entries: u32,
    /// Kernel SQ polling thread with this idle time (ms); opt-in, costly on small machines.
    pub sqpoll_idle_ms: Option<u32>,
    /// Allow SINGLE_ISSUER + DEFER_TASKRUN: completions then appear only when the
    /// creating thread enters the kernel, so only that thread may use the ring.
    pub single_issuer: bool,
}

/// Which setup the running kernel accepted.
#[derive(Clone, Debug)]
pub struct Setup {
    pub flags: Vec<&'static str>,
    pub sq_entries: u32,
    pub cq_entries: u32,
    pub defer_taskrun: bool,
    /// The kernel takes `IORING_ENTER_NO_IOWAIT` (Linux 6.15).
    pub no_iowait: bool,
}

/// The ring with the best flags the running kernel accepts: SINGLE_ISSUER +
/// DEFER_TASKRUN (+ TASKRUN_FLAG) when `opts.single_issuer` allows it, else
/// COOP_TASKRUN, else neither. A kernel that does not know a flag refuses the setup
/// with EINVAL and the next rung is tried; any other error is final.
pub fn build(opts: &Options) -> io::Result<(IoUring, Setup)> {
    let mut last = None;
    for attempt in 0..3 {
        match build_attempt(opts, attempt) {
            Ok(built) => return Ok(built),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EINVAL)))
}

fn build_attempt(opts: &Options, attempt: usize) -> io::Result<(IoUring, Setup)> {
    let mut b = IoUring::builder();
    let mut flags = vec!["SUBMIT_ALL", "CLAMP"];
    b.setup_submit_all()
        .setup_clamp()
        .setup_cqsize(opts.entries.saturating_mul(4));
    let defer = opts.single_issuer && attempt == 0 && opts.sqpoll_idle_ms.is_none();
    if defer {
        // TASKRUN_FLAG: the kernel sets IORING_SQ_TASKRUN while completions wait
        // for the owner to enter (the engine's `run_deferred` looks at it).
        b.setup_single_issuer()
            .setup_defer_taskrun()
            .setup_taskrun_flag();
        flags.extend(["SINGLE_ISSUER", "DEFER_TASKRUN", "TASKRUN_FLAG"]);
    } else if attempt <= 1 {
        b.setup_coop_taskrun();
        flags.push("COOP_TASKRUN");
    }
    if let Some(idle) = opts.sqpoll_idle_ms {
        b.setup_sqpoll(idle);
        flags.push("SQPOLL");
    }
    let ring = b.build(opts.entries)?;
    let setup = Setup {
        flags,
        sq_entries: ring.params().sq_entries(),
        cq_entries: ring.params().cq_entries(),
        defer_taskrun: defer,
        no_iowait: ring.params().is_feature_no_iowait(),
    };
    Ok((ring, setup))
}

/// The opcodes the running kernel supports, by ringio's names.
pub fn probe() -> io::Result<Vec<(&'static str, bool)>> {
    let ring = IoUring::new(2)?;
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    Ok([
        ("read", opcode::Read::CODE),
        ("write", opcode::Write::CODE),
        ("readv", opcode::Readv::CODE),
        ("writev", opcode::Writev::CODE),
        ("fsync", opcode::Fsync::CODE),
        ("poll_add", opcode::PollAdd::CODE),
        ("nop", opcode::Nop::CODE),
        ("openat", opcode::OpenAt::CODE),
        ("close", opcode::Close::CODE),
        ("statx", opcode::Statx::CODE),
        ("ftruncate", opcode::Ftruncate::CODE),
        ("fallocate", opcode::Fallocate::CODE),
        ("renameat", opcode::RenameAt::CODE),
        ("unlinkat", opcode::UnlinkAt::CODE),
        ("mkdirat", opcode::MkDirAt::CODE),
        ("symlinkat", opcode::SymlinkAt::CODE),
        ("linkat", opcode::LinkAt::CODE),
        ("async_cancel", opcode::AsyncCancel::CODE),
        ("accept", opcode::Accept::CODE),
        ("connect", opcode::Connect::CODE),
        ("send", opcode::Send::CODE),
        ("recv", opcode::Recv::CODE),
        ("sendmsg", opcode::SendMsg::CODE),
        ("recvmsg", opcode::RecvMsg::CODE),
        ("timeout", opcode::Timeout::CODE),
        ("link_timeout", opcode::LinkTimeout::CODE),
        ("splice", opcode::Splice::CODE),
        ("send_zc", opcode::SendZc::CODE),
    ]
    .into_iter()
    .map(|(name, code)| (name, probe.is_supported(code)))
    .collect())
}
