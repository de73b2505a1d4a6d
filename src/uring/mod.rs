//! The io_uring engine: one ring, SQEs pushed at submit, CQEs reaped in batches.
//! Its Python face, `uring.Ring`, is `crate::pydriver::ring`.

mod encode;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use io_uring::{squeue, IoUring};

use crate::engine::{CancelOutcome, Engine, RawCompletion, Request, Submitted, Waiter};
use crate::ring::enter::{enter, enter_to_submit, IORING_ENTER_GETEVENTS};
pub use crate::ring::setup::{probe, Options, Setup};

// Whose each CQE is (`crate::ring::owner`): the Driver's ops are matched to Python
// ops; the loop core's (`crate::loopcore`) are set aside for it ("side" CQEs); a
// loop-bound Watcher's (`crate::net`) go to that Watcher's sink.
use crate::ring::owner::{self, Owner};
use crate::ring::prep;
use crate::ring::regring::RegisteredRing;
use crate::ring::route::{Completion, CompletionSink, Counted, Router, Sinks, Take};
use crate::ring::submit;

/// How many times `run_deferred` re-enters for work that arrived while it ran.
const RUN_DEFERRED_ROUNDS: usize = 8;

pub struct UringEngine {
    /// Dropped (unmapped and its fd closed) by `shutdown`, once every in-flight
    /// op's completion has arrived.
    ring: Option<IoUring>,
    /// With SINGLE_ISSUER, the only thread the kernel lets use the ring.
    owner: Option<std::thread::ThreadId>,
    /// The registered eventfd; None for a ring made without one (`notify`).
    eventfd: Option<OwnedFd>,
    /// A SINGLE_ISSUER ring's fd, registered with its owner thread, which alone
    /// enters it: each enter then skips the fd lookup and the file's reference
    /// count. None where the kernel refused, and for rings any thread may use.
    registered: Option<RegisteredRing>,
    setup: Setup,
    live: bool,
    /// CQEs of side SQEs (`Owner::LoopCore`), reaped but not yet taken by the loop core.
    side: Vec<RawCompletion>,
    /// Hands each CQE to its owner, and counts the loop core's and each Watcher's
    /// ops whose final CQE has not arrived: `shutdown` waits for them too, since
    /// the kernel may still read or fill their buffers.
    router: Router,
    /// The loop core's provided-buffer ring, registered on this ring. Declared after
    /// `ring` and cleared after it in `shutdown`: its memory must outlive the ring.
    pub(crate) bufring: Option<crate::ring::bufring::BufRing>,
    /// Driver CQEs reaped by a loop-bound Watcher's own wait (`reap_aside`): the
    /// next `reap_now` returns them first.
    held: Vec<RawCompletion>,
    /// Loop-bound Watchers, by id (index 0 unused).
    sinks: Vec<Option<WatcherSink>>,
    /// Ids of Watchers whose sink got CQEs since the last `take_signalled`.
    signalled: Vec<u16>,
    /// The fixed-file table the loop-bound Watchers share (registered on first use;
    /// `Some(table with cap 0)` when the kernel refused it).
    pub(crate) files: Option<crate::ring::files::FileTable>,
    /// Sends pushed since the CQ was last drained whose CQEs are posted while they
    /// are submitted (`push_side_send_now`): they are in the CQ, not yet taken, when an
    /// enter that submitted them starts to wait. Reset by every drain (a drain that
    /// took some of them would make the count too high; too low only ends a wait
    /// early).
    at_submit: usize,
}

/// The completions of one loop-bound Watcher, set aside at reap time.
pub(crate) struct WatcherSink {
    /// (user_data without the Watcher bits, res, flags), in CQ order.
    cqes: Vec<(u64, i32, u32)>,
    signalled: bool,
    /// Called (by the loop core, after its select) when CQEs arrived.
    waker: Option<pyo3::Py<pyo3::PyAny>>,
    /// The Watcher is gone without waiting for its CQEs (its memory was leaked):
    /// they are counted and dropped.
    orphan: bool,
}

