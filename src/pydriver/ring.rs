//! `ringio.uring.Ring`: an io_uring instance, synchronously, from Python.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::PyDriver;
use crate::buffers::AlignedBuffer;
use crate::errors;
use crate::op::{Completion, Op};
use crate::started::Bounce;
use crate::uring::{Options, UringEngine};

/// An io_uring instance with a registered eventfd.
///
/// Ops go into the submission queue at `submit()` (one io_uring_enter for the whole
/// list); completions are collected by `get_events()` / `reap()`.
/// What `Ring._stage` did with an op: not taken, because the CQ has no room
/// beyond the ops in flight (the caller keeps it for after a wake-up).
pub const STAGE_FULL: u8 = 0;
/// In the SQ, for the ring's next enter.
pub const STAGE_WAITING: u8 = 1;
/// In the kernel: the SQ was submitted, and nothing waits in it.
pub const STAGE_SUBMITTED: u8 = 2;

#[pyclass(module = "ringio._core.uring", frozen)]
pub struct Ring {
    inner: PyDriver<UringEngine>,
    flags: Vec<&'static str>,
    sq_entries: u32,
    cq_entries: u32,
    defer_taskrun: bool,
    registered_fd: bool,
}

impl Ring {
    /// The driver, for the event loop's native core (`crate::loopcore`), which
    /// submits and reaps on this same ring.
    pub(crate) fn inner(&self) -> &PyDriver<UringEngine> {
        &self.inner
    }

    /// Whether the CQ has room for one more op beyond those in flight.
    fn has_room(&self) -> bool {
        self.inner.driver().in_flight() < self.inner.capacity() as usize
    }

    /// Makes a `pread` of `fd` into `target` at `offset`, with `new_future()` as its
    /// data, puts it in the kernel at once, and returns a `Started` awaiting the
    /// future (whose result is the bytes of `bounce` when there is one). The caller
    /// checked `has_room()`, with the GIL held since, so the op is taken.
    ///
    /// This is an O_DIRECT file's read (`_stage_pread_in_place`,
    /// `_stage_pread_bytes`), which goes to the device: it enters the kernel when it
    /// is staged even while the kernel has other ops (fio's default too), because
    /// its slot of the device's queue stays empty while it waits in the SQ, and at a
    /// depth the device is bound by that wait is throughput lost. The tasks that a
    /// batch of completions wakes start their next reads one after another; held
    /// for the loop's next enter, the first read waited for all the other tasks to
    /// run (2026-11-28: 32 tasks' `preadinto` on ringio's loop against fio at depth
    /// 32, 16 interleaved rounds: 64.2k reads/s held, 68.5k entered at once, at 9.0
    /// and 10.1 µs of CPU per read, the difference an `io_uring_enter` per read).
    fn stage_started_read<'py>(
        &self,
        py: Python<'py>,
        fd: &Bound<'py, PyAny>,
        target: &Bound<'py, PyAny>,
        offset: i64,
        new_future: &Bound<'py, PyAny>,
        bounce: Option<Bounce<'py>>,
    ) -> PyResult<Py<PyAny>> {
        let future = new_future.call0()?;
        let data = Some(future.clone().unbind());
        let op = crate::op::pread(py, fd, target, offset, 0, None, None, data)?;
        self.stage(py, Bound::new(py, op)?, true)?;
        Ok(crate::started::started(py, &future, bounce)?.unbind())
    }

    /// `_stage`'s body (see there); with `at_once`, the op enters the kernel now
    /// whatever the kernel already has.
    fn stage(&self, py: Python<'_>, op: Bound<'_, Op>, at_once: bool) -> PyResult<u8> {
        let mut driver = self.inner.driver();
        if driver.in_flight() >= self.inner.capacity() as usize {
            return Ok(STAGE_FULL);
        }
        let ops = std::slice::from_ref(&op);
        let (tokens, launch) = driver.begin_submit(py, ops)?;
        driver.finish_submit(py, ops, &tokens, launch.staged())?;
        let waiting = driver.engine.sq_pending() as usize;
        if waiting > 0 && (at_once || waiting >= driver.in_flight() - waiting) {
            // A failure here leaves the SQEs queued: the next enter (a flush, a
            // wait, the loop's select) submits them or reports the error.
            if driver.engine.submit_now().is_ok() {
                return Ok(STAGE_SUBMITTED);
            }
        }
        Ok(if driver.engine.sq_pending() == 0 {
            STAGE_SUBMITTED
        } else {
            STAGE_WAITING
        })
    }
}

