//! `WatcherCore`: the native Watcher's Python class, its ring access and its
//! teardown.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use io_uring::squeue;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::buffers::View;
use crate::conn::recv::Arm;
use crate::pydriver::ring::Ring;

use super::conn::Conn;
use super::ops::{Kind, Msg, Op};
use super::ring::WatcherRing;
use super::view::{OpResult, RingView};
use super::{addr, ConnFreedError, WatcherClosedError};
use crate::ring::bufring::BufRing;

/// The native Watcher. Used through `ringio.Watcher`, which maps sockets to
/// connection ids and wraps accepted fds into socket objects.
#[pyclass(module = "ringio._core.net", name = "WatcherCore")]
pub struct WatcherCore {
    /// Its own ring, or the event loop's (`ring::WatcherRing`); None once closed.
    pub(super) ring: Option<WatcherRing>,
    pub(super) owner: std::thread::ThreadId,
    /// Only the owner thread may use the ring (SINGLE_ISSUER, or the loop's ring).
    pub(super) one_thread: bool,
    /// Bound to an event loop's ring (fixed at creation).
    pub(super) on_loop: bool,
    /// Why later calls fail with WatcherClosedError.
    pub(super) closed_why: &'static str,
    pub(super) bgid: u16,
    pub(super) pool: Option<BufRing>,
    pub(super) mshot_recv_ok: bool,
    pub(super) bufsize: usize,
    pub(super) conns: Vec<Option<Conn>>,
    pub(super) conn_gens: Vec<u32>,
    pub(super) conn_free: Vec<u32>,
    pub(super) nconns: usize,
    pub(super) ops: Vec<Option<Box<Op>>>,
    pub(super) op_free: Vec<usize>,
    pub(super) serial: u64,
    pub(super) ready: Vec<Py<OpResult>>,
    /// Ring buffers returned by the last `wait`: recycled at the start of the next.
    pub(super) handed: Vec<Py<RingView>>,
    /// Ring buffers in results not yet returned by `wait` (a read served from the
    /// read-ahead inside `read()` completes before the `wait` that returns it).
    pub(super) fresh: Vec<Py<RingView>>,
    pub(super) pinned: Vec<Py<RingView>>,
    pub(super) starved: Vec<u64>,
    /// Ring buffers held as read-ahead over all connections (< nbufs / 2, so that
    /// read-ahead never takes more than half the ring from the other connections).
    pub(super) held_total: usize,
    pub(super) deadlines: BinaryHeap<Reverse<(u64, usize, u64)>>,
    pub(super) inflight: usize,
    pub(super) closed: bool,
    pub(super) sock_factory: Py<PyAny>,
    pub(super) cqes: Vec<(u64, i32, u32)>,
    /// The op slots a completed send covered (kept to reuse its allocation).
    pub(super) covered: Vec<usize>,
}

impl WatcherCore {
    pub(super) fn ring(&mut self) -> &mut WatcherRing {
        self.ring
            .as_mut()
            .expect("ring is open while the watcher is not closed")
    }

