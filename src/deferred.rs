//! `Deferred`: the awaitable a file's `read` and `readinto` return. At its first
//! `send` (when the awaiting task runs it, as a coroutine would start) it calls the
//! file's `_read_now(arg)` (or `_readinto_now`): a result other than None is the
//! result, with no coroutine made; None means the read must wait, and the file's
//! `_read_later(arg)` coroutine is made and driven from then on.
//!
//! Nothing happens before that first `send`: a task cancelled before it ran throws
//! into an awaitable that has not started, which raises and reads nothing, as a
//! coroutine would. (A `Ready` made at the call would already hold bytes taken from
//! the file's position, and they would be lost with it.)

use std::ffi::{c_int, c_void};
use std::ptr;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::pytype::{
    close_inner, coroutine_type, gc_dealloc, send_or_stop, take_field, throw_into, traverse,
    CoroutineType,
};

/// What the awaitable reads: `READ` calls `_read_now`/`_read_later`, `READINTO`
/// `_readinto_now`/`_readinto_later`.
pub const READ: u8 = 0;
pub const READINTO: u8 = 1;

const REUSED: &str = "cannot reuse an already awaited ringio read";

/// The object layout. Pointer fields are strong references or NULL.
#[repr(C)]
struct Deferred {
    ob_base: ffi::PyObject,
    /// The file and the argument, until the first `send` takes them.
    file: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
    /// The file's coroutine, while the read waits in it.
    inner: *mut ffi::PyObject,
    kind: u8,
    started: bool,
}

/// Drops the file and argument (the read will not start).
///
/// # Safety
/// The GIL must be held; `d` is a live Deferred.
unsafe fn forget_start(d: *mut Deferred) {
    // SAFETY: caller's contract; each reference is released once, after the field
    // was cleared.
    unsafe {
        (*d).started = true;
        ffi::Py_XDECREF(take_field(&mut (*d).file));
        ffi::Py_XDECREF(take_field(&mut (*d).arg));
    }
}

/// The first `send`: the file's `_*_now(arg)`. Ok(Some(result)) when it read at
/// once; Ok(None) once `inner` holds the file's coroutine.
///
/// # Safety
/// The GIL must be held; `d` is a live Deferred that has not started.
unsafe fn start(py: Python<'_>, d: *mut Deferred) -> PyResult<Option<Bound<'_, PyAny>>> {
    // SAFETY: caller's contract; `file` and `arg` are strong references set by
    // `deferred_new`, moved out here (so a re-entrant send sees `started`).
    unsafe {
        (*d).started = true;
        let (file, arg) = (take_field(&mut (*d).file), take_field(&mut (*d).arg));
        if file.is_null() || arg.is_null() {
            // Cleared by the garbage collector (tp_clear) before it started.
            ffi::Py_XDECREF(file);
            ffi::Py_XDECREF(arg);
            return Err(PyRuntimeError::new_err(REUSED));
        }
        let file = Bound::from_owned_ptr(py, file);
        let arg = Bound::from_owned_ptr(py, arg);
        let (now, later) = if (*d).kind == READINTO {
            (
                pyo3::intern!(py, "_readinto_now"),
                pyo3::intern!(py, "_readinto_later"),
            )
        } else {
            (
                pyo3::intern!(py, "_read_now"),
                pyo3::intern!(py, "_read_later"),
            )
        };
        // PyObject_CallMethodObjArgs calls the method without making a bound
        // method object (what `call_method1` does under the limited API).
        let call = |name: &Bound<'_, pyo3::types::PyString>| {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyObject_CallMethodObjArgs(
                    file.as_ptr(),
                    name.as_ptr(),
                    arg.as_ptr(),
                    ptr::null_mut::<ffi::PyObject>(),
                ),
            )
        };
        let got = call(now)?;
        if !got.is_none() {
            return Ok(Some(got));
        }
        let coro = call(later)?;
        (*d).inner = coro.into_ptr();
        Ok(None)
    }
}

/// `am_send`: starts the read at the first call, then drives the file's coroutine.
unsafe extern "C" fn deferred_am_send(
    slf: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
    result: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    // SAFETY: called by CPython with the GIL held; `slf` is a Deferred, `arg` a
    // valid object and `result` writable.
    unsafe {
        let py = Python::assume_attached();
        let d = slf as *mut Deferred;
        if !(*d).started {
            match start(py, d) {
                Ok(Some(value)) => {
                    *result = value.into_ptr();
                    return ffi::PySendResult::PYGEN_RETURN;
                }
                Ok(None) => {}
                Err(e) => {
                    e.restore(py);
                    *result = ptr::null_mut();
                    return ffi::PySendResult::PYGEN_ERROR;
                }
            }
        }
        let inner = (*d).inner;
        if inner.is_null() {
            PyRuntimeError::new_err(REUSED).restore(py);
            *result = ptr::null_mut();
            return ffi::PySendResult::PYGEN_ERROR;
        }
        let status = ffi::PyIter_Send(inner, arg, result);
        if status != ffi::PySendResult::PYGEN_NEXT {
            ffi::Py_XDECREF(take_field(&mut (*d).inner)); // finished: returned or raised
        }
        status
    }
}