#[pymethods]
impl Ring {
    /// `entries`: submission queue size (the completion queue is 4x). `sqpoll_idle`:
    /// start a kernel polling thread that sleeps after this many ms idle (opt-in:
    /// it costs a CPU). `single_issuer`: allow SINGLE_ISSUER + DEFER_TASKRUN, the
    /// fastest mode, where only the creating thread may use the ring. `eventfd`:
    /// register an eventfd (`fileno()`) that becomes readable when completions
    /// wait, for waiting on the ring from a selector; without it the kernel signals
    /// nothing per completion (a ring waited for only by entering it).
    #[new]
    #[pyo3(signature = (entries=256, *, sqpoll_idle=None, single_issuer=false, eventfd=true))]
    fn new(
        py: Python<'_>,
        entries: i64,
        sqpoll_idle: Option<u32>,
        single_issuer: bool,
        eventfd: bool,
    ) -> PyResult<Self> {
        if !(1..=32768).contains(&entries) {
            return Err(PyValueError::new_err(format!(
                "entries must be between 1 and 32768, not {entries}"
            )));
        }
        let engine = UringEngine::new(
            Options {
                entries: entries as u32,
                sqpoll_idle_ms: sqpoll_idle,
                single_issuer,
            },
            eventfd,
        )
        .map_err(|e| errors::io_error(py, &e, None))?;
        let setup = engine.setup().clone();
        let registered_fd = engine.is_registered();
        Ok(Self {
            inner: PyDriver::new(engine, setup.cq_entries),
            flags: setup.flags,
            sq_entries: setup.sq_entries,
            cq_entries: setup.cq_entries,
            defer_taskrun: setup.defer_taskrun,
            registered_fd,
        })
    }

    /// Pushes every op into the submission queue and submits them with one
    /// io_uring_enter (more if they outnumber the queue). Returns the count. Errors
    /// of individual ops arrive in their completions.
    fn submit(&self, py: Python<'_>, ops: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.inner.submit(py, ops)
    }

    /// Pushes `op` into the submission queue, for the ring's next enter (a
    /// `submit()`, a wait, `_submit_staged()`, or the select of the event loop that
    /// owns the ring: how `ringio.EventLoop` runs file ops on its own ring), and
    /// enters the kernel now only while it is short of work: when the SQEs waiting
    /// outnumber the ops the kernel already has (or the queue is full). So a burst
    /// of ops started one by one reaches the kernel in batches of 1, 1, 2, 4, ...
    /// while the device still has work, and otherwise with the next enter, in the
    /// same syscall. Back-pressure: the op is not taken when the CQ holds no more
    /// beyond the ops in flight. Returns `STAGE_FULL` (not taken), `STAGE_WAITING`
    /// (in the SQ for the next enter) or `STAGE_SUBMITTED` (nothing waits).
    fn _stage(&self, py: Python<'_>, op: Bound<'_, Op>) -> PyResult<u8> {
        self.stage(py, op, false)
    }

