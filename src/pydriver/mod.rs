//! The Python-facing behaviour every synchronous engine class shares
//! (`ringio.aio.Context`, `ringio.uring.Ring`): submit, wait with the GIL
//! released, reap, cancel, close; and those two classes (`aio_context`, `ring`).

pub mod aio_context;
pub mod ring;

use std::sync::{Mutex, MutexGuard};

pub(crate) use crate::sync::{lock, try_lock};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;

use crate::engine::{Driver, Engine, RawCompletion, Waiter};
use crate::errors;
use crate::op::{Completion, Op};

pub struct PyDriver<E: Engine> {
    driver: Mutex<Driver<E>>,
    waiter: E::Waiter,
    capacity: u32,
    /// Completions reaped but not yet handed out: by a wait that a signal
    /// interrupted, or by close(). Handed out first, so none is lost.
    backlog: Mutex<Vec<Py<Completion>>>,
}

fn extract_ops<'py>(ops: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, Op>>> {
    ops.try_iter()
        .map_err(|_| PyTypeError::new_err("submit() takes a list of ops"))?
        .map(|item| {
            let item = item?;
            item.cast_into::<Op>().map_err(|e| {
                PyTypeError::new_err(format!(
                    "submit() takes ops made by ringio.aio or ringio.uring (pread, pwrite, ...), \
                     not '{}'",
                    crate::buffers::type_name(&e.into_inner())
                ))
            })
        })
        .collect()
}

/// Resolves `op.data` as an asyncio future from the op's result; Ok(false) when
/// it is already done.
fn settle_future(py: Python<'_>, op: &Op, res: i64) -> PyResult<bool> {
    let fut = op.data.bind(py);
    if fut.call_method0(intern!(py, "done"))?.is_truthy()? {
        return Ok(false);
    }
    if res < 0 {
        let err = op.completion_error(py, res).into_value(py);
        fut.call_method1(intern!(py, "set_exception"), (err,))?;
    } else {
        fut.call_method1(intern!(py, "set_result"), (res,))?;
    }
    Ok(true)
}

impl<E: Engine> PyDriver<E> {
    pub fn new(engine: E, capacity: u32) -> Self {
        Self {
            waiter: engine.waiter(),
            capacity,
            driver: Mutex::new(Driver::new(engine)),
            backlog: Mutex::new(Vec::new()),
        }
    }

