//! Proactor networking on io_uring: the core of `ringio.Watcher` (gaio's model).
//!
//! The watcher owns its own ring. Each registered connection (a dup of the user's
//! socket fd) has FIFO queues of reads and writes; only the head of each queue is in
//! the kernel, so a connection's bytes keep their order. Reads without a buffer use a
//! provided-buffer ring and, where no deadline is set, a multishot receive; reads
//! with a deadline carry an absolute (CLOCK_MONOTONIC) link timeout, so thousands of
//! deadlines are kernel hrtimers (O(log n) each). Ops queued behind another op wait in
//! a user-space heap of deadlines. Every buffer the kernel may touch is held by the
//! op (or the shared buffer ring) until the op's final CQE is reaped; `close()`
//! cancels everything and waits for every CQE before memory is released.

mod addr;
pub(crate) mod bufring;
pub(crate) mod pybytes;
pub(crate) mod ring;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types};
use pyo3::exceptions::{PyBufferError, PyEOFError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

use crate::buffers::View;
use crate::uring::py::Ring;
use addr::SockAddr;
use bufring::{BufRing, PoolMem};
use ring::WRing;

pyo3::create_exception!(
    _core,
    WatcherClosedError,
    PyOSError,
    "The Watcher was closed: an op pending at close, or a call after close."
);
pyo3::create_exception!(
    _core,
    ConnFreedError,
    PyOSError,
    "The connection was freed (Watcher.free) while this op was pending."
);

pub const OP_READ: i32 = 0;
pub const OP_WRITE: i32 = 1;
pub const OP_ACCEPT: i32 = 2;
pub const OP_CONNECT: i32 = 3;

const TAG_OP: u64 = 0;
const TAG_TIMEOUT: u64 = 1;
const TAG_MSHOT: u64 = 2;
const TAG_INTERNAL: u64 = 3;
/// Bits of a connection's generation in a multishot's user_data (which must fit
/// the 50 bits a loop-bound Watcher has): a stale CQE is recognised as long as its
/// slot was not reused 2^18 times meanwhile.
const GEN_BITS: u32 = 18;
const MAX_RW: usize = 0x7fff_f000;
/// Accepted connections a listener may hold unclaimed (no accept() pending) before
/// the watcher stops its multishot accept; the kernel's listen backlog takes over.
const ACCEPT_BACKLOG: usize = 1024;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Read,
    ReadFull,
    Write,
    Accept,
    Connect,
    ReadFrom,
    WriteTo,
}

impl Kind {
    fn operation(self) -> i32 {
        match self {
            Kind::Read | Kind::ReadFull | Kind::ReadFrom => OP_READ,
            Kind::Write | Kind::WriteTo => OP_WRITE,
            Kind::Accept => OP_ACCEPT,
            Kind::Connect => OP_CONNECT,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Why {
    Freed,
    Closed,
}

enum Fail {
    Os(i32),
    Eof,
    Timeout,
    Freed,
    Closed,
    Py(PyErr),
}

impl From<Why> for Fail {
    fn from(w: Why) -> Self {
        match w {
            Why::Freed => Fail::Freed,
            Why::Closed => Fail::Closed,
        }
    }
}

/// Storage the kernel reads or writes through pointers for connect/recvmsg/sendmsg.
struct Msg {
    addr: SockAddr,
    iov: libc::iovec,
    hdr: libc::msghdr,
}

// SAFETY: the raw pointers in `iov`/`hdr` point into this same boxed struct or into
// buffers the op holds; the struct is only touched through the watcher's `&mut self`.
unsafe impl Send for Msg {}
// SAFETY: as above; nothing reads it through a shared reference concurrently.
unsafe impl Sync for Msg {}

struct Op {
    kind: Kind,
    cid: u64,
    serial: u64,
    ctx: Py<PyAny>,
    conn: Py<PyAny>,
    bufobj: Option<Py<PyAny>>,
    /// The user's buffer export: pins its memory until the op is dropped.
    view: Option<View>,
    /// Fallback receive buffer when the kernel has no buffer rings.
    own: Option<Box<[u8]>>,
    done: usize,
    deadline: Option<f64>,
    ts: types::Timespec,
    in_kernel: bool,
    cancel: Option<Why>,
    msg: Option<Box<Msg>>,
}

impl Op {
    fn len(&self) -> usize {
        self.view.as_ref().map_or(0, View::len)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mshot {
    Off,
    On,
    Cancelling,
}

/// A connection accepted by a multishot accept and not yet claimed by accept().
enum Accepted {
    Fd(OwnedFd),
    /// A direct descriptor (fixed-file slot) the kernel allocated.
    Direct(u32),
}

struct Conn {
    /// Our own reference to the socket: a slot of the ring's fixed-file table (no fd
    /// used, no fd lookup per op), or a private dup when the table is full.
    fd: Option<OwnedFd>,
    slot: Option<u32>,
    /// The slot came from the kernel's allocator (direct accept), not ours.
    direct: bool,
    gen: u32,
    reads: VecDeque<usize>,
    writes: VecDeque<usize>,
    accepts: VecDeque<usize>,
    read_busy: bool,
    write_busy: bool,
    mshot: Mshot,
    /// Whether the multishot (when not Off) is an accept rather than a receive.
    mshot_accept: bool,
    starved: bool,
    /// Read-ahead: data a multishot receive delivered while no read wanted it, in
    /// arrival order. Ring buffers are held out of the ring as they are (zero copy)
    /// within the limits of `hold_ok`; past them the bytes are copied out.
    backlog: VecDeque<Seg>,
    /// Bytes in `backlog`; of which copied (`Seg::Heap`) bytes.
    backlog_bytes: usize,
    heap_bytes: usize,
    /// `Seg::Ring` entries in `backlog`.
    held: usize,
    accepted: VecDeque<Accepted>,
    accept_direct: bool,
    eof: bool,
    rerr: Option<i32>,
}

impl Conn {
    /// The fd for an SQE and whether it is a fixed-file index.
    fn target(&self) -> (types::Fd, bool) {
        match (self.slot, &self.fd) {
            (Some(slot), _) => (types::Fd(slot as i32), true),
            (None, Some(fd)) => (types::Fd(fd.as_raw_fd()), false),
            (None, None) => (types::Fd(-1), false),
        }
    }

    /// Whether an op of this connection may be in the kernel.
    fn in_kernel(&self) -> bool {
        self.mshot != Mshot::Off || self.read_busy || self.write_busy
    }

    /// An SQE that cancels every op of this connection's file (its link timeouts
    /// go with them).
    fn cancel_all(&self) -> squeue::Entry {
        let (fd, fixed) = self.target();
        let builder = if fixed {
            types::CancelBuilder::fd(types::Fixed(fd.0 as u32))
        } else {
            types::CancelBuilder::fd(fd)
        };
        opcode::AsyncCancel2::new(builder.all())
            .build()
            .user_data(TAG_INTERNAL)
    }

    fn new(fd: Option<OwnedFd>, slot: Option<u32>, direct: bool, gen: u32) -> Self {
        Conn {
            fd,
            slot,
            direct,
            gen,
            reads: VecDeque::new(),
            writes: VecDeque::new(),
            accepts: VecDeque::new(),
            read_busy: false,
            write_busy: false,
            mshot: Mshot::Off,
            mshot_accept: false,
            starved: false,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            heap_bytes: 0,
            held: 0,
            accepted: VecDeque::new(),
            accept_direct: false,
            eof: false,
            rerr: None,
        }
    }

    fn backlog_len(&self) -> usize {
        self.backlog_bytes
    }
}

/// A piece of read-ahead (see `Conn::backlog`).
enum Seg {
    /// `len` bytes at `off` of ring buffer `bid`, which stays out of the ring (the
    /// kernel cannot reuse it) until a read consumes it or the connection is freed.
    Ring { bid: u16, off: usize, len: usize },
    /// Bytes copied out of the ring; `pos` of them already consumed.
    Heap { data: Vec<u8>, pos: usize },
}

/// Ring buffers of read-ahead past which a connection's multishot receive is
/// cancelled while no read is pending (TCP flow control takes over).
const HOLD_PER_CONN: usize = 16;

/// Data received into the watcher's buffer ring, handed to Python as
/// `OpResult.buffer`. Valid until the next `wait_io`; a buffer-protocol export
/// (memoryview, a pending `write` of it) taken before then keeps the data in place
/// until released. After that, reading it raises BufferError instead of showing
/// bytes the kernel has since overwritten.
#[pyclass(module = "ringio._core", frozen, name = "RingBuffer")]
pub struct RingView {
    mem: Arc<PoolMem>,
    off: usize,
    len: usize,
    bid: u16,
    exports: AtomicUsize,
    expired: AtomicBool,
}

#[pymethods]
impl RingView {
    fn __len__(&self) -> usize {
        self.len
    }

    fn __repr__(&self) -> String {
        let state = if self.expired.load(Ordering::Relaxed) {
            "recycled"
        } else {
            "valid"
        };
        format!("<ringio.RingBuffer {} bytes, {state}>", self.len)
    }

    /// Whether the data is still readable (not yet recycled into the ring).
    #[getter]
    fn valid(&self) -> bool {
        !self.expired.load(Ordering::Relaxed)
    }

    /// A copy of the data as bytes.
    fn tobytes<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let this = slf.get();
        this.check()?;
        // SAFETY: not expired, so the buffer is not in the ring and the kernel does not
        // write it; `off + len` is inside the mapping that `mem` keeps alive.
        let data = unsafe { std::slice::from_raw_parts(this.mem.ptr(this.off), this.len) };
        Ok(pyo3::types::PyBytes::new(slf.py(), data))
    }

    /// # Safety
    /// Called by CPython with a valid `Py_buffer` to fill, per the buffer protocol.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: std::os::raw::c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        this.check()?;
        // SAFETY: the buffer is out of the ring (not expired) and stays out while
        // `exports` > 0 (the watcher checks it before recycling, both under the GIL);
        // PyBuffer_FillInfo stores a new reference to `slf`, which keeps `mem` mapped.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                this.mem.ptr(this.off).cast(),
                this.len as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc < 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        this.exports.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// # Safety
    /// Called by CPython once per view that `__getbuffer__` filled successfully, so
    /// the export count it decrements was incremented for this view.
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::Relaxed);
    }
}

impl RingView {
    fn check(&self) -> PyResult<()> {
        if self.expired.load(Ordering::Relaxed) {
            return Err(PyBufferError::new_err(
                "this Watcher buffer was recycled at the next wait_io(); copy the data \
                 (bytes(result.buffer)) or hold a memoryview of it before calling wait_io again",
            ));
        }
        Ok(())
    }
}

/// One completed operation, as gaio's OpResult.
#[pyclass(module = "ringio._core", frozen, get_all, name = "OpResult")]
pub struct OpResult {
    /// OP_READ, OP_WRITE, OP_ACCEPT or OP_CONNECT.
    operation: i32,
    context: Py<PyAny>,
    /// The socket the op was submitted on (for accept: the new connection).
    conn: Py<PyAny>,
    /// The user's buffer, a RingBuffer (is_swap_buffer) or None.
    buffer: Py<PyAny>,
    is_swap_buffer: bool,
    size: usize,
    error: Py<PyAny>,
    /// The peer address of read_from; the listener for accept; else None.
    address: Py<PyAny>,
}

#[pymethods]
impl OpResult {
    /// The cyclic GC sees what a result holds (a context that refers back to it,
    /// for one, can then be collected).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.context)?;
        visit.call(&self.conn)?;
        visit.call(&self.buffer)?;
        visit.call(&self.error)?;
        visit.call(&self.address)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let op = ["OP_READ", "OP_WRITE", "OP_ACCEPT", "OP_CONNECT"]
            .get(self.operation as usize)
            .copied()
            .unwrap_or("?");
        let err = self
            .error
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default();
        format!("<OpResult {op} size={} error={err}>", self.size)
    }
}

/// Marks an SQE's fd as a fixed-file index when it is one.
fn on(sqe: squeue::Entry, fixed: bool) -> squeue::Entry {
    if fixed {
        sqe.flags(squeue::Flags::FIXED_FILE)
    } else {
        sqe
    }
}

fn timespec(deadline: f64) -> types::Timespec {
    let d = deadline.max(0.0);
    let secs = d.trunc() as u64;
    let nsec = ((d - d.trunc()) * 1e9) as u32;
    types::Timespec::new().sec(secs).nsec(nsec.min(999_999_999))
}

/// The native Watcher. Used through `ringio.Watcher`, which maps sockets to
/// connection ids and wraps accepted fds into socket objects.
#[pyclass(module = "ringio._core", name = "WatcherCore")]
pub struct WatcherCore {
    /// Its own ring, or the event loop's (`ring::WRing`); None once closed.
    ring: Option<WRing>,
    owner: std::thread::ThreadId,
    /// Only the owner thread may use the ring (SINGLE_ISSUER, or the loop's ring).
    one_thread: bool,
    /// Bound to an event loop's ring (fixed at creation).
    on_loop: bool,
    /// Why later calls fail with WatcherClosedError.
    closed_why: &'static str,
    bgid: u16,
    pool: Option<BufRing>,
    mshot_recv_ok: bool,
    bufsize: usize,
    conns: Vec<Option<Conn>>,
    conn_gens: Vec<u32>,
    conn_free: Vec<u32>,
    nconns: usize,
    ops: Vec<Option<Box<Op>>>,
    op_free: Vec<usize>,
    serial: u64,
    ready: Vec<Py<OpResult>>,
    /// Ring buffers returned by the last `wait`: recycled at the start of the next.
    handed: Vec<Py<RingView>>,
    /// Ring buffers in results not yet returned by `wait` (a read served from the
    /// read-ahead inside `read()` completes before the `wait` that returns it).
    fresh: Vec<Py<RingView>>,
    pinned: Vec<Py<RingView>>,
    starved: Vec<u64>,
    /// Ring buffers held as read-ahead over all connections (< nbufs / 2, so that
    /// read-ahead never takes more than half the ring from the other connections).
    held_total: usize,
    deadlines: BinaryHeap<Reverse<(u64, usize, u64)>>,
    inflight: usize,
    closed: bool,
    sock_factory: Py<PyAny>,
    cqes: Vec<(u64, i32, u32)>,
}

impl WatcherCore {
    fn ring(&mut self) -> &mut WRing {
        self.ring
            .as_mut()
            .expect("ring is open while the watcher is not closed")
    }

