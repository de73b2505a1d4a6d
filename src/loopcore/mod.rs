//! The event loop's native hot path (`ringio.EventLoop`).
//!
//! [`LoopCore`] shares the loop's one ring (`ringio.uring.Ring`, driven by the
//! selector's polls and the `sock_*` ops) and runs stream transports on it:
//!
//! * receive: one multishot `RECV` per reading transport into a provided-buffer ring
//!   registered on that ring; each CQE's bytes become one `bytes` handed straight to
//!   `protocol.data_received` (or copied into `get_buffer()` for a BufferedProtocol),
//!   called from here during the selector step, with no Python Handle in between. A
//!   transport whose receives average 48 KiB or more is served by readiness instead
//!   (a multishot `POLL_ADD`, then turns of a `recv` straight into a new `bytes`);
//! * send: `write()` appends to a per-transport queue (small writes are coalesced,
//!   `bytes` of 2 KiB or more are kept by reference, never copied); every transport
//!   with queued data gets one `SEND`/`SENDMSG` pushed right before the loop's next
//!   `io_uring_enter`, which also submits the selector's polls and waits. A partial
//!   send leaves the rest queued for the next round.
//!
//! SQEs of the core carry `Owner::LoopCore` user_data (`crate::ring::owner`); the engine sets their CQEs
//! aside (`UringEngine::take_side`) instead of giving them to the Driver. The state
//! lives behind one mutex that is never held while Python code runs: a CQE batch is
//! first turned into actions under the lock, then the actions call the protocol.
//! Everything the kernel may still use (queued chunks of an in-flight send, the
//! buffer ring) stays alive until the op's final CQE, even after the transport was
//! closed, aborted or collected.

mod action;
mod callbacks;
mod calls;
mod cqes;
mod deliver;
mod flush;
mod handles;
mod instance_slots;
mod iteration;
mod pybytes;
mod select;
mod timer_handle;
mod timers;
mod transport;
mod writer;

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyModule};
use pyo3::{PyTraverseError, PyVisit};

use crate::conn::recv::Arm;
use crate::engine::RawCompletion;
use crate::errors;
use crate::op::{Completion, Op};
use crate::pydriver::ring::Ring;
use crate::pydriver::{lock, try_lock};
use crate::ring::owner::Owner;

use action::{with_bufring, Action};
use callbacks::Callbacks;
use iteration::NATIVE_ITERATIONS;
use pybytes::_fail_receive_allocations;
use transport::Conn;
use writer::TransportWriter;

const KIND_RECV: u64 = 0;
const KIND_SEND: u64 = 1;
/// In a receive's user_data: it takes its buffers from the `bytes`-backed group.
const BIG_BIT: u64 = 1 << 31;
/// Buffer group of the loop's provided buffers.
const BGID: u16 = 0x4c;
/// Large receives go into a new `bytes` of this size (`receive_large`): the whole
/// object stays below glibc's default mmap threshold (128 KiB), so that it comes
/// from the heap and shrinking it to the received length is a split in place, not
/// an mremap.
const BIG_BUFSIZE: usize = 128 * 1024 - 256;
/// Large-receive transports served per select, in the order their data came
/// (`CoreState::ready_large`): about `CACHE_BUDGET` of received bytes. Each one's bytes
/// go to its protocol right after its receive, while they are in the cache; a
/// streams protocol keeps them until its task runs, the next iteration, so an
/// unbounded turn (every readable transport) left 1,000 x 100 KiB in buffers
/// between two iterations.
const LARGE_TURNS: usize = CACHE_BUDGET / BIG_BUFSIZE;
/// Up to 1024 x 16 KiB (16 MiB, mapped with MAP_NORESERVE). The buffer ring provides
/// a small window of the most recently returned buffers (cache-warm), doubled each
/// time the kernel runs out (ENOBUFS ends the multishot receive); a buffer goes back
/// as soon as its bytes are copied out. (256 buffers in all starved 1,000
/// connections.)
///
/// The window is capped so that one batch's received bytes stay about
/// `CACHE_BUDGET` (see `CoreState::recv_avg`): the kernel fills every buffer of a batch
/// before the first callback runs, and 100 connections x 100 KiB (10 MiB of
/// buffers) made every copy out of them a cache miss, where uvloop reads each
/// socket into the same warm 256 KiB. Transports the window could not serve wait
/// in `CoreState::starved` and are re-armed a few per iteration, as buffers allow.
const NBUFS: u16 = 1024;
const BUFSIZE: usize = 16 * 1024;
/// About the L2 cache of one core here.
const CACHE_BUDGET: usize = 512 * 1024;
/// The window never shrinks below this many buffers.
const MIN_WINDOW: usize = 32;