    /// The per-read path of an O_DIRECT read straight into a caller's buffer (a
    /// file's `preadinto`): when `offset`, the buffer's length and its address are
    /// aligned (`off_align`, `mem_align`; the buffer not empty) and the CQ has room,
    /// makes the `pread` op, with `new_future()` as its data, puts it in the kernel
    /// at once (see `stage_started_read`) and returns a `Started` awaiting the
    /// future. Otherwise makes and stages nothing and returns None: the caller's
    /// general path decides (a bounce buffer, the wait for room, the error for a
    /// bad argument).
    #[allow(clippy::too_many_arguments)]
    fn _stage_pread_in_place(
        &self,
        py: Python<'_>,
        fd: &Bound<'_, PyAny>,
        buf: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        off_align: u64,
        mem_align: u64,
        new_future: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Py<PyAny>>> {
        // Anything but an int offset and a writable buffer is the general path's to
        // report.
        let Ok(offset) = offset.extract::<i64>() else {
            return Ok(None);
        };
        let Ok((address, len)) = crate::buffers::writable_address(buf) else {
            return Ok(None);
        };
        let (len, address) = (len as u64, address as u64);
        if offset < 0
            || len == 0
            || off_align == 0
            || mem_align == 0
            || (offset as u64) % off_align != 0
            || len % off_align != 0
            || address % mem_align != 0
            || !self.has_room()
        {
            return Ok(None);
        }
        self.stage_started_read(py, fd, buf, offset, new_future, None)
            .map(Some)
    }

    /// The per-read path of an O_DIRECT `pread(n, offset)`: reads the aligned span
    /// around [offset, offset + n) (`off_align`) into a new `AlignedBuffer`
    /// (`mem_align`), puts it in the kernel at once (see `stage_started_read`), and
    /// returns a `Started` whose result is the bytes of that span from `offset` on
    /// (fewer at the end of the file).
    /// None, with nothing made or staged, when `n` or `offset` is not a
    /// non-negative int, `n` is 0, or the CQ has no room: the caller's general path
    /// decides.
    #[allow(clippy::too_many_arguments)]
    fn _stage_pread_bytes(
        &self,
        py: Python<'_>,
        fd: &Bound<'_, PyAny>,
        n: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        off_align: u64,
        mem_align: u64,
        new_future: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let (Ok(n), Ok(offset)) = (n.extract::<u64>(), offset.extract::<u64>()) else {
            return Ok(None);
        };
        if n == 0 || off_align == 0 || !mem_align.is_power_of_two() || !self.has_room() {
            return Ok(None);
        }
        let start = offset - offset % off_align;
        let Some(end) = offset
            .checked_add(n)
            .and_then(|e| e.checked_next_multiple_of(off_align))
            .filter(|&e| e <= i64::MAX as u64 && e - start <= isize::MAX as u64)
        else {
            return Ok(None);
        };
        let buffer = Bound::new(
            py,
            AlignedBuffer::new((end - start) as isize, Some(mem_align as isize))?,
        )?;
        let target = buffer.clone().into_any();
        let bounce = Bounce {
            buffer,
            skip: (offset - start) as usize,
            n: n as usize,
        };
        self.stage_started_read(py, fd, &target, start as i64, new_future, Some(bounce))
            .map(Some)
    }

    /// Submits the SQEs that `_stage` left waiting (one io_uring_enter, none when
    /// nothing waits).
    fn _submit_staged(&self, py: Python<'_>) -> PyResult<()> {
        let mut driver = self.inner.driver();
        if driver.engine.sq_pending() == 0 {
            return Ok(());
        }
        driver
            .engine
            .submit_now()
            .map_err(|e| errors::io_error(py, &e, None))
    }

    /// Waits for at least `min_nr` completions (at most `max_nr`) for up to
    /// `timeout` seconds (None: no limit), with the GIL released.
    #[pyo3(signature = (min_nr=1, max_nr=None, timeout=None))]
    fn get_events(
        &self,
        py: Python<'_>,
        min_nr: i64,
        max_nr: Option<i64>,
        timeout: Option<f64>,
    ) -> PyResult<Vec<Py<Completion>>> {
        self.inner.get_events(py, min_nr, max_nr, timeout)
    }

    /// Every completion already available, without blocking.
    fn reap(&self, py: Python<'_>) -> PyResult<Vec<Py<Completion>>> {
        self.inner.reap(py)
    }

    /// Like `reap()`, but settles each op whose `data` is an asyncio future
    /// (`set_result(res)` or `set_exception(OSError)`) instead of returning its
    /// completion. Returns the completions it did not settle: those whose future
    /// was already done (cancelled) or whose `data` is not a future.
    fn resolve_futures(&self, py: Python<'_>) -> PyResult<Vec<Py<Completion>>> {
        self.inner.resolve_futures(py)
    }

    /// Submits an async cancel for `op`. The op then completes with -ECANCELED, or
    /// with its own result if it finished first. Returns None.
    fn cancel(&self, py: Python<'_>, op: &Bound<'_, Op>) -> PyResult<Option<Py<Completion>>> {
        self.inner.cancel(py, op)
    }

    /// Cancels every in-flight op, waits (GIL released) for their completions, and
    /// releases the ring; those final completions are available from `reap()`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.inner.close(py)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    #[getter]
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    /// SQEs pushed by `_stage()` that have not reached the kernel yet (tests).
    #[getter]
    fn _sq_waiting(&self) -> u32 {
        self.inner.driver().engine.sq_pending()
    }

    /// Operations of loop-bound ``ringio.Watcher``s (sharing this ring through its
    /// event loop) whose final completion has not arrived.
    #[getter]
    fn watcher_in_flight(&self) -> usize {
        self.inner.driver().engine.watchers_inflight()
    }

    /// ``ringio.Watcher``s sharing this ring.
    #[getter]
    fn watchers(&self) -> usize {
        self.inner.driver().engine.watchers()
    }

    /// How many completions one reap can hold (the CQ size).
    #[getter]
    fn maxevents(&self) -> u32 {
        self.inner.capacity()
    }

    /// The setup the kernel accepted: flags and queue sizes.
    #[getter]
    fn setup<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("flags", self.flags.clone())?;
        d.set_item("sq_entries", self.sq_entries)?;
        d.set_item("cq_entries", self.cq_entries)?;
        d.set_item("defer_taskrun", self.defer_taskrun)?;
        d.set_item("registered_fd", self.registered_fd)?;
        Ok(d)
    }

    /// The registered eventfd, readable while completions wait (ValueError for a
    /// ring made with `eventfd=False`).
    fn fileno(&self) -> PyResult<i32> {
        self.inner.fileno()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<Py<PyAny>>,
        _v: Option<Py<PyAny>>,
        _tb: Option<Py<PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<ringio.uring.Ring sq={} cq={} flags={} in_flight={}{}>",
            self.sq_entries,
            self.cq_entries,
            self.flags.join("|"),
            self.inner.in_flight(),
            if self.inner.is_closed() {
                " closed"
            } else {
                ""
            }
        )
    }
}

/// The io_uring opcodes the running kernel supports, as {name: bool}. Raises the
/// kernel's OSError where io_uring itself is refused (seccomp, io_uring_disabled).
#[pyfunction]
pub fn probe(py: Python<'_>) -> PyResult<Vec<(&'static str, bool)>> {
    crate::uring::probe().map_err(|e| errors::io_error(py, &e, None))
}