    fn check(&mut self, py: Python<'_>) -> PyResult<()> {
        self.check_loop(py);
        if self.closed {
            return Err(WatcherClosedError::new_err((libc::EBADF, self.closed_why)));
        }
        if self.one_thread && std::thread::current().id() != self.owner {
            return Err(PyRuntimeError::new_err(if self.on_loop {
                "a loop-bound Watcher can only be used from the thread whose event loop \
                 ring it shares (the thread that created it)"
            } else {
                "a Watcher can only be used from the thread that created it"
            }));
        }
        Ok(())
    }

    /// The event loop closed the ring this Watcher shares: the kernel has given
    /// back every op (the loop waited for them), so the Watcher closes too; its
    /// pending ops come back from one last wait_io with WatcherClosedError.
    fn check_loop(&mut self, py: Python<'_>) {
        if !self.closed && self.ring.as_ref().is_some_and(WRing::is_dead) {
            self.closed_why = "the Watcher's event loop closed the ring they shared \
                               (the loop was closed, or moved to another thread)";
            self.shutdown(py);
        }
    }

    fn conn(&mut self, cid: u64) -> Option<&mut Conn> {
        let idx = (cid & 0xffff_ffff) as usize;
        let gen = (cid >> 32) as u32;
        match self.conns.get_mut(idx) {
            Some(Some(c)) if c.gen == gen => Some(c),
            _ => None,
        }
    }

    fn conn_ref(&self, cid: u64) -> Option<&Conn> {
        let idx = (cid & 0xffff_ffff) as usize;
        let gen = (cid >> 32) as u32;
        match self.conns.get(idx) {
            Some(Some(c)) if c.gen == gen => Some(c),
            _ => None,
        }
    }

    fn conn_or_err(&mut self, cid: u64) -> PyResult<&mut Conn> {
        self.conn(cid).ok_or_else(|| {
            ConnFreedError::new_err((libc::EBADF, "this connection was freed from the Watcher"))
        })
    }

    /// Pushes SQEs, entering the kernel to make room when the SQ is full.
    fn push(&mut self, sqes: &[squeue::Entry]) -> io::Result<()> {
        let ring = self.ring.as_mut().expect("open");
        ring.push(sqes, &mut self.cqes)?;
        self.inflight += sqes.len();
        Ok(())
    }

    fn submit_now(&mut self) -> io::Result<()> {
        let ring = self.ring.as_mut().expect("open");
        ring.submit(&mut self.cqes)
    }

    /// Moves every CQE available without a syscall into `self.cqes` (handled by
    /// `process`).
    fn collect_cqes(&mut self) {
        let ring = self.ring.as_mut().expect("open");
        ring.collect(&mut self.cqes);
    }

    fn new_op(
        &mut self,
        kind: Kind,
        cid: u64,
        ctx: Py<PyAny>,
        conn: Py<PyAny>,
        deadline: Option<f64>,
    ) -> usize {
        self.serial += 1;
        let op = Box::new(Op {
            kind,
            cid,
            serial: self.serial,
            ctx,
            conn,
            bufobj: None,
            view: None,
            own: None,
            done: 0,
            deadline,
            ts: timespec(deadline.unwrap_or(0.0)),
            in_kernel: false,
            cancel: None,
            msg: None,
        });
        let slot = if let Some(s) = self.op_free.pop() {
            self.ops[s] = Some(op);
            s
        } else {
            self.ops.push(Some(op));
            self.ops.len() - 1
        };
        if let Some(d) = deadline {
            let ns = (d.max(0.0) * 1e9) as u64;
            self.deadlines.push(Reverse((ns, slot, self.serial)));
        }
        slot
    }