    pub fn driver(&self) -> MutexGuard<'_, Driver<E>> {
        lock(&self.driver)
    }

    /// The driver, if no one holds its lock (for checks that must not wait for
    /// it, such as those a `Drop` run by the GC makes).
    pub fn try_driver(&self) -> Option<MutexGuard<'_, Driver<E>>> {
        try_lock(&self.driver)
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Matches raw completions to their ops and makes a `Completion` of each.
    pub(crate) fn finish(
        &self,
        py: Python<'_>,
        raw: &[RawCompletion],
    ) -> PyResult<Vec<Py<Completion>>> {
        let (done, released) = self.driver().complete(py, raw);
        // Dropped outside the lock: releasing a buffer view can run Python code.
        drop(released);
        done.into_iter()
            .map(|(op, c)| {
                Py::new(
                    py,
                    Completion {
                        op,
                        res: c.res,
                        res2: c.res2,
                    },
                )
            })
            .collect()
    }

    pub fn submit(&self, py: Python<'_>, ops: &Bound<'_, PyAny>) -> PyResult<usize> {
        let ops = extract_ops(ops)?;
        if ops.is_empty() {
            // Nothing to submit, but a closed (or inherited) queue still says so.
            self.driver().check_open()?;
            return Ok(0);
        }
        let (tokens, launch) = self.driver().begin_submit(py, &ops)?;
        let outcome = py.detach(|| E::launch(launch));
        self.driver().finish_submit(py, &ops, &tokens, outcome)
    }

    pub fn get_events(
        &self,
        py: Python<'_>,
        min_nr: i64,
        max_nr: Option<i64>,
        timeout: Option<f64>,
    ) -> PyResult<Vec<Py<Completion>>> {
        let max_nr = max_nr.unwrap_or(self.capacity as i64);
        if max_nr < 1 || min_nr < 0 || min_nr > max_nr {
            return Err(PyValueError::new_err(format!(
                "need 0 <= min_nr <= max_nr and max_nr >= 1 (min_nr={min_nr}, max_nr={max_nr})"
            )));
        }
        let timeout = match timeout {
            None => None,
            Some(t) if t >= 0.0 && t.is_finite() => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(PyValueError::new_err(format!(
                    "timeout must be >= 0, not {t}"
                )))
            }
        };
        let (mut min, mut max) = (min_nr as usize, max_nr as usize);
        let mut results: Vec<Py<Completion>> = {
            let mut backlog = lock(&self.backlog);
            let n = backlog.len().min(max);
            backlog.drain(..n).collect()
        };
        min = min.saturating_sub(results.len());
        max -= results.len();
        {
            let driver = self.driver();
            driver.check_open()?;
            if timeout.is_none() && min > driver.in_flight() {
                return Err(PyValueError::new_err(format!(
                    "min_nr={min_nr} exceeds the {} ops in flight: waiting would never end",
                    driver.in_flight()
                )));
            }
        }
        if max == 0 {
            return Ok(results);
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let waiter = self.waiter;
        loop {
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let mut raw = Vec::new();
            let outcome = py.detach(|| waiter.wait(&mut raw, min, max, remaining));
            // The waiter may only have waited (io_uring); collect what is there.
            if raw.len() < max && !self.driver().is_closed() {
                let mut more = Vec::new();
                self.driver()
                    .engine
                    .reap_now(&mut more, max - raw.len())
                    .map_err(|e| errors::io_error(py, &e, None))?;
                raw.extend(more);
            }
            let got = self.finish(py, &raw)?;
            min = min.saturating_sub(got.len());
            max -= got.len().min(max);
            results.extend(got);
            match outcome {
                Ok(()) if min == 0 || remaining.is_some_and(|r| r.is_zero()) => {
                    return Ok(results);
                }
                // Woken short of `min` (a signal may have cut the wait without an
                // EINTR): its Python handler runs before waiting again.
                Ok(()) => {
                    if let Err(sig) = py.check_signals() {
                        lock(&self.backlog).extend(results);
                        return Err(sig);
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if let Err(sig) = py.check_signals() {
                        lock(&self.backlog).extend(results);
                        return Err(sig);
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => return Ok(results),
                // The context was closed by another thread while this one waited.
                Err(_) if self.driver().is_closed() => return Ok(results),
                Err(e) => {
                    lock(&self.backlog).extend(results);
                    return Err(errors::io_error(py, &e, None));
                }
            }
            if max == 0 || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(results);
            }
        }
    }

    /// The completions held back (by an interrupted wait or close), and the raw
    /// ones the kernel has ready now (none once closed), without waiting.
    fn take_ready(&self, py: Python<'_>) -> PyResult<(Vec<Py<Completion>>, Vec<RawCompletion>)> {
        let held: Vec<Py<Completion>> = std::mem::take(&mut *lock(&self.backlog));
        let mut raw = Vec::new();
        let mut driver = self.driver();
        if driver.is_closed() {
            return Ok((held, raw));
        }
        driver.check_process()?;
        let notify_fd = driver.engine.notify_fd();
        if notify_fd >= 0 {
            crate::sys::eventfd_drain(notify_fd);
        }
        driver
            .engine
            .reap_now(&mut raw, usize::MAX)
            .map_err(|e| errors::io_error(py, &e, None))?;
        Ok((held, raw))
    }

    pub fn reap(&self, py: Python<'_>) -> PyResult<Vec<Py<Completion>>> {
        let (mut results, raw) = self.take_ready(py)?;
        results.extend(self.finish(py, &raw)?);
        Ok(results)
    }

    /// What the asyncio proactor does on every wake-up, without a Python object per
    /// completion: reaps what is available and settles each op's future (its
    /// `data`) with `set_result(res)` or `set_exception(OSError)`. Returns the
    /// completions it left alone, for the caller to handle: those whose future was
    /// already done (cancelled), whose `data` is not a future, and any held back by
    /// an interrupted wait or by close().
    pub fn resolve_futures(&self, py: Python<'_>) -> PyResult<Vec<Py<Completion>>> {
        let (mut left, raw) = self.take_ready(py)?;
        left.extend(self.finish_settling(py, &raw, None)?);
        Ok(left)
    }

    /// Like `finish`, but settles the future of each op whose `data` is one (see
    /// `resolve_futures`) and returns only the other completions. With
    /// `future_types` (a type or a tuple of types, as `isinstance` takes), only
    /// `data` of those types is taken for a future (the loop's ring also carries
    /// polls and callbacks, which must not be duck-typed).
    pub(crate) fn finish_settling(
        &self,
        py: Python<'_>,
        raw: &[RawCompletion],
        future_types: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Py<Completion>>> {
        let (done, released) = self.driver().complete(py, raw);
        // Dropped outside the lock: releasing a buffer view can run Python code.
        drop(released);
        let mut left = Vec::new();
        for (op, c) in done {
            let is_future = match future_types {
                Some(t) => op.get().data.bind(py).is_instance(t).unwrap_or(false),
                None => true,
            };
            if !is_future || !settle_future(py, op.get(), c.res).unwrap_or(false) {
                left.push(Py::new(
                    py,
                    Completion {
                        op,
                        res: c.res,
                        res2: c.res2,
                    },
                )?);
            }
        }
        Ok(left)
    }

    pub fn cancel(&self, py: Python<'_>, op: &Bound<'_, Op>) -> PyResult<Option<Py<Completion>>> {
        let raw = self.driver().cancel(py, op)?;
        match raw {
            None => Ok(None),
            Some(c) => Ok(self.finish(py, &[c])?.pop()),
        }
    }

    pub fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.driver().is_closed() {
            return Ok(());
        }
        if self.driver().check_process().is_err() {
            // Inherited through fork(): the kernel context is the parent's. Closing
            // here only forgets it (its memory is leaked, never freed under the
            // parent's kernel ops); reaping would touch the parent's queue.
            let _ = self.driver().close();
            return Ok(());
        }
        let ready = self.reap(py)?;
        lock(&self.backlog).extend(ready);
        let closed = py.detach(|| loop {
            let mut driver = self.driver();
            if !driver.is_launching() {
                break driver.close();
            }
            // Another thread is inside io_submit/io_uring_enter with this batch.
            drop(driver);
            std::thread::sleep(Duration::from_micros(200));
        });
        let (finals, released) = closed.map_err(|e| errors::io_error(py, &e, None))?;
        let mut last = Vec::with_capacity(released.len());
        for (entry, c) in released.iter().zip(&finals) {
            last.push(Py::new(
                py,
                Completion {
                    op: entry.op.clone_ref(py),
                    res: c.res,
                    res2: c.res2,
                },
            )?);
        }
        drop(released);
        lock(&self.backlog).extend(last);
        Ok(())
    }

    pub fn is_closed(&self) -> bool {
        self.driver().is_closed()
    }

    pub fn in_flight(&self) -> usize {
        self.driver().in_flight()
    }

    pub fn fileno(&self) -> PyResult<i32> {
        let driver = self.driver();
        driver.check_open()?;
        match driver.engine.notify_fd() {
            -1 => Err(pyo3::exceptions::PyValueError::new_err(
                "this ring was made with eventfd=False and has no fd to poll: wait for \
                 its completions with get_events(), or make it with eventfd=True",
            )),
            fd => Ok(fd),
        }
    }
}
