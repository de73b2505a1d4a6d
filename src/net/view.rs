//! The Python objects a `wait_io` returns: `OpResult`, and `RingBuffer` over a
//! ring buffer's bytes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;
use pyo3::{ffi, PyTraverseError, PyVisit};

use crate::ring::bufring::PoolMem;

/// Data received into the watcher's buffer ring, handed to Python as
/// `OpResult.buffer`. Valid until the next `wait_io`; a buffer-protocol export
/// (memoryview, a pending `write` of it) taken before then keeps the data in place
/// until released. After that, reading it raises BufferError instead of showing
/// bytes the kernel has since overwritten.
#[pyclass(module = "ringio._core.net", frozen, name = "RingBuffer")]
pub struct RingView {
    pub(super) mem: Arc<PoolMem>,
    pub(super) off: usize,
    pub(super) len: usize,
    pub(super) bid: u16,
    pub(super) exports: AtomicUsize,
    pub(super) expired: AtomicBool,
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
#[pyclass(module = "ringio._core.net", frozen, get_all, name = "OpResult")]
pub struct OpResult {
    /// OP_READ, OP_WRITE, OP_ACCEPT or OP_CONNECT.
    pub(super) operation: i32,
    pub(super) context: Py<PyAny>,
    /// The socket the op was submitted on (for accept: the new connection).
    pub(super) conn: Py<PyAny>,
    /// The user's buffer, a RingBuffer (is_swap_buffer) or None.
    pub(super) buffer: Py<PyAny>,
    pub(super) is_swap_buffer: bool,
    pub(super) size: usize,
    pub(super) error: Py<PyAny>,
    /// The peer address of read_from; the listener for accept; else None.
    pub(super) address: Py<PyAny>,
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