    pub(super) fn check(&mut self, py: Python<'_>) -> PyResult<()> {
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
    pub(super) fn check_loop(&mut self, py: Python<'_>) {
        if !self.closed && self.ring.as_ref().is_some_and(WatcherRing::is_dead) {
            self.closed_why = "the Watcher's event loop closed the ring they shared \
                               (the loop was closed, or moved to another thread)";
            self.shutdown(py);
        }
    }

    /// The registered (live) connection `cid`; None once freed.
    pub(super) fn conn(&mut self, cid: u64) -> Option<&mut Conn> {
        self.conn_any(cid).filter(|c| c.life.is_live())
    }

    pub(super) fn conn_ref(&self, cid: u64) -> Option<&Conn> {
        let idx = (cid & 0xffff_ffff) as usize;
        let gen = (cid >> 32) as u32;
        match self.conns.get(idx) {
            Some(Some(c)) if c.gen == gen && c.life.is_live() => Some(c),
            _ => None,
        }
    }

    /// Connection `cid`, live or freed with ops still in the kernel (lost);
    /// None once released.
    pub(super) fn conn_any(&mut self, cid: u64) -> Option<&mut Conn> {
        let idx = (cid & 0xffff_ffff) as usize;
        let gen = (cid >> 32) as u32;
        match self.conns.get_mut(idx) {
            Some(Some(c)) if c.gen == gen => Some(c),
            _ => None,
        }
    }

    pub(super) fn conn_or_err(&mut self, cid: u64) -> PyResult<&mut Conn> {
        self.conn(cid).ok_or_else(|| {
            ConnFreedError::new_err((libc::EBADF, "this connection was freed from the Watcher"))
        })
    }

    /// Pushes SQEs, entering the kernel to make room when the SQ is full.
    pub(super) fn push(&mut self, sqes: &[squeue::Entry]) -> io::Result<()> {
        let ring = self.ring.as_mut().expect("open");
        ring.push(sqes, &mut self.cqes)?;
        self.inflight += sqes.len();
        Ok(())
    }

    pub(super) fn submit_now(&mut self) -> io::Result<()> {
        let ring = self.ring.as_mut().expect("open");
        ring.submit(&mut self.cqes)
    }

    /// Moves every CQE available without a syscall into `self.cqes` (handled by
    /// `process`).
    pub(super) fn collect_cqes(&mut self) {
        let ring = self.ring.as_mut().expect("open");
        ring.collect(&mut self.cqes);
    }

    /// Submits queued SQEs and collects CQEs without waiting. On a loop's ring,
    /// `enter`: when its select reaped nothing for us, enter the kernel ourselves
    /// (see `WatcherRing::poll`).
    pub(super) fn poll_kernel(&mut self, py: Python<'_>, enter: bool) -> PyResult<()> {
        let ring = self.ring.as_mut().expect("open");
        ring.poll(enter, &mut self.cqes)
            .map_err(|e| crate::errors::io_error(py, &e, None))?;
        self.process(py);
        Ok(())
    }
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
                WatcherRing::on_loop(py, &r, waker)?
            }
            None => WatcherRing::own(entries).map_err(|e| {
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
            covered: Vec::new(),
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
        if full && buf.is_none() {
            return Err(PyValueError::new_err("read_full needs a buffer"));
        }
        let view = read_view(buf.as_ref())?;
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
        let view = read_view(buf.as_ref())?;
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
        if c.accepts.is_empty() && c.mshot == Arm::Off && c.accepted.is_empty() {
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
            if self.ring.as_ref().is_some_and(WatcherRing::is_dead) {
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
        if let Some(fd) = self.ring.as_ref().and_then(WatcherRing::eventfd) {
            crate::sys::eventfd_drain(fd);
        }
    }

    /// The eventfd that becomes readable when completions arrive (-1 when there is
    /// none: closed, or on an event loop's ring).
    fn fileno(&self) -> RawFd {
        self.ring
            .as_ref()
            .and_then(WatcherRing::eventfd)
            .unwrap_or(-1)
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
            self.ring.as_ref().is_some_and(WatcherRing::defer),
            self.mshot_recv_ok,
            p.map_or(0, |p| p.nbufs as usize),
            p.map_or(0, BufRing::free),
        )
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
            // A send queue in flight holds the iovecs and msghdr of its send.
            std::mem::forget(std::mem::take(&mut self.conns));
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

/// The writable view of a read's buffer, if the caller gave one (without one the
/// read receives into a provided buffer). An empty buffer is refused: a read into
/// it would complete at once with 0, which means end of stream.
fn read_view(buf: Option<&Bound<'_, PyAny>>) -> PyResult<Option<View>> {
    let Some(b) = buf else { return Ok(None) };
    let v = View::writable(b)?;
    if v.is_empty() {
        return Err(PyValueError::new_err("the read buffer is empty"));
    }
    Ok(Some(v))
}
