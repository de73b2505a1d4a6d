//! The ring a Watcher runs on: its own io_uring (with an eventfd for asyncio's
//! `add_reader`), or the ring of a `ringio.EventLoop` (`crate::uring`), whose select
//! submits the Watcher's SQEs and reaps its CQEs in the loop's one `io_uring_enter`.
//!
//! On the loop's ring the Watcher's user_data carry its id (`Owner::Watcher`); the
//! engine sets those CQEs aside in the Watcher's sink and the loop core calls its
//! waker. Several Watchers share that ring: each has its own buffer group
//! (`LOOP_BGID_BASE + id`), and they share one fixed-file table.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use io_uring::{squeue, IoUring};
use pyo3::prelude::*;

use crate::pydriver::ring::Ring;
use crate::ring::bufring::BufRing;
use crate::ring::enter::IORING_ENTER_GETEVENTS;
use crate::ring::files::FileTable;
use crate::ring::owner::{self, Owner};
use crate::ring::regring::RegisteredRing;
use crate::ring::setup::{self, Options};
use crate::ring::submit;

/// (user_data, res, flags) of one CQE.
pub(crate) type Cqe = (u64, i32, u32);

/// Buffer group of a Watcher with its own ring.
const OWN_BGID: u16 = 0;
/// Buffer groups of loop-bound Watchers: this plus the Watcher's id (the loop core
/// uses 0x4c).
const LOOP_BGID_BASE: u16 = 0x1000;

// One per Watcher, never moved in a hot path: boxing the ring would only add an
// indirection to every op of the common case.
#[allow(clippy::large_enum_variant)]
pub(crate) enum WatcherRing {
    Own {
        ring: IoUring,
        eventfd: OwnedFd,
        defer: bool,
        files: FileTable,
        /// With DEFER_TASKRUN (SINGLE_ISSUER: the creating thread alone enters the
        /// ring), its fd registered with that thread (`crate::ring::regring`).
        registered: Option<RegisteredRing>,
    },
    Loop {
        ring: Py<Ring>,
        wid: u16,
        fd: RawFd,
        defer: bool,
    },
}

impl Drop for WatcherRing {
    /// Gives a registered ring fd's index back before the ring's fd is closed.
    fn drop(&mut self) {
        if let WatcherRing::Own {
            ring, registered, ..
        } = self
        {
            if let Some(r) = registered.take() {
                r.unregister(ring.as_raw_fd());
            }
        }
    }
}

fn closed_ring() -> io::Error {
    io::Error::from_raw_os_error(libc::EBADF)
}

impl WatcherRing {
    /// A ring of the Watcher's own, with a registered eventfd and a file table.
    pub(crate) fn own(entries: u32) -> io::Result<Self> {
        let (ring, setup) = setup::build(&Options {
            entries,
            sqpoll_idle_ms: None,
            single_issuer: true,
        })?;
        let defer = setup.defer_taskrun;
        let eventfd = crate::sys::eventfd()?;
        ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        let files = FileTable::setup(&ring);
        let registered = if defer {
            RegisteredRing::register(ring.as_raw_fd())
        } else {
            None
        };
        Ok(WatcherRing::Own {
            ring,
            eventfd,
            defer,
            files,
            registered,
        })
    }

    /// A place on the loop's ring `ring` (which the calling thread must own);
    /// `waker` is called by the loop's select when CQEs arrive.
    pub(crate) fn on_loop(
        py: Python<'_>,
        ring: &Bound<'_, Ring>,
        waker: Py<PyAny>,
    ) -> PyResult<Self> {
        let pydriver = ring.get().inner();
        let mut driver = pydriver.driver();
        driver.check_open()?;
        driver.check_caller(py)?;
        let engine = &mut driver.engine;
        let wid = engine
            .add_watcher(waker)
            .map_err(|e| crate::errors::io_error(py, &e, None))?;
        engine.ensure_files();
        Ok(WatcherRing::Loop {
            ring: ring.clone().unbind(),
            wid,
            fd: engine.ring_fd(),
            defer: engine.setup().defer_taskrun,
        })
    }

    pub(crate) fn is_loop(&self) -> bool {
        matches!(self, WatcherRing::Loop { .. })
    }

    pub(crate) fn defer(&self) -> bool {
        match self {
            WatcherRing::Own { defer, .. } | WatcherRing::Loop { defer, .. } => *defer,
        }
    }

    pub(crate) fn bgid(&self) -> u16 {
        match self {
            WatcherRing::Own { .. } => OWN_BGID,
            WatcherRing::Loop { wid, .. } => LOOP_BGID_BASE + wid,
        }
    }

    pub(crate) fn eventfd(&self) -> Option<RawFd> {
        match self {
            WatcherRing::Own { eventfd, .. } => Some(eventfd.as_raw_fd()),
            WatcherRing::Loop { .. } => None,
        }
    }