    fn op(&mut self, slot: usize) -> &mut Op {
        self.ops[slot].as_mut().expect("live op")
    }

    /// Completes an op: removes it, builds its OpResult into `ready`.
    fn finish(
        &mut self,
        py: Python<'_>,
        slot: usize,
        fail: Option<Fail>,
        buffer: Option<Py<PyAny>>,
        swap: bool,
        address: Option<Py<PyAny>>,
    ) {
        let op = self.ops[slot].take().expect("live op");
        self.op_free.push(slot);
        if let Some(c) = self.conn(op.cid) {
            let q = match op.kind {
                Kind::Read | Kind::ReadFull | Kind::ReadFrom => &mut c.reads,
                Kind::Write | Kind::WriteTo | Kind::Connect => &mut c.writes,
                Kind::Accept => &mut c.accepts,
            };
            if q.front() == Some(&slot) {
                q.pop_front();
            } else if let Some(pos) = q.iter().position(|s| *s == slot) {
                q.remove(pos);
            }
        }
        let error = match fail {
            None => py.None(),
            Some(f) => {
                let e = match f {
                    Fail::Os(errno) => PyOSError::new_err((errno, crate::errors::strerror(errno))),
                    Fail::Eof => PyEOFError::new_err("end of stream"),
                    Fail::Timeout => PyOSError::new_err((libc::ETIMEDOUT, "deadline exceeded")),
                    Fail::Freed => ConnFreedError::new_err((
                        libc::ECANCELED,
                        "the connection was freed while the op was pending",
                    )),
                    Fail::Closed => WatcherClosedError::new_err((
                        libc::ECANCELED,
                        "the Watcher was closed while the op was pending",
                    )),
                    Fail::Py(e) => e,
                };
                e.into_value(py).into_any()
            }
        };
        let buffer = match buffer {
            Some(b) => b,
            None => op
                .bufobj
                .as_ref()
                .map_or_else(|| py.None(), |b| b.clone_ref(py)),
        };
        let res = OpResult {
            operation: op.kind.operation(),
            context: op.ctx,
            conn: op.conn,
            buffer,
            is_swap_buffer: swap,
            size: op.done,
            error,
            address: address.unwrap_or_else(|| py.None()),
        };
        // Dropping `op.view` here releases the user's buffer export.
        match Py::new(py, res) {
            Ok(r) => self.ready.push(r),
            Err(e) => e.restore(py),
        }
    }

    /// Hands ring buffer `bid` (holding `len` bytes) to Python.
    fn ring_view(&mut self, py: Python<'_>, bid: u16, len: usize) -> PyResult<Py<PyAny>> {
        self.pool.as_mut().expect("pool").available -= 1;
        self.hand_out(py, bid, 0, len)
    }

    /// Hands `len` bytes at `off` of ring buffer `bid`, already out of the ring and
    /// counted so, to Python; it goes back to the ring at the next `recycle`.
    fn hand_out(
        &mut self,
        py: Python<'_>,
        bid: u16,
        off: usize,
        len: usize,
    ) -> PyResult<Py<PyAny>> {
        let pool = self.pool.as_ref().expect("pool");
        let view = Py::new(
            py,
            RingView {
                mem: pool.mem.clone(),
                off: pool.buffer(bid) + off,
                len,
                bid,
                exports: AtomicUsize::new(0),
                expired: AtomicBool::new(false),
            },
        );
        let view = match view {
            Ok(v) => v,
            Err(e) => {
                self.return_held(bid);
                return Err(e);
            }
        };
        self.fresh.push(view.clone_ref(py));
        Ok(view.into_any())
    }

    /// Puts back a ring buffer that is out of the ring and already counted so.
    fn return_held(&mut self, bid: u16) {
        let pool = self.pool.as_mut().expect("pool");
        pool.give(bid);
        pool.refill();
    }

    fn give_back(&mut self, bid: u16) {
        let pool = self.pool.as_mut().expect("pool");
        pool.available -= 1;
        pool.give(bid);
        pool.refill();
    }

    /// The ready results, for `wait` to return: their ring buffers become last
    /// round's, recycled at the next `wait`.
    fn take_ready(&mut self) -> Vec<Py<OpResult>> {
        self.handed.append(&mut self.fresh);
        std::mem::take(&mut self.ready)
    }

    /// Returns last round's ring buffers to the kernel (those no export pins).
    fn recycle(&mut self, py: Python<'_>) {
        if self.handed.is_empty() && self.pinned.is_empty() {
            return;
        }
        let Some(pool) = self.pool.as_mut() else {
            return;
        };
        let mut keep = Vec::new();
        for v in self.handed.drain(..).chain(self.pinned.drain(..)) {
            let r = v.get();
            if r.exports.load(Ordering::Relaxed) > 0 {
                keep.push(v);
            } else {
                r.expired.store(true, Ordering::Relaxed);
                pool.give(r.bid);
            }
        }
        pool.refill();
        self.pinned = keep;
        let _ = py;
    }

    fn cancel_mshot(&mut self, cid: u64) -> io::Result<()> {
        let (accept, direct) = self
            .conn_ref(cid)
            .map_or((false, false), |c| (c.mshot_accept, c.accept_direct));
        let ud = self.ring().tag(mshot_ud(cid, accept, accept && direct));
        let sqe = opcode::AsyncCancel::new(ud).build().user_data(TAG_INTERNAL);
        self.push(&[sqe])?;
        if let Some(c) = self.conn(cid) {
            c.mshot = Mshot::Cancelling;
        }
        Ok(())
    }