unsafe extern "C" fn deferred_next(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held; None is immortal or held.
    unsafe { send_or_stop(slf, ffi::Py_None(), deferred_am_send) }
}

unsafe extern "C" fn deferred_send(
    slf: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and a valid argument.
    unsafe { send_or_stop(slf, arg, deferred_am_send) }
}

/// `throw(...)`: before the start, raises it and reads nothing; while waiting,
/// throws it into the file's coroutine.
unsafe extern "C" fn deferred_throw(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and an args tuple.
    unsafe {
        let d = slf as *mut Deferred;
        forget_start(d);
        throw_into(&mut (*d).inner, args)
    }
}

/// `close()`: closes the file's coroutine, or forgets a read not started.
unsafe extern "C" fn deferred_close(
    slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held on a live Deferred.
    unsafe {
        let d = slf as *mut Deferred;
        forget_start(d);
        close_inner(&mut (*d).inner)
    }
}

/// `Deferred(file, arg, kind)`.
unsafe extern "C" fn deferred_new(
    tp: *mut ffi::PyTypeObject,
    args: *mut ffi::PyObject,
    kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and a valid args tuple.
    unsafe {
        let py = Python::assume_attached();
        let nkw = if kwargs.is_null() {
            0
        } else {
            ffi::PyDict_Size(kwargs)
        };
        if ffi::PyTuple_Size(args) != 3 || nkw != 0 {
            PyTypeError::new_err(
                "Deferred(file, arg, kind) takes exactly three positional arguments",
            )
            .restore(py);
            return ptr::null_mut();
        }
        let kind = ffi::PyLong_AsLong(ffi::PyTuple_GetItem(args, 2));
        if kind == -1 && !ffi::PyErr_Occurred().is_null() {
            return ptr::null_mut();
        }
        if kind != READ as std::ffi::c_long && kind != READINTO as std::ffi::c_long {
            PyTypeError::new_err("Deferred: kind is DEFERRED_READ or DEFERRED_READINTO")
                .restore(py);
            return ptr::null_mut();
        }
        // PyType_GenericAlloc zero-fills (NULL fields, not started) and starts GC
        // tracking.
        let obj = ffi::PyType_GenericAlloc(tp, 0);
        if obj.is_null() {
            return obj;
        }
        let d = obj as *mut Deferred;
        for (field, i) in [(&mut (*d).file, 0), (&mut (*d).arg, 1)] {
            let v = ffi::PyTuple_GetItem(args, i);
            ffi::Py_INCREF(v);
            *field = v;
        }
        (*d).kind = kind as u8;
        obj
    }
}

unsafe extern "C" fn deferred_traverse(
    slf: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: called by the GC on a live Deferred; its fields are NULL or objects it holds.
    unsafe {
        let o = slf as *mut Deferred;
        traverse(slf, &[(*o).file, (*o).arg, (*o).inner], visit, arg)
    }
}

unsafe extern "C" fn deferred_clear(slf: *mut ffi::PyObject) -> c_int {
    // SAFETY: called with the GIL held on a live Deferred; each field is cleared
    // before its reference is released.
    unsafe {
        let d = slf as *mut Deferred;
        ffi::Py_XDECREF(take_field(&mut (*d).file));
        ffi::Py_XDECREF(take_field(&mut (*d).arg));
        ffi::Py_XDECREF(take_field(&mut (*d).inner));
    }
    0
}

/// A coroutine still held is released unclosed, as a dropped coroutine is (its own
/// finaliser closes it).
unsafe extern "C" fn deferred_dealloc(slf: *mut ffi::PyObject) {
    // SAFETY: called by CPython for the last reference, with the GIL held.
    unsafe { gc_dealloc(slf, deferred_clear) }
}

/// Creates `Deferred` and its kind constants in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let tp = coroutine_type(
        m.py(),
        CoroutineType {
            name: c"ringio._core.Deferred",
            doc: c"Deferred(file, arg, kind): a file read that starts at its first send; see src/deferred.rs.",
            basicsize: std::mem::size_of::<Deferred>(),
            new: deferred_new,
            dealloc: deferred_dealloc,
            traverse: deferred_traverse,
            clear: deferred_clear,
            next: deferred_next,
            am_send: deferred_am_send,
            send: (deferred_send, c"send(arg): as a coroutine's."),
            throw: (deferred_throw, c"throw(exc): as a coroutine's."),
            close: (deferred_close, c"close(): as a coroutine's."),
        },
    )?;
    m.add("Deferred", tp)?;
    m.add("DEFERRED_READ", READ)?;
    m.add("DEFERRED_READINTO", READINTO)?;
    Ok(())
}