/// The user_data of a transport's SQE. The core's own bits (`Owner::LoopCore`):
/// 32..62 the generation, 31 BIG_BIT (receives), 1..31 the slot, 0 the kind.
fn token(slot: u32, gen: u32, kind: u64) -> u64 {
    Owner::LoopCore((u64::from(gen & 0x3fff_ffff) << 32) | (u64::from(slot) << 1) | kind).encode()
}

/// The slot of the loop's wake-up read (`LoopCore::wake`): above any transport's
/// (slots are indexes of `CoreState::conns`, which never holds 2^30 entries).
const WAKE_SLOT: u32 = 0x3fff_ffff;

/// The user_data of the wake-up read. Its kind is a receive's: `select_step`
/// keeps waiting past CQEs that are all sends, never past this one.
fn wake_token() -> u64 {
    token(WAKE_SLOT, 0x3fff_ffff, KIND_RECV)
}

/// Where every loop's wake-up read puts the eventfd's counter, which nobody reads:
/// a static, so that a read the kernel completes after its loop is gone (a ring
/// that was never shut down) writes into memory that is still there. Only its
/// address is taken; Rust code never reads or writes it.
static mut WAKE_SINK: u64 = 0;

fn recv_token(slot: u32, gen: u32, big: bool) -> u64 {
    token(slot, gen, KIND_RECV) | if big { BIG_BIT } else { 0 }
}

fn untoken(t: u64) -> (u32, u32, u64) {
    (
        ((t >> 1) & 0x3fff_ffff) as u32,
        ((t >> 32) & 0x3fff_ffff) as u32,
        t & 1,
    )
}

/// Everything the core keeps behind its mutex: the transports, the queues of
/// those waiting for a flush, for buffers or for a large-receive turn, and the
/// deliveries a select left for later.
#[derive(Default)]
struct CoreState {
    conns: Vec<Option<Conn>>,
    free: Vec<u32>,
    next_gen: u32,
    dirty: Vec<u32>,
    /// Transports resumed with a backlog: delivered at the next select.
    resumed: Vec<u32>,
    batch: u64,
    /// Moving averages (x16) of the bytes per receive CQE and of the buffers one
    /// transport took per batch: they size the window and the starved re-arms.
    recv_avg: usize,
    bufs_avg: usize,
    /// Transports whose receive ended with ENOBUFS, in order: re-armed by `flush`
    /// as many at a time as the free buffers can serve. Re-arming all of them at
    /// once made 1,000 connections fail again, one wasted SQE and CQE each.
    starved: VecDeque<(u32, u32)>,
    /// Large-receive transports whose sockets are readable, in the order their
    /// data came: each select gives the first `LARGE_TURNS` of them a receive.
    ready_large: VecDeque<(u32, u32)>,
    ring: Option<Py<Ring>>,
    /// Side CQEs not yet processed (a KeyboardInterrupt stopped the last batch).
    pending: Vec<RawCompletion>,
    /// Driver completions to hand out first (the last select raised).
    backlog: Vec<Py<Completion>>,
    /// Deliveries a select made while handles were already ready (`select_step`'s
    /// `defer`): run by `run_deferred`, a handle queued behind those, so that the
    /// handles run first, as in asyncio, whose reader handles join the ready queue
    /// after them. With `deferred_resumed`, the resumed transports' backlogs.
    deferred: Vec<Action>,
    deferred_resumed: Vec<u32>,
    /// A `run_deferred` handle is queued (`claim_deferred`).
    deferred_queued: bool,
    closed: bool,
    /// The wake-up eventfd (`LoopCore::wake`), until `close_all` closes it. Behind
    /// the core's mutex, so that no thread's `wake()` writes to the fd number once
    /// it has been given back (and maybe reused).
    wake: Option<OwnedFd>,
    /// A read of `wake` is on the ring: a `wake()` from any thread completes it,
    /// which ends the loop's wait.
    wake_armed: bool,
    /// The read failed other than by cancellation: no more are armed, and `wake()`
    /// returns False so that the loop wakes itself through asyncio's self-pipe.
    wake_failed: bool,
    /// `wake()` has written to the eventfd since the loop last saw the read's
    /// completion: the wait is ending already, so later wake-ups write nothing.
    /// Cleared when the completion is taken, and when the core moves to another
    /// ring (whose first read may find the counter already consumed).
    wake_signalled: bool,
}