impl UringEngine {
    /// Sets up a ring with the best flags the running kernel accepts: DEFER_TASKRUN
    /// (when allowed), else COOP_TASKRUN, else neither. With `notify`, an eventfd
    /// is registered that becomes readable when completions wait, for waiting on
    /// the ring from another loop's selector. Without it the kernel signals nothing
    /// per completion: a ring waited for only by entering it (an event loop's own)
    /// saves an eventfd signal per completion, and with DEFER_TASKRUN one more
    /// when the completion's task work is queued.
    pub fn new(opts: Options, notify: bool) -> io::Result<Self> {
        let (ring, setup) = crate::ring::setup::build(&opts)?;
        let eventfd = if notify {
            let eventfd = crate::sys::eventfd()?;
            ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
            Some(eventfd)
        } else {
            None
        };
        let registered = if setup.defer_taskrun {
            RegisteredRing::register(ring.as_raw_fd())
        } else {
            None
        };
        Ok(Self {
            owner: setup.defer_taskrun.then(|| std::thread::current().id()),
            ring: Some(ring),
            eventfd,
            registered,
            setup,
            live: true,
            side: Vec::new(),
            router: Router::new(),
            bufring: None,
            held: Vec::new(),
            sinks: Vec::new(),
            signalled: Vec::new(),
            files: None,
            at_submit: 0,
        })
    }

    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    pub fn ring_fd(&self) -> RawFd {
        self.ring.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// The fd argument and the flag for `io_uring_enter` from the calling thread:
    /// the registered index on the thread that registered the ring, else the fd.
    pub fn enter_target(&self) -> (RawFd, u32) {
        RegisteredRing::target(self.registered.as_ref(), self.ring_fd())
    }

    /// Whether the ring's fd is registered with its owner thread.
    pub fn is_registered(&self) -> bool {
        self.registered.is_some()
    }

    /// Gives the registered index back (on the owner thread; see `regring`) before
    /// the ring's fd is closed.
    fn unregister(&mut self) {
        if let Some(r) = self.registered.take() {
            r.unregister(self.ring_fd());
        }
    }

    fn ring(&self) -> io::Result<&IoUring> {
        self.ring
            .as_ref()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }

    /// The kernel ring, for a loop-bound Watcher's registrations (buffer ring, files).
    pub(crate) fn io_uring(&self) -> io::Result<&IoUring> {
        self.ring()
    }

    /// Whether the ring was shut down (the loop closed it).
    pub(crate) fn is_live(&self) -> bool {
        self.live
    }

    /// Completions reaped but not yet handed out (Driver CQEs a Watcher's wait set
    /// aside, loop-core CQEs, Watchers to wake): the loop's select must not block.
    pub(crate) fn has_backlog(&self) -> bool {
        !self.held.is_empty() || !self.side.is_empty() || !self.signalled.is_empty()
    }

    /// A new loop-bound Watcher: its id (also the key of its CQE sink).
    pub(crate) fn add_watcher(&mut self, waker: pyo3::Py<pyo3::PyAny>) -> io::Result<u16> {
        self.ring()?;
        if self.sinks.is_empty() {
            self.sinks.push(None);
        }
        let wid = match self.sinks.iter().skip(1).position(Option::is_none) {
            Some(i) => i + 1,
            None if self.sinks.len() <= usize::from(owner::MAX_WATCHER_ID) => {
                self.sinks.push(None);
                self.sinks.len() - 1
            }
            None => return Err(io::Error::from_raw_os_error(libc::EMFILE)),
        };
        self.sinks[wid] = Some(WatcherSink {
            cqes: Vec::new(),
            signalled: false,
            waker: Some(waker),
            orphan: false,
        });
        Ok(wid as u16)
    }

    /// The Watcher is closed. With CQEs still due (it leaked its memory rather
    /// than wait), the sink stays, counting them, so `shutdown` still waits.
    pub(crate) fn remove_watcher(&mut self, wid: u16) {
        let in_flight = self.router.in_flight(Counted::Watcher(wid));
        if let Some(slot) = self.sinks.get_mut(wid as usize) {
            match slot {
                Some(s) if in_flight > 0 => {
                    s.orphan = true;
                    s.cqes.clear();
                    s.waker = None;
                }
                _ => *slot = None,
            }
        }
    }

    /// Pushes a Watcher's SQEs, tagged with its id, all or none (an op and its
    /// link timeout go in together, and an op refused here is completed by the
    /// Watcher with the error, so none of its SQEs may stay behind). Enters the
    /// kernel to make room when the SQ is full, reaping aside if the kernel wants
    /// the CQ drained first.
    pub(crate) fn push_watcher(&mut self, wid: u16, sqes: &[squeue::Entry]) -> io::Result<()> {
        for _ in 0..1000 {
            let room = {
                let sq = self.ring_mut()?.submission();
                sq.capacity() - sq.len()
            };
            if room >= sqes.len() {
                let mut sq = self.ring_mut()?.submission();
                for sqe in sqes {
                    let ud = sqe.get_user_data();
                    let e = sqe.clone().user_data(
                        Owner::Watcher {
                            id: wid,
                            payload: ud & owner::WATCHER_PAYLOAD,
                        }
                        .encode(),
                    );
                    // SAFETY: the Watcher keeps every buffer, timespec, msghdr and
                    // address its SQEs point to until their final CQE is reaped.
                    unsafe { submit::push(&mut sq, &e) };
                }
                drop(sq);
                self.router.submitted(Counted::Watcher(wid), sqes.len());
                return Ok(());
            }
            let before = self.sq_pending();
            self.enter_submit()?;
            if self.sq_pending() >= before {
                // Nothing taken: the kernel wants its completions posted first.
                self.reap_aside()?;
            }
        }
        Err(io::Error::from_raw_os_error(libc::EBUSY))
    }

    /// Moves a Watcher's CQEs (user_data without the Watcher bits) into `out`.
    pub(crate) fn take_watcher(&mut self, wid: u16, out: &mut Vec<(u64, i32, u32)>) {
        if let Some(Some(s)) = self.sinks.get_mut(wid as usize) {
            out.append(&mut s.cqes);
            if std::mem::take(&mut s.signalled) {
                // Taken by the Watcher itself: nothing left for the loop to wake it
                // for (and no reason for the loop's next select not to block).
                self.signalled.retain(|&w| w != wid);
            }
        }
    }

    /// The wakers of Watchers that got CQEs since the last call.
    pub(crate) fn take_signalled(&mut self, py: pyo3::Python<'_>) -> Vec<pyo3::Py<pyo3::PyAny>> {
        let mut out = Vec::new();
        for wid in std::mem::take(&mut self.signalled) {
            if let Some(Some(s)) = self.sinks.get_mut(wid as usize) {
                if std::mem::take(&mut s.signalled) {
                    if let Some(w) = &s.waker {
                        out.push(w.clone_ref(py));
                    }
                }
            }
        }
        out
    }

    /// `reap_now` right after the caller's own `io_uring_enter` with GETEVENTS (the
    /// loop's select): enters the kernel again only if task work was queued since.
    /// (Entering unconditionally was one more syscall per loop iteration.)
    pub(crate) fn reap_after_enter(
        &mut self,
        out: &mut Vec<RawCompletion>,
        max: usize,
    ) -> io::Result<()> {
        self.reap_held_then_kernel(out, max, true)
    }

    fn reap_held_then_kernel(
        &mut self,
        out: &mut Vec<RawCompletion>,
        max: usize,
        entered: bool,
    ) -> io::Result<()> {
        let mut max = max;
        if !self.held.is_empty() {
            let n = self.held.len().min(max);
            out.extend(self.held.drain(..n));
            max -= n;
            if max == 0 {
                return Ok(());
            }
        }
        self.reap_kernel(out, max, entered)
    }

    /// Submits what is queued and posts what the kernel has (DEFER_TASKRUN task
    /// work), without waiting; the Driver's CQEs are held for the next `reap_now`.
    /// A loop-bound Watcher's own poll and wait use it.
    pub(crate) fn reap_aside(&mut self) -> io::Result<()> {
        let mut out = Vec::new();
        self.reap_kernel(&mut out, usize::MAX, false)?;
        self.held.append(&mut out);
        Ok(())
    }

    /// `reap_aside` right after an `io_uring_enter` with GETEVENTS (which ran the
    /// task work): only drains the CQ, without entering again.
    pub(crate) fn drain_aside(&mut self) -> io::Result<()> {
        let mut out = Vec::new();
        loop {
            self.drain_cq(&mut out, usize::MAX);
            if !self.ring_mut()?.submission().cq_overflow() {
                break;
            }
            // Completions the CQ had no room for wait in the kernel (NODROP).
            self.get_events()?;
        }
        self.held.append(&mut out);
        Ok(())
    }

    /// Submits the SQ without waiting (the kernel takes the SQEs now: a cancel by
    /// file looks the file up at this point).
    pub(crate) fn submit_pending(&mut self) -> io::Result<()> {
        self.enter_submit()
    }

    /// What the kernel has: runs DEFER_TASKRUN task work (or flushes an overflowed
    /// CQ), then drains the CQ (the loop core's and Watchers' CQEs set aside).
    ///
    /// `entered`: the caller's own GETEVENTS enter just ran the task work, so the
    /// kernel is entered again only for work queued since (it sets
    /// IORING_SQ_TASKRUN when it queues some) or an overflowed CQ.
    fn reap_kernel(
        &mut self,
        out: &mut Vec<RawCompletion>,
        max: usize,
        entered: bool,
    ) -> io::Result<()> {
        if self.setup.defer_taskrun {
            if !entered || kernel_flagged(self.ring_mut()?) {
                self.run_deferred()?;
            }
        } else if self.ring_mut()?.submission().cq_overflow() {
            self.get_events()?;
        }
        let mut left = max;
        loop {
            left -= self.drain_cq(out, left);
            if left == 0 || !self.ring_mut()?.submission().cq_overflow() {
                return Ok(());
            }
            // Completions the CQ had no room for wait in the kernel (NODROP).
            self.get_events()?;
        }
    }

    /// Sets up the fixed-file table loop-bound Watchers share (once).
    pub(crate) fn ensure_files(&mut self) {
        if self.files.is_none() {
            if let Some(ring) = self.ring.as_ref() {
                self.files = Some(crate::ring::files::FileTable::setup(ring));
            }
        }
    }

    /// Registers `fd` in the shared fixed-file table; None: full or refused.
    pub(crate) fn register_file(&mut self, fd: RawFd) -> Option<u32> {
        let ring = self.ring.as_ref()?;
        self.files.as_mut()?.register(ring, fd)
    }

    /// Empties a slot of the shared table; `ours`: it came from `register_file`.
    pub(crate) fn clear_file(&mut self, slot: u32, ours: bool) {
        let ring = if self.live { self.ring.as_ref() } else { None };
        if let Some(files) = self.files.as_mut() {
            files.clear(ring, slot, ours);
        }
    }

    /// SQEs of loop-bound Watchers whose final CQE has not arrived.
    pub(crate) fn watchers_inflight(&self) -> usize {
        self.router.watchers_in_flight()
    }

    /// Loop-bound Watchers on this ring (closed ones still waiting for CQEs too).
    pub(crate) fn watchers(&self) -> usize {
        self.sinks.iter().flatten().count()
    }

    fn ring_mut(&mut self) -> io::Result<&mut IoUring> {
        self.ring
            .as_mut()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }

    /// Pushes one SQE of the loop core; `counted`: a CQE without MORE will end it
    /// (cancels carry `owner::INTERNAL` and are not counted).
    pub(crate) fn push_side(&mut self, sqe: squeue::Entry, counted: bool) -> io::Result<()> {
        self.push_all(&[&mut sqe.clone()])?;
        if counted {
            self.router.submitted(Counted::LoopCore, 1);
        }
        Ok(())
    }

    /// Pushes a `prep::send_all_now` and its `prep::link_check` side by side in
    /// the SQ (a link the SQ's end split would submit the send alone), and counts
    /// the one CQE the pair posts at submission when the send sent everything.
    /// False (nothing pushed) when the SQ has no room for two even after a submit.
    pub(crate) fn push_side_send_now(&mut self, send: squeue::Entry) -> io::Result<bool> {
        let mut room = self.sq_room()?;
        if room < 2 {
            self.enter_submit()?;
            room = self.sq_room()?;
            if room < 2 {
                return Ok(false);
            }
        }
        let mut check = crate::ring::prep::link_check().user_data(crate::ring::owner::INTERNAL);
        self.push_all(&[&mut send.clone(), &mut check])?;
        self.router.submitted(Counted::LoopCore, 1);
        self.at_submit += 1;
        Ok(true)
    }

    fn sq_room(&mut self) -> io::Result<usize> {
        let sq = self.ring_mut()?.submission();
        Ok(sq.capacity() - sq.len())
    }

    /// CQEs that the pairs of [`push_side_send_now`](Self::push_side_send_now)
    /// pushed since the CQ was last drained will have posted once the SQ is
    /// submitted (at least that many: a pair whose send fell short posts two): an
    /// enter that submits them may wait for that many CQEs more than it would.
    pub(crate) fn posted_at_submit(&self) -> usize {
        self.at_submit
    }

    /// The loop core's completions reaped so far.
    pub(crate) fn take_side(&mut self, out: &mut Vec<RawCompletion>) {
        out.append(&mut self.side);
    }

    /// DEFER_TASKRUN with TASKRUN_FLAG: completions wait as task work until this
    /// thread enters, and the kernel sets IORING_SQ_TASKRUN when it queues some, so
    /// a step with nothing to submit or wait for may skip its enter and let
    /// `reap_after_enter` enter only when that flag (or a CQ overflow) says so.
    pub(crate) fn defers_taskrun(&self) -> bool {
        self.setup.defer_taskrun
    }

    /// Whether a reap now would find nothing: the CQ is empty, and the kernel has
    /// flagged no task work (DEFER_TASKRUN) and no overflowed completions.
    pub(crate) fn nothing_to_reap(&mut self) -> bool {
        let Some(ring) = self.ring.as_mut() else {
            return true;
        };
        !kernel_flagged(ring) && ring.completion().is_empty()
    }

    /// CQEs the CQ can take beyond those it holds (0 without a ring).
    pub(crate) fn cq_room(&mut self) -> usize {
        self.ring.as_mut().map_or(0, |r| {
            let cq = r.completion();
            cq.capacity() - cq.len()
        })
    }

    /// SQEs pushed but not yet handed to the kernel.
    pub(crate) fn sq_pending(&mut self) -> u32 {
        self.ring
            .as_mut()
            .map_or(0, |r| r.submission().len() as u32)
    }

    /// Registers the loop core's provided-buffer ring (once).
    pub(crate) fn ensure_bufring(
        &mut self,
        nbufs: u16,
        bufsize: usize,
        bgid: u16,
    ) -> io::Result<()> {
        if self.bufring.is_none() {
            let br = crate::ring::bufring::BufRing::new(self.ring()?, nbufs, bufsize, bgid)?;
            self.bufring = Some(br);
        }
        Ok(())
    }

    fn get_events(&self) -> io::Result<()> {
        self.enter_getevents(0)
    }

    /// io_uring_enter with GETEVENTS, nothing to submit, waiting for `min_complete`
    /// CQEs (0: only runs the task work and flushes an overflowed CQ).
    fn enter_getevents(&self, min_complete: u32) -> io::Result<()> {
        self.ring()?;
        let (fd, flag) = self.enter_target();
        enter(fd, 0, min_complete, IORING_ENTER_GETEVENTS | flag, None).map(drop)
    }

    /// DEFER_TASKRUN: posts the completions waiting for this thread, without the
    /// eventfd signal each posted CQE would otherwise send.
    ///
    /// With DEFER_TASKRUN a completion signals the eventfd twice: once when the
    /// device completes it (its task work is queued for us), and again when our
    /// io_uring_enter runs that task work and posts the CQE. The second signal
    /// comes after the caller has drained the eventfd, so the loop would wake once
    /// more for nothing (one more epoll_wait, eventfd read and io_uring_enter per
    /// wake-up). Notifications are disabled while we run the task work; one that
    /// arrives meanwhile is not lost: the kernel sets IORING_SQ_TASKRUN when it
    /// queues work, and we look at that flag after re-enabling notifications and
    /// run the work ourselves.
    ///
    /// A ring without an eventfd (the event loop's) runs the same rounds: each
    /// posts the completions whose task work was queued while the last one ran, so
    /// one reap hands the loop core everything that has arrived. The loop's
    /// large-message turns count on that (one enter per reap left most receives
    /// seen dry in `test_receives_that_run_dry_wait_or_move_to_large_receives`).
    fn run_deferred(&mut self) -> io::Result<()> {
        for _ in 0..RUN_DEFERRED_ROUNDS {
            self.ring_mut()?.completion().disable_eventfd();
            let entered = self.get_events();
            let ring = self.ring_mut()?;
            ring.completion().enable_eventfd();
            // Re-enabling must be visible to the kernel before we read the flag it
            // sets when it queues work (a store-load pair: this fence on our side,
            // the kernel's atomic_or before it looks at our flag on its side).
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            entered?;
            if !ring.submission().taskrun() {
                return Ok(());
            }
        }
        // Completions keep arriving faster than we post them: leave the rest for the
        // next wake-up, which this signal guarantees. (Without an eventfd the ring
        // is waited for by entering it, which runs the queued work first.)
        if let Some(eventfd) = &self.eventfd {
            crate::sys::eventfd_signal(eventfd.as_raw_fd());
        }
        Ok(())
    }

    /// Pushes SQEs, entering the kernel only when the SQ is full.
    fn push_all(&mut self, batch: &[&mut squeue::Entry]) -> io::Result<()> {
        let mut next = 0;
        loop {
            {
                let mut sq = self.ring_mut()?.submission();
                while next < batch.len() && !sq.is_full() {
                    // SAFETY: every SQE's buffers, iovecs, paths and statx buffer are
                    // owned by its in-flight entry until its completion is reaped
                    // (the loop core's SQEs, pushed through `push_side`, point into
                    // its transports' send queues and the provided-buffer ring,
                    // kept until the final CQE in the same way).
                    unsafe { submit::push(&mut sq, batch[next]) };
                    next += 1;
                }
            }
            if next == batch.len() {
                return Ok(());
            }
            self.enter_submit()?;
        }
    }

    /// Submits what waits in the SQ (a busy CQ is not an error: the SQEs stay
    /// queued for the next enter).
    pub(crate) fn submit_now(&self) -> io::Result<()> {
        self.enter_submit()
    }

    fn enter_submit(&self) -> io::Result<()> {
        loop {
            match self.ring()?.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                // The CQ is full and the kernel wants it drained first: the SQEs stay
                // queued and go in with the next enter.
                Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Routes the CQEs in the CQ: the Driver's into `out` (at most `max`, the rest
    /// stay in the CQ), the loop core's into `side`, each Watcher's into its sink.
    /// Returns how many went into `out`.
    fn drain_cq(&mut self, out: &mut Vec<RawCompletion>, max: usize) -> usize {
        let Some(ring) = self.ring.as_mut() else {
            return 0;
        };
        if max == 0 {
            return 0;
        }
        self.at_submit = 0;
        let before = out.len();
        let mut sinks = OwnerSinks {
            driver: DriverSink { out, left: max },
            loop_core: &mut self.side,
            watchers: &mut self.sinks,
            signalled: &mut self.signalled,
        };
        self.router
            .route(ring.completion().map(Completion::from), &mut sinks);
        out.len() - before
    }
}

/// Whether the kernel flagged task work (DEFER_TASKRUN: completions wait until this
/// thread enters) or completions the CQ had no room for.
fn kernel_flagged(ring: &mut IoUring) -> bool {
    let sq = ring.submission();
    sq.taskrun() || sq.cq_overflow()
}

/// A completion in the form the engines hand out (`flags` in `res2`).
fn raw_completion(c: Completion) -> RawCompletion {
    RawCompletion {
        token: c.user_data,
        res: i64::from(c.res),
        res2: i64::from(c.flags),
        more: c.more(),
    }
}

/// The Driver's completions of one reap, at most `left` more.
struct DriverSink<'a> {
    out: &'a mut Vec<RawCompletion>,
    left: usize,
}

impl CompletionSink for DriverSink<'_> {
    fn take(&mut self, completion: Completion) -> Take {
        self.out.push(raw_completion(completion));
        self.left -= 1;
        if self.left == 0 {
            Take::Enough
        } else {
            Take::More
        }
    }
}

/// The loop core's completions, with the whole user_data: the core decodes its own
/// bits from it.
impl CompletionSink for Vec<RawCompletion> {
    fn take(&mut self, completion: Completion) -> Take {
        self.push(raw_completion(completion));
        Take::More
    }
}

impl CompletionSink for WatcherSink {
    fn take(&mut self, completion: Completion) -> Take {
        if !self.orphan {
            self.cqes.push((
                completion.user_data & owner::WATCHER_PAYLOAD,
                completion.res,
                completion.flags,
            ));
        }
        Take::More
    }
}

/// The sinks of one reap, by owner.
struct OwnerSinks<'a> {
    driver: DriverSink<'a>,
    loop_core: &'a mut Vec<RawCompletion>,
    watchers: &'a mut [Option<WatcherSink>],
    /// Watchers whose sink got a CQE, for the loop to call their wakers.
    signalled: &'a mut Vec<u16>,
}

