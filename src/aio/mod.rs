//! The kernel AIO engine: io_setup/io_submit/io_getevents behind [`Engine`].

pub mod abi;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use abi::{AioContextId, IoEvent, Iocb};

use crate::engine::{CancelOutcome, Engine, RawCompletion, Request, Submitted, Waiter};
use crate::op::OpCode;

pub struct AioEngine {
    ctx: AioContextId,
    /// Closed by `shutdown`, so that no later read can hit a reused fd number.
    eventfd: Option<OwnedFd>,
    maxevents: u32,
    live: bool,
}

/// Contexts of this process whose engine shut down with nothing in flight, kept
/// for the next engine of the same size: `io_destroy` waits for an RCU grace period
/// (30-48 ms here, 2026-11-27, every time), which every `asyncio.run` on the aio
/// engine paid at its end. A kept context has no op in flight and an empty
/// completion ring, so a new engine starts from what `io_setup` would have given
/// it. Each holds its events of `fs.aio-max-nr` until reused or the process exits;
/// at most `SPARES_KEPT` are kept (see `keep_spare`). Entries carry the pid that
/// made them: a forked child has none of its parent's contexts (the kernel ties
/// them to the address space), so it never takes one.
static SPARES: std::sync::Mutex<Vec<Spare>> = std::sync::Mutex::new(Vec::new());
const SPARES_KEPT: usize = 4;

struct Spare {
    ctx: AioContextId,
    maxevents: u32,
    pid: u32,
}

/// The kept contexts, locked, with those of a parent process (after a fork)
/// dropped: they are not this process's to use or destroy.
fn own_spares() -> std::sync::MutexGuard<'static, Vec<Spare>> {
    let pid = std::process::id();
    let mut spares = SPARES.lock().unwrap_or_else(|e| e.into_inner());
    spares.retain(|s| s.pid == pid);
    spares
}

/// A kept context of `maxevents` events made by this process, if any.
fn take_spare(maxevents: u32) -> Option<AioContextId> {
    let mut spares = own_spares();
    let i = spares.iter().position(|s| s.maxevents == maxevents)?;
    Some(spares.swap_remove(i).ctx)
}

/// Keeps `ctx` for a later engine. With `SPARES_KEPT` kept already, the one kept
/// longest gives way (the sizes in use lately are the likeliest to come again) and
/// is returned, for the caller to destroy outside the lock.
fn keep_spare(ctx: AioContextId, maxevents: u32) -> Option<AioContextId> {
    let mut spares = own_spares();
    let oldest = (spares.len() >= SPARES_KEPT).then(|| spares.remove(0).ctx);
    spares.push(Spare {
        ctx,
        maxevents,
        pid: std::process::id(),
    });
    oldest
}

/// How many contexts this process keeps for reuse now (tests).
pub fn spare_count() -> usize {
    own_spares().len()
}

impl AioEngine {
    pub fn new(maxevents: u32) -> io::Result<Self> {
        let eventfd = crate::sys::eventfd()?;
        let ctx = match take_spare(maxevents) {
            Some(ctx) => ctx,
            None => abi::io_setup(maxevents)?,
        };
        Ok(Self {
            ctx,
            eventfd: Some(eventfd),
            maxevents,
            live: true,
        })
    }

    pub fn maxevents(&self) -> u32 {
        self.maxevents
    }
}

/// The IOCB command for `code`; None for operations kernel AIO does not have.
fn opcode(code: OpCode) -> Option<u16> {
    Some(match code {
        OpCode::Read => abi::IOCB_CMD_PREAD,
        OpCode::Write => abi::IOCB_CMD_PWRITE,
        OpCode::Readv => abi::IOCB_CMD_PREADV,
        OpCode::Writev => abi::IOCB_CMD_PWRITEV,
        OpCode::Fsync => abi::IOCB_CMD_FSYNC,
        OpCode::Fdsync => abi::IOCB_CMD_FDSYNC,
        OpCode::Poll => abi::IOCB_CMD_POLL,
        OpCode::Noop => abi::IOCB_CMD_NOOP,
        _ => return None,
    })
}

fn raw(ev: &IoEvent) -> RawCompletion {
    RawCompletion {
        token: ev.data,
        res: ev.res,
        res2: ev.res2,
        more: false,
    }
}

impl Engine for AioEngine {
    /// Boxed so that its address, which io_cancel matches on, never changes.
    type Slot = Box<Iocb>;
    type Waiter = AioWaiter;
    type Launch = AioLaunch;

    fn waiter(&self) -> AioWaiter {
        AioWaiter { ctx: self.ctx }
    }