impl CoreState {
    fn conn(&mut self, slot: u32, gen: u32) -> Option<&mut Conn> {
        self.conns
            .get_mut(slot as usize)
            .and_then(Option::as_mut)
            .filter(|c| c.gen == gen)
    }

    fn mark(&mut self, slot: u32) {
        if let Some(Some(c)) = self.conns.get_mut(slot as usize) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(slot);
            }
        }
    }

    fn maybe_free(&mut self, slot: u32) {
        let free = matches!(self.conns.get(slot as usize), Some(Some(c)) if c.life.is_released() && c.idle());
        if free {
            self.conns[slot as usize] = None;
            self.free.push(slot);
        }
    }
}

/// The native half of `ringio.EventLoop`: stream transports on the loop's ring, and
/// the selector's submit + wait + reap in one `io_uring_enter`.
#[pyclass(module = "ringio._core.loop", frozen)]
pub struct LoopCore {
    inner: Mutex<CoreState>,
    /// What the select settles as a future (`isinstance`'s second argument): the
    /// loop hands asyncio's `Future` and the lanes of `pread_many`
    /// (`ringio._engines.many.Lane`, settled through the same methods).
    future_types: Py<PyAny>,
    /// `report_error(handle, exc)`: a handle's callback raised (the except branch
    /// of asyncio's `Handle._run`, which `run_ready` does natively).
    report_error: Py<PyAny>,
    /// Where the loop that runs the native iterations keeps its attributes, found
    /// at the first of them.
    iteration_state: std::sync::OnceLock<instance_slots::IterationState>,
}

/// Whether `ring` was shut down: its engine waited for the final CQE of every op,
/// the core's included, so the kernel reads and writes none of the core's memory
/// any more. False when that is not known (the shutdown failed, as it does in a
/// thread that does not own a SINGLE_ISSUER ring; or the driver is busy).
fn ring_finished(ring: &Py<Ring>) -> bool {
    ring.get()
        .inner()
        .try_driver()
        .is_some_and(|d| !d.engine.is_live())
}

impl Drop for LoopCore {
    /// The core goes away (its last reference dropped, after `close_all` or
    /// without it: an unclosed loop collected by the GC, whose `__del__` could
    /// not close its ring). Transports' memory is freed only if the ring is known
    /// to be shut down; a send still in flight on a live ring keeps its buffers
    /// forever (`Conn::dispose`). The ring's own buffers are its engine's, which
    /// frees them only after its shutdown confirmed the kernel is done.
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        let done = inner.ring.as_ref().is_none_or(ring_finished);
        for c in std::mem::take(&mut inner.conns).into_iter().flatten() {
            c.dispose(done);
        }
        // `inner.ring` is dropped after this, with the rest of `CoreState`.
    }
}

impl LoopCore {
    fn has_deferred(&self) -> bool {
        let inner = self.lock();
        !inner.deferred.is_empty() || !inner.deferred_resumed.is_empty()
    }

    /// Whether the caller is to queue a `run_deferred` handle: there are deferred
    /// deliveries and none is queued yet.
    fn claim_deferred(&self) -> bool {
        let mut inner = self.lock();
        let due = !inner.deferred_queued
            && (!inner.deferred.is_empty() || !inner.deferred_resumed.is_empty());
        inner.deferred_queued |= due;
        due
    }