impl Sinks for OwnerSinks<'_> {
    fn sink_of(&mut self, owner: Owner) -> Option<&mut dyn CompletionSink> {
        match owner {
            Owner::Driver(_) => Some(&mut self.driver),
            Owner::LoopCore(_) => Some(&mut *self.loop_core),
            Owner::Watcher { id, .. } => {
                let sink = self.watchers.get_mut(usize::from(id))?.as_mut()?;
                if !sink.orphan && !sink.signalled {
                    sink.signalled = true;
                    self.signalled.push(id);
                }
                Some(sink)
            }
            Owner::Internal => None,
        }
    }
}

impl Engine for UringEngine {
    /// The encoded SQE; pushed into the SQ only at submit, so that a batch refused
    /// while being prepared leaves nothing behind in the ring.
    type Slot = squeue::Entry;
    type Waiter = UringWaiter;
    type Launch = UringLaunch;

    fn waiter(&self) -> UringWaiter {
        UringWaiter {
            ring_fd: self.ring_fd(),
        }
    }

    fn check_caller(&self) -> io::Result<()> {
        match self.owner {
            Some(owner) if owner != std::thread::current().id() => {
                Err(io::Error::from_raw_os_error(libc::EEXIST))
            }
            _ => Ok(()),
        }
    }