    /// The user_data the kernel sees for `ud` (the target of an AsyncCancel).
    pub(crate) fn tag(&self, ud: u64) -> u64 {
        match self {
            WatcherRing::Own { .. } => ud,
            WatcherRing::Loop { wid, .. } => Owner::Watcher {
                id: *wid,
                payload: ud & owner::WATCHER_PAYLOAD,
            }
            .encode(),
        }
    }

    /// Whether the loop closed its ring: the kernel has completed (and the engine
    /// collected) every op of ours; nothing can be submitted any more.
    pub(crate) fn is_dead(&self) -> bool {
        match self {
            WatcherRing::Own { .. } => false,
            WatcherRing::Loop { ring, .. } => {
                let d = ring.get().inner().driver();
                d.is_closed() || !d.engine.is_live()
            }
        }
    }

    /// Pushes SQEs, entering the kernel to make room when the SQ is full (CQEs
    /// drained meanwhile go to `cqes`).
    pub(crate) fn push(&mut self, sqes: &[squeue::Entry], cqes: &mut Vec<Cqe>) -> io::Result<()> {
        match self {
            WatcherRing::Own { ring, .. } => loop {
                {
                    let mut sq = ring.submission();
                    if sq.capacity() - sq.len() >= sqes.len() {
                        for sqe in sqes {
                            // SAFETY: every pointer in these SQEs (buffers, timespecs,
                            // msghdrs, addresses) lives in a boxed op, a pinned buffer
                            // export, the buffer ring or a connection's send queue
                            // (which stays, lost if freed, until its send's CQE),
                            // all kept until the SQE's final CQE is reaped.
                            unsafe { submit::push(&mut sq, sqe) };
                        }
                        return Ok(());
                    }
                }
                Self::own_submit(ring, cqes)?;
            },
            WatcherRing::Loop { ring, wid, .. } => {
                let mut d = ring.get().inner().driver();
                if d.is_closed() || !d.engine.is_live() {
                    return Err(closed_ring());
                }
                d.engine.push_watcher(*wid, sqes)
            }
        }
    }

