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
//! SQEs of the core carry [`SIDE_BIT`] in their user_data; the engine sets their CQEs
//! aside (`UringEngine::take_side`) instead of giving them to the Driver. The state
//! lives behind one mutex that is never held while Python code runs: a CQE batch is
//! first turned into actions under the lock, then the actions call the protocol.
//! Everything the kernel may still use (queued chunks of an in-flight send, the
//! buffer ring) stays alive until the op's final CQE, even after the transport was
//! closed, aborted or collected.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types};
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyMemoryError, PyRuntimeError, PySystemExit, PyTypeError,
};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyByteArray, PyBytes, PyDict, PyList, PyMemoryView, PyString, PyTuple, PyWeakrefReference,
};
use pyo3::{PyTraverseError, PyVisit};

use crate::buffers::View;
use crate::engine::{RawCompletion, Submitted};
use crate::errors;
use crate::net::bufring::BufRing;
use crate::op::{Completion, Op};
use crate::pydriver::{lock, try_lock};
use crate::uring::py::Ring;
use crate::uring::{INTERNAL_TOKEN, SIDE_BIT};

/// What the loop's select settles as a future: asyncio's, and the lanes of
/// `pread_many` (`ringio._engines.many.Lane`, settled through the same methods).
static FUTURE_TYPES: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();

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
/// (`Inner::ready_large`): about `CACHE_BUDGET` of received bytes. Each one's bytes
/// go to its protocol right after its receive, while they are in the cache; a
/// streams protocol keeps them until its task runs, the next iteration, so an
/// unbounded turn (every readable transport) left 1,000 x 100 KiB in buffers
/// between two iterations.
const LARGE_TURNS: usize = CACHE_BUDGET / BIG_BUFSIZE;
/// A transport moves to the large-receive path (readiness, then a receive into a
/// new `bytes`) when it receives at least this many bytes per batch (moving
/// average), and back to the pool's multishot receive below `BIG_OFF`.
const BIG_ON: usize = 48 * 1024;
const BIG_OFF: usize = 16 * 1024;
/// Up to 1024 x 16 KiB (16 MiB, mapped with MAP_NORESERVE). The buffer ring provides
/// a small window of the most recently returned buffers (cache-warm), doubled each
/// time the kernel runs out (ENOBUFS ends the multishot receive); a buffer goes back
/// as soon as its bytes are copied out. (256 buffers in all starved 1,000
/// connections.)
///
/// The window is capped so that one batch's received bytes stay about
/// `CACHE_BUDGET` (see `Inner::recv_avg`): the kernel fills every buffer of a batch
/// before the first callback runs, and 100 connections x 100 KiB (10 MiB of
/// buffers) made every copy out of them a cache miss, where uvloop reads each
/// socket into the same warm 256 KiB. Transports the window could not serve wait
/// in `Inner::starved` and are re-armed a few per iteration, as buffers allow.
const NBUFS: u16 = 1024;
const BUFSIZE: usize = 16 * 1024;
/// About the L2 cache of one core here.
const CACHE_BUDGET: usize = 512 * 1024;
/// The window never shrinks below this many buffers.
const MIN_WINDOW: usize = 32;
/// Writes smaller than this are copied into the queue's tail chunk (one iovec for
/// many small writes); larger `bytes` are sent from the object itself.
const COALESCE: usize = 2048;
const MAX_IOV: usize = 64;
const MAX_SEND: usize = 0x7fff_f000;

fn token(slot: u32, gen: u32, kind: u64) -> u64 {
    // Bits 32..62 the generation (bit 62 always clear, so never INTERNAL_TOKEN),
    // bit 31 BIG_BIT (receives), 1..31 the slot, bit 0 the kind.
    SIDE_BIT | (u64::from(gen & 0x3fff_ffff) << 32) | (u64::from(slot) << 1) | kind
}

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

/// One queued write.
enum Chunk {
    /// A `bytes` object, sent from its own storage (immutable, kept alive here).
    Shared {
        _obj: Py<PyBytes>,
        ptr: *const u8,
        len: usize,
    },
    Owned(Vec<u8>),
}