    fn prepare(&mut self, req: &Request<'_>, token: u64) -> io::Result<squeue::Entry> {
        Ok(encode::encode(req)?.user_data(token))
    }

    fn stage(&mut self, batch: &mut [&mut squeue::Entry]) -> UringLaunch {
        // Pushed into the SQ now (entering the kernel here only when the SQ fills);
        // once in the SQ an SQE reaches the kernel with the next enter, so every
        // one counts as accepted and its errors arrive in its CQE (SUBMIT_ALL).
        let error = self.push_all(batch).err();
        let sqpoll = self.setup.flags.contains(&"SQPOLL");
        let error = error.or_else(|| {
            if sqpoll {
                self.enter_submit().err()
            } else {
                None
            }
        });
        UringLaunch {
            ring_fd: self.ring_fd(),
            to_submit: if sqpoll {
                0
            } else {
                self.ring
                    .as_mut()
                    .map_or(0, |r| r.submission().len() as u32)
            },
            count: batch.len(),
            error,
        }
    }

    fn launch(launch: UringLaunch) -> Submitted {
        let mut error = launch.error;
        if error.is_none() && launch.to_submit > 0 {
            loop {
                match enter_to_submit(launch.ring_fd, launch.to_submit) {
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    // CQ full: the SQEs stay queued and go in with the next enter.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN)) => {}
                    Err(e) => error = Some(e),
                    Ok(_) => {}
                }
                break;
            }
        }
        Submitted {
            accepted: launch.count,
            error,
        }
    }