    fn own_submit(ring: &mut IoUring, cqes: &mut Vec<Cqe>) -> io::Result<()> {
        loop {
            match ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {
                    // CQ overflowing: drain it (the CQEs are processed later).
                    Self::own_collect(ring, cqes);
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn own_collect(ring: &mut IoUring, cqes: &mut Vec<Cqe>) {
        let mut cq = ring.completion();
        cq.sync();
        for cqe in &mut cq {
            cqes.push((cqe.user_data(), cqe.result(), cqe.flags()));
        }
    }

    /// Hands the queued SQEs to the kernel now (a cancel by file must be taken
    /// before the file's slot is cleared or its dup closed).
    pub(crate) fn submit(&mut self, cqes: &mut Vec<Cqe>) -> io::Result<()> {
        match self {
            WatcherRing::Own { ring, .. } => Self::own_submit(ring, cqes),
            WatcherRing::Loop { ring, .. } => {
                let mut d = ring.get().inner().driver();
                if d.is_closed() || !d.engine.is_live() {
                    return Ok(());
                }
                d.engine.submit_pending()
            }
        }
    }

    /// Moves the CQEs already available to us into `cqes`, without a syscall.
    pub(crate) fn collect(&mut self, cqes: &mut Vec<Cqe>) {
        match self {
            WatcherRing::Own { ring, .. } => Self::own_collect(ring, cqes),
            WatcherRing::Loop { ring, wid, .. } => {
                ring.get().inner().driver().engine.take_watcher(*wid, cqes)
            }
        }
    }

    /// Submits and collects without waiting. On the loop's ring, what the loop's
    /// last select reaped for us; only when that is nothing and `enter`, the
    /// kernel is entered (submitting the SQ and running task work), what belongs to
    /// others set aside for the loop. Without entering, the loop's next select
    /// submits our SQEs.
    pub(crate) fn poll(&mut self, enter: bool, cqes: &mut Vec<Cqe>) -> io::Result<()> {
        match self {
            WatcherRing::Own {
                ring,
                defer,
                registered,
                ..
            } => {
                let to_submit = ring.submission().len() as u32;
                let overflow = ring.submission().cq_overflow();
                if to_submit > 0 || *defer || overflow {
                    let (fd, flag) = RegisteredRing::target(registered.as_ref(), ring.as_raw_fd());
                    crate::ring::enter::enter_nowait(fd, to_submit, IORING_ENTER_GETEVENTS | flag)?;
                }
                Self::own_collect(ring, cqes);
                Ok(())
            }
            WatcherRing::Loop { ring, wid, fd, .. } => {
                let mut d = ring.get().inner().driver();
                let before = cqes.len();
                d.engine.take_watcher(*wid, cqes);
                if enter && cqes.len() == before && !d.is_closed() && d.engine.is_live() {
                    let n = d.engine.sq_pending();
                    crate::ring::enter::enter_nowait(*fd, n, IORING_ENTER_GETEVENTS)?;
                    d.engine.drain_aside()?;
                    d.engine.take_watcher(*wid, cqes);
                }
                Ok(())
            }
        }
    }

    /// Submits and waits (GIL released) up to `timeout` for a completion on the
    /// ring, then collects ours. On the loop's ring the completion that ends the
    /// wait may be someone else's: the caller loops. EINTR/ETIME are returned.
    pub(crate) fn wait(
        &mut self,
        py: Python<'_>,
        timeout: Option<Duration>,
        cqes: &mut Vec<Cqe>,
    ) -> io::Result<()> {
        match self {
            WatcherRing::Own {
                ring, registered, ..
            } => {
                let (fd, flag) = RegisteredRing::target(registered.as_ref(), ring.as_raw_fd());
                let to_submit = ring.submission().len() as u32;
                // A Watcher waits for sockets, as `epoll_wait` does: not iowait.
                let not_iowait =
                    crate::ring::enter::not_iowait(ring.params().is_feature_no_iowait());
                let flags = IORING_ENTER_GETEVENTS | flag | not_iowait;
                let rc =
                    py.detach(move || crate::ring::enter::enter(fd, to_submit, 1, flags, timeout));
                Self::own_collect(ring, cqes);
                rc.map(drop)
            }
            WatcherRing::Loop { ring, wid, fd, .. } => {
                let pydriver = ring.get().inner();
                let (to_submit, not_iowait) = {
                    let mut d = pydriver.driver();
                    if d.is_closed() || !d.engine.is_live() {
                        d.engine.take_watcher(*wid, cqes);
                        return Ok(());
                    }
                    (
                        d.engine.sq_pending(),
                        crate::ring::enter::not_iowait(d.engine.setup().no_iowait),
                    )
                };
                let fd = *fd;
                let flags = IORING_ENTER_GETEVENTS | not_iowait;
                let rc =
                    py.detach(move || crate::ring::enter::enter(fd, to_submit, 1, flags, timeout));
                let mut d = pydriver.driver();
                if !d.is_closed() && d.engine.is_live() {
                    d.engine.drain_aside()?;
                }
                d.engine.take_watcher(*wid, cqes);
                rc.map(drop)
            }
        }
    }

    /// Registers `fd` in the fixed-file table; None: use a dup instead.
    pub(crate) fn register_file(&mut self, fd: RawFd) -> Option<u32> {
        match self {
            WatcherRing::Own { ring, files, .. } => files.register(ring, fd),
            WatcherRing::Loop { ring, .. } => ring.get().inner().driver().engine.register_file(fd),
        }
    }

    /// Empties a fixed-file slot (the ring drops its reference to the socket).
    pub(crate) fn clear_slot(&mut self, slot: u32, ours: bool) {
        match self {
            WatcherRing::Own { ring, files, .. } => files.clear(Some(ring), slot, ours),
            WatcherRing::Loop { ring, .. } => {
                ring.get().inner().driver().engine.clear_file(slot, ours)
            }
        }
    }

    /// Whether direct accepts are possible (a fixed-file table is registered).
    pub(crate) fn has_files(&self) -> bool {
        match self {
            WatcherRing::Own { files, .. } => files.has_slots(),
            WatcherRing::Loop { ring, .. } => ring
                .get()
                .inner()
                .driver()
                .engine
                .files
                .as_ref()
                .is_some_and(FileTable::has_slots),
        }
    }

    /// The Watcher's provided-buffer ring, registered on this ring (None: the
    /// kernel has no buffer rings; reads without a buffer allocate).
    pub(crate) fn bufring(&self, nbufs: u16, bufsize: usize) -> Option<BufRing> {
        let bgid = self.bgid();
        match self {
            WatcherRing::Own { ring, .. } => BufRing::new(ring, nbufs, bufsize, bgid).ok(),
            WatcherRing::Loop { ring, .. } => {
                let d = ring.get().inner().driver();
                BufRing::new(d.engine.io_uring().ok()?, nbufs, bufsize, bgid).ok()
            }
        }
    }

    /// Unregisters the buffer ring (every CQE that could use it has been reaped).
    pub(crate) fn drop_bufring(&self, pool: &mut BufRing) {
        match self {
            WatcherRing::Own { ring, .. } => pool.unregister(ring),
            WatcherRing::Loop { ring, .. } => {
                let d = ring.get().inner().driver();
                if d.engine.is_live() {
                    if let Ok(r) = d.engine.io_uring() {
                        pool.unregister(r);
                    }
                }
            }
        }
    }

    /// The Watcher is closed: a loop's ring forgets it (or, with CQEs still due
    /// because its memory was leaked, keeps counting them for its own shutdown).
    pub(crate) fn leave(&self) {
        if let WatcherRing::Loop { ring, wid, .. } = self {
            ring.get().inner().driver().engine.remove_watcher(*wid);
        }
    }
}