    fn lock(&self) -> MutexGuard<'_, CoreState> {
        lock(&self.inner)
    }

    fn with_conn<R>(&self, slot: u32, gen: u32, f: impl FnOnce(&mut Conn) -> R) -> Option<R> {
        let mut inner = self.lock();
        let r = inner.conn(slot, gen).map(f);
        inner.mark(slot);
        r
    }
}

#[pymethods]
impl LoopCore {
    /// `future_types`: the types (a type or a tuple, as `isinstance` takes) of the
    /// file ops' futures the select settles; `report_error(handle, exc)` reports
    /// an exception out of a handle's callback.
    #[new]
    fn new(future_types: Py<PyAny>, report_error: Py<PyAny>) -> PyResult<Self> {
        let inner = CoreState {
            wake: Some(crate::sys::eventfd()?),
            ..CoreState::default()
        };
        Ok(Self {
            inner: Mutex::new(inner),
            future_types,
            report_error,
            iteration_state: std::sync::OnceLock::new(),
        })
    }

    /// Ends the loop's wait from any thread (`call_soon_threadsafe`'s
    /// `_write_to_self`): adds 1 to the eventfd that the ring's wake-up read waits
    /// on. Its completion is the core's own: the loop runs its ready handles with
    /// no selector event, no self-pipe read and no Python-level iteration. Returns
    /// False, having written nothing, once the wake-up read has failed or the core
    /// is closed; the caller then uses asyncio's self-pipe. Also when the core's
    /// lock is taken: the caller is then a finalizer that a collection ran inside
    /// one of the core's own critical sections in this thread (no other thread
    /// holds the lock while this one holds the GIL), where locking would deadlock.
    ///
    /// Wake-ups are coalesced: after one write, the next ones write nothing until
    /// the loop has taken the read's completion. The callbacks they follow are in
    /// the ready queue by then (queued before `wake()`, under the GIL, which the
    /// loop holds when it takes the completion and runs the queue after it).
    fn wake(&self) -> bool {
        let Some(mut inner) = try_lock(&self.inner) else {
            return false;
        };
        let inner = &mut *inner;
        match &inner.wake {
            Some(fd) if !inner.wake_failed => {
                if !inner.wake_signalled {
                    crate::sys::eventfd_signal(fd.as_raw_fd());
                    inner.wake_signalled = true;
                }
                true
            }
            _ => false,
        }
    }