    /// Serves head read `slot` of `cid` from the connection's read-ahead: a read
    /// without a buffer gets the first piece as it is (a held ring buffer is handed
    /// out without a copy); a read into a buffer gets as much as fits, copied.
    fn serve_backlog(&mut self, py: Python<'_>, cid: u64, slot: usize) {
        let idx = (cid & 0xffff_ffff) as usize;
        if self.ops[slot].as_ref().expect("live op").view.is_none() {
            let c = self.conns[idx].as_mut().expect("conn");
            let seg = c.backlog.pop_front().expect("read-ahead");
            let (res, swap) = match seg {
                Seg::Ring { bid, off, len } => {
                    c.held -= 1;
                    c.backlog_bytes -= len;
                    self.held_total -= 1;
                    self.op(slot).done = len;
                    (self.hand_out(py, bid, off, len), true)
                }
                Seg::Heap { data, pos } => {
                    let n = data.len() - pos;
                    c.backlog_bytes -= n;
                    c.heap_bytes -= n;
                    self.op(slot).done = n;
                    let b = pyo3::types::PyBytes::new(py, &data[pos..]);
                    (Ok(b.into_any().unbind()), false)
                }
            };
            match res {
                Ok(b) => self.finish(py, slot, None, Some(b), swap, None),
                Err(e) => self.finish(py, slot, Some(Fail::Py(e)), None, false, None),
            }
            return;
        }
        let op = self.ops[slot].as_mut().expect("live op");
        let v = op.view.as_ref().expect("view");
        let c = self.conns[idx].as_mut().expect("conn");
        let mut released = Vec::new();
        while op.done < v.len() {
            let room = v.len() - op.done;
            let Some(front) = c.backlog.front_mut() else {
                break;
            };
            // SAFETY: pointer math within the pinned view: `done < len` (loop condition).
            let dst = unsafe { v.ptr().add(op.done) };
            let n = match front {
                Seg::Ring { bid, off, len } => {
                    let pool = self.pool.as_ref().expect("pool");
                    let n = room.min(*len);
                    // SAFETY: the buffer is out of the ring (held), so the kernel does
                    // not write it; `off + n <= bufsize` lies inside the mapping; the
                    // view is a pinned writable export with room for `n` bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            pool.mem.ptr(pool.buffer(*bid) + *off),
                            dst,
                            n,
                        )
                    };
                    *off += n;
                    *len -= n;
                    if *len == 0 {
                        released.push(*bid);
                        c.backlog.pop_front();
                        c.held -= 1;
                    }
                    n
                }
                Seg::Heap { data, pos } => {
                    let n = room.min(data.len() - *pos);
                    // SAFETY: `data[pos..pos + n]` is initialised; the view is a pinned
                    // writable export with room for `n` bytes; they cannot overlap.
                    unsafe { std::ptr::copy_nonoverlapping(data[*pos..].as_ptr(), dst, n) };
                    *pos += n;
                    c.heap_bytes -= n;
                    if *pos == data.len() {
                        c.backlog.pop_front();
                    }
                    n
                }
            };
            c.backlog_bytes -= n;
            op.done += n;
        }
        let complete = op.kind != Kind::ReadFull || op.done == op.len();
        for bid in released {
            self.held_total -= 1;
            self.return_held(bid);
        }
        if complete {
            self.finish(py, slot, None, None, false, None);
        }
    }

    /// Keeps `n` bytes the kernel received into ring buffer `bid` as read-ahead of
    /// `cid`: the buffer itself while the hold limits allow, else a copy (and the
    /// buffer goes straight back to the ring).
    fn keep_read_ahead(&mut self, cid: u64, bid: u16, n: usize) {
        let idx = (cid & 0xffff_ffff) as usize;
        let pool = self.pool.as_mut().expect("pool");
        let c = self.conns[idx].as_mut().expect("conn");
        // Past HOLD_PER_CONN the multishot is being cancelled; what it still delivers
        // meanwhile is held too, as long as half the ring stays free of read-ahead.
        let hold = (self.held_total + 1) * 2 <= pool.nbufs as usize;
        pool.available -= 1;
        c.backlog_bytes += n;
        if hold {
            c.backlog.push_back(Seg::Ring {
                bid,
                off: 0,
                len: n,
            });
            c.held += 1;
            self.held_total += 1;
            return;
        }
        // SAFETY: the kernel filled `n` bytes of buffer `bid` and handed it to us (the
        // CQE carried its bid); it is not in the ring until the push below.
        let data = unsafe { std::slice::from_raw_parts(pool.mem.ptr(pool.buffer(bid)), n) };
        match c.backlog.back_mut() {
            Some(Seg::Heap { data: v, .. }) => v.extend_from_slice(data),
            _ => c.backlog.push_back(Seg::Heap {
                data: data.to_vec(),
                pos: 0,
            }),
        }
        c.heap_bytes += n;
        pool.give(bid);
        pool.refill();
    }

    /// Serves queued reads from the read-ahead, EOF and errors; puts the head read
    /// into the kernel (multishot receive or a single receive) when it needs data.
    fn pump_reads(&mut self, py: Python<'_>, cid: u64) {
        loop {
            let Some(c) = self.conn(cid) else { return };
            let Some(&slot) = c.reads.front() else { break };
            if c.read_busy {
                break;
            }
            if c.backlog_len() > 0 {
                self.serve_backlog(py, cid, slot);
                continue;
            }
            if let Some(errno) = c.rerr.take() {
                self.finish(py, slot, Some(Fail::Os(errno)), None, false, None);
                continue;
            }
            if c.eof {
                self.finish(py, slot, Some(Fail::Eof), None, false, None);
                continue;
            }
            if c.starved {
                break;
            }
            let (mshot, mshot_accept, (fd, fixed)) = (c.mshot, c.mshot_accept, c.target());
            let op = self.ops[slot].as_ref().expect("live op");
            let wants_mshot = op.kind == Kind::Read
                && op.view.is_none()
                && op.deadline.is_none()
                && self.pool.is_some()
                && self.mshot_recv_ok;
            match mshot {
                Mshot::On if wants_mshot && !mshot_accept => {}
                Mshot::On => {
                    let _ = self.cancel_mshot(cid);
                }
                Mshot::Cancelling => {}
                Mshot::Off if wants_mshot => {
                    let sqe = on(opcode::RecvMulti::new(fd, self.bgid).build(), fixed)
                        .user_data(mshot_ud(cid, false, false));
                    if self.push(&[sqe]).is_ok() {
                        let c = self.conn(cid).expect("conn");
                        c.mshot = Mshot::On;
                        c.mshot_accept = false;
                    }
                }
                Mshot::Off => {
                    if !self.submit_or_fail(py, slot) {
                        continue;
                    }
                    self.conn(cid).expect("conn").read_busy = true;
                }
            }
            break;
        }
        // Read-ahead bound: no read wants the data and enough is buffered: stop the
        // kernel reading this connection (TCP flow control then pushes back).
        let limit = self.bufsize;
        if let Some(c) = self.conn(cid) {
            if c.reads.is_empty()
                && c.mshot == Mshot::On
                && !c.mshot_accept
                && (c.heap_bytes >= limit || c.held >= HOLD_PER_CONN)
            {
                let _ = self.cancel_mshot(cid);
            }
        }
    }

    fn pump_writes(&mut self, py: Python<'_>, cid: u64) {
        loop {
            let Some(c) = self.conn(cid) else { return };
            let Some(&slot) = c.writes.front() else {
                return;
            };
            if c.write_busy {
                return;
            }
            let op = self.ops[slot].as_ref().expect("live op");
            if matches!(op.kind, Kind::Write) && op.len() == 0 {
                self.finish(py, slot, None, None, false, None);
                continue;
            }
            if !self.submit_or_fail(py, slot) {
                continue;
            }
            self.conn(cid).expect("conn").write_busy = true;
            return;
        }
    }

    fn pump_accepts(&mut self, py: Python<'_>, cid: u64) {
        loop {
            let Some(c) = self.conn(cid) else { return };
            let Some(&slot) = c.accepts.front() else {
                break;
            };
            if let Some(fd) = c.accepted.pop_front() {
                self.deliver_accept(py, slot, fd);
                continue;
            }
            if let Some(errno) = c.rerr.take() {
                self.finish(py, slot, Some(Fail::Os(errno)), None, false, None);
                continue;
            }
            if c.mshot == Mshot::Off {
                let (fd, fixed) = c.target();
                let direct = c.accept_direct;
                let sqe = opcode::AcceptMulti::new(fd)
                    .allocate_file_index(direct)
                    // CLOEXEC means nothing for a direct descriptor (EINVAL).
                    .flags(if direct { 0 } else { libc::SOCK_CLOEXEC })
                    .build();
                let sqe = on(sqe, fixed).user_data(mshot_ud(cid, true, direct));
                if self.push(&[sqe]).is_ok() {
                    let c = self.conn(cid).expect("conn");
                    c.mshot = Mshot::On;
                    c.mshot_accept = true;
                }
            }
            break;
        }
    }

    fn deliver_accept(&mut self, py: Python<'_>, slot: usize, acc: Accepted) {
        let listener = self.op(slot).conn.clone_ref(py);
        let (handle, direct, fd) = match acc {
            Accepted::Fd(fd) => (i64::from(fd.as_raw_fd()), false, Some(fd)),
            Accepted::Direct(idx) => (self.adopt_direct(idx) as i64, true, None),
        };
        match self
            .sock_factory
            .bind(py)
            .call1((listener.bind(py), handle, direct))
        {
            Ok(sock) => {
                // The socket object owns the fd now (a direct conn stays ours).
                if let Some(fd) = fd {
                    std::mem::forget(fd);
                }
                let op = self.op(slot);
                op.conn = sock.unbind();
                let address = Some(listener);
                self.finish(py, slot, None, None, false, address);
            }
            Err(e) => {
                if direct {
                    let _ = self.release_conn(py, handle as u64);
                }
                self.finish(py, slot, Some(Fail::Py(e)), None, false, None)
            }
        }
    }

    /// Registers a kernel-allocated direct descriptor as a connection.
    fn adopt_direct(&mut self, idx: u32) -> u64 {
        let idx_conn = self.new_conn_index();
        let gen = self.conn_gens[idx_conn];
        self.conns[idx_conn] = Some(Conn::new(None, Some(idx), true, gen));
        self.nconns += 1;
        ((gen as u64) << 32) | idx_conn as u64
    }

    fn new_conn_index(&mut self) -> usize {
        let idx = match self.conn_free.pop() {
            Some(i) => i as usize,
            None => {
                self.conns.push(None);
                self.conn_gens.push(0);
                self.conns.len() - 1
            }
        };
        self.conn_gens[idx] = self.conn_gens[idx].wrapping_add(1);
        idx
    }

    /// Clears a fixed-file slot (the ring drops its reference to the socket).
    fn clear_slot(&mut self, slot: u32, ours: bool) {
        if let Some(ring) = self.ring.as_mut() {
            ring.clear_slot(slot, ours);
        }
    }

    /// Frees a connection: queued ops fail now, the kernel's are cancelled, our
    /// reference (fixed slot or dup) is dropped.
    fn release_conn(&mut self, py: Python<'_>, cid: u64) -> io::Result<()> {
        let idx = (cid & 0xffff_ffff) as usize;
        let Some(c) = self.conn(cid) else {
            return Ok(());
        };
        let slots: Vec<usize> = c
            .reads
            .iter()
            .chain(&c.writes)
            .chain(&c.accepts)
            .copied()
            .collect();
        let in_kernel = c.in_kernel();
        let cancel_all = c.cancel_all();
        for slot in slots {
            let op = self.op(slot);
            op.cancel = Some(Why::Freed);
            if !op.in_kernel {
                self.finish(py, slot, Some(Fail::Freed), None, false, None);
            }
        }
        let mut result = Ok(());
        if in_kernel {
            // The cancel looks the file up when the kernel takes it: submit before
            // the slot is cleared or the dup closed.
            result = self.push(&[cancel_all]).and_then(|()| self.submit_now());
        }
        let conn = self.conns[idx].take().expect("conn");
        self.conn_free.push(idx as u32);
        self.nconns -= 1;
        if let Some(slot) = conn.slot {
            self.clear_slot(slot, !conn.direct);
        }
        for acc in &conn.accepted {
            if let Accepted::Direct(i) = acc {
                self.clear_slot(*i, false);
            }
        }
        // Held read-ahead buffers go back to the ring.
        for seg in &conn.backlog {
            if let Seg::Ring { bid, .. } = *seg {
                self.held_total -= 1;
                self.return_held(bid);
            }
        }
        drop(conn); // closes a dup and any accepted-but-unclaimed fds
        result
    }

    /// Builds and pushes the SQE (and link timeout) for op `slot` at its progress.
    /// Submits `slot`; where the kernel queue refuses it, completes the op with that
    /// error instead. Returns whether it went in.
    fn submit_or_fail(&mut self, py: Python<'_>, slot: usize) -> bool {
        match self.submit_op(slot) {
            Ok(()) => true,
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                self.finish(py, slot, Some(Fail::Os(errno)), None, false, None);
                false
            }
        }
    }

    fn submit_op(&mut self, slot: usize) -> io::Result<()> {
        let bufsize = self.bufsize;
        let bgid = self.bgid;
        let has_pool = self.pool.is_some();
        let cid = self.op(slot).cid;
        let (fd, fixed) = match self.conn_ref(cid) {
            Some(c) => c.target(),
            None => return Err(io::Error::from_raw_os_error(libc::EBADF)),
        };
        let ud = ((slot as u64) << 2) | TAG_OP;
        let op = self.ops[slot].as_mut().expect("live op");
        let done = op.done;
        let sqe = match op.kind {
            Kind::Read | Kind::ReadFull => {
                if let Some(v) = &op.view {
                    let len = (v.len() - done).min(MAX_RW) as u32;
                    // SAFETY: pointer math only; done < len of the pinned export.
                    opcode::Recv::new(fd, unsafe { v.ptr().add(done) }, len).build()
                } else if has_pool {
                    opcode::Recv::new(fd, std::ptr::null_mut(), bufsize as u32)
                        .buf_group(bgid)
                        .build()
                        .flags(squeue::Flags::BUFFER_SELECT)
                } else {
                    let own = op
                        .own
                        .get_or_insert_with(|| vec![0u8; bufsize].into_boxed_slice());
                    opcode::Recv::new(fd, own.as_mut_ptr(), own.len() as u32).build()
                }
            }
            Kind::Write => {
                let v = op.view.as_ref().expect("write data");
                let len = (v.len() - done).min(MAX_RW) as u32;
                // SAFETY: pointer math only; done < len of the pinned export.
                opcode::Send::new(fd, unsafe { v.ptr().add(done) }, len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            }
            Kind::Connect => {
                let m = op.msg.as_ref().expect("connect address");
                opcode::Connect::new(
                    fd,
                    &m.addr.storage as *const _ as *const libc::sockaddr,
                    m.addr.len,
                )
                .build()
            }
            Kind::ReadFrom | Kind::WriteTo => {
                let select = op.kind == Kind::ReadFrom && op.view.is_none() && has_pool;
                let (base, len) = match (&op.view, op.kind) {
                    (Some(v), _) => (v.ptr(), v.len()),
                    (None, Kind::ReadFrom) if has_pool => (std::ptr::null_mut(), bufsize),
                    (None, _) => {
                        let own = op
                            .own
                            .get_or_insert_with(|| vec![0u8; bufsize].into_boxed_slice());
                        (own.as_mut_ptr(), own.len())
                    }
                };
                let m = op.msg.get_or_insert_with(|| {
                    Box::new(Msg {
                        addr: SockAddr::empty(),
                        // SAFETY: iovec is plain old data; zero is valid.
                        iov: unsafe { std::mem::zeroed() },
                        // SAFETY: msghdr is plain old data; zero is valid.
                        hdr: unsafe { std::mem::zeroed() },
                    })
                });
                m.iov.iov_base = base.cast();
                m.iov.iov_len = len;
                m.hdr.msg_name = (&mut m.addr.storage as *mut libc::sockaddr_storage).cast();
                m.hdr.msg_iov = &mut m.iov;
                m.hdr.msg_iovlen = 1;
                if op.kind == Kind::ReadFrom {
                    m.hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
                    let e = opcode::RecvMsg::new(fd, &mut m.hdr);
                    if select {
                        e.buf_group(bgid)
                            .build()
                            .flags(squeue::Flags::BUFFER_SELECT)
                    } else {
                        e.build()
                    }
                } else {
                    m.hdr.msg_namelen = m.addr.len;
                    opcode::SendMsg::new(fd, &m.hdr)
                        .flags(libc::MSG_NOSIGNAL as u32)
                        .build()
                }
            }
            Kind::Accept => unreachable!("accepts use the connection's multishot accept"),
        };
        let sqe = on(sqe, fixed).user_data(ud);
        op.in_kernel = true;
        if op.deadline.is_some() {
            let ts: *const types::Timespec = &op.ts;
            let link = opcode::LinkTimeout::new(ts)
                .flags(types::TimeoutFlags::ABS)
                .build()
                .user_data(TAG_TIMEOUT);
            self.push(&[sqe.flags(squeue::Flags::IO_LINK), link])
        } else {
            self.push(&[sqe])
        }
        .inspect_err(|_| self.op(slot).in_kernel = false)
    }

    /// Handles every collected CQE.
    fn process(&mut self, py: Python<'_>) {
        while !self.cqes.is_empty() {
            let batch = std::mem::take(&mut self.cqes);
            for &(ud, res, flags) in &batch {
                let more = cqueue::more(flags);
                match ud & 3 {
                    TAG_OP => {
                        self.inflight -= 1;
                        self.on_op(py, (ud >> 2) as usize, res, flags);
                    }
                    TAG_MSHOT => {
                        if !more {
                            self.inflight -= 1;
                        }
                        self.on_mshot(py, ud, res, flags, more);
                    }
                    _ => self.inflight -= 1,
                }
            }
            let mut batch = batch;
            batch.clear();
            if self.cqes.is_empty() {
                self.cqes = batch;
            }
        }
    }

    fn on_mshot(&mut self, py: Python<'_>, ud: u64, res: i32, flags: u32, more: bool) {
        let idx = (ud & 0xffff_ffff) >> 4;
        let gen = self
            .conns
            .get(idx as usize)
            .and_then(Option::as_ref)
            .filter(|c| u64::from(c.gen) & GEN_MASK == (ud >> 32) & GEN_MASK)
            .map_or(0, |c| c.gen);
        // Generation 0 is never live (the first one is 1): a stale CQE finds no conn.
        let cid = (u64::from(gen) << 32) | idx;
        let is_accept = ud & 4 != 0;
        let is_direct = ud & 8 != 0;
        let bid = cqueue::buffer_select(flags);
        let Some(c) = self.conn(cid) else {
            // Freed connection: give back its buffer, close an fd it accepted.
            if let Some(bid) = bid {
                self.give_back(bid);
            }
            if is_accept && res >= 0 {
                if is_direct {
                    self.clear_slot(res as u32, false);
                } else {
                    // SAFETY: a multishot accept CQE's result is a new fd nobody else owns.
                    drop(unsafe { OwnedFd::from_raw_fd(res) });
                }
            }
            return;
        };
        if !more {
            c.mshot = Mshot::Off;
        }
        if c.mshot_accept {
            if res >= 0 {
                c.accepted.push_back(if is_direct {
                    Accepted::Direct(res as u32)
                } else {
                    // SAFETY: a multishot accept CQE's result is a new fd nobody else owns.
                    Accepted::Fd(unsafe { OwnedFd::from_raw_fd(res) })
                });
                let over = c.accepts.is_empty()
                    && c.accepted.len() >= ACCEPT_BACKLOG
                    && c.mshot == Mshot::On;
                if over {
                    let _ = self.cancel_mshot(cid);
                }
            } else if res != -libc::ECANCELED {
                c.rerr = Some(-res);
            }
            self.pump_accepts(py, cid);
            return;
        }
        if res > 0 {
            let n = res as usize;
            let bid = bid.expect("multishot receive CQE carries a buffer");
            let head = c.reads.front().copied();
            let direct = c.backlog_len() == 0
                && head.is_some_and(|s| {
                    let op = self.ops[s].as_ref().expect("live op");
                    op.kind == Kind::Read && op.view.is_none() && !op.in_kernel
                });
            if direct {
                let slot = head.expect("head");
                match self.ring_view(py, bid, n) {
                    Ok(view) => {
                        self.op(slot).done = n;
                        self.finish(py, slot, None, Some(view), true, None);
                    }
                    Err(e) => self.finish(py, slot, Some(Fail::Py(e)), None, false, None),
                }
            } else {
                self.keep_read_ahead(cid, bid, n);
            }
        } else {
            match -res {
                0 => c.eof = true,
                libc::ENOBUFS => {
                    c.starved = true;
                    self.starved.push(cid);
                    self.pool.as_mut().expect("pool").grow();
                }
                libc::ECANCELED => {}
                libc::EINVAL if !more => {
                    // No multishot receive on this kernel: single receives from now.
                    self.mshot_recv_ok = false;
                }
                e => c.rerr = Some(e),
            }
            if let Some(bid) = bid {
                self.give_back(bid);
            }
        }
        self.pump_reads(py, cid);
    }

    fn on_op(&mut self, py: Python<'_>, slot: usize, res: i32, flags: u32) {
        let Some(op) = self.ops.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        op.in_kernel = false;
        let (kind, cid, deadline, cancel) = (op.kind, op.cid, op.deadline, op.cancel);
        let bid = cqueue::buffer_select(flags);
        let alive = self.conn_ref(cid).is_some();
        if alive {
            let c = self.conn(cid).expect("conn");
            match kind {
                Kind::Read | Kind::ReadFull | Kind::ReadFrom => c.read_busy = false,
                Kind::Write | Kind::WriteTo | Kind::Connect => c.write_busy = false,
                Kind::Accept => {}
            }
        }
        let why = cancel.or((!alive).then_some(Why::Freed));
        let timed_out = |res: i32| {
            (res == -libc::ECANCELED || res == -libc::EINTR || res == -libc::ETIME)
                && deadline.is_some_and(|d| crate::sys::monotonic() >= d - 0.002)
        };
        if res < 0 {
            if let Some(bid) = bid {
                self.give_back(bid);
            }
            let errno = -res;
            if errno == libc::ENOBUFS && why.is_none() {
                // Buffer ring ran dry: retried at the next wait_io, after recycling
                // (and with more buffers provided from now on).
                let c = self.conn(cid).expect("conn");
                c.starved = true;
                self.starved.push(cid);
                if let Some(pool) = self.pool.as_mut() {
                    pool.grow();
                }
                return;
            }
            let fail = if let Some(w) = why {
                w.into()
            } else if timed_out(res) {
                Fail::Timeout
            } else {
                Fail::Os(errno)
            };
            self.finish(py, slot, Some(fail), None, false, None);
            self.pump(py, cid, kind);
            return;
        }
        let n = res as usize;
        match kind {
            Kind::Read | Kind::ReadFull | Kind::ReadFrom => {
                let address = if kind == Kind::ReadFrom {
                    let m = &self.op(slot).msg.as_ref().expect("msg").addr;
                    let mut a = SockAddr::empty();
                    a.storage = m.storage;
                    a.len = self.op(slot).msg.as_ref().expect("msg").hdr.msg_namelen;
                    addr::from_sockaddr(py, &a).ok()
                } else {
                    None
                };
                if n == 0 && kind != Kind::ReadFrom {
                    if let Some(bid) = bid {
                        self.give_back(bid);
                    }
                    if let Some(c) = self.conn(cid) {
                        c.eof = true;
                    }
                    self.finish(py, slot, Some(Fail::Eof), None, false, None);
                } else if let Some(bid) = bid {
                    self.op(slot).done = n;
                    match self.ring_view(py, bid, n) {
                        Ok(v) => self.finish(py, slot, None, Some(v), true, address),
                        Err(e) => self.finish(py, slot, Some(Fail::Py(e)), None, false, None),
                    }
                } else if let Some(own) = self.op(slot).own.take() {
                    self.op(slot).done = n;
                    let b = pyo3::types::PyBytes::new(py, &own[..n]).into_any().unbind();
                    self.finish(py, slot, None, Some(b), false, address);
                } else {
                    let op = self.op(slot);
                    op.done += n;
                    if kind == Kind::ReadFull && op.done < op.len() {
                        if let Some(w) = why {
                            self.finish(py, slot, Some(w.into()), None, false, None);
                        }
                        // else: stays at the head, re-submitted by pump_reads below
                    } else {
                        self.finish(py, slot, None, None, false, address);
                    }
                }
            }
            Kind::Write => {
                let op = self.op(slot);
                op.done += n;
                if op.done < op.len() {
                    if let Some(w) = why {
                        self.finish(py, slot, Some(w.into()), None, false, None);
                    } else if n == 0 {
                        self.finish(py, slot, Some(Fail::Os(libc::EPIPE)), None, false, None);
                    }
                } else {
                    self.finish(py, slot, None, None, false, None);
                }
            }
            Kind::WriteTo => {
                self.op(slot).done = n;
                self.finish(py, slot, None, None, false, None);
            }
            Kind::Connect | Kind::Accept => self.finish(py, slot, None, None, false, None),
        }
        self.pump(py, cid, kind);
    }

    fn pump(&mut self, py: Python<'_>, cid: u64, kind: Kind) {
        match kind {
            Kind::Read | Kind::ReadFull | Kind::ReadFrom => self.pump_reads(py, cid),
            Kind::Write | Kind::WriteTo | Kind::Connect => self.pump_writes(py, cid),
            Kind::Accept => self.pump_accepts(py, cid),
        }
    }

    /// Queued (not in the kernel) ops past their deadline complete with TimeoutError.
    fn expire(&mut self, py: Python<'_>) -> Option<f64> {
        let now = crate::sys::monotonic();
        let now_ns = (now * 1e9) as u64;
        while let Some(Reverse((ns, slot, serial))) = self.deadlines.peek().copied() {
            let live = self
                .ops
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|o| o.serial == serial);
            if !live {
                self.deadlines.pop();
                continue;
            }
            if ns > now_ns {
                return Some(ns as f64 * 1e-9);
            }
            self.deadlines.pop();
            let op = self.ops[slot].as_ref().expect("live op");
            if op.in_kernel {
                continue; // its link timeout fires in the kernel
            }
            let (cid, kind) = (op.cid, op.kind);
            self.finish(py, slot, Some(Fail::Timeout), None, false, None);
            self.pump(py, cid, kind);
        }
        None
    }

    fn rearm_starved(&mut self, py: Python<'_>) {
        if self.starved.is_empty() || self.pool.as_ref().is_some_and(|p| p.available == 0) {
            return;
        }
        for cid in std::mem::take(&mut self.starved) {
            if let Some(c) = self.conn(cid) {
                c.starved = false;
                self.pump_reads(py, cid);
            }
        }
    }

    /// Submits queued SQEs and collects CQEs without waiting. On a loop's ring,
    /// `enter`: when its select reaped nothing for us, enter the kernel ourselves
    /// (see `WRing::poll`).
    fn poll_kernel(&mut self, py: Python<'_>, enter: bool) -> PyResult<()> {
        let ring = self.ring.as_mut().expect("open");
        ring.poll(enter, &mut self.cqes)
            .map_err(|e| crate::errors::io_error(py, &e, None))?;
        self.process(py);
        Ok(())
    }

    /// Cancels everything and waits for every CQE; then the memory can go.
    fn shutdown(&mut self, py: Python<'_>) {
        let Some(ring) = self.ring.as_ref() else {
            return;
        };
        let dead = ring.is_dead();
        self.closed = true;
        // Accepted, never claimed: a direct one is a slot of the table to empty
        // (on our own ring, dropping the ring does that).
        let mut unclaimed = Vec::new();
        for c in self.conns.iter_mut().flatten() {
            for acc in c.accepted.drain(..) {
                if let Accepted::Direct(i) = acc {
                    unclaimed.push(i);
                }
            }
        }
        if self.on_loop && !dead {
            for i in unclaimed {
                self.clear_slot(i, false);
            }
        }
        for op in self.ops.iter_mut().flatten() {
            op.cancel = Some(Why::Closed);
        }
        // Ops not in the kernel complete now.
        let queued: Vec<usize> = self
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().filter(|o| !o.in_kernel).map(|_| i))
            .collect();
        for slot in queued {
            self.finish(py, slot, Some(Fail::Closed), None, false, None);
        }
        let wrong_thread = self.one_thread && std::thread::current().id() != self.owner;
        if !self.on_loop {
            let cancel_all = opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(TAG_INTERNAL);
            let _ = self.push(&[cancel_all]);
        } else if !dead && !wrong_thread {
            // The loop's ring is shared: cancel by file, ours only (every op of
            // ours is on one of our connections; link timeouts go with their op).
            let cancels: Vec<squeue::Entry> = self
                .conns
                .iter()
                .flatten()
                .filter(|c| c.in_kernel())
                .map(Conn::cancel_all)
                .collect();
            for sqe in cancels {
                let _ = self.push(&[sqe]);
            }
        }
        let started = Instant::now();
        while self.inflight > 0 {
            let ring = self.ring.as_mut().expect("open");
            if dead || (self.on_loop && wrong_thread) {
                // The loop's shutdown reaped our CQEs for us (or, from another
                // thread, we cannot enter its ring): take what is there.
                ring.collect(&mut self.cqes);
            } else {
                let _ = ring.wait(py, Some(Duration::from_millis(100)), &mut self.cqes);
            }
            // Conns go away first so nothing gets re-armed while we drain.
            self.process(py);
            let stuck = (dead || (self.on_loop && wrong_thread)) && self.inflight > 0;
            if stuck || started.elapsed() > Duration::from_secs(10) {
                // The kernel still owns buffers: leak them rather than free them
                // under it (never expected for socket ops, which all cancel).
                for op in self.ops.drain(..).flatten() {
                    std::mem::forget(op);
                }
                if let Some(p) = self.pool.take() {
                    std::mem::forget(p);
                }
                if let Some(ring) = self.ring.take() {
                    ring.leave();
                    if !ring.is_loop() {
                        std::mem::forget(ring);
                    }
                }
                self.conns.clear();
                return;
            }
        }
        if self.on_loop && !dead {
            // The table is the loop's: empty our slots (the sockets close with them).
            let slots: Vec<(u32, bool)> = self
                .conns
                .iter()
                .flatten()
                .filter_map(|c| c.slot.map(|s| (s, !c.direct)))
                .collect();
            for (slot, ours) in slots {
                self.clear_slot(slot, ours);
            }
        }
        if let (Some(pool), Some(ring)) = (self.pool.as_mut(), self.ring.as_ref()) {
            ring.drop_bufring(pool);
        }
        self.conns.clear();
        self.nconns = 0;
        if let Some(ring) = self.ring.take() {
            ring.leave();
        }
        self.pool = None;
    }
}

