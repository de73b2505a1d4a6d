//! New `bytes` objects that a receive writes into before any Python code sees them.
//!
//! The loop core receives large messages straight into the `bytes` that
//! `protocol.data_received` gets: a new, uninitialised object of the largest size
//! one receive may bring, shrunk in place to what arrived (no copy out of a
//! provided buffer: at 100 KiB per message that copy cost about as much as the
//! kernel's own).

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

/// A new `bytes` of `n` bytes whose content is not yet written: for a receive into
/// it before any Python code sees it. None: no memory (the error is cleared).
pub fn uninit_bytes(py: Python<'_>, n: usize) -> Option<Py<PyBytes>> {
    if crate::loopcore::receive_alloc_fails() {
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
pub fn shrink(py: Python<'_>, obj: Py<PyBytes>, n: usize) -> Option<Py<PyBytes>> {
    let mut raw = obj.into_ptr();
    let rc = if crate::loopcore::receive_alloc_fails() {
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