impl Chunk {
    fn slice(&self) -> (*const u8, usize) {
        match self {
            Chunk::Shared { ptr, len, .. } => (*ptr, *len),
            Chunk::Owned(v) => (v.as_ptr(), v.len()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Recv {
    Off,
    On,
    Cancelling,
}

struct Conn {
    gen: u32,
    fd: RawFd,
    /// The Python transport (`ringio.loop._transport.RingSocketTransport`): its
    /// methods handle the rare paths (EOF, errors, close after drain, flow control).
    transport: Option<Py<PyAny>>,
    /// The `contextvars.Context` the protocol's callbacks run in (copied when the
    /// transport was made, as asyncio's reader handle and uvloop's transport do).
    context: Option<Py<PyAny>>,
    data_received: Option<Py<PyAny>>,
    /// (get_buffer, buffer_updated) of a BufferedProtocol.
    buffered: Option<(Py<PyAny>, Py<PyAny>)>,
    reading: bool,
    recv: Recv,
    /// The kernel reported EOF or an error: the receive is never re-armed.
    recv_done: bool,
    /// Received while reading was paused: delivered, in order, on resume.
    backlog: Vec<u8>,
    pending_eof: bool,
    pending_err: Option<i32>,
    queue: VecDeque<Chunk>,
    /// An emptied chunk buffer, reused by the next write.
    spare: Option<Vec<u8>>,
    /// Bytes of the queue's head chunk already sent.
    head_off: usize,
    queued: usize,
    send_inflight: bool,
    send_cancelled: bool,
    iov: Vec<libc::iovec>,
    msg: Box<libc::msghdr>,
    /// close(): connection_lost once the queue has drained.
    closing: bool,
    /// write_eof(): SHUT_WR once the queue has drained.
    eof: bool,
    shut: bool,
    /// loop.sendfile() runs on the socket: write() is refused; `want_empty` asks
    /// for `_ringio_empty` once the queue has drained.
    sendfile: bool,
    want_empty: bool,
    /// connection_lost scheduled (asyncio's `_conn_lost`): writes are dropped.
    lost: bool,
    /// The transport is gone; the slot waits only for the kernel's last CQEs.
    released: bool,
    proto_paused: bool,
    /// The CQE batch that last delivered data: an EOF or error in the same batch
    /// waits for the next select, as asyncio reads data and EOF in two iterations
    /// (a handshake's waiter must see the transport still open).
    data_batch: u64,
    /// `groups[group]` holds this transport's receives of CQE batch `group_batch`.
    group_batch: u64,
    group: usize,
    /// In `Inner::starved`, waiting for buffers.
    starved: bool,
    /// Its last receive from the pool filled a whole buffer.
    filled: bool,
    /// Large receives: its readiness poll reported data that is not read yet (its
    /// turn is pending in `Inner::ready_large` or as a `Readable` action, or it
    /// waits for reading to resume).
    readable: bool,
    /// ... and it reported the peer's EOF or an error (whose report ends the
    /// stream): the transport keeps its turns until a receive finds it, since no
    /// further wake-up will come.
    hup: bool,
    /// Bytes received in CQE batch `rx_batch`, and their moving average over the
    /// batches that brought data (x1; None before a batch with data has ended): it
    /// picks the buffer group.
    rx_acc: usize,
    rx_batch: u64,
    rx_avg: Option<usize>,
    /// The receive should take `bytes`-backed buffers (`big`), and the armed one
    /// does (`recv_big`); when they differ, the receive is cancelled and re-armed.
    big: bool,
    recv_big: bool,
    high: usize,
    low: usize,
    dirty: bool,
}

// SAFETY: the raw pointers (iovecs, msghdr, chunk pointers) point into memory this
// Conn owns (its chunks and boxes); they are only handed to the kernel, and the
// Conn is only touched under the core's mutex.
unsafe impl Send for Conn {}

impl Conn {
    /// Frees the transport's state, when the core lets go of it without waiting
    /// for its ops (`close_all`, the core's `Drop`). `kernel_done`: the ring the
    /// ops went to was shut down (every CQE of the core has arrived), so the
    /// kernel no longer reads any of it. Otherwise, with a send in flight, what
    /// the send's SQE points at (the queued chunks, including `bytes` objects
    /// sent from their own storage, the iovecs and the msghdr) is leaked, never
    /// freed: the kernel may still read it, and nothing would be left to see the
    /// send's CQE. Only the chunks the send covers (the first `iov.len()`) are
    /// kept; the Python references and the rest are released. (A receive in
    /// flight uses only the ring's provided buffers, which the ring's engine
    /// owns, not this Conn.)
    fn dispose(mut self, kernel_done: bool) {
        if self.send_inflight && !kernel_done {
            self.queue.truncate(self.iov.len());
            let queue = std::mem::take(&mut self.queue);
            let iov = std::mem::take(&mut self.iov);
            // SAFETY: msghdr is plain data; all-zero is a valid empty header.
            let msg = std::mem::replace(&mut self.msg, Box::new(unsafe { std::mem::zeroed() }));
            std::mem::forget((queue, iov, msg));
        }
    }

    fn idle(&self) -> bool {
        self.recv == Recv::Off && !self.send_inflight
    }

    /// Drops the first `n` queued bytes (sent).
    fn advance(&mut self, mut n: usize) {
        self.queued -= n.min(self.queued);
        while n > 0 {
            let Some(len) = self.queue.front().map(|ch| ch.slice().1) else {
                break;
            };
            let left = len - self.head_off;
            if n >= left {
                n -= left;
                if let Some(Chunk::Owned(mut v)) = self.queue.pop_front() {
                    // Kept for the next write: a ping-pong transport then queues
                    // every message without a malloc/free pair.
                    if self.spare.is_none() && v.capacity() <= 64 * 1024 {
                        v.clear();
                        self.spare = Some(v);
                    }
                }
                self.head_off = 0;
            } else {
                self.head_off += n;
                n = 0;
            }
        }
    }

    /// One non-blocking sendmsg of the queue's head (no send may be in flight).
    /// Returns the errno of a failure other than EAGAIN/EINTR; the queue is then
    /// dropped, as asyncio clears its buffer on a fatal write error.
    fn send_now(&mut self) -> Option<i32> {
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(MAX_IOV.min(self.queue.len()));
        for (i, ch) in self.queue.iter().take(MAX_IOV).enumerate() {
            let (p, n) = ch.slice();
            let off = if i == 0 { self.head_off } else { 0 };
            iov.push(libc::iovec {
                // SAFETY: off < n for the head chunk (a fully sent chunk is popped).
                iov_base: unsafe { p.add(off) } as *mut libc::c_void,
                iov_len: n - off,
            });
        }
        // SAFETY: msghdr is plain data; zeroed is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        // usize on glibc, c_int on musl.
        msg.msg_iovlen = iov.len() as _;
        // SAFETY: `msg` points at `iov`, whose entries point into chunks this Conn
        // owns; all outlive the synchronous call, which only reads them.
        let rc = unsafe { libc::sendmsg(self.fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if rc >= 0 {
            self.advance(rc as usize);
            return None;
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno == libc::EAGAIN || errno == libc::EINTR {
            return None;
        }
        self.queue.clear();
        self.queued = 0;
        self.head_off = 0;
        Some(errno)
    }
}

enum Payload {
    Raw(Vec<u8>),
    /// Provided buffers (id, length) still out of the ring, copied out (and given
    /// back) only when the action runs: building every `bytes` of a batch up front
    /// kept them all alive at once (1,000 x 100 KiB grew and trimmed the heap, so
    /// every received byte was page-faulted anew); one at a time, malloc reuses
    /// the same memory.
    Segs(Vec<(u16, usize)>),
    /// A `bytes` the kernel received into directly (a large-receive turn).
    Obj(Py<PyBytes>),
}

/// One transport's receives in a CQE batch: (slot, index of its Data action, the
/// (buffer id, length) of each receive, in order).
type Group = (u32, usize, Vec<(u16, usize)>);

/// How many of the next `bytes` objects for received data are not made, as though
/// memory had run out (tests: `_core._fail_receive_allocations`). Out of memory is
/// otherwise next to impossible to reach on purpose, and each of those paths must
/// fail the transport rather than deliver a stream with a hole in it.
static RECEIVE_ALLOC_FAILURES: AtomicU32 = AtomicU32::new(0);

/// Whether this allocation of received data is to fail (see
/// [`RECEIVE_ALLOC_FAILURES`]); one relaxed load when no failure is pending.
pub(crate) fn receive_alloc_fails() -> bool {
    RECEIVE_ALLOC_FAILURES.load(Ordering::Relaxed) != 0
        && RECEIVE_ALLOC_FAILURES
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
}

/// Makes the next `count` allocations of received data fail as though memory had
/// run out (tests).
#[pyfunction]
fn _fail_receive_allocations(count: u32) {
    RECEIVE_ALLOC_FAILURES.store(count, Ordering::Relaxed);
}

/// A new `bytes` copy of `data`; a MemoryError, not a panic, when memory runs out.
fn new_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Py<PyBytes>> {
    if receive_alloc_fails() {
        return Err(PyMemoryError::new_err(()));
    }
    // SAFETY: `data` is valid for `data.len()` bytes; CPython copies them.
    let raw =
        unsafe { pyo3::ffi::PyBytes_FromStringAndSize(data.as_ptr().cast(), data.len() as isize) };
    if raw.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `raw` is a new, owned, non-NULL reference to a bytes object.
    Ok(unsafe { Bound::from_owned_ptr(py, raw).cast_into_unchecked() }.unbind())
}

/// A new `bytes` holding the provided buffers `segs`, which go back to the kernel.
fn bytes_from_segs(
    py: Python<'_>,
    br: &mut BufRing,
    segs: &[(u16, usize)],
) -> PyResult<Py<PyBytes>> {
    let total: usize = segs.iter().map(|s| s.1).sum();
    let raw = if receive_alloc_fails() {
        PyMemoryError::new_err(()).restore(py);
        std::ptr::null_mut()
    } else {
        // SAFETY: a NULL source asks CPython for an uninitialised bytes of `total`
        // bytes (PyO3's PyBytes::new_with would zero it first, a memset of every
        // received byte); it is filled below before any Python code can see it.
        unsafe { pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), total as isize) }
    };
    let obj = if raw.is_null() {
        Err(PyErr::fetch(py))
    } else {
        // SAFETY: `raw` is a new, owned, non-NULL reference to a bytes object.
        Ok(unsafe { Bound::from_owned_ptr(py, raw) })
    };
    if let Ok(o) = &obj {
        // SAFETY: `o` is a bytes object of `total` bytes; its storage is ours to
        // fill until it is shared.
        let dst = unsafe { pyo3::ffi::PyBytes_AsString(o.as_ptr()) }.cast::<u8>();
        let mut off = 0;
        for &(bid, n) in segs {
            // SAFETY: the kernel filled `n` bytes of buffer `bid` and handed it to us;
            // it is not back in the ring until `give` below; dst has room for
            // `total` >= off + n bytes and does not overlap the pool.
            unsafe { std::ptr::copy_nonoverlapping(br.mem.ptr(br.buffer(bid)), dst.add(off), n) };
            off += n;
        }
    }
    give_back(br, segs);
    Ok(obj?.cast_into::<PyBytes>()?.unbind())
}

/// Appends the provided buffers `segs` to `out`; they go back to the kernel.
fn extend_from_segs(br: &mut BufRing, segs: &[(u16, usize)], out: &mut Vec<u8>) {
    for &(bid, n) in segs {
        // SAFETY: as in bytes_from_segs: filled by the kernel, ours until `give`.
        let data = unsafe { std::slice::from_raw_parts(br.mem.ptr(br.buffer(bid)), n) };
        out.extend_from_slice(data);
    }
    give_back(br, segs);
}

fn give_back(br: &mut BufRing, segs: &[(u16, usize)]) {
    for &(bid, _) in segs {
        br.give(bid);
    }
    br.refill();
}

/// Runs `f` on the buffer ring of `ring` (None once the ring was shut down: its
/// buffers are gone and nothing is left to copy or give back).
fn with_bufring<R>(ring: Option<&Py<Ring>>, f: impl FnOnce(Option<&mut BufRing>) -> R) -> R {
    let Some(ring) = ring else { return f(None) };
    let pydriver = ring.get().inner();
    let mut driver = pydriver.driver();
    f(driver.engine.bufring.as_mut())
}

impl Payload {
    /// The bytes, as one buffer; provided buffers are copied out and given back.
    fn into_vec(self, ring: Option<&Py<Ring>>, py: Python<'_>) -> Vec<u8> {
        match self {
            Payload::Raw(v) => v,
            other => {
                let mut out = Vec::new();
                other.append_to(ring, py, &mut out);
                out
            }
        }
    }

    /// Drops the bytes (their transport is gone); provided buffers go back.
    fn discard(self, ring: Option<&Py<Ring>>) {
        if let Payload::Segs(segs) = self {
            with_bufring(ring, |br| {
                if let Some(br) = br {
                    give_back(br, &segs);
                }
            });
        }
    }

    /// Appends the bytes to `out` (a paused transport's backlog).
    fn append_to(self, ring: Option<&Py<Ring>>, py: Python<'_>, out: &mut Vec<u8>) {
        match self {
            Payload::Obj(o) => out.extend_from_slice(o.as_bytes(py)),
            Payload::Segs(segs) => with_bufring(ring, |br| {
                if let Some(br) = br {
                    extend_from_segs(br, &segs, out);
                }
            }),
            Payload::Raw(v) => out.extend_from_slice(&v),
        }
    }
}

enum Action {
    Data(u32, u32, Payload),
    /// A large-receive transport's socket is readable: receive into a new `bytes`
    /// and deliver it (see `receive_large`).
    Readable(u32, u32),
    Eof(u32, u32),
    ReadErr(u32, u32, i32),
    /// Python method of the transport to call: (transport, name, errno or -1).
    Call(Py<PyAny>, &'static str, i32),
    /// A send completed: resume the protocol (if below the low-water mark), then
    /// act on an empty queue (close, write_eof, sendfile's empty waiter).
    SendDone(u32, u32),
}

#[derive(Default)]
struct Inner {
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
}

impl Inner {
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
        let free = matches!(self.conns.get(slot as usize), Some(Some(c)) if c.released && c.idle());
        if free {
            self.conns[slot as usize] = None;
            self.free.push(slot);
        }
    }
}

/// The native half of `ringio.EventLoop`: stream transports on the loop's ring, and
/// the selector's submit + wait + reap in one `io_uring_enter`.
#[pyclass(module = "ringio._core", frozen)]
pub struct LoopCore {
    inner: Mutex<Inner>,
}

/// Counts `n` bytes received in CQE batch `batch`: the previous batch's bytes
/// (moving average) pick the buffer group. True when the pick changed.
fn note_received(conn: &mut Conn, n: usize, batch: u64) -> bool {
    let mut changed = false;
    if conn.rx_batch != batch {
        if conn.rx_batch != 0 {
            // The first batch with data starts the average (an average starting at
            // 0 would take a new connection of 100 KiB messages four batches to move).
            let avg = conn
                .rx_avg
                .map_or(conn.rx_acc, |a| (a * 3 + conn.rx_acc) / 4);
            conn.rx_avg = Some(avg);
            let want = conn.buffered.is_none() && avg >= if conn.big { BIG_OFF } else { BIG_ON };
            if want != conn.big {
                conn.big = want;
                changed = true;
            }
        }
        (conn.rx_acc, conn.rx_batch) = (0, batch);
    }
    conn.rx_acc += n;
    changed
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
        // `inner.ring` is dropped after this, with the rest of `Inner`.
    }
}

/// What a `Data` action calls: the transport, its context and its protocol's
/// receiving callbacks.
struct Callbacks {
    tr: Py<PyAny>,
    ctx: Option<Py<PyAny>>,
    dr: Option<Py<PyAny>>,
    buffered: Option<(Py<PyAny>, Py<PyAny>)>,
}

/// `context.run(f, *args)`: `f` sees (and sets) the context's variables.
fn in_context<'py>(
    py: Python<'py>,
    context: &Bound<'py, PyAny>,
    f: &Bound<'py, PyAny>,
    args: Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    let run = &HandleKinds::get(py)?.context_run;
    let mut call = Vec::with_capacity(args.len() + 2);
    call.push(context.clone());
    call.push(f.clone());
    call.extend(args.iter());
    run.bind(py).call1(PyTuple::new(py, call)?)
}

fn is_fatal(py: Python<'_>, e: &PyErr) -> bool {
    e.is_instance_of::<PyKeyboardInterrupt>(py) || e.is_instance_of::<PySystemExit>(py)
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

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Binds the core to `ring` (the selector makes a new ring when the loop moves
    /// to another thread). Transports re-arm their receive on the new ring; a send
    /// in flight on the old one can complete there unseen: its chunks are leaked
    /// (the old ring may still read them) and counted as sent.
    fn bind(inner: &mut Inner, ring: &Bound<'_, Ring>) {
        if inner
            .ring
            .as_ref()
            .is_some_and(|r| r.as_ptr() == ring.as_ptr())
        {
            return;
        }
        let had_ring = inner.ring.is_some();
        inner.ring = Some(ring.clone().unbind());
        if !had_ring {
            return;
        }
        let mut slots = Vec::new();
        for (slot, c) in inner.conns.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            c.recv = Recv::Off;
            if c.send_inflight {
                c.send_inflight = false;
                for _ in 0..c.iov.len() {
                    if let Some(ch) = c.queue.pop_front() {
                        std::mem::forget(ch);
                    }
                }
                c.head_off = 0;
                c.queued = c.queue.iter().map(|ch| ch.slice().1).sum();
            }
            slots.push(slot as u32);
        }
        for s in slots {
            inner.mark(s);
            inner.maybe_free(s);
        }
    }

    /// Pushes the SQEs that dirty transports need: arm or cancel the receive, send
    /// the queue, cancel what a released transport left in flight.
    fn flush(inner: &mut Inner, engine: &mut crate::uring::UringEngine) -> std::io::Result<()> {
        Self::unstarve(inner, engine);
        let dirty = std::mem::take(&mut inner.dirty);
        let mut result = Ok(());
        for slot in dirty {
            let Some(Some(c)) = inner.conns.get_mut(slot as usize) else {
                continue;
            };
            c.dirty = false;
            let gen = c.gen;
            let fd = types::Fd(c.fd);
            let stop = c.released || c.lost;
            if c.reading && !stop && c.recv == Recv::Off && !c.recv_done && !c.starved {
                let sqe = if c.big {
                    // Large receives: readiness, then a receive straight into a new
                    // `bytes` per turn, transports served in the order their data
                    // came (see `receive_large`).
                    opcode::PollAdd::new(fd, (libc::POLLIN | libc::POLLRDHUP) as u32)
                        .multi(true)
                        .build()
                        .user_data(recv_token(slot, gen, true))
                } else {
                    if let Err(e) = engine.ensure_bufring(NBUFS, BUFSIZE, BGID) {
                        result = Err(e);
                        continue;
                    }
                    opcode::RecvMulti::new(fd, BGID)
                        .build()
                        .user_data(recv_token(slot, gen, false))
                };
                engine.push_side(sqe, true)?;
                c.recv = Recv::On;
                c.recv_big = c.big;
            } else if (stop || !c.reading || c.big != c.recv_big || c.recv_done)
                && c.recv == Recv::On
            {
                // Stopped, or moving to the other buffer group: the final CQE
                // re-arms (see `absorb_cqes`).
                let sqe = opcode::AsyncCancel::new(recv_token(slot, gen, c.recv_big))
                    .build()
                    .user_data(INTERNAL_TOKEN);
                engine.push_side(sqe, false)?;
                c.recv = Recv::Cancelling;
            }
            if c.send_inflight {
                if stop && !c.send_cancelled {
                    // Aborted: a send the peer never makes room for would pin the
                    // socket open forever.
                    let sqe = opcode::AsyncCancel::new(token(slot, gen, KIND_SEND))
                        .build()
                        .user_data(INTERNAL_TOKEN);
                    engine.push_side(sqe, false)?;
                    c.send_cancelled = true;
                }
            } else if !c.queue.is_empty() && !c.released {
                c.iov.clear();
                let mut total = 0usize;
                for (i, ch) in c.queue.iter().enumerate() {
                    let (mut p, mut n) = ch.slice();
                    if i == 0 {
                        // SAFETY: head_off < the head chunk's length (a fully sent
                        // chunk is popped), so the pointer stays inside the chunk.
                        p = unsafe { p.add(c.head_off) };
                        n -= c.head_off;
                    }
                    c.iov.push(libc::iovec {
                        iov_base: p as *mut libc::c_void,
                        iov_len: n,
                    });
                    total += n;
                    if c.iov.len() >= MAX_IOV || total >= MAX_SEND / 2 {
                        break;
                    }
                }
                let ud = token(slot, gen, KIND_SEND);
                let sqe = if c.iov.len() == 1 {
                    let v = c.iov[0];
                    opcode::Send::new(fd, v.iov_base as *const u8, v.iov_len.min(MAX_SEND) as u32)
                        .flags(libc::MSG_NOSIGNAL)
                        .build()
                        .user_data(ud)
                } else {
                    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
                    *c.msg = unsafe { std::mem::zeroed() };
                    c.msg.msg_iov = c.iov.as_mut_ptr();
                    // usize on glibc, c_int on musl.
                    c.msg.msg_iovlen = c.iov.len() as _;
                    opcode::SendMsg::new(fd, &*c.msg as *const libc::msghdr)
                        .flags(libc::MSG_NOSIGNAL as u32)
                        .build()
                        .user_data(ud)
                };
                engine.push_side(sqe, true)?;
                c.send_inflight = true;
                c.send_cancelled = false;
            }
        }
        result
    }

    /// Lets starved transports re-arm (marks them dirty): as many as the buffers
    /// now in the ring can serve at the recent buffers-per-transport rate, and at
    /// least one, so every starved transport gets its turn.
    fn unstarve(inner: &mut Inner, engine: &crate::uring::UringEngine) {
        if inner.starved.is_empty() {
            return;
        }
        let available = engine.bufring.as_ref().map_or(0, |br| br.available);
        let per = inner.bufs_avg.div_ceil(16).max(1);
        let mut budget = (available / per).max(1);
        while budget > 0 {
            let Some((slot, gen)) = inner.starved.pop_front() else {
                break;
            };
            let Some(c) = inner.conn(slot, gen) else {
                continue;
            };
            if !c.starved {
                continue;
            }
            c.starved = false;
            if c.reading && !c.released && !c.lost {
                budget -= 1;
            }
            inner.mark(slot);
        }
    }

    /// Buffer `bid` of a CQE whose bytes are not wanted goes back to its group.
    fn recycle(engine: &mut crate::uring::UringEngine, bid: u16) {
        if let Some(br) = engine.bufring.as_mut() {
            br.available -= 1;
            br.give(bid);
            br.refill();
        }
    }

    /// Turns side CQEs into actions (under the lock; no Python code runs here).
    fn absorb(
        inner: &mut Inner,
        py: Python<'_>,
        engine: &mut crate::uring::UringEngine,
        cqes: &[RawCompletion],
        actions: &mut Vec<Action>,
    ) {
        inner.batch += 1;
        let batch = inner.batch;
        let mut groups: Vec<Group> = Vec::new();
        Self::absorb_cqes(inner, py, engine, cqes, actions, batch, &mut groups);
        let (bufs, bytes) = groups.iter().fold((0, 0), |(b, n), g| {
            (b + g.2.len(), n + g.2.iter().map(|s| s.1).sum::<usize>())
        });
        if let Some(recv) = (bytes * 16).checked_div(bufs) {
            // Moving averages over batches (x16 fixed point, weight 1/8), started
            // at the first batch's figures. (bufs > 0: there is a group.)
            let per = bufs * 16 / groups.len();
            if inner.recv_avg == 0 {
                (inner.recv_avg, inner.bufs_avg) = (recv, per);
            }
            inner.recv_avg = (inner.recv_avg * 7 + recv) / 8;
            inner.bufs_avg = (inner.bufs_avg * 7 + per) / 8;
            if let Some(br) = engine.bufring.as_mut() {
                let per_buf = (inner.recv_avg / 16).max(1);
                br.set_cap((CACHE_BUDGET / per_buf).max(MIN_WINDOW));
            }
        }
        for (slot, at, segs) in groups {
            if let Action::Data(s, _, p) = &mut actions[at] {
                debug_assert_eq!(*s, slot);
                *p = Payload::Segs(segs);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn absorb_cqes(
        inner: &mut Inner,
        py: Python<'_>,
        engine: &mut crate::uring::UringEngine,
        cqes: &[RawCompletion],
        actions: &mut Vec<Action>,
        batch: u64,
        groups: &mut Vec<Group>,
    ) {
        for c in cqes {
            let (slot, gen, kind) = untoken(c.token);
            let flags = c.res2 as u32;
            let bid = cqueue::buffer_select(flags);
            let res = c.res as i32;
            let big = kind == KIND_RECV && c.token & BIG_BIT != 0;
            let Some(conn) = inner.conn(slot, gen) else {
                if let Some(bid) = bid {
                    Self::recycle(engine, bid);
                }
                continue;
            };
            if big {
                // The readiness poll of a large-receive transport.
                if !c.more {
                    conn.recv = Recv::Off;
                }
                let live = !conn.released && !conn.lost && !conn.recv_done;
                if res > 0 && live {
                    if res & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) as i32 != 0 {
                        conn.hup = true;
                    }
                    if !conn.readable {
                        conn.readable = true;
                        inner.ready_large.push_back((slot, gen));
                    }
                } else if res < 0 && res != -libc::ECANCELED && live {
                    conn.recv_done = true;
                    actions.push(Action::ReadErr(slot, gen, -res));
                }
                if !c.more {
                    inner.mark(slot);
                }
                inner.maybe_free(slot);
                continue;
            }
            if kind == KIND_RECV {
                if !c.more {
                    conn.recv = Recv::Off;
                }
                let live = !conn.released && !conn.lost;
                let mut remark = false;
                if res > 0 && live {
                    remark = note_received(conn, res as usize, batch);
                }
                if res > 0 {
                    let br = engine
                        .bufring
                        .as_mut()
                        .expect("recv CQE without a buffer ring");
                    let bid = bid.expect("a multishot receive CQE carries a buffer");
                    let n = res as usize;
                    conn.filled = n == BUFSIZE;
                    // SAFETY: the kernel filled `n` bytes of buffer `bid` and handed it
                    // to us with this CQE; it is not back in the ring until the push
                    // below, so nothing else writes it while we copy.
                    let data = unsafe { std::slice::from_raw_parts(br.mem.ptr(br.buffer(bid)), n) };
                    // The kernel took it from the ring: it is ours until given back.
                    br.available -= 1;
                    let mut kept = false;
                    if live {
                        if !conn.reading || !conn.backlog.is_empty() {
                            conn.backlog.extend_from_slice(data);
                        } else if conn.buffered.is_some() {
                            conn.data_batch = batch;
                            actions.push(Action::Data(slot, gen, Payload::Raw(data.to_vec())));
                        } else {
                            conn.data_batch = batch;
                            // Every receive of this transport in the batch becomes one
                            // data_received call (asyncio reads up to 256 KiB at once);
                            // its buffers go back once copied, after the loop.
                            if conn.group_batch == batch {
                                groups[conn.group].2.push((bid, n));
                            } else {
                                conn.group_batch = batch;
                                conn.group = groups.len();
                                groups.push((slot, actions.len(), vec![(bid, n)]));
                                actions.push(Action::Data(slot, gen, Payload::Segs(Vec::new())));
                            }
                            kept = true;
                        }
                    }
                    if !kept {
                        br.give(bid);
                        br.refill();
                    }
                } else {
                    if let Some(bid) = bid {
                        Self::recycle(engine, bid);
                    }
                    let deferred = conn.data_batch == batch;
                    let mut starved = false;
                    match -res {
                        0 => {
                            conn.recv_done = true;
                            if live && deferred {
                                conn.pending_eof = true;
                            } else if live {
                                actions.push(Action::Eof(slot, gen));
                            }
                        }
                        libc::ECANCELED => {}
                        libc::ENOBUFS if live && conn.buffered.is_none() && conn.filled => {
                            // The window ran dry while this transport filled whole
                            // buffers: its messages are large, but a starved
                            // receive's batches cannot show it (each gets a buffer
                            // or two), so the average would keep it waiting for
                            // buffers turn after turn (at 100 KiB x 1,000 every new
                            // client's connections took a second to move). Large
                            // receives need no buffers. (Moving those that ran dry
                            // before any data as well, to let their first receives
                            // there decide, left up to a tenth of 1,000 new 1 KiB
                            // streams connections unanswered for a second.)
                            conn.big = true;
                            conn.rx_avg = Some(conn.rx_avg.map_or(BIG_ON, |a| a.max(BIG_ON)));
                        }
                        libc::ENOBUFS => {
                            // The provided window ran dry: widen it (up to its cap)
                            // and wait for buffers (see `unstarve`).
                            if let Some(br) = engine.bufring.as_mut() {
                                br.grow();
                            }
                            if live && !conn.starved {
                                conn.starved = true;
                                starved = true;
                            }
                        }
                        e => {
                            conn.recv_done = true;
                            if live && deferred {
                                conn.pending_err = Some(e);
                            } else if live {
                                actions.push(Action::ReadErr(slot, gen, e));
                            }
                        }
                    }
                    if live && deferred && res != -libc::ECANCELED && res != -libc::ENOBUFS {
                        inner.resumed.push(slot);
                    }
                    if starved {
                        inner.starved.push_back((slot, gen));
                    }
                }
                if !c.more || remark {
                    inner.mark(slot);
                }
            } else {
                conn.send_inflight = false;
                if res >= 0 {
                    // res never exceeds the in-flight iovecs, which cover the head.
                    conn.advance(res as usize);
                    if !conn.released && !conn.lost {
                        // Decided when the action runs: the resume_writing callback
                        // may queue more (asyncio's _write_ready order).
                        actions.push(Action::SendDone(slot, gen));
                    }
                } else {
                    match -res {
                        libc::EAGAIN | libc::EINTR => {}
                        libc::ECANCELED if conn.lost || conn.released => {}
                        e => {
                            if !conn.released && !conn.lost {
                                // Dropped with the queue, as asyncio clears its buffer.
                                conn.queue.clear();
                                conn.queued = 0;
                                conn.head_off = 0;
                                if let Some(t) = conn.transport.as_ref() {
                                    actions.push(Action::Call(
                                        t.clone_ref(py),
                                        "_ringio_write_error",
                                        e,
                                    ));
                                }
                            }
                        }
                    }
                }
                if conn.released || conn.lost {
                    // Nothing more to send: release the chunks the kernel no longer reads.
                    if !conn.send_inflight {
                        conn.queue.clear();
                        conn.queued = 0;
                        conn.head_off = 0;
                    }
                }
                inner.mark(slot);
            }
            inner.maybe_free(slot);
        }
    }

    /// Runs one action; Err only for KeyboardInterrupt/SystemExit (or a failing
    /// `_fatal_error`), which stop the batch.
    fn run(&self, py: Python<'_>, action: Action) -> PyResult<()> {
        match action {
            Action::Readable(slot, gen) => self.receive_large(py, slot, gen),
            Action::Data(slot, gen, payload) => {
                let (tr, ctx, dr, buffered, ring) = {
                    let mut inner = self.lock();
                    let ring = inner.ring.as_ref().map(|r| r.clone_ref(py));
                    let Some(c) = inner.conn(slot, gen) else {
                        payload.discard(ring.as_ref());
                        return Ok(());
                    };
                    if c.released || c.lost {
                        payload.discard(ring.as_ref());
                        return Ok(());
                    }
                    if !c.reading || !c.backlog.is_empty() {
                        // Paused by an earlier callback of this batch: keep the bytes.
                        payload.append_to(ring.as_ref(), py, &mut c.backlog);
                        return Ok(());
                    }
                    (
                        c.transport.as_ref().map(|t| t.clone_ref(py)),
                        c.context.as_ref().map(|t| t.clone_ref(py)),
                        c.data_received.as_ref().map(|t| t.clone_ref(py)),
                        c.buffered
                            .as_ref()
                            .map(|(a, b)| (a.clone_ref(py), b.clone_ref(py))),
                        ring,
                    )
                };
                let Some(tr) = tr else {
                    payload.discard(ring.as_ref());
                    return Ok(());
                };
                let cb = Callbacks {
                    tr,
                    ctx,
                    dr,
                    buffered,
                };
                self.deliver(py, slot, gen, cb, payload, ring.as_ref())
            }
            Action::Eof(slot, gen) => {
                let tr = {
                    let mut inner = self.lock();
                    let Some(c) = inner.conn(slot, gen) else {
                        return Ok(());
                    };
                    if c.released || c.lost {
                        return Ok(());
                    }
                    if !c.reading || !c.backlog.is_empty() {
                        c.pending_eof = true;
                        return Ok(());
                    }
                    c.transport.as_ref().map(|t| t.clone_ref(py))
                };
                match tr {
                    Some(t) => self.call(py, &t, "_ringio_eof", -1),
                    None => Ok(()),
                }
            }
            Action::ReadErr(slot, gen, e) => {
                let tr = {
                    let mut inner = self.lock();
                    let Some(c) = inner.conn(slot, gen) else {
                        return Ok(());
                    };
                    if c.released || c.lost {
                        return Ok(());
                    }
                    if !c.reading || !c.backlog.is_empty() {
                        c.pending_err = Some(e);
                        return Ok(());
                    }
                    c.transport.as_ref().map(|t| t.clone_ref(py))
                };
                match tr {
                    Some(t) => self.call(py, &t, "_ringio_read_error", e),
                    None => Ok(()),
                }
            }
            Action::Call(t, name, arg) => self.call(py, &t, name, arg),
            Action::SendDone(slot, gen) => {
                // Flow control is judged on what the kernel left queued: write()
                // only queues (asyncio's write sends at once), so the water marks
                // are checked here, and in write() only while a send is in flight.
                let flow = {
                    let mut inner = self.lock();
                    let Some(c) = inner.conn(slot, gen) else {
                        return Ok(());
                    };
                    let name = if c.proto_paused && c.queued <= c.low {
                        c.proto_paused = false;
                        Some("_maybe_resume_protocol")
                    } else if !c.proto_paused && c.queued > c.high {
                        Some("_maybe_pause_protocol")
                    } else {
                        None
                    };
                    name.zip(c.transport.as_ref().map(|t| t.clone_ref(py)))
                };
                if let Some((name, t)) = flow {
                    self.call(py, &t, name, -1)?;
                }
                let (tr, what) = {
                    let mut inner = self.lock();
                    let Some(c) = inner.conn(slot, gen) else {
                        return Ok(());
                    };
                    if c.released || c.lost || !c.queue.is_empty() || c.send_inflight {
                        return Ok(());
                    }
                    let what = if c.closing {
                        c.lost = true;
                        Some("_ringio_drained")
                    } else {
                        if c.eof && !c.shut {
                            c.shut = true;
                            // SAFETY: shutdown(2) on the transport's fd, which stays
                            // open until the transport is released.
                            unsafe { libc::shutdown(c.fd, libc::SHUT_WR) };
                        }
                        if c.want_empty {
                            c.want_empty = false;
                            Some("_ringio_empty")
                        } else {
                            None
                        }
                    };
                    (c.transport.as_ref().map(|t| t.clone_ref(py)), what)
                };
                match (tr, what) {
                    (Some(t), Some(name)) => self.call(py, &t, name, -1),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Whether running `action` would call no Python code: a `SendDone` that
    /// crosses no water mark and owes the transport no drained/empty/shutdown step
    /// (the conditions of `run`'s `SendDone` arm, read without acting).
    fn send_done_is_quiet(inner: &mut Inner, action: &Action) -> bool {
        let Action::SendDone(slot, gen) = action else {
            return false;
        };
        let Some(c) = inner.conn(*slot, *gen) else {
            return true;
        };
        let flow = (c.proto_paused && c.queued <= c.low) || (!c.proto_paused && c.queued > c.high);
        if flow {
            return false;
        }
        c.released
            || c.lost
            || !c.queue.is_empty()
            || c.send_inflight
            || !(c.closing || (c.eof && !c.shut) || c.want_empty)
    }

    /// Calls the transport's method `name` (with `arg` if >= 0) in the transport's
    /// context (its `_context`): the method calls the protocol (`eof_received`,
    /// `pause_writing`, ...) or schedules `connection_lost`, whose handle copies
    /// the context current when it is made.
    fn call(&self, py: Python<'_>, t: &Py<PyAny>, name: &str, arg: i32) -> PyResult<()> {
        let t = t.bind(py);
        let ctx = t
            .getattr(intern!(py, "_context"))
            .ok()
            .filter(|c| !c.is_none());
        let r = (|| {
            let method = t.getattr(name)?;
            match (&ctx, arg >= 0) {
                (Some(c), true) => in_context(py, c, &method, PyTuple::new(py, [arg])?),
                (Some(c), false) => in_context(py, c, &method, PyTuple::empty(py)),
                (None, true) => method.call1((arg,)),
                (None, false) => method.call0(),
            }
        })();
        match r {
            Ok(_) => Ok(()),
            Err(e) if is_fatal(py, &e) => Err(e),
            Err(e) => {
                // The transport's helpers do not raise; if one does, report it the way
                // asyncio reports a failing callback rather than lose it.
                let msg = format!("Fatal error in transport {name}()");
                let fatal = t.getattr(intern!(py, "_fatal_error"))?;
                match &ctx {
                    Some(c) => {
                        let args = PyTuple::new(
                            py,
                            [e.value(py).as_any(), PyString::new(py, &msg).as_any()],
                        )?;
                        in_context(py, c, &fatal, args).map(drop)
                    }
                    None => fatal.call1((e.value(py), msg)).map(drop),
                }
            }
        }
    }

    fn deliver(
        &self,
        py: Python<'_>,
        slot: u32,
        gen: u32,
        cb: Callbacks,
        payload: Payload,
        ring: Option<&Py<Ring>>,
    ) -> PyResult<()> {
        let Callbacks {
            tr,
            ctx,
            dr,
            buffered,
        } = cb;
        let ctx = ctx.as_ref().map(|c| c.bind(py));
        // The protocol's callbacks, and `_fatal_error` (which schedules
        // connection_lost), run in the transport's context.
        let invoke = |f: &Bound<'_, PyAny>, args: Bound<'_, PyTuple>| -> PyResult<()> {
            match ctx {
                Some(c) => in_context(py, c, f, args).map(drop),
                None => f.call1(args).map(drop),
            }
        };
        let fail = |e: PyErr, msg: &str| -> PyResult<()> {
            if is_fatal(py, &e) {
                return Err(e);
            }
            let fatal = tr.bind(py).getattr(intern!(py, "_fatal_error"))?;
            let args = PyTuple::new(py, [e.value(py).as_any(), PyString::new(py, msg).as_any()])?;
            invoke(&fatal, args)
        };
        if let Some((get_buffer, buffer_updated)) = buffered {
            let data = payload.into_vec(ring, py);
            let mut off = 0;
            while off < data.len() {
                let got = match ctx {
                    Some(c) => {
                        let run = HandleKinds::get(py)?.context_run.bind(py);
                        run.call1((c, get_buffer.bind(py), -1))
                    }
                    None => get_buffer.bind(py).call1((-1,)),
                };
                let buf = match got {
                    Ok(b) => b,
                    Err(e) => return fail(e, "Fatal error: protocol.get_buffer() call failed."),
                };
                let view = match View::writable(&buf) {
                    Ok(v) if !v.is_empty() => v,
                    Ok(_) => {
                        let e = PyRuntimeError::new_err("get_buffer() returned an empty buffer");
                        return fail(e, "Fatal error: protocol.get_buffer() call failed.");
                    }
                    Err(e) => return fail(e, "Fatal error: protocol.get_buffer() call failed."),
                };
                let n = view.len().min(data.len() - off);
                // SAFETY: `view` is a writable, C-contiguous export of at least `n`
                // bytes, held until the copy is done; `data[off..off + n]` is in bounds.
                unsafe { std::ptr::copy_nonoverlapping(data[off..].as_ptr(), view.ptr(), n) };
                drop(view);
                off += n;
                if let Err(e) = invoke(buffer_updated.bind(py), PyTuple::new(py, [n])?) {
                    return fail(e, "Fatal error: protocol.buffer_updated() call failed.");
                }
                if off < data.len() {
                    // The callback may have paused reading or closed: keep the rest.
                    let mut inner = self.lock();
                    let Some(c) = inner.conn(slot, gen) else {
                        return Ok(());
                    };
                    if c.released || c.lost {
                        return Ok(());
                    }
                    if !c.reading {
                        let mut rest = data[off..].to_vec();
                        rest.extend_from_slice(&c.backlog);
                        c.backlog = rest;
                        return Ok(());
                    }
                }
            }
            return Ok(());
        }
        let Some(dr) = dr else {
            payload.discard(ring);
            return Ok(());
        };
        let made = match payload {
            Payload::Raw(v) => new_bytes(py, &v),
            Payload::Obj(o) => Ok(o),
            Payload::Segs(segs) => {
                match with_bufring(ring, |br| br.map(|br| bytes_from_segs(py, br, &segs))) {
                    Some(made) => made,
                    None => return Ok(()), // the ring is gone: the loop is closing
                }
            }
        };
        let arg = match made {
            Ok(b) => b,
            // No memory for the bytes: they are lost, so the stream cannot go on.
            // asyncio fails the transport the same way for a MemoryError in recv.
            Err(e) => return fail(e, "Fatal read error on socket transport"),
        };
        let r = match ctx {
            Some(c) => {
                let run = HandleKinds::get(py)?.context_run.bind(py);
                run.call1((c, dr.bind(py), arg))
            }
            None => dr.bind(py).call1((arg,)),
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) => fail(e, "Fatal error: protocol.data_received() call failed."),
        }
    }

    /// A large-receive transport's turn: one receive (MSG_DONTWAIT) into a new
    /// `bytes` of `BIG_BUFSIZE`, cut to what came and handed to `data_received` at
    /// once, as uvloop reads each ready socket and calls back before the next (the
    /// bytes are still in the cache). A full buffer may have left more: the
    /// transport takes another turn at the next select, after the others ready now.
    /// The kernel writes the object only during the syscall; no Python code can see
    /// it before.
    fn receive_large(&self, py: Python<'_>, slot: u32, gen: u32) -> PyResult<()> {
        let fd = {
            let mut inner = self.lock();
            let Some(c) = inner.conn(slot, gen) else {
                return Ok(());
            };
            // Without its readiness poll armed (ended, or cancelled to move to the
            // pool's multishot receive), the receive armed next reports the data:
            // reading it here could race that receive.
            if c.released || c.lost || c.recv_done || c.recv != Recv::On || !c.recv_big {
                c.readable = false;
                return Ok(());
            }
            if !c.reading || !c.backlog.is_empty() {
                // `set_reading(True)` gives it its turn.
                c.readable = true;
                return Ok(());
            }
            c.readable = false;
            c.fd
        };
        let Some(obj) = crate::net::pybytes::uninit_bytes(py, BIG_BUFSIZE) else {
            return self.fail_receive(py, slot, gen, libc::ENOMEM);
        };
        // SAFETY: `obj` is a new bytes of BIG_BUFSIZE bytes that only this frame
        // references; the kernel writes at most that many into it, during the call.
        let n = unsafe {
            let p = pyo3::ffi::PyBytes_AsString(obj.as_ptr());
            libc::recv(fd, p.cast(), BIG_BUFSIZE, libc::MSG_DONTWAIT)
        };
        if n < 0 {
            let e = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            return match e {
                libc::EAGAIN | libc::EINTR => Ok(()),
                e => self.fail_receive(py, slot, gen, e),
            };
        }
        if n == 0 {
            self.end_receive(slot, gen);
            return self.run(py, Action::Eof(slot, gen));
        }
        let n = n as usize;
        {
            let mut inner = self.lock();
            let batch = inner.batch;
            if let Some(c) = inner.conn(slot, gen) {
                let regroup = note_received(c, n, batch);
                if n == BIG_BUFSIZE || c.hup {
                    // Another turn, after the transports readable now.
                    c.readable = true;
                    inner.ready_large.push_back((slot, gen));
                }
                if regroup {
                    inner.mark(slot);
                }
            }
        }
        let Some(obj) = crate::net::pybytes::shrink(py, obj, n) else {
            return self.fail_receive(py, slot, gen, libc::ENOMEM);
        };
        self.run(py, Action::Data(slot, gen, Payload::Obj(obj)))
    }

    /// The large-receive path is done with this transport (EOF or an error): its
    /// readiness poll is cancelled by the next flush.
    fn end_receive(&self, slot: u32, gen: u32) {
        let mut inner = self.lock();
        if let Some(c) = inner.conn(slot, gen) {
            c.recv_done = true;
            c.readable = false;
            inner.mark(slot);
        }
    }

    fn fail_receive(&self, py: Python<'_>, slot: u32, gen: u32, errno: i32) -> PyResult<()> {
        self.end_receive(slot, gen);
        self.run(py, Action::ReadErr(slot, gen, errno))
    }

    /// Delivers the backlogs of resumed transports (bytes, then EOF or error).
    fn deliver_resumed(&self, py: Python<'_>, resumed: Vec<u32>) -> PyResult<()> {
        let mut it = resumed.into_iter();
        while let Some(slot) = it.next() {
            if let Err(e) = self.deliver_one(py, slot) {
                // Interrupted: the others keep their backlog for the next select.
                self.lock().resumed.extend(it);
                return Err(e);
            }
        }
        Ok(())
    }

    fn deliver_one(&self, py: Python<'_>, slot: u32) -> PyResult<()> {
        {
            let (gen, data, eof, err, readable) = {
                let mut inner = self.lock();
                let Some(Some(c)) = inner.conns.get_mut(slot as usize) else {
                    return Ok(());
                };
                if !c.reading || c.released || c.lost {
                    return Ok(());
                }
                (
                    c.gen,
                    std::mem::take(&mut c.backlog),
                    std::mem::take(&mut c.pending_eof),
                    c.pending_err.take(),
                    c.readable,
                )
            };
            if !data.is_empty() {
                self.run(py, Action::Data(slot, gen, Payload::Raw(data)))?;
            }
            if eof {
                self.run(py, Action::Eof(slot, gen))?;
            } else if let Some(e) = err {
                self.run(py, Action::ReadErr(slot, gen, e))?;
            } else if readable {
                self.receive_large(py, slot, gen)?;
            }
        }
        Ok(())
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
    #[new]
    fn new() -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
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
        // Only tried: a collection can start inside one of the core's own
        // critical sections, in this same thread.
        let Some(inner) = try_lock(&self.inner) else {
            return Ok(());
        };
        visit.call(&inner.ring)?;
        for c in &inner.backlog {
            visit.call(c)?;
        }
        for c in inner.conns.iter().flatten() {
            visit.call(&c.transport)?;
            visit.call(&c.context)?;
            visit.call(&c.data_received)?;
            if let Some((get_buffer, buffer_updated)) = &c.buffered {
                visit.call(get_buffer)?;
                visit.call(buffer_updated)?;
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
            let mut refs: Vec<Py<PyAny>> = Vec::new();
            for c in inner.conns.iter_mut().flatten() {
                refs.extend(c.transport.take());
                refs.extend(c.context.take());
                refs.extend(c.data_received.take());
                if let Some((a, b)) = c.buffered.take() {
                    refs.extend([a, b]);
                }
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
    /// queue an op or a poll for the selector, or cancel enough timers that asyncio
    /// rebuilds the heap). Returns when one of them fails (None), or with the
    /// selector's completions of the last iteration, which the caller dispatches
    /// before `run_ready`, as with `run_once`. asyncio's `run_forever` calls
    /// `_run_once` and looks at `_stopping` after each: here both happen without
    /// going back to Python, whose per-iteration checks were a quarter of an idle
    /// iteration's instructions.
    fn run_iterations<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        event_loop: &Bound<'py, PyAny>,
        selector: &Bound<'py, PyAny>,
        ring: &Bound<'py, Ring>,
        ready: &Bound<'py, PyAny>,
        scheduled: &Bound<'py, PyList>,
    ) -> PyResult<Option<Vec<Py<Completion>>>> {
        let instance_dict = |o: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyDict>> {
            Ok(o.getattr(intern!(py, "__dict__"))?.cast_into::<PyDict>()?)
        };
        let loop_dict = instance_dict(event_loop)?;
        let selector_dict = instance_dict(selector)?;
        let stopping_now = || -> PyResult<bool> {
            loop_dict
                .get_item(intern!(py, "_stopping"))?
                .map_or(Ok(true), |v| v.is_truthy())
        };
        let mut stopping = stopping_now()?;
        loop {
            NATIVE_ITERATIONS.fetch_add(1, Ordering::Relaxed);
            let done = Self::run_once(slf, event_loop, ring, ready, scheduled, stopping)?;
            if done.is_some() || stopping {
                return Ok(done);
            }
            stopping = stopping_now()?;
            if stopping || !Self::native_iteration_ok(&loop_dict, &selector_dict, ring, scheduled)?
            {
                return Ok(None);
            }
            // Python's eval loop would run a signal's handler between two iterations.
            py.check_signals()?;
        }
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
        let py = event_loop.py();
        let heappop = heappop(py)?;
        while !scheduled.is_empty() {
            let head = scheduled.get_item(0)?;
            if !head.getattr(intern!(py, "_cancelled"))?.is_truthy()? {
                break;
            }
            let count = event_loop.getattr(intern!(py, "_timer_cancelled_count"))?;
            event_loop.setattr(intern!(py, "_timer_cancelled_count"), count.sub(1)?)?;
            let handle = heappop.call1((scheduled,))?;
            handle.setattr(intern!(py, "_scheduled"), false)?;
        }
        Ok(if stopping || ready.len()? > 0 {
            Some(0.0)
        } else if !scheduled.is_empty() {
            let when: f64 = scheduled
                .get_item(0)?
                .getattr(intern!(py, "_when"))?
                .extract()?;
            Some((when - crate::sys::monotonic()).clamp(0.0, MAXIMUM_SELECT_TIMEOUT))
        } else {
            None
        })
    }

    /// The second half of asyncio's iteration: timers due by now (within the
    /// loop's clock resolution) join `ready`, then the handles in `ready` at this
    /// point run, cancelled ones skipped; those they schedule wait for the next
    /// iteration. An exception out of a handle (`Handle._run` lets only
    /// SystemExit and KeyboardInterrupt out) leaves the rest queued, as asyncio does.
    #[staticmethod]
    fn run_ready(
        event_loop: &Bound<'_, PyAny>,
        ready: &Bound<'_, PyAny>,
        scheduled: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        let py = event_loop.py();
        if !scheduled.is_empty() {
            let resolution: f64 = event_loop
                .getattr(intern!(py, "_clock_resolution"))?
                .extract()?;
            let end_time = crate::sys::monotonic() + resolution;
            let heappop = heappop(py)?;
            while !scheduled.is_empty() {
                let head = scheduled.get_item(0)?;
                let when: f64 = head.getattr(intern!(py, "_when"))?.extract()?;
                if when >= end_time {
                    break;
                }
                let handle = heappop.call1((scheduled,))?;
                handle.setattr(intern!(py, "_scheduled"), false)?;
                ready.call_method1(intern!(py, "append"), (handle,))?;
            }
        }
        let count = ready.len()?;
        if count == 0 {
            return Ok(());
        }
        let popleft = ready.getattr(intern!(py, "popleft"))?;
        let kinds = HandleKinds::get(py)?;
        for _ in 0..count {
            let handle = popleft.call0()?;
            if !handle.getattr(intern!(py, "_cancelled"))?.is_truthy()? {
                kinds.run(&handle)?;
            }
        }
        Ok(())
    }

    /// Registers a stream transport on `fd`; returns its (slot, generation). The
    /// protocol's callbacks run in `context` (a `contextvars.Context`; None: in
    /// whatever context runs the loop).
    #[pyo3(signature = (fd, transport, context=None))]
    fn add(
        &self,
        fd: RawFd,
        transport: Py<PyAny>,
        context: Option<Py<PyAny>>,
    ) -> PyResult<(u32, u32)> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(PyRuntimeError::new_err("the loop core is closed"));
        }
        inner.next_gen = inner.next_gen.wrapping_add(1) & 0x3fff_ffff;
        let gen = inner.next_gen;
        let conn = Conn {
            gen,
            fd,
            transport: Some(transport),
            context,
            data_received: None,
            buffered: None,
            reading: false,
            recv: Recv::Off,
            recv_done: false,
            backlog: Vec::new(),
            pending_eof: false,
            pending_err: None,
            queue: VecDeque::new(),
            spare: None,
            head_off: 0,
            queued: 0,
            send_inflight: false,
            send_cancelled: false,
            iov: Vec::new(),
            // SAFETY: msghdr is plain data; all-zero is a valid empty header.
            msg: Box::new(unsafe { std::mem::zeroed() }),
            closing: false,
            eof: false,
            shut: false,
            sendfile: false,
            want_empty: false,
            lost: false,
            released: false,
            proto_paused: false,
            data_batch: 0,
            group_batch: 0,
            group: 0,
            starved: false,
            filled: false,
            readable: false,
            hup: false,
            rx_acc: 0,
            rx_batch: 0,
            rx_avg: None,
            big: false,
            recv_big: false,
            high: 64 * 1024,
            low: 16 * 1024,
            dirty: false,
        };
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
        let (dr, bf) = if buffered {
            (
                None,
                Some((
                    protocol.getattr("get_buffer")?.unbind(),
                    protocol.getattr("buffer_updated")?.unbind(),
                )),
            )
        } else {
            (Some(protocol.getattr("data_received")?.unbind()), None)
        };
        let _ = py;
        // The old callbacks are dropped after the lock is released: dropping the
        // last reference to a protocol may run its Python code, which may call
        // the transport (and so the core) again.
        let old = self.with_conn(slot, gen, |c| {
            (
                std::mem::replace(&mut c.data_received, dr),
                std::mem::replace(&mut c.buffered, bf),
            )
        });
        drop(old);
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
            let empty = c.queue.is_empty() && !c.send_inflight;
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
        self.lock().conn(slot, gen).map_or(0, |c| c.queued)
    }

    /// close(): stop reading; True when nothing is queued (the caller schedules
    /// connection_lost), else connection_lost follows the last send.
    fn close(&self, slot: u32, gen: u32) -> bool {
        self.with_conn(slot, gen, |c| {
            c.reading = false;
            c.closing = true;
            if c.queue.is_empty() {
                c.lost = true;
            }
            c.queue.is_empty()
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
            if !c.send_inflight && !c.lost && !c.released {
                // As much as the socket takes (up to MAX_IOV chunks per sendmsg);
                // stops when it takes nothing more (EAGAIN) or fails.
                while !c.queue.is_empty() {
                    let before = c.queued;
                    if c.send_now().is_some() || c.queued == before {
                        break;
                    }
                }
            }
            c.lost = true;
            if !c.send_inflight {
                c.queue.clear();
                c.head_off = 0;
            } else {
                // Keep only what the kernel may be reading.
                let n = c.iov.len();
                while c.queue.len() > n {
                    c.queue.pop_back();
                }
            }
            c.queued = 0;
        });
    }

    /// write_eof(): SHUT_WR now if nothing is queued, else after the last send.
    fn write_eof(&self, slot: u32, gen: u32) -> PyResult<()> {
        let now = self
            .with_conn(slot, gen, |c| {
                c.eof = true;
                c.shut = c.queue.is_empty();
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
        let (transport, dr, bf, ctx, ring) = {
            let mut inner = self.lock();
            let Some(c) = inner.conn(slot, gen) else {
                return Ok(());
            };
            c.released = true;
            c.reading = false;
            c.lost = true;
            if !c.send_inflight {
                c.queue.clear();
                c.head_off = 0;
            }
            c.queued = 0;
            c.backlog = Vec::new();
            let taken = (
                c.transport.take(),
                c.data_received.take(),
                c.buffered.take(),
                c.context.take(),
            );
            inner.mark(slot);
            inner.maybe_free(slot);
            (
                taken.0,
                taken.1,
                taken.2,
                taken.3,
                inner.ring.as_ref().map(|r| r.clone_ref(py)),
            )
        };
        // Dropped without the lock: releasing them may run Python code.
        drop((transport, dr, bf, ctx));
        let Some(ring) = ring else { return Ok(()) };
        let pydriver = ring.get().inner();
        let mut inner = self.lock();
        let mut driver = pydriver.driver();
        if driver.is_closed() || driver.check_caller(py).is_err() {
            return Ok(());
        }
        Self::flush(&mut inner, &mut driver.engine).map_err(|e| errors::io_error(py, &e, None))?;
        let n = driver.engine.sq_pending();
        if n > 0 {
            let fd = driver.engine.ring_fd();
            // Not waiting (min_complete 0); GETEVENTS runs DEFER_TASKRUN task work,
            // which is where a cancelled request drops its file reference. The CQEs
            // stay in the CQ for the next select.
            crate::uring::enter_nowait(fd, n, crate::uring::IORING_ENTER_GETEVENTS)
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
            .filter(|c| !c.released)
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
            .filter(|c| c.recv == Recv::On && c.recv_big)
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
            .filter(|c| c.released)
            .count()
    }
}

/// `transport.write` of a ring transport: bound to one transport's slot.
#[pyclass(module = "ringio._core", frozen)]
pub struct TransportWriter {
    core: Py<LoopCore>,
    slot: u32,
    gen: u32,
    /// A weak reference to the Python transport (a strong one would be a cycle the
    /// GC cannot see through this native object).
    transport: Py<PyWeakrefReference>,
}

impl TransportWriter {
    fn call_transport(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        if let Some(t) = self.transport.bind(py).upgrade() {
            t.call_method0(name)?;
        }
        Ok(())
    }
}

#[pymethods]
impl TransportWriter {
    /// The writer holds the core (the transport holds the writer's bound
    /// `write`): a cycle the GC must see through. Both fields are immutable, so
    /// there is nothing to clear: the cycle is broken at the transport's
    /// `__dict__` or at the core.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.core)?;
        visit.call(&self.transport)
    }

    #[new]
    fn new(
        core: Py<LoopCore>,
        slot: u32,
        gen: u32,
        transport: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(Self {
            core,
            slot,
            gen,
            transport: PyWeakrefReference::new(transport)?.unbind(),
        })
    }

    /// Queues `data` for the next io_uring_enter (asyncio's Transport.write).
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = data.cast::<PyBytes>().ok();
        if bytes.is_none()
            && !data.is_instance_of::<PyByteArray>()
            && !data.is_instance_of::<PyMemoryView>()
        {
            // asyncio's socket transport's words, which changed in 3.14.
            let what = if py.version_info() >= (3, 14) {
                "a bytes, bytearray, or memoryview object"
            } else {
                "a bytes-like object"
            };
            return Err(PyTypeError::new_err(format!(
                "data argument must be {what}, not '{}'",
                data.get_type().name()?
            )));
        }
        let core = self.core.get();
        let mut inner = core.lock();
        let Some(c) = inner.conn(self.slot, self.gen) else {
            drop(inner);
            return self.call_transport(py, "_ringio_write_lost");
        };
        if c.eof {
            return Err(PyRuntimeError::new_err(
                "Cannot call write() after write_eof()",
            ));
        }
        if c.sendfile {
            return Err(PyRuntimeError::new_err(
                "unable to write; sendfile is in progress",
            ));
        }
        let view;
        let src: &[u8] = match &bytes {
            Some(b) => b.as_bytes(),
            None => {
                view = View::readable(data)?;
                // SAFETY: `view` is a C-contiguous export of len() bytes, held (so the
                // exporter cannot resize or free it) until the copy below is done.
                unsafe { std::slice::from_raw_parts(view.ptr(), view.len()) }
            }
        };
        if src.is_empty() {
            return Ok(());
        }
        if c.lost || c.released {
            drop(inner);
            return self.call_transport(py, "_ringio_write_lost");
        }
        let n = src.len();
        // Chunks covered by an in-flight send must not change (the kernel reads them).
        let tail_free = !c.send_inflight || c.queue.len() > c.iov.len();
        match (&bytes, c.queue.back_mut()) {
            (_, Some(Chunk::Owned(v))) if n < COALESCE && tail_free && v.len() + n <= 64 * 1024 => {
                v.extend_from_slice(src)
            }
            (Some(b), _) if n >= COALESCE => c.queue.push_back(Chunk::Shared {
                ptr: src.as_ptr(),
                len: n,
                _obj: Bound::<PyBytes>::clone(b).unbind(),
            }),
            _ => {
                let mut v = c.spare.take().unwrap_or_default();
                v.reserve(n.max(4096));
                v.extend_from_slice(src);
                c.queue.push_back(Chunk::Owned(v));
            }
        }
        c.queued += n;
        let mut failed = None;
        if c.queued > c.high && !c.send_inflight {
            // Over the high-water mark with nothing handed to the kernel yet: try
            // to send now, as asyncio's write() does, so that the water marks
            // judge what the socket could not take (and a writer that never
            // yields still meets a dead connection's error).
            failed = c.send_now();
        }
        let pause = failed.is_none() && c.queued > c.high && !c.proto_paused;
        inner.mark(self.slot);
        drop(inner);
        if let Some(errno) = failed {
            if let Some(t) = self.transport.bind(py).upgrade() {
                t.call_method1("_ringio_write_error", (errno,))?;
            }
        } else if pause {
            self.call_transport(py, "_maybe_pause_protocol")?;
        }
        Ok(())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LoopCore>()?;
    m.add_class::<TransportWriter>()?;
    m.add_function(wrap_pyfunction!(_fail_receive_allocations, m)?)?;
    Ok(())
}

impl LoopCore {
    /// `select`'s body, with the ops already taken from Python.
    fn select_step(
        &self,
        py: Python<'_>,
        ring: &Bound<'_, Ring>,
        mut ops: Vec<Bound<'_, Op>>,
        block: bool,
        timeout: Option<f64>,
        defer: bool,
    ) -> PyResult<Vec<Py<Completion>>> {
        let mut timeout = match timeout {
            Some(t) if t.is_nan() || t < 0.0 => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "timeout must be >= 0 or None",
                ))
            }
            Some(t) => Some(Duration::from_secs_f64(t.min(1e9))),
            None => None,
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let want_block = block;
        let pydriver = ring.get().inner();
        // A blocking wait that ends with nothing for Python (only send completions
        // whose handling calls no Python code: the reply to a request went out, and
        // its CQE arrived before the next request) waits again, in Rust, until the
        // deadline: a Python loop iteration per send completion was half of the
        // iterations with one connection (1.5 selects per request, counted).
        let mut signal_err: Option<PyErr> = None;
        let (raw, mut side, wakers, enter_err, interrupted, early_actions) = loop {
            let (ring_fd, tokens, to_submit, flush_err, block, skip_enter) = {
                let mut inner = self.lock();
                if inner.closed {
                    return Err(PyRuntimeError::new_err("the loop core is closed"));
                }
                Self::bind(&mut inner, ring);
                let block = want_block
                    && inner.backlog.is_empty()
                    && inner.pending.is_empty()
                    && inner.resumed.is_empty()
                    && inner.deferred.is_empty()
                    && inner.deferred_resumed.is_empty()
                    && inner.ready_large.is_empty();
                let mut driver = pydriver.driver();
                driver.check_open()?;
                driver.check_caller(py)?;
                let flush_err = Self::flush(&mut inner, &mut driver.engine).err();
                // A loop-bound Watcher's own wait may have reaped for us meanwhile.
                let block = block && !driver.engine.has_backlog();
                let tokens = if ops.is_empty() {
                    Vec::new()
                } else {
                    driver.begin_submit(py, &ops)?.0
                };
                let to_submit = driver.engine.sq_pending();
                let skip_enter = !block && to_submit == 0 && driver.engine.defers_taskrun();
                let fd = driver.engine.ring_fd();
                (fd, tokens, to_submit, flush_err, block, skip_enter)
            };
            if let Some(e) = flush_err {
                // A failed buffer-ring registration: the transports stay unarmed; say so.
                return Err(errors::io_error(py, &e, None));
            }
            let wait = if block { 1 } else { 0 };
            let flags = crate::uring::IORING_ENTER_GETEVENTS;
            let t = if block { timeout } else { None };
            // EINTR: a signal arrived (its Python handler runs below); SQEs the kernel
            // had not consumed stay in the SQ and go in with the next enter.
            let outcome = if skip_enter {
                // Nothing to submit or wait for: the reap below enters only if the
                // kernel flagged task work (a busy loop of callbacks, e.g. tasks
                // waking each other, made one syscall per iteration for nothing).
                Ok(0)
            } else {
                py.detach(|| crate::uring::enter(ring_fd, to_submit, wait, flags, t))
            };
            let mut enter_err = None;
            let mut interrupted = false;
            match outcome {
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::ETIME | libc::EBUSY | libc::EAGAIN) => {}
                    Some(libc::EINTR) => interrupted = true,
                    _ => enter_err = Some(e),
                },
            }
            let (raw, mut side, wakers) = {
                let mut driver = pydriver.driver();
                if !ops.is_empty() {
                    let done = Submitted {
                        accepted: ops.len(),
                        error: None,
                    };
                    driver.finish_submit(py, &ops, &tokens, done)?;
                }
                let mut raw = Vec::new();
                if !driver.is_closed() {
                    driver
                        .engine
                        .reap_after_enter(&mut raw, usize::MAX)
                        .map_err(|e| errors::io_error(py, &e, None))?;
                }
                let mut side = std::mem::take(&mut self.lock().pending);
                driver.engine.take_side(&mut side);
                (raw, side, driver.engine.take_signalled(py))
            };
            ops.clear(); // submitted: a second pass only waits
            let sends_only = block
                && enter_err.is_none()
                && !interrupted
                && raw.is_empty()
                && wakers.is_empty()
                && !side.is_empty()
                && side.iter().all(|c| untoken(c.token).2 == KIND_SEND);
            if !sends_only {
                break (raw, side, wakers, enter_err, interrupted, None);
            }
            // Send completions never resume a transport (`resumed`): absorbing them
            // here leaves the order of deliveries as it was.
            let mut actions = Vec::with_capacity(side.len());
            let quiet = {
                let mut inner = self.lock();
                let mut driver = pydriver.driver();
                Self::absorb(&mut inner, py, &mut driver.engine, &side, &mut actions);
                inner.backlog.is_empty()
                    && inner.resumed.is_empty()
                    && inner.ready_large.is_empty()
                    && actions
                        .iter()
                        .all(|a| Self::send_done_is_quiet(&mut inner, a))
            };
            side.clear();
            if !quiet {
                break (raw, side, wakers, enter_err, interrupted, Some(actions));
            }
            // A signal delivered after the enter returned (its C handler ran while this
            // thread was absorbing the sends) interrupts no later wait: its Python
            // handler runs now, or Ctrl-C would wait for the next completion.
            if let Err(e) = py.check_signals() {
                signal_err = Some(e);
                break (raw, side, wakers, enter_err, interrupted, Some(actions));
            }
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    break (raw, side, wakers, enter_err, interrupted, Some(Vec::new()));
                }
                timeout = Some(d - now);
            }
        };
        let (mut results, resumed) = {
            let mut inner = self.lock();
            // Taken now: what this step's callbacks resume (or defer) is delivered
            // by the next select, which then does not block.
            (
                std::mem::take(&mut inner.backlog),
                std::mem::take(&mut inner.resumed),
            )
        };
        // File ops (`ringio._engines`' loop-ring proactor) carry an asyncio future:
        // settled here, as the eventfd proactor's resolve_futures() does elsewhere.
        let future_types = FUTURE_TYPES.get_or_try_init(py, || -> PyResult<Py<PyTuple>> {
            let future = py.import("asyncio")?.getattr("Future")?;
            let lane = py.import("ringio._engines.many")?.getattr("Lane")?;
            Ok(PyTuple::new(py, [future, lane])?.unbind())
        })?;
        results.extend(pydriver.finish_settling(py, &raw, Some(future_types.bind(py).as_any()))?);
        // The transports' completions: actions under the lock, then the callbacks.
        let mut actions = early_actions.unwrap_or_default();
        {
            let mut inner = self.lock();
            if !side.is_empty() {
                let mut driver = pydriver.driver();
                Self::absorb(&mut inner, py, &mut driver.engine, &side, &mut actions);
                side.clear();
            }
            let turns = inner.ready_large.len().min(LARGE_TURNS);
            for (slot, gen) in inner.ready_large.drain(..turns) {
                actions.push(Action::Readable(slot, gen));
            }
        }
        let mut failure = None;
        // Loop-bound Watchers with new completions: their wakers only resolve the
        // future a `wait_io_async` awaits (they process the CQEs when it resumes).
        for w in wakers {
            if let Err(e) = w.call0(py) {
                if is_fatal(py, &e) {
                    failure.get_or_insert(e);
                } else {
                    e.write_unraisable(py, None);
                }
            }
        }
        if defer {
            // Handles were ready before this select: the deliveries wait for them
            // (the caller queues `run_deferred` behind them).
            let mut inner = self.lock();
            inner.deferred.extend(actions);
            inner.deferred_resumed.extend(resumed);
        } else {
            // Deliveries deferred by an earlier select whose handle did not run
            // (an exception stopped the loop) go first.
            let (mut all, mut all_resumed) = {
                let mut inner = self.lock();
                inner.deferred_queued = false;
                (
                    std::mem::take(&mut inner.deferred),
                    std::mem::take(&mut inner.deferred_resumed),
                )
            };
            all.extend(actions);
            all_resumed.extend(resumed);
            if failure.is_none() {
                if let Err(e) = self.run_actions(py, all, all_resumed) {
                    failure = Some(e);
                }
            } else {
                self.stash(py, all.into_iter());
                self.lock().resumed.extend(all_resumed);
            }
        }
        if failure.is_none() {
            failure = signal_err;
        }
        if failure.is_none() && interrupted {
            if let Err(e) = py.check_signals() {
                failure = Some(e);
            }
        }
        if failure.is_none() {
            if let Some(e) = enter_err {
                failure = Some(errors::io_error(py, &e, None));
            }
        }
        if let Some(e) = failure {
            // Keep what this step could not hand out: the next select delivers it.
            self.lock().backlog = results;
            return Err(e);
        }
        Ok(results)
    }

    /// Runs a select's deliveries: the transports' actions (protocol callbacks),
    /// then the backlogs of resumed transports. On an exception that stops the
    /// loop (KeyboardInterrupt, SystemExit), what was not delivered is kept for
    /// the next select.
    fn run_actions(&self, py: Python<'_>, actions: Vec<Action>, resumed: Vec<u32>) -> PyResult<()> {
        let mut it = actions.into_iter();
        for a in it.by_ref() {
            if let Err(e) = self.run(py, a) {
                self.stash(py, it);
                self.lock().resumed.extend(resumed);
                return Err(e);
            }
        }
        self.deliver_resumed(py, resumed)
    }

    /// Keeps actions that could not run: received bytes, EOF and errors go to
    /// their transports' backlogs (delivered, in order, by the next select).
    fn stash(&self, py: Python<'_>, actions: impl Iterator<Item = Action>) {
        {
            let mut inner = self.lock();
            let ring = inner.ring.as_ref().map(|r| r.clone_ref(py));
            for a in actions {
                match a {
                    Action::Data(slot, gen, p) => {
                        if let Some(c) = inner.conn(slot, gen) {
                            p.append_to(ring.as_ref(), py, &mut c.backlog);
                            inner.resumed.push(slot);
                        } else {
                            p.discard(ring.as_ref());
                        }
                    }
                    Action::Eof(slot, gen) => {
                        if let Some(c) = inner.conn(slot, gen) {
                            c.pending_eof = true;
                            inner.resumed.push(slot);
                        }
                    }
                    Action::ReadErr(slot, gen, err) => {
                        if let Some(c) = inner.conn(slot, gen) {
                            c.pending_err = Some(err);
                            inner.resumed.push(slot);
                        }
                    }
                    Action::Readable(slot, gen) => inner.ready_large.push_back((slot, gen)),
                    Action::Call(..) | Action::SendDone(..) => {}
                }
            }
        }
    }

    /// One iteration of the event loop, asyncio's `BaseEventLoop._run_once`, for
    /// the common case that the selector has nothing of its own to arm, submit or
    /// dispatch first (`run_iterations` and `EventLoop._run_once` check that, and
    /// everything it does not do here: debug mode, a `time()` of its own, the
    /// heap rebuild):
    /// cancelled timers leave the head of `scheduled`, the step waits as asyncio's
    /// would (not at all when `ready` has handles or the loop is stopping, else
    /// until the first timer or forever), and the due timers and the handles ready
    /// now run (`run_ready`). When the step left completions for the selector
    /// (polls, `sock_*` ops), they are returned instead and the caller dispatches
    /// them, then calls `run_ready`: asyncio runs I/O callbacks' handles after the
    /// timers that are due. None when the whole iteration ran here.
    fn run_once(
        slf: &Bound<'_, Self>,
        event_loop: &Bound<'_, PyAny>,
        ring: &Bound<'_, Ring>,
        ready: &Bound<'_, PyAny>,
        scheduled: &Bound<'_, PyList>,
        stopping: bool,
    ) -> PyResult<Option<Vec<Py<Completion>>>> {
        let (this, py) = (slf.get(), slf.py());
        let timeout = Self::select_timeout(event_loop, ready, scheduled, stopping)?;
        let block = timeout.is_none_or(|t| t > 0.0);
        // Handles ready before the select run before what it receives (asyncio's
        // order): the deliveries go in a handle queued behind them.
        let defer = ready.len()? > 0;
        let done = this.select_step(
            py,
            ring,
            Vec::new(),
            block,
            timeout.filter(|_| block),
            defer,
        )?;
        if defer && this.claim_deferred() {
            event_loop.call_method1(
                intern!(py, "call_soon"),
                (slf.getattr(intern!(py, "run_deferred"))?,),
            )?;
        }
        if !done.is_empty() {
            return Ok(Some(done));
        }
        Self::run_ready(event_loop, ready, scheduled)?;
        Ok(None)
    }

    /// `EventLoop._run_once`'s conditions for `run_iterations` that a callback
    /// can change: not in debug mode; the selector has nothing of its own to arm,
    /// submit, cancel or dispatch, no file op waiting for CQ room, and still this
    /// ring;
    /// and asyncio would not rebuild the timer heap now (more than
    /// `_MIN_SCHEDULED_TIMER_HANDLES` timers, over half of them cancelled).
    fn native_iteration_ok(
        loop_dict: &Bound<'_, PyDict>,
        selector_dict: &Bound<'_, PyDict>,
        ring: &Bound<'_, Ring>,
        scheduled: &Bound<'_, PyList>,
    ) -> PyResult<bool> {
        let py = loop_dict.py();
        // The instances' own dicts, read directly: these are plain attributes of
        // asyncio's loop and of RingSelector, and seven generic getattrs were a
        // fifth of an idle iteration. A missing one ends the native iterations.
        let set = |d: &Bound<'_, PyDict>, name: &Bound<'_, PyString>| {
            d.get_item(name)?.map_or(Ok(true), |v| v.is_truthy())
        };
        if set(loop_dict, intern!(py, "_debug"))? {
            return Ok(false);
        }
        // A `time` patched on the instance: timers are judged by it, in asyncio's
        // `_run_once` (which `EventLoop._run_once` then takes).
        if loop_dict.contains(intern!(py, "time"))? {
            return Ok(false);
        }
        for name in [
            intern!(py, "_queued"),
            intern!(py, "_to_arm"),
            intern!(py, "_backlog"),
            intern!(py, "_cancel_later"),
        ] {
            if set(selector_dict, name)? {
                return Ok(false);
            }
        }
        // File proactors (`ringio.open` on this loop) stage their ops into the ring
        // themselves and the core settles their futures; Python has work only for
        // ops that waited for CQ room (`after_select`). Returning for every
        // iteration while a proactor merely existed made every later iteration of
        // the loop cost its Python path (sleep(0) 2.6-3.5 -> 4.5-5.0 µs).
        if let Some(files) = selector_dict.get_item(intern!(py, "_files"))? {
            for proactor in files.try_iter()? {
                if proactor?.getattr(intern!(py, "_queue"))?.is_truthy()? {
                    return Ok(false);
                }
            }
        }
        if !selector_dict
            .get_item(intern!(py, "_ring"))?
            .is_some_and(|r| r.is(ring))
        {
            return Ok(false);
        }
        let timers = scheduled.len();
        if timers > MIN_SCHEDULED_TIMER_HANDLES {
            let cancelled: f64 = loop_dict
                .get_item(intern!(py, "_timer_cancelled_count"))?
                .map_or(Ok(f64::INFINITY), |c| c.extract())?;
            if cancelled / timers as f64 > MIN_CANCELLED_TIMER_HANDLES_FRACTION {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// What `Handle._run` needs, looked up once: asyncio's own handle classes (whose
/// `_run` this does natively; a subclass's own `_run` is called instead),
/// `Context.run`, and ringio's report of a callback's exception.
struct HandleKinds {
    handle: Py<PyAny>,
    timer_handle: Py<PyAny>,
    context_run: Py<PyAny>,
    report: Py<PyAny>,
}

static HANDLE_KINDS: PyOnceLock<HandleKinds> = PyOnceLock::new();

impl HandleKinds {
    fn get(py: Python<'_>) -> PyResult<&HandleKinds> {
        HANDLE_KINDS.get_or_try_init(py, || {
            let events = py.import("asyncio.events")?;
            Ok(HandleKinds {
                handle: events.getattr("Handle")?.unbind(),
                timer_handle: events.getattr("TimerHandle")?.unbind(),
                context_run: py
                    .import("contextvars")?
                    .getattr("Context")?
                    .getattr("run")?
                    .unbind(),
                report: py
                    .import("ringio.loop._loop")?
                    .getattr("_report_callback_error")?
                    .unbind(),
            })
        })
    }

    /// `handle._run()`: its callback runs in its context; SystemExit and
    /// KeyboardInterrupt propagate, any other exception goes to the loop's
    /// exception handler with asyncio's context (`_report_callback_error`). Done
    /// here for asyncio's own classes, it costs a third of the Python method
    /// (which unpacks the arguments into a call of `Context.run` inside a `try`).
    fn run(&self, handle: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = handle.py();
        let kind = handle.get_type();
        if !(kind.is(self.handle.bind(py)) || kind.is(self.timer_handle.bind(py))) {
            return handle.call_method0(intern!(py, "_run")).map(drop);
        }
        let context = handle.getattr(intern!(py, "_context"))?;
        let callback = handle.getattr(intern!(py, "_callback"))?;
        let args = handle.getattr(intern!(py, "_args"))?;
        let args = args.cast::<PyTuple>()?;
        let mut call = Vec::with_capacity(args.len() + 2);
        call.push(context);
        call.push(callback);
        call.extend(args.iter());
        match self.context_run.bind(py).call1(PyTuple::new(py, call)?) {
            Ok(_) => Ok(()),
            Err(e) if is_fatal(py, &e) => Err(e),
            Err(e) => self
                .report
                .bind(py)
                .call1((handle, e.into_value(py)))
                .map(drop),
        }
    }
}

/// Native loop iterations so far (all loops of the process).
static NATIVE_ITERATIONS: AtomicU64 = AtomicU64::new(0);

/// asyncio's thresholds for rebuilding the timer heap (`base_events`).
const MIN_SCHEDULED_TIMER_HANDLES: usize = 100;
const MIN_CANCELLED_TIMER_HANDLES_FRACTION: f64 = 0.5;

/// asyncio's own cap on a select's wait (`base_events.MAXIMUM_SELECT_TIMEOUT`).
const MAXIMUM_SELECT_TIMEOUT: f64 = 24.0 * 3600.0;

static HEAPPOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

fn heappop(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    HEAPPOP
        .get_or_try_init(py, || Ok(py.import("heapq")?.getattr("heappop")?.unbind()))
        .map(|f| f.bind(py))
}