const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

/// user_data of a connection's multishot: generation (its low GEN_BITS), index,
/// direct and accept bits, tag (the index is < 2^28).
fn mshot_ud(cid: u64, accept: bool, direct: bool) -> u64 {
    (((cid >> 32) & GEN_MASK) << 32)
        | ((cid & 0xffff_ffff) << 4)
        | (u64::from(direct) << 3)
        | (u64::from(accept) << 2)
        | TAG_MSHOT
}

#[pymethods]
impl WatcherCore {
    /// `bufsize`: size of each internal receive buffer; `nbufs`: how many (a power of
    /// two <= 32768); `sock_factory(listener, fd)` wraps an accepted fd. `ring`: an
    /// event loop's ring (`ringio.uring.Ring`, owned by the calling thread) to share
    /// instead of creating one (`entries` is then unused); `waker` is called by the
    /// loop's select when completions for this Watcher arrive.
    #[new]
    #[pyo3(signature = (sock_factory, bufsize=65536, nbufs=256, entries=4096, ring=None, waker=None))]
    fn new(
        py: Python<'_>,
        sock_factory: Py<PyAny>,
        bufsize: usize,
        nbufs: u32,
        entries: u32,
        ring: Option<Bound<'_, Ring>>,
        waker: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        if bufsize == 0 || bufsize > 1 << 30 {
            return Err(PyValueError::new_err("bufsize must be in 1..2**30"));
        }
        if nbufs == 0 || !nbufs.is_power_of_two() || nbufs > 32768 {
            return Err(PyValueError::new_err(
                "nbufs must be a power of two in 1..32768",
            ));
        }
        if entries == 0 || entries > 32768 {
            return Err(PyValueError::new_err("entries must be in 1..32768"));
        }
        let on_loop = ring.is_some();
        let wring = match ring {
            Some(r) => {
                let waker = waker.unwrap_or_else(|| py.None());
                WRing::on_loop(py, &r, waker)?
            }
            None => WRing::own(entries).map_err(|e| {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                let why = crate::errors::strerror(errno);
                PyOSError::new_err((
                    errno,
                    format!("io_uring_setup: {why} (the Watcher needs io_uring)"),
                ))
            })?,
        };
        // Buffer rings need Linux 5.19; without them, reads without a buffer allocate.
        let pool = wring.bufring(nbufs as u16, bufsize);
        Ok(Self {
            owner: std::thread::current().id(),
            one_thread: on_loop || wring.defer(),
            on_loop,
            closed_why: "the Watcher is closed",
            bgid: wring.bgid(),
            ring: Some(wring),
            mshot_recv_ok: pool.is_some(),
            pool,
            bufsize,
            conns: Vec::new(),
            conn_gens: Vec::new(),
            conn_free: Vec::new(),
            nconns: 0,
            ops: Vec::new(),
            op_free: Vec::new(),
            serial: 0,
            ready: Vec::new(),
            handed: Vec::new(),
            fresh: Vec::new(),
            pinned: Vec::new(),
            starved: Vec::new(),
            held_total: 0,
            deadlines: BinaryHeap::new(),
            inflight: 0,
            closed: false,
            sock_factory,
            cqes: Vec::new(),
        })
    }

