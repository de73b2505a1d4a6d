//! `ringio.aio.Context`: the kernel AIO engine, synchronously, from Python.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::PyDriver;
use crate::aio::AioEngine;
use crate::errors;
use crate::op::{Completion, Op};

/// A kernel AIO context (io_setup) with its own eventfd.
///
/// Every op submitted here signals the context's eventfd on completion (unless the op
/// names its own `resfd`), so `fileno()` can drive an event loop.
#[pyclass(module = "ringio._core.aio", frozen)]
pub struct AioContext {
    inner: PyDriver<AioEngine>,
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
            inner: PyDriver::new(engine, maxevents as u32),
        })
    }

    /// Submits every op in `ops` with one io_submit. Returns the number submitted.
    ///
    /// If the kernel refuses an op, the ops before it are in flight and the error
    /// raised says so: a plain OSError when none went in, a PartialSubmitError with
    /// `.submitted` (how many went in) and `.op` (the refused op) otherwise.
    fn submit(&self, py: Python<'_>, ops: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.inner.submit(py, ops)
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
        self.inner.get_events(py, min_nr, max_nr, timeout)
    }

    /// Reaps every completion already available, without blocking; clears the
    /// eventfd first so that a later completion signals it again.
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

    /// Asks the kernel to cancel `op`. Kernel AIO can cancel only POLL ops: for
    /// those this returns None and the completion (res = -ECANCELED) arrives through
    /// get_events. For other ops it raises OSError(EINVAL) and the op completes
    /// normally.
    fn cancel(&self, py: Python<'_>, op: &Bound<'_, Op>) -> PyResult<Option<Py<Completion>>> {
        self.inner.cancel(py, op)
    }

    /// Destroys the context. Like io_destroy, waits (with the GIL released) until
    /// every in-flight op has finished. Completions already waiting, and a
    /// -ECANCELED completion for each op whose result io_destroy discarded, remain
    /// available from `reap()` so that nobody waits for them forever. Idempotent.
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

    #[getter]
    fn maxevents(&self) -> u32 {
        self.inner.capacity()
    }

    /// The eventfd that becomes readable when completions are waiting.
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
            "<ringio.aio.Context maxevents={} in_flight={}{}>",
            self.inner.capacity(),
            self.inner.in_flight(),
            if self.inner.is_closed() {
                " closed"
            } else {
                ""
            }
        )
    }
}

/// The outcome of the process's one `io_setup` probe: Ok, or the errno.
static PROBE: std::sync::OnceLock<Result<(), i32>> = std::sync::OnceLock::new();

/// Whether this process may use kernel AIO (engine choice): raises the OSError of a
/// refused `io_setup` (ENOSYS or EPERM under a seccomp profile, EAGAIN past
/// `fs.aio-max-nr`). The probe's context is never destroyed: `io_destroy` waits for
/// an RCU grace period (30-48 ms measured here, every time), which made choosing the
/// aio engine cost more than a whole small benchmark. The kernel frees it at exit;
/// it holds a few events of `fs.aio-max-nr` and one page, once per process.
#[pyfunction]
pub fn probe(py: Python<'_>) -> PyResult<()> {
    let outcome = PROBE.get_or_init(|| match crate::aio::abi::io_setup(1) {
        Ok(_kept) => Ok(()),
        Err(e) => Err(e.raw_os_error().unwrap_or(libc::EIO)),
    });
    outcome.map_err(|errno| errors::io_error(py, &std::io::Error::from_raw_os_error(errno), None))
}
