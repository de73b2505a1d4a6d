//! `ringio.aio.Context`: the kernel AIO engine, synchronously, from Python.

use std::os::fd::RawFd;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::{AioEngine, AioWaiter};
use crate::engine::{Driver, Engine, RawCompletion, Waiter};
use crate::errors;
use crate::op::{Completion, Op};

/// A kernel AIO context (io_setup) with its own eventfd.
///
/// Every op submitted here signals the context's eventfd on completion (unless the op
/// names its own `resfd`), so `fileno()` can drive an event loop.
#[pyclass(module = "ringio._core", frozen)]
pub struct AioContext {
    driver: Mutex<Driver<AioEngine>>,
    waiter: AioWaiter,
    maxevents: u32,
    /// Completions reaped by a wait that was then interrupted by a signal; handed out
    /// first by the next get_events so that none is lost.
    backlog: Mutex<Vec<Py<Completion>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AioContext {
    fn driver(&self) -> MutexGuard<'_, Driver<AioEngine>> {
        lock(&self.driver)
    }

    fn finish(&self, py: Python<'_>, raw: &[RawCompletion]) -> PyResult<Vec<Py<Completion>>> {
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
}

fn extract_ops<'py>(ops: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, Op>>> {
    ops.try_iter()
        .map_err(|_| PyTypeError::new_err("submit() takes a list of ops"))?
        .map(|item| {
            let item = item?;
            item.cast_into::<Op>().map_err(|e| {
                PyTypeError::new_err(format!(
                    "submit() takes ops made by ringio.aio (pread, pwrite, ...), not '{}'",
                    crate::buffers::type_name(&e.into_inner())
                ))
            })
        })
        .collect()
}

#[pymethods]
impl AioContext {
    #[new]
    #[pyo3(signature = (maxevents=128))]
    fn new(py: Python<'_>, maxevents: i64) -> PyResult<Self> {
        if maxevents <= 0 || maxevents > i32::MAX as i64 {
            return Err(PyValueError::new_err(format!(
                "maxevents must be a positive int, not {maxevents}"
            )));
        }
        let engine =
            AioEngine::new(maxevents as u32).map_err(|e| errors::io_error(py, &e, None))?;
        Ok(Self {
            waiter: engine.waiter(),
            maxevents: maxevents as u32,
            driver: Mutex::new(Driver::new(engine)),
            backlog: Mutex::new(Vec::new()),
        })
    }

    /// Submits every op in `ops` with one io_submit. Returns the number submitted.
    ///
    /// If the kernel refuses an op, the ops before it are in flight and the error
    /// raised says so: a plain OSError when none went in, a PartialSubmitError with
    /// `.submitted` (how many went in) and `.op` (the refused op) otherwise.
    fn submit(&self, py: Python<'_>, ops: &Bound<'_, PyAny>) -> PyResult<usize> {
        let ops = extract_ops(ops)?;
        if ops.is_empty() {
            return Ok(0);
        }
        self.driver().submit(py, &ops)
    }

    /// Waits for at least `min_nr` completions (at most `max_nr`, default
    /// `maxevents`) for up to `timeout` seconds (None: no limit), with the GIL
    /// released. Returns the completions, possibly fewer than `min_nr` on timeout.
    #[pyo3(signature = (min_nr=1, max_nr=None, timeout=None))]
    fn get_events(
        &self,
        py: Python<'_>,
        min_nr: i64,
        max_nr: Option<i64>,
        timeout: Option<f64>,
    ) -> PyResult<Vec<Py<Completion>>> {
        let max_nr = max_nr.unwrap_or(self.maxevents as i64);
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
        let deadline = timeout.map(|t| Instant::now() + t);
        let waiter = self.waiter;
        loop {
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let mut raw = Vec::new();
            let outcome = py.detach(|| waiter.wait(&mut raw, min, max, remaining));
            let got = self.finish(py, &raw)?;
            min = min.saturating_sub(got.len());
            max -= got.len();
            results.extend(got);
            match outcome {
                Ok(()) => return Ok(results),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if let Err(sig) = py.check_signals() {
                        lock(&self.backlog).extend(results);
                        return Err(sig);
                    }
                    if max == 0 || (min == 0 && results.len() >= min_nr as usize) {
                        return Ok(results);
                    }
                }
                // The context was closed by another thread while this one waited.
                Err(_) if self.driver().is_closed() => return Ok(results),
                Err(e) => {
                    lock(&self.backlog).extend(results);
                    return Err(errors::io_error(py, &e, None));
                }
            }
        }
    }

    /// Reaps every completion already available, without blocking; clears the
    /// eventfd first so that a later completion signals it again.
    fn reap(&self, py: Python<'_>) -> PyResult<Vec<Py<Completion>>> {
        let mut results: Vec<Py<Completion>> = std::mem::take(&mut *lock(&self.backlog));
        let mut raw = Vec::new();
        {
            let mut driver = self.driver();
            if driver.is_closed() {
                return Ok(results);
            }
            crate::sys::eventfd_drain(driver.engine.notify_fd());
            let max = self.maxevents as usize;
            driver
                .engine
                .reap_now(&mut raw, max)
                .map_err(|e| errors::io_error(py, &e, None))?;
        }
        results.extend(self.finish(py, &raw)?);
        Ok(results)
    }

    /// Asks the kernel to cancel `op`. Kernel AIO can cancel only POLL ops: for
    /// those this returns None and the completion (res = -ECANCELED) arrives through
    /// get_events. For other ops it raises OSError(EINVAL) and the op completes
    /// normally.
    fn cancel(&self, py: Python<'_>, op: &Bound<'_, Op>) -> PyResult<Option<Py<Completion>>> {
        let raw = self.driver().cancel(py, op)?;
        match raw {
            None => Ok(None),
            Some(c) => Ok(self.finish(py, &[c])?.pop()),
        }
    }

    /// Destroys the context. Like io_destroy, waits (with the GIL released) until
    /// every in-flight op has finished. Completions already waiting, and a
    /// -ECANCELED completion for each op whose result io_destroy discarded, remain
    /// available from `reap()` so that nobody waits for them forever. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.driver().is_closed() {
            return Ok(());
        }
        let ready = self.reap(py)?;
        lock(&self.backlog).extend(ready);
        let released = py.detach(|| self.driver().close());
        let released = released.map_err(|e| errors::io_error(py, &e, None))?;
        let mut abandoned = Vec::with_capacity(released.len());
        for entry in &released {
            abandoned.push(Py::new(
                py,
                Completion {
                    op: entry.op.clone_ref(py),
                    res: -(libc::ECANCELED as i64),
                    res2: 0,
                },
            )?);
        }
        drop(released);
        lock(&self.backlog).extend(abandoned);
        Ok(())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.driver().is_closed()
    }

    #[getter]
    fn in_flight(&self) -> usize {
        self.driver().in_flight()
    }

    #[getter]
    fn maxevents(&self) -> u32 {
        self.maxevents
    }

    /// The eventfd that becomes readable when completions are waiting.
    fn fileno(&self) -> PyResult<RawFd> {
        let driver = self.driver();
        driver.check_open()?;
        Ok(driver.engine.notify_fd())
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
        let d = self.driver();
        format!(
            "<ringio.aio.Context maxevents={} in_flight={}{}>",
            self.maxevents,
            d.in_flight(),
            if d.is_closed() { " closed" } else { "" }
        )
    }
}