    /// Takes the Watcher's own reference to a socket (a fixed-file slot, else a
    /// dup of the fd); returns the connection id.
    fn register(&mut self, py: Python<'_>, fd: RawFd) -> PyResult<u64> {
        self.check(py)?;
        if fd < 0 {
            return Err(PyOSError::new_err((libc::EBADF, "the socket is closed")));
        }
        let mut ty: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `ty`/`len` are valid out-parameters of the sizes getsockopt expects.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&mut ty as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(crate::errors::last_os_error(py, None));
        }
        if self.conns.len() >= 1 << 28 {
            return Err(PyValueError::new_err("too many connections"));
        }
        let (owned, slot) = match self.ring().register_file(fd) {
            Some(sl) => (None, Some(sl)),
            None => {
                // SAFETY: F_DUPFD_CLOEXEC has no memory arguments; a non-negative
                // result is a new fd that only we own.
                let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
                if dup < 0 {
                    return Err(crate::errors::last_os_error(py, None));
                }
                // SAFETY: `dup` was just created and nothing else owns it.
                (Some(unsafe { OwnedFd::from_raw_fd(dup) }), None)
            }
        };
        let idx = self.new_conn_index();
        let gen = self.conn_gens[idx];
        self.conns[idx] = Some(Conn::new(owned, slot, false, gen));
        self.nconns += 1;
        Ok(((gen as u64) << 32) | idx as u64)
    }

    /// Frees a connection: its queued ops complete with ConnFreedError now, the
    /// kernel's are cancelled (they complete the same way), our reference is dropped.
    fn free(&mut self, py: Python<'_>, cid: u64) -> PyResult<()> {
        self.check(py)?;
        self.release_conn(py, cid)
            .map_err(|e| crate::errors::io_error(py, &e, None))
    }

    #[pyo3(signature = (cid, ctx, conn, buf, deadline, full))]
    #[allow(clippy::too_many_arguments)]
    fn read(
        &mut self,
        py: Python<'_>,
        cid: u64,
        ctx: Py<PyAny>,
        conn: Py<PyAny>,
        buf: Option<Bound<'_, PyAny>>,
        deadline: Option<f64>,
        full: bool,
    ) -> PyResult<()> {
        self.check(py)?;
        let view = match &buf {
            Some(b) => {
                let v = View::writable(b)?;
                if v.is_empty() {
                    return Err(PyValueError::new_err("the read buffer is empty"));
                }
                Some(v)
            }
            None if full => return Err(PyValueError::new_err("read_full needs a buffer")),
            None => None,
        };
        self.conn_or_err(cid)?;
        let kind = if full { Kind::ReadFull } else { Kind::Read };
        let slot = self.new_op(kind, cid, ctx, conn, deadline);
        let op = self.op(slot);
        op.view = view;
        op.bufobj = buf.map(Bound::unbind);
        self.queue(py, slot, cid, kind);
        Ok(())
    }

    fn read_from(
        &mut self,
        py: Python<'_>,
        cid: u64,
        ctx: Py<PyAny>,
        conn: Py<PyAny>,
        buf: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.check(py)?;
        let view = match &buf {
            Some(b) => {
                let v = View::writable(b)?;
                if v.is_empty() {
                    return Err(PyValueError::new_err("the read buffer is empty"));
                }
                Some(v)
            }
            None => None,
        };
        self.conn_or_err(cid)?;
        let slot = self.new_op(Kind::ReadFrom, cid, ctx, conn, None);
        let op = self.op(slot);
        op.view = view;
        op.bufobj = buf.map(Bound::unbind);
        self.queue(py, slot, cid, Kind::ReadFrom);
        Ok(())
    }

    #[pyo3(signature = (cid, ctx, conn, data, deadline=None))]
    fn write(
        &mut self,
        py: Python<'_>,
        cid: u64,
        ctx: Py<PyAny>,
        conn: Py<PyAny>,
        data: Bound<'_, PyAny>,
        deadline: Option<f64>,
    ) -> PyResult<()> {
        self.check(py)?;
        let view = View::readable(&data)?;
        self.conn_or_err(cid)?;
        let slot = self.new_op(Kind::Write, cid, ctx, conn, deadline);
        let op = self.op(slot);
        op.view = Some(view);
        op.bufobj = Some(data.unbind());
        self.queue(py, slot, cid, Kind::Write);
        Ok(())
    }

    #[pyo3(signature = (cid, ctx, conn, data, family, address))]
    #[allow(clippy::too_many_arguments)]
    fn write_to(
        &mut self,
        py: Python<'_>,
        cid: u64,
        ctx: Py<PyAny>,
        conn: Py<PyAny>,
        data: Bound<'_, PyAny>,
        family: i32,
        address: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.check(py)?;
        let view = View::readable(&data)?;
        let sa = addr::to_sockaddr(family, &address)?;
        self.conn_or_err(cid)?;
        let slot = self.new_op(Kind::WriteTo, cid, ctx, conn, None);
        let op = self.op(slot);
        op.view = Some(view);
        op.bufobj = Some(data.unbind());
        op.msg = Some(Box::new(Msg {
            addr: sa,
            // SAFETY: iovec is plain old data; zero is valid.
            iov: unsafe { std::mem::zeroed() },
            // SAFETY: msghdr is plain old data; zero is valid.
            hdr: unsafe { std::mem::zeroed() },
        }));
        self.queue(py, slot, cid, Kind::WriteTo);
        Ok(())
    }

    #[pyo3(signature = (cid, ctx, conn, family, address, deadline=None))]
    #[allow(clippy::too_many_arguments)]
    fn connect(
        &mut self,
        py: Python<'_>,
        cid: u64,
        ctx: Py<PyAny>,
        conn: Py<PyAny>,
        family: i32,
        address: Bound<'_, PyAny>,
        deadline: Option<f64>,
    ) -> PyResult<()> {
        self.check(py)?;
        let sa = addr::to_sockaddr(family, &address)?;
        self.conn_or_err(cid)?;
        let slot = self.new_op(Kind::Connect, cid, ctx, conn, deadline);
        self.op(slot).msg = Some(Box::new(Msg {
            addr: sa,
            // SAFETY: iovec is plain old data; zero is valid.
            iov: unsafe { std::mem::zeroed() },
            // SAFETY: msghdr is plain old data; zero is valid.
            hdr: unsafe { std::mem::zeroed() },
        }));
        self.queue(py, slot, cid, Kind::Connect);
        Ok(())
    }

    #[pyo3(signature = (cid, ctx, conn, direct=false))]
    fn accept(
        &mut self,
        py: Python<'_>,
        cid: u64,
        ctx: Py<PyAny>,
        conn: Py<PyAny>,
        direct: bool,
    ) -> PyResult<()> {
        self.check(py)?;
        if direct && !self.ring().has_files() {
            return Err(PyOSError::new_err((
                libc::EOPNOTSUPP,
                "direct accepts need a fixed-file table (Linux 5.19+, RLIMIT_NOFILE >= 64)",
            )));
        }
        let c = self.conn_or_err(cid)?;
        if c.accepts.is_empty() && c.mshot == Mshot::Off && c.accepted.is_empty() {
            c.accept_direct = direct;
        } else if c.accept_direct != direct {
            return Err(PyValueError::new_err(
                "this listener already accepts in the other mode (direct=True/False)",
            ));
        }
        let slot = self.new_op(Kind::Accept, cid, ctx, conn, None);
        self.queue(py, slot, cid, Kind::Accept);
        Ok(())
    }

    /// Completed ops; blocks up to `timeout` seconds (None: until one completes)
    /// with the GIL released. Buffers handed out by the previous call are recycled.
    #[pyo3(signature = (timeout=None, drain=false))]
    fn wait(
        &mut self,
        py: Python<'_>,
        timeout: Option<f64>,
        drain: bool,
    ) -> PyResult<Vec<Py<OpResult>>> {
        self.check_loop(py);
        if self.closed && !self.ready.is_empty() {
            return Ok(self.take_ready());
        }
        self.check(py)?;
        if let Some(t) = timeout {
            if t.is_nan() || t < 0.0 {
                return Err(PyValueError::new_err("timeout must be >= 0 or None"));
            }
        }
        if let Some(fd) = self.ring().eventfd().filter(|_| drain) {
            // Before reaping, so a completion posted after the reap re-signals it.
            crate::sys::eventfd_drain(fd);
        }
        self.recycle(py);
        self.rearm_starved(py);
        self.expire(py);
        if timeout == Some(0.0) || !self.ready.is_empty() {
            // wait_io_async on a loop's ring: besides what the loop's select reaped,
            // enter the kernel while ops are in flight (it submits ours and runs task
            // work): a reply that is already there then comes back without a loop
            // iteration (the select would cost more than this syscall).
            let enter = !drain || self.inflight > 0;
            self.poll_kernel(py, enter)?;
        } else {
            // Blocking call: the enter below submits, runs task work and returns at
            // once when CQEs are there; one syscall per round instead of two.
            self.collect_cqes();
            self.process(py);
        }
        let end = timeout.map(|t| crate::sys::monotonic() + t);
        while self.ready.is_empty() {
            self.rearm_starved(py);
            let next = self.expire(py);
            if !self.ready.is_empty() {
                break;
            }
            let now = crate::sys::monotonic();
            if end.is_some_and(|e| now >= e) {
                break;
            }
            let limit = match (end, next) {
                (Some(e), Some(n)) => Some(e.min(n)),
                (e, n) => e.or(n),
            };
            let wait = limit.map(|l| Duration::from_secs_f64((l - now).max(0.0)));
            // A signal's Python handler (KeyboardInterrupt) runs here, before each
            // block: an io_uring_enter that submitted SQEs and was then interrupted
            // returns the count it submitted, not EINTR, so the wake-up looks like
            // any other. Results already collected stay queued for the next wait.
            py.check_signals()?;
            let ring = self.ring.as_mut().expect("open");
            let rc = ring.wait(py, wait, &mut self.cqes);
            match rc {
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::ETIME | libc::EBUSY | libc::EAGAIN) => {}
                    Some(libc::EINTR) => py.check_signals()?,
                    _ => return Err(crate::errors::io_error(py, &e, None)),
                },
            }
            self.process(py);
            if self.ring.as_ref().is_some_and(WRing::is_dead) {
                // The loop closed its ring while we waited on it.
                self.check_loop(py);
                break;
            }
        }
        Ok(self.take_ready())
    }

    /// The earliest deadline of an op still queued in user space (monotonic seconds).
    fn next_deadline(&mut self, py: Python<'_>) -> Option<f64> {
        if self.closed {
            return None;
        }
        self.expire(py)
    }

    /// Whether results are ready without waiting (ops completed in user space).
    fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Resets the eventfd (asyncio reader callback).
    fn drain_eventfd(&self) {
        if let Some(fd) = self.ring.as_ref().and_then(WRing::eventfd) {
            crate::sys::eventfd_drain(fd);
        }
    }

    /// The eventfd that becomes readable when completions arrive (-1 when there is
    /// none: closed, or on an event loop's ring).
    fn fileno(&self) -> RawFd {
        self.ring.as_ref().and_then(WRing::eventfd).unwrap_or(-1)
    }

    /// Whether the Watcher shares an event loop's ring.
    #[getter]
    fn loop_bound(&self) -> bool {
        self.on_loop
    }

    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.closed {
            return Ok(());
        }
        if self.one_thread && std::thread::current().id() != self.owner {
            return Err(PyRuntimeError::new_err(
                "a Watcher can only be closed from the thread that created it",
            ));
        }
        self.shutdown(py);
        Ok(())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed
    }

    /// Registered connections.
    #[getter]
    fn connections(&self) -> usize {
        self.nconns
    }

    /// Ops not yet completed.
    #[getter]
    fn pending(&self) -> usize {
        self.ops.len() - self.op_free.len()
    }

    /// SQEs whose final CQE has not been reaped.
    #[getter]
    fn in_flight(&self) -> usize {
        self.inflight
    }

    /// Facts about the setup, for tests and docs.
    fn info(&self) -> (bool, bool, usize, usize) {
        let p = self.pool.as_ref();
        (
            self.ring.as_ref().is_some_and(WRing::defer),
            self.mshot_recv_ok,
            p.map_or(0, |p| p.nbufs as usize),
            p.map_or(0, BufRing::free),
        )
    }
}