    fn cancel(&mut self, slot: &mut squeue::Entry) -> io::Result<CancelOutcome> {
        let target = slot.get_user_data();
        let sqe = prep::cancel(target).user_data(owner::INTERNAL);
        self.push_all(&[&mut sqe.clone()])?;
        self.enter_submit()?;
        Ok(CancelOutcome::Requested)
    }

    fn reap_now(&mut self, out: &mut Vec<RawCompletion>, max: usize) -> io::Result<()> {
        self.reap_held_then_kernel(out, max, false)
    }

    fn notify_fd(&self) -> RawFd {
        self.eventfd.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    fn shutdown(&mut self, in_flight: usize, out: &mut Vec<RawCompletion>) -> io::Result<()> {
        if !self.live {
            return Ok(());
        }
        // Closing a ring does not wait for io-wq workers that may still write into
        // buffers: cancel everything and wait for every in-flight CQE first.
        let cancel_all = prep::cancel_everything().user_data(owner::INTERNAL);
        self.push_all(&[&mut cancel_all.clone()])?;
        self.enter_submit()?;
        let mut seen = 0;
        while seen < in_flight || self.router.total_in_flight() > 0 {
            let before = out.len();
            self.reap_now(out, usize::MAX)?;
            seen += out[before..].iter().filter(|c| !c.more).count();
            if seen < in_flight || self.router.total_in_flight() > 0 {
                match self.enter_getevents(1) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.live = false;
        self.eventfd = None;
        self.unregister();
        self.ring = None;
        // After the ring: the kernel no longer reads the buffer ring.
        self.bufring = None;
        Ok(())
    }
}

impl Drop for UringEngine {
    /// Dropped without a confirmed `shutdown` (it failed: a SINGLE_ISSUER ring
    /// dropped in a thread that does not own it; or a forked child, which never
    /// shuts the parent's ring down): the kernel may still write into the loop
    /// core's provided buffers, so they are leaked, never freed. (The Driver leaks
    /// its in-flight entries in the same case.) The ring itself is closed and
    /// unmapped: the kernel keeps its own references to what it still uses of the
    /// rings.
    fn drop(&mut self) {
        if self.live {
            std::mem::forget(self.bufring.take());
        }
        self.unregister();
    }
}

/// A staged batch: how many SQEs wait in the SQ for io_uring_enter.
pub struct UringLaunch {
    ring_fd: RawFd,
    to_submit: u32,
    count: usize,
    error: Option<io::Error>,
}

impl UringLaunch {
    /// What `launch` would report, without entering the kernel: the SQEs stay in the
    /// SQ and go in with the ring's next enter (an SQ that filled up while pushing
    /// was already submitted by `stage`).
    pub(crate) fn staged(self) -> Submitted {
        Submitted {
            accepted: self.count,
            error: self.error,
        }
    }
}

#[derive(Clone, Copy)]
pub struct UringWaiter {
    ring_fd: RawFd,
}

impl Waiter for UringWaiter {
    /// Waits until at least `min` CQEs are in the CQ; the caller then reaps them.
    fn wait(
        &self,
        _out: &mut Vec<RawCompletion>,
        min: usize,
        _max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<()> {
        enter(self.ring_fd, 0, min as u32, IORING_ENTER_GETEVENTS, timeout).map(drop)
    }
}