    fn prepare(&mut self, req: &Request<'_>, token: u64) -> io::Result<Box<Iocb>> {
        let op = req.op;
        let Some(command) = opcode(op.code) else {
            // Kernel AIO has no path or file-table operations; io_uring has.
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        };
        let mut iocb = Box::new(Iocb {
            aio_data: token,
            aio_lio_opcode: command,
            aio_fildes: op.fd as u32,
            aio_offset: op.offset,
            aio_rw_flags: op.rw_flags,
            ..Iocb::default()
        });
        match op.code {
            OpCode::Read | OpCode::Write => {
                iocb.aio_buf = req.buf as u64;
                iocb.aio_nbytes = req.len as u64;
            }
            OpCode::Readv | OpCode::Writev => {
                iocb.aio_buf = req.iovecs.as_ptr() as u64;
                iocb.aio_nbytes = req.iovecs.len() as u64;
            }
            OpCode::Poll => iocb.aio_buf = u64::from(op.poll_events),
            _ => {}
        }
        if let Some(prio) = op.ioprio {
            iocb.aio_flags |= abi::IOCB_FLAG_IOPRIO;
            iocb.aio_reqprio = prio as i16;
        }
        iocb.aio_flags |= abi::IOCB_FLAG_RESFD;
        iocb.aio_resfd = op.resfd.unwrap_or(self.notify_fd()) as u32;
        Ok(iocb)
    }

    fn stage(&mut self, batch: &mut [&mut Box<Iocb>]) -> AioLaunch {
        AioLaunch {
            ctx: self.ctx,
            iocbs: batch
                .iter_mut()
                .map(|b| &mut ***b as *mut Iocb as usize)
                .collect(),
        }
    }

    fn launch(launch: AioLaunch) -> Submitted {
        let ptrs: Vec<*mut Iocb> = launch.iocbs.iter().map(|&p| p as *mut Iocb).collect();
        let mut accepted = 0;
        // io_submit stops at the first iocb it refuses and reports only the count
        // before it; submitting the rest again yields that iocb's own errno.
        while accepted < ptrs.len() {
            // SAFETY: each iocb is boxed in an in-flight entry that the driver keeps,
            // with the buffer views and iovecs it points to, until its completion;
            // the entries were recorded before this call and a refused one is
            // removed only after it returns.
            match unsafe { abi::io_submit(launch.ctx, &ptrs[accepted..]) } {
                Ok(0) => {
                    return Submitted {
                        accepted,
                        error: Some(io::Error::from_raw_os_error(libc::EAGAIN)),
                    };
                }
                Ok(n) => accepted += n,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    return Submitted {
                        accepted,
                        error: Some(e),
                    };
                }
            }
        }
        Submitted {
            accepted,
            error: None,
        }
    }

    fn cancel(&mut self, slot: &mut Box<Iocb>) -> io::Result<CancelOutcome> {
        let mut ev = IoEvent::default();
        // SAFETY: `slot` is the boxed iocb that was submitted, at its submitted address.
        match unsafe { abi::io_cancel(self.ctx, &mut **slot, &mut ev) } {
            Ok(()) => Ok(CancelOutcome::Completed(raw(&ev))),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(CancelOutcome::Requested),
            Err(e) => Err(e),
        }
    }

    fn reap_now(&mut self, out: &mut Vec<RawCompletion>, max: usize) -> io::Result<()> {
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let mut events = vec![IoEvent::default(); max.clamp(1, self.maxevents as usize)];
        loop {
            let n = match abi::io_getevents(self.ctx, 0, &mut events, Some(&zero)) {
                Ok(n) => n,
                // io_getevents reports EINTR when it read nothing and a signal is
                // pending, even with a zero timeout: nothing was ready (a reap in a
                // test's teardown failed on a SIGCHLD this way).
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => 0,
                Err(e) => return Err(e),
            };
            out.extend(events[..n].iter().map(raw));
            if n < events.len() {
                return Ok(());
            }
        }
    }

    fn notify_fd(&self) -> RawFd {
        self.eventfd.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    fn shutdown(&mut self, in_flight: usize, out: &mut Vec<RawCompletion>) -> io::Result<()> {
        if !self.live {
            return Ok(());
        }
        self.live = false;
        if in_flight == 0 {
            // Nothing in flight, so nothing can complete into the ring any more; a
            // completion still in it (none is expected: every reaped op left the
            // count) sends the context to io_destroy instead.
            let before = out.len();
            if self.reap_now(out, 1).is_ok() && out.len() == before {
                self.eventfd = None;
                if let Some(given_way) = keep_spare(self.ctx, self.maxevents) {
                    // Idle too: only the grace period's wait is left to it.
                    return abi::io_destroy(given_way);
                }
                return Ok(());
            }
        }
        // io_destroy cancels what it can and blocks until the rest has completed;
        // only then can nothing signal the eventfd any more.
        let res = abi::io_destroy(self.ctx);
        self.eventfd = None;
        res
    }
}

/// A staged batch: the iocb addresses (as integers, to be Send) for io_submit.
pub struct AioLaunch {
    ctx: AioContextId,
    iocbs: Vec<usize>,
}

#[derive(Clone, Copy)]
pub struct AioWaiter {
    ctx: AioContextId,
}

impl Waiter for AioWaiter {
    fn wait(
        &self,
        out: &mut Vec<RawCompletion>,
        min: usize,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<()> {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let mut events = vec![IoEvent::default(); max.max(1)];
        let n = abi::io_getevents(
            self.ctx,
            min,
            &mut events[..max.max(min).max(1)],
            ts.as_ref(),
        )?;
        out.extend(events[..n].iter().map(raw));
        Ok(())
    }
}
