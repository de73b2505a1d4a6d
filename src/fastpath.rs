//! Reads served inline when the data is cached: no kernel queue, no future.

use std::os::fd::RawFd;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors;

/// Reads of at least this size release the GIL for the copy.
const RELEASE_GIL_FROM: usize = 64 * 1024;

/// `preadv2(fd, n, offset, RWF_NOWAIT)` straight into a new bytes object: one copy
/// from the page cache, no zero-fill, no second buffer. Returns None where the data
/// is not (all) cached (EAGAIN: the caller goes through the kernel queue instead); raises
/// the kernel's OSError otherwise (EOPNOTSUPP where the file cannot do RWF_NOWAIT).
#[pyfunction]
pub fn pread_nowait(
    py: Python<'_>,
    fd: RawFd,
    n: usize,
    offset: i64,
) -> PyResult<Option<Py<PyBytes>>> {
    if fd < 0 {
        return Err(errors::os_error(py, libc::EBADF, None, None));
    }
    if offset < 0 {
        return Err(errors::os_error(
            py,
            libc::EINVAL,
            Some(fd),
            Some("negative offset"),
        ));
    }
    let len = ffi::Py_ssize_t::try_from(n)
        .map_err(|_| pyo3::exceptions::PyOverflowError::new_err("read size too large"))?;
    // SAFETY: a NULL source asks CPython for an uninitialised bytes object of `len`
    // bytes; it is not visible to any Python code until we return it, so filling it
    // in place is allowed (the documented use of this call).
    let raw = unsafe { ffi::PyBytes_FromStringAndSize(std::ptr::null(), len) };
    // SAFETY: `raw` is a new reference or NULL with an exception set.
    let obj: Bound<'_, PyBytes> = unsafe { Bound::from_owned_ptr_or_err(py, raw)? }.cast_into()?;
    // SAFETY: the object is a bytes object of `len` bytes, owned by us alone.
    let data = unsafe { ffi::PyBytes_AsString(obj.as_ptr()) } as usize;
    // A read that comes back short is either at the end of the file or only partly
    // cached: reading on tells which (0 at EOF, EAGAIN where the cache stops). A
    // partly cached range is left to the caller's queue, so that a result is short
    // only at the end of the file, as a blocking pread's is.
    let read = move || -> (isize, i32) {
        let mut got = 0usize;
        loop {
            let iov = libc::iovec {
                iov_base: (data + got) as *mut libc::c_void,
                iov_len: n - got,
            };
            // SAFETY: `iov` describes the `n - got` writable bytes left in the
            // unshared bytes object, which outlives the call (it is held by `obj` in
            // the caller's frame).
            let r = unsafe { libc::preadv2(fd, &iov, 1, offset + got as i64, libc::RWF_NOWAIT) };
            if r < 0 {
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if got > 0 && errno == libc::EAGAIN {
                    return (-1, libc::EAGAIN);
                }
                return if got > 0 {
                    (got as isize, 0)
                } else {
                    (r, errno)
                };
            }
            got += r as usize;
            if r == 0 || got == n {
                return (got as isize, 0);
            }
        }
    };
    let (got, errno) = if n >= RELEASE_GIL_FROM {
        py.detach(read)
    } else {
        read()
    };
    if got < 0 {
        return if errno == libc::EAGAIN {
            Ok(None)
        } else {
            Err(errors::os_error(py, errno, Some(fd), None))
        };
    }
    let got = got as usize;
    if got == n {
        return Ok(Some(obj.unbind()));
    }
    // Short at the end of the file: an exact-size copy.
    // SAFETY: the first `got` bytes were written by the kernel.
    let filled = unsafe { std::slice::from_raw_parts(data as *const u8, got) };
    Ok(Some(PyBytes::new(py, filled).unbind()))
}
