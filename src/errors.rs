//! Turning kernel error codes into Python exceptions that name what failed.

use std::ffi::CStr;
use std::os::fd::RawFd;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

pyo3::create_exception!(
    _core,
    PartialSubmitError,
    PyOSError,
    "The kernel accepted only the first `submitted` ops of a batch; `op` is the first it refused, and errno says why."
);

/// The kernel's text for `errno`, thread-safe (strerror(3) is not).
pub fn strerror(errno: i32) -> String {
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: `buf` is writable for its full length and libc's `strerror_r` is the XSI
    // variant, which writes a NUL-terminated string of at most `buf.len()` bytes.
    let rc = unsafe { libc::strerror_r(errno, buf.as_mut_ptr(), buf.len()) };
    if rc != 0 {
        return format!("Unknown error {errno}");
    }
    // SAFETY: on success the buffer holds a NUL-terminated string.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// An `OSError` (the errno-specific subclass, as Python's `OSError()` picks it) whose
/// message names the fd, with the fd also stored as the `fd` attribute.
pub fn os_error(py: Python<'_>, errno: i32, fd: Option<RawFd>, detail: Option<&str>) -> PyErr {
    let mut msg = strerror(errno);
    let fd = fd.filter(|fd| *fd >= 0);
    if let Some(fd) = fd {
        msg.push_str(&format!(" (fd {fd})"));
    }
    if let Some(detail) = detail {
        msg.push_str(": ");
        msg.push_str(detail);
    }
    let err = PyOSError::new_err((errno, msg));
    if let Some(fd) = fd {
        // OSError instances have a __dict__, so this cannot fail short of memory exhaustion.
        let _ = err.value(py).setattr("fd", fd);
    }
    err
}

/// An `OSError` for a path operation, with `filename` (and `filename2`) set as the
/// os module sets them.
pub fn path_error(py: Python<'_>, errno: i32, path: &[u8], path2: Option<&[u8]>) -> PyErr {
    let decode = |b: &[u8]| -> Py<PyAny> {
        py.import("os")
            .and_then(|os| os.call_method1("fsdecode", (pyo3::types::PyBytes::new(py, b),)))
            .map(|s| s.unbind())
            .unwrap_or_else(|_| py.None())
    };
    let msg = strerror(errno);
    match path2 {
        Some(p2) => PyOSError::new_err((errno, msg, decode(path), py.None(), decode(p2))),
        None => PyOSError::new_err((errno, msg, decode(path))),
    }
}

pub fn last_os_error(py: Python<'_>, fd: Option<RawFd>) -> PyErr {
    let errno = std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    os_error(py, errno, fd, None)
}

pub fn io_error(py: Python<'_>, err: &std::io::Error, fd: Option<RawFd>) -> PyErr {
    os_error(py, err.raw_os_error().unwrap_or(libc::EIO), fd, None)
}
