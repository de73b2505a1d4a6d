//! New `bytes` objects that a receive writes into before any Python code sees them.
//!
//! The loop core receives large messages straight into the `bytes` that
//! `protocol.data_received` gets: a new, uninitialised object of the largest size
//! one receive may bring, shrunk in place to what arrived (no copy out of a
//! provided buffer: at 100 KiB per message that copy cost about as much as the
//! kernel's own).
//!
//! Every allocation of received data asks `receive_alloc_fails` first: tests make
//! it fail on purpose (`_core._fail_receive_allocations`).

use std::sync::atomic::{AtomicU32, Ordering};

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

extern "C" {
    // Not in the limited API, but exported by every CPython 3 (and documented):
    // shrinking a bytes object that nothing else references is a realloc in place.
    fn _PyBytes_Resize(
        bytes: *mut *mut pyo3::ffi::PyObject,
        newsize: pyo3::ffi::Py_ssize_t,
    ) -> std::os::raw::c_int;
}

/// How many of the next `bytes` objects for received data are not made, as though
/// memory had run out (tests: `_core._fail_receive_allocations`). Out of memory is
/// otherwise next to impossible to reach on purpose, and each of those paths must
/// fail the transport rather than deliver a stream with a hole in it.
static RECEIVE_ALLOC_FAILURES: AtomicU32 = AtomicU32::new(0);

/// Whether this allocation of received data is to fail (see
/// [`RECEIVE_ALLOC_FAILURES`]); one relaxed load when no failure is pending.
pub(super) fn receive_alloc_fails() -> bool {
    RECEIVE_ALLOC_FAILURES.load(Ordering::Relaxed) != 0
        && RECEIVE_ALLOC_FAILURES
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
}

/// Makes the next `count` allocations of received data fail as though memory had
/// run out (tests).
#[pyfunction]
pub(super) fn _fail_receive_allocations(count: u32) {
    RECEIVE_ALLOC_FAILURES.store(count, Ordering::Relaxed);
}

/// A new `bytes` copy of `data`; a MemoryError, not a panic, when memory runs out.
pub(super) fn new_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Py<PyBytes>> {
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

/// A new `bytes` of `n` bytes whose content is not yet written: for a receive into
/// it before any Python code sees it. None: no memory (the error is cleared).
pub(super) fn uninit_bytes(py: Python<'_>, n: usize) -> Option<Py<PyBytes>> {
    if receive_alloc_fails() {
        return None;
    }
    // SAFETY: a NULL source asks CPython for an uninitialised object of that size.
    let raw = unsafe { pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), n as isize) };
    if raw.is_null() {
        drop(PyErr::take(py));
        return None;
    }
    // SAFETY: `raw` is a new, owned reference to a bytes object.
    Some(unsafe { Bound::from_owned_ptr(py, raw).cast_into_unchecked() }.unbind())
}

/// `obj` (a `bytes` no Python code has seen) cut to its first `n` bytes, in place.
/// None: no memory to shrink it (CPython then frees it, data included).
pub(super) fn shrink(py: Python<'_>, obj: Py<PyBytes>, n: usize) -> Option<Py<PyBytes>> {
    let mut raw = obj.into_ptr();
    let rc = if receive_alloc_fails() {
        // SAFETY: `raw` is an owned reference, given up here as a failing
        // `_PyBytes_Resize` gives it up; it is not used again but as NULL.
        unsafe { pyo3::ffi::Py_DECREF(raw) };
        raw = std::ptr::null_mut();
        -1
    } else {
        // SAFETY: `raw` is the only reference to a bytes object (never shared
        // with Python code), as `_PyBytes_Resize` requires; on failure it
        // releases the object and sets `raw` to NULL.
        unsafe { _PyBytes_Resize(&mut raw, n as pyo3::ffi::Py_ssize_t) }
    };
    if rc != 0 || raw.is_null() {
        drop(PyErr::take(py));
        return None;
    }
    // SAFETY: `raw` is an owned reference to a bytes object.
    Some(unsafe { Bound::from_owned_ptr(py, raw).cast_into_unchecked() }.unbind())
}