impl WatcherCore {
    fn queue(&mut self, py: Python<'_>, slot: usize, cid: u64, kind: Kind) {
        if let Some(d) = self.op(slot).deadline {
            if d <= crate::sys::monotonic() {
                self.finish(py, slot, Some(Fail::Timeout), None, false, None);
                return;
            }
        }
        let c = self.conn(cid).expect("checked by the caller");
        match kind {
            Kind::Read | Kind::ReadFull | Kind::ReadFrom => c.reads.push_back(slot),
            Kind::Write | Kind::WriteTo | Kind::Connect => c.writes.push_back(slot),
            Kind::Accept => c.accepts.push_back(slot),
        }
        self.pump(py, cid, kind);
    }
}

impl Drop for WatcherCore {
    fn drop(&mut self) {
        if self.ring.is_none() {
            return;
        }
        // SAFETY: Py_IsInitialized only reads the runtime's state; we are in
        // tp_dealloc, with the interpreter's lock held.
        if unsafe { ffi::Py_IsInitialized() } == 0 {
            // Collected while the interpreter finalizes: no Python object (an
            // exception for each pending op) can be made any more, and the process
            // is exiting. Leak what the kernel may still use rather than wait.
            std::mem::forget(std::mem::take(&mut self.ops));
            std::mem::forget(self.pool.take());
            std::mem::forget(self.ring.take());
            return;
        }
        {
            Python::attach(|py| {
                self.shutdown(py);
                self.ready.clear();
            });
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<WatcherCore>()?;
    m.add_class::<OpResult>()?;
    m.add_class::<RingView>()?;
    m.add("WatcherClosedError", py.get_type::<WatcherClosedError>())?;
    m.add("ConnFreedError", py.get_type::<ConnFreedError>())?;
    m.add("OP_READ", OP_READ)?;
    m.add("OP_WRITE", OP_WRITE)?;
    m.add("OP_ACCEPT", OP_ACCEPT)?;
    m.add("OP_CONNECT", OP_CONNECT)?;
    Ok(())
}