    /// The cyclic GC sees the Python objects the core holds: an unclosed loop
    /// with transports (loop -> selector -> core -> transport -> loop, and
    /// core -> transport -> writer -> core) is then collected, and its
    /// `__del__` warns and closes it as asyncio's does.
    ///
    /// Visited: the ring, the Driver completions held for the next select, and
    /// each transport with its protocol's callbacks. Not visited: the `bytes`
    /// objects queued for sending: the GC does not track `bytes`, which refer to
    /// nothing and so are never part of a cycle.
    ///
    /// The lock is only tried, and what the try finds cannot change during a
    /// collection: the lock is never held across `py.detach`, so a holder is
    /// either this thread (the collection started inside one of the core's
    /// critical sections) or a thread waiting for the GIL that the collection
    /// holds. Every pass of the collection then finds the lock held and visits
    /// nothing, consistently (a visit in one pass and not in the next could
    /// make the GC free a live object): the core's objects merely look
    /// referenced from outside, and survive this collection.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.future_types)?;
        visit.call(&self.report_error)?;
        if let Some(state) = self.iteration_state.get() {
            state.traverse(&visit)?;
        }
        // Only tried: a collection can start inside one of the core's own
        // critical sections, in this same thread.
        let Some(inner) = try_lock(&self.inner) else {
            return Ok(());
        };
        visit.call(&inner.ring)?;
        for c in &inner.backlog {
            visit.call(c)?;
        }
        // Each transport's callbacks once, through its state: the actions that
        // share them (an interrupted batch's, the deferred ones) are not visited,
        // which only makes those objects look referenced from outside.
        for c in inner.conns.iter().flatten() {
            if let Some(cb) = &c.callbacks {
                cb.traverse(&visit)?;
            }
        }
        Ok(())
    }

    /// Breaks the cycles through the core: drops its references to transports,
    /// protocols' callbacks and held completions. Python references only: what
    /// the kernel may still use stays (the chunks of a send in flight, the ring,
    /// which owns the provided buffers); the core's `Drop` decides whether that
    /// memory can be freed. Transports whose references are gone are left alone
    /// by the completions that still arrive (their actions find no transport).
    fn __clear__(&self) {
        let taken = {
            let Some(mut inner) = try_lock(&self.inner) else {
                return; // see __traverse__: the other objects' clears break the cycle
            };
            let mut refs = Vec::new();
            for c in inner.conns.iter_mut().flatten() {
                refs.extend(c.callbacks.take());
            }
            let deferred = std::mem::take(&mut inner.deferred);
            (refs, std::mem::take(&mut inner.backlog), deferred)
        };
        // Dropped without the lock: releasing them may run Python code.
        drop(taken);
    }

    /// One selector step on `ring`: pushes the transports' SQEs, submits `ops` (the
    /// selector's polls and queued ops), enters the kernel once (waiting for a
    /// completion for up to `timeout` seconds when `block`, None: no limit), runs
    /// the transports' completions (protocol callbacks included) and returns the
    /// Driver's completions.
    /// `defer`: handles are ready already; the transports' deliveries wait for
    /// `run_deferred` (the caller queues it behind them; `deferred` says whether
    /// there is anything to run).
    #[pyo3(signature = (ring, ops, block, timeout=None, defer=false))]
    fn select(
        &self,
        py: Python<'_>,
        ring: &Bound<'_, Ring>,
        ops: &Bound<'_, PyAny>,
        block: bool,
        timeout: Option<f64>,
        defer: bool,
    ) -> PyResult<Vec<Py<Completion>>> {
        let ops: Vec<Bound<'_, Op>> = ops
            .try_iter()?
            .map(|o| o.and_then(|o| o.cast_into::<Op>().map_err(PyErr::from)))
            .collect::<PyResult<_>>()?;
        self.select_step(py, ring, ops, block, timeout, defer)
    }

    /// Runs the deliveries a select deferred (see `select`'s `defer`).
    fn run_deferred(&self, py: Python<'_>) -> PyResult<()> {
        let (actions, resumed) = {
            let mut inner = self.lock();
            inner.deferred_queued = false;
            (
                std::mem::take(&mut inner.deferred),
                std::mem::take(&mut inner.deferred_resumed),
            )
        };
        self.run_actions(py, actions, resumed)
    }

    /// True when the caller is to queue `run_deferred` now (deferred deliveries
    /// wait and no handle for them is queued); marks it queued.
    fn queue_deferred(&self) -> bool {
        self.claim_deferred()
    }

    /// Whether a select deferred deliveries that `run_deferred` has not run yet.
    #[getter]
    fn deferred(&self) -> bool {
        self.has_deferred()
    }

    /// Iterations of the event loop, `run_once` after `run_once`, for as long as
    /// `EventLoop._run_once`'s conditions for the native iteration hold (checked
    /// again after each one: a callback may stop the loop, switch debug mode on,
    /// queue a poll for the selector or an op for the loop's ring, or cancel enough
    /// timers that asyncio rebuilds the heap). Returns when one of them fails (None),
    /// or with the completions for Python of the last iteration, which the caller dispatches
    /// before `run_ready`, as with `run_once`. asyncio's `run_forever` calls
    /// `_run_once` and looks at `_stopping` after each: here both happen without
    /// going back to Python, whose per-iteration checks were a quarter of an idle
    /// iteration's instructions.
    fn run_iterations<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        event_loop: &Bound<'py, PyAny>,
        selector: &Bound<'py, PyAny>,
        loop_ring: &Bound<'py, PyAny>,
        ready: &Bound<'py, PyAny>,
        scheduled: &Bound<'py, PyList>,
    ) -> PyResult<Option<Vec<Py<Completion>>>> {
        Self::run_iterations_impl(slf, py, event_loop, selector, loop_ring, ready, scheduled)
    }

    /// Native iterations `run_iterations` has made, for `select_count()`.
    #[staticmethod]
    fn iterations() -> u64 {
        NATIVE_ITERATIONS.load(Ordering::Relaxed)
    }

    /// The first half of asyncio's iteration, before the wait: the cancelled
    /// timers leave the head of `scheduled` (counted off the loop's
    /// `_timer_cancelled_count`), then how long the wait may last: 0 when `ready`
    /// has handles or the loop is stopping, else until the first timer, else None
    /// (no limit).
    #[staticmethod]
    fn select_timeout(
        event_loop: &Bound<'_, PyAny>,
        ready: &Bound<'_, PyAny>,
        scheduled: &Bound<'_, PyList>,
        stopping: bool,
    ) -> PyResult<Option<f64>> {
        Self::select_timeout_impl(event_loop, ready, scheduled, stopping)
    }

    /// The second half of asyncio's iteration: timers due by now (within the
    /// loop's clock resolution) join `ready`, then the handles in `ready` at this
    /// point run, cancelled ones skipped; those they schedule wait for the next
    /// iteration. An exception out of a handle (`Handle._run` lets only
    /// SystemExit and KeyboardInterrupt out) leaves the rest queued, as asyncio does;
    /// any other exception goes to `report_error(handle, exc)`.
    #[staticmethod]
    fn run_ready(
        event_loop: &Bound<'_, PyAny>,
        ready: &Bound<'_, PyAny>,
        scheduled: &Bound<'_, PyList>,
        report_error: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        Self::run_ready_impl(event_loop, ready, scheduled, report_error)
    }

    /// Registers a stream transport on `fd`; returns its (slot, generation). The
    /// protocol's callbacks run in `context` (a `contextvars.Context`; None: in
    /// whatever context runs the loop).
    #[pyo3(signature = (fd, transport, context=None))]
    fn add(
        &self,
        fd: RawFd,
        transport: &Bound<'_, PyAny>,
        context: Option<Py<PyAny>>,
    ) -> PyResult<(u32, u32)> {
        let callbacks = Callbacks::new(transport, context)?;
        let mut inner = self.lock();
        if inner.closed {
            return Err(PyRuntimeError::new_err("the loop core is closed"));
        }
        inner.next_gen = inner.next_gen.wrapping_add(1) & 0x3fff_ffff;
        let gen = inner.next_gen;
        let conn = Conn::new(gen, fd, callbacks);
        let slot = match inner.free.pop() {
            Some(s) => {
                inner.conns[s as usize] = Some(conn);
                s
            }
            None => {
                inner.conns.push(Some(conn));
                (inner.conns.len() - 1) as u32
            }
        };
        Ok((slot, gen))
    }

    /// The protocol whose callbacks receive data (`buffered`: a BufferedProtocol).
    fn set_protocol(
        &self,
        py: Python<'_>,
        slot: u32,
        gen: u32,
        protocol: &Bound<'_, PyAny>,
        buffered: bool,
    ) -> PyResult<()> {
        let current = self
            .lock()
            .conn(slot, gen)
            .and_then(|c| c.callbacks.clone());
        let Some(current) = current else {
            return Ok(()); // released: nothing is delivered any more
        };
        let new = Arc::new(current.with_protocol(protocol, buffered)?);
        // The old callbacks are dropped after the lock is released: dropping the
        // last reference to a protocol may run its Python code, which may call
        // the transport (and so the core) again.
        let old = self.with_conn(slot, gen, |c| {
            c.buffered = buffered;
            c.callbacks.replace(new)
        });
        drop((old, current));
        let _ = py;
        Ok(())
    }

    /// Starts (True) or stops (False) delivering received data. Stopping cancels
    /// the multishot receive; bytes that arrive meanwhile are kept for the resume.
    fn set_reading(&self, slot: u32, gen: u32, on: bool) {
        let mut inner = self.lock();
        let Some(c) = inner.conn(slot, gen) else {
            return;
        };
        c.reading = on;
        let resume =
            on && (!c.backlog.is_empty() || c.pending_eof || c.pending_err.is_some() || c.readable);
        if resume {
            inner.resumed.push(slot);
        }
        inner.mark(slot);
    }

    /// loop.sendfile() starts (True) or ends: True when the queue is already empty,
    /// else the transport's `_ringio_empty` is called once it is.
    fn set_sendfile(&self, slot: u32, gen: u32, on: bool) -> bool {
        self.with_conn(slot, gen, |c| {
            c.sendfile = on;
            let empty = c.send.is_idle();
            c.want_empty = on && !empty;
            empty
        })
        .unwrap_or(true)
    }

    fn set_limits(&self, slot: u32, gen: u32, high: usize, low: usize) {
        let mut inner = self.lock();
        if let Some(c) = inner.conn(slot, gen) {
            c.high = high;
            c.low = low;
        }
    }

    /// The protocol was paused (pause_writing): resume it when the queue drains.
    fn note_paused(&self, slot: u32, gen: u32) {
        let mut inner = self.lock();
        if let Some(c) = inner.conn(slot, gen) {
            c.proto_paused = true;
        }
    }

    fn buffer_size(&self, slot: u32, gen: u32) -> usize {
        self.lock().conn(slot, gen).map_or(0, |c| c.send.queued())
    }

    /// close(): stop reading; True when nothing is queued (the caller schedules
    /// connection_lost), else connection_lost follows the last send.
    fn close(&self, slot: u32, gen: u32) -> bool {
        self.with_conn(slot, gen, |c| {
            c.reading = false;
            c.life.close(c.send.is_empty());
            c.send.is_empty()
        })
        .unwrap_or(true)
    }

    /// _force_close(): stop reading, drop the queue (a send in flight is cancelled;
    /// its chunks stay alive until its CQE).
    /// abort() (and `_force_close`): the queue is dropped, except what a
    /// non-blocking send hands to the kernel now. asyncio's write() sends at
    /// once while nothing is buffered, so the bytes written since the last select
    /// (queued here, with no send in flight) would already be in the kernel there:
    /// a server that writes its answer and aborts must still send it. With a send
    /// in flight the socket was full, and asyncio would have buffered them too.
    fn abort(&self, slot: u32, gen: u32) {
        self.with_conn(slot, gen, |c| {
            c.reading = false;
            if !c.send.in_flight() && c.life.is_live() {
                // As much as the socket takes (up to 64 chunks per sendmsg); stops
                // when it takes nothing more (EAGAIN) or fails.
                while !c.send.is_empty() {
                    let before = c.send.queued();
                    if c.send.send_now(c.fd).is_some() || c.send.queued() == before {
                        break;
                    }
                }
            }
            c.life.lose();
            // Keep only what the kernel may be reading.
            c.send.discard();
        });
    }

    /// write_eof(): SHUT_WR now if nothing is queued, else after the last send.
    fn write_eof(&self, slot: u32, gen: u32) -> PyResult<()> {
        let now = self
            .with_conn(slot, gen, |c| {
                c.eof = true;
                c.shut = c.send.is_empty();
                c.shut.then_some(c.fd)
            })
            .flatten();
        if let Some(fd) = now {
            // SAFETY: shutdown(2) on the transport's open fd; no pointers involved.
            if unsafe { libc::shutdown(fd, libc::SHUT_WR) } < 0 {
                return Err(PyErr::from(std::io::Error::last_os_error()));
            }
        }
        Ok(())
    }

    /// The transport is done (connection_lost ran): drops its Python references,
    /// cancels its ops and submits the cancels at once, so that the kernel drops its
    /// file references before the socket is closed. The slot itself is reused only
    /// after the last CQE.
    fn release(&self, py: Python<'_>, slot: u32, gen: u32) -> PyResult<()> {
        let (callbacks, ring) = {
            let mut inner = self.lock();
            let Some(c) = inner.conn(slot, gen) else {
                return Ok(());
            };
            c.life.release();
            c.reading = false;
            c.send.discard();
            c.backlog = Vec::new();
            let callbacks = c.callbacks.take();
            inner.mark(slot);
            inner.maybe_free(slot);
            (callbacks, inner.ring.as_ref().map(|r| r.clone_ref(py)))
        };
        // Dropped without the lock: releasing them may run Python code.
        drop(callbacks);
        let Some(ring) = ring else { return Ok(()) };
        let pydriver = ring.get().inner();
        let mut inner = self.lock();
        let mut driver = pydriver.driver();
        if driver.is_closed() || driver.check_caller(py).is_err() {
            return Ok(());
        }
        Self::flush(&mut inner, &mut driver.engine, false)
            .map_err(|e| errors::io_error(py, &e, None))?;
        let n = driver.engine.sq_pending();
        if n > 0 {
            let (fd, registered) = driver.engine.enter_target();
            // Not waiting (min_complete 0); GETEVENTS runs DEFER_TASKRUN task work,
            // which is where a cancelled request drops its file reference. The CQEs
            // stay in the CQ for the next select.
            let flags = crate::ring::enter::IORING_ENTER_GETEVENTS | registered;
            crate::ring::enter::enter_nowait(fd, n, flags)
                .map_err(|e| errors::io_error(py, &e, None))?;
        }
        Ok(())
    }

    /// Drops every transport reference (the loop is closing; its ring has been
    /// closed, or is kept alive elsewhere). Chunks a ring that was not shut down
    /// may still read are leaked rather than freed.
    fn close_all(&self, py: Python<'_>) {
        let (conns, ring, deferred) = {
            let mut inner = self.lock();
            inner.closed = true;
            inner.dirty.clear();
            inner.resumed.clear();
            inner.pending.clear();
            inner.deferred_resumed.clear();
            // Closed: a read of it still in flight holds the file, not the number.
            inner.wake = None;
            // Dropped below, without the lock (they may hold transports).
            let deferred = std::mem::take(&mut inner.deferred);
            (
                std::mem::take(&mut inner.conns),
                inner.ring.take(),
                deferred,
            )
        };
        // Not `is_closed()`: a ring whose close failed (another thread owns it; the
        // selector keeps it in its graveyard) is closed for Python but not shut
        // down, and its kernel may still read a send's chunks.
        let ring_done = ring.as_ref().is_none_or(ring_finished);
        for c in conns.into_iter().flatten() {
            c.dispose(ring_done);
        }
        drop(deferred);
        let _ = py;
    }

    /// Transports registered (tests).
    #[getter]
    fn transports(&self) -> usize {
        self.lock()
            .conns
            .iter()
            .flatten()
            .filter(|c| !c.life.is_released())
            .count()
    }

    /// Provided buffers handed out by the kernel and not yet given back (tests:
    /// 0 once every receive has been delivered, kept or dropped).
    #[getter]
    fn buffers_out(&self, py: Python<'_>) -> usize {
        let ring = self.lock().ring.as_ref().map(|r| r.clone_ref(py));
        with_bufring(ring.as_ref(), |br| {
            br.map_or(0, |br| usize::from(br.nbufs) - br.free())
        })
    }

    /// Buffers the provided window holds when topped up (tests).
    #[getter]
    fn buffer_window(&self, py: Python<'_>) -> usize {
        let ring = self.lock().ring.as_ref().map(|r| r.clone_ref(py));
        with_bufring(ring.as_ref(), |br| br.map_or(0, |br| br.target()))
    }

    /// Transports on the large-receive path, their readiness poll armed (tests).
    #[getter]
    fn big_receives(&self) -> usize {
        let inner = self.lock();
        inner
            .conns
            .iter()
            .flatten()
            .filter(|c| c.recv == Arm::On && c.recv_big)
            .count()
    }

    /// Transports waiting for buffers to re-arm their receive (tests).
    #[getter]
    fn starved(&self) -> usize {
        let inner = self.lock();
        inner.conns.iter().flatten().filter(|c| c.starved).count()
    }

    /// Slots still waiting for the kernel after release (tests).
    #[getter]
    fn draining(&self) -> usize {
        self.lock()
            .conns
            .iter()
            .flatten()
            .filter(|c| c.life.is_released())
            .count()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LoopCore>()?;
    m.add_class::<TransportWriter>()?;
    m.add_class::<calls::LoopCalls>()?;
    m.add_function(wrap_pyfunction!(_fail_receive_allocations, m)?)?;
    m.add_function(wrap_pyfunction!(timer_handle::timer_handle_type, m)?)?;
    Ok(())
}
