//! `Ready` as a done asyncio future: the methods asyncio's helpers call on a
//! future (`done`, `result`, `add_done_callback`, ...), so that `gather`, `wait`,
//! `wait_for`, `shield`, `as_completed` and `ensure_future` take a read the page
//! cache served as it is. Without them each such read became a task of its own
//! (`ensure_future` wraps a coroutine in one): the task, its first step, and only
//! then the callback `gather` was waiting for.
//!
//! asyncio recognises a future by duck typing (`asyncio.isfuture`: the class has
//! `_asyncio_future_blocking` and the object's is not None) and asks it for its
//! loop (`get_loop()`). A `Ready` holds no loop: the loop is the one running in the
//! calling thread. Outside a running loop `_asyncio_future_blocking` is None, so
//! that `loop.run_until_complete(ready)` takes it as the coroutine it also is
//! (asyncio would otherwise ask the future for its loop, and there is none).
//!
//! A done future's callbacks are scheduled with the loop's `call_soon` when they
//! are added, and it cannot be cancelled: so here. `result()` leaves the value in
//! place; `await` takes it (see ready.rs), after which `result()` raises.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::pytype::{add_method, method};

/// `asyncio.events._get_running_loop` (the C one of `_asyncio` where there is one).
static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The loop running in this thread, or None.
fn running_loop(py: Python<'_>) -> PyResult<Option<Bound<'_, PyAny>>> {
    let get = GET_RUNNING_LOOP.get_or_try_init(py, || -> PyResult<_> {
        Ok(py
            .import("asyncio.events")?
            .getattr("_get_running_loop")?
            .unbind())
    })?;
    let event_loop = get.bind(py).call0()?;
    Ok((!event_loop.is_none()).then_some(event_loop))
}

/// The running loop, or RuntimeError as `asyncio.get_running_loop()` raises it.
fn required_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    running_loop(py)?.ok_or_else(|| PyRuntimeError::new_err("no running event loop"))
}

/// Hands a method's result to CPython: the object, or NULL with the error set.
fn to_c(py: Python<'_>, result: PyResult<Bound<'_, PyAny>>) -> *mut ffi::PyObject {
    match result {
        Ok(obj) => obj.into_ptr(),
        Err(e) => {
            e.restore(py);
            ptr::null_mut()
        }
    }
}

/// Keyword arguments as a dict that holds only `allowed` (or none).
fn only_keyword<'py>(
    kwargs: *mut ffi::PyObject,
    py: Python<'py>,
    method: &str,
    allowed: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if kwargs.is_null() {
        return Ok(None);
    }
    // SAFETY: CPython passes a METH_KEYWORDS method's keywords as a dict (a
    // borrowed reference), or NULL (handled above).
    let kwargs = unsafe { Borrowed::from_ptr(py, kwargs) }
        .cast::<PyDict>()?
        .to_owned();
    for key in kwargs.keys() {
        if key.extract::<&str>().ok() != Some(allowed) {
            return Err(PyTypeError::new_err(format!(
                "{method}() got an unexpected keyword argument {}; it takes only {allowed}",
                key.repr()?
            )));
        }
    }
    kwargs.get_item(allowed)
}

/// Positional arguments, checked to be at most `max` (and at least `min`).
fn positional<'py>(
    args: *mut ffi::PyObject,
    py: Python<'py>,
    method: &str,
    min: usize,
    max: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    // SAFETY: CPython passes a METH_VARARGS method's arguments as a tuple (a
    // borrowed reference).
    let args = unsafe { Borrowed::from_ptr(py, args) }
        .cast::<PyTuple>()?
        .to_owned();
    if args.len() < min || args.len() > max {
        return Err(PyTypeError::new_err(format!(
            "{method}() takes {} positional argument(s) ({} given)",
            if min == max {
                min.to_string()
            } else {
                format!("{min} to {max}")
            },
            args.len()
        )));
    }
    Ok(args)
}

/// `done()`: always True.
unsafe extern "C" fn done(_slf: *mut ffi::PyObject, _: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a METH_NOARGS method with the GIL held.
    unsafe { ffi::Py_NewRef(ffi::Py_True()) }
}

/// `cancelled()`: always False.
unsafe extern "C" fn cancelled(
    _slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: as `done`.
    unsafe { ffi::Py_NewRef(ffi::Py_False()) }
}

/// `exception()`: None (an error is raised at the call that made no `Ready`).
unsafe extern "C" fn exception(
    _slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: as `done`.
    unsafe { ffi::Py_NewRef(ffi::Py_None()) }
}

/// `result()`: the value, left in place; RuntimeError once `await` has taken it.
unsafe extern "C" fn result(slf: *mut ffi::PyObject, _: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: as `done`; `slf` is a live Ready (the method descriptor checked its
    // type).
    unsafe {
        let value = crate::ready::peek(slf);
        if value.is_null() {
            PyRuntimeError::new_err(crate::ready::REUSED).restore(Python::assume_attached());
            return ptr::null_mut();
        }
        ffi::Py_NewRef(value)
    }
}

/// `remove_done_callback(fn)`: 0, as for a done future (its callbacks were
/// scheduled when they were added).
unsafe extern "C" fn remove_done_callback(
    _slf: *mut ffi::PyObject,
    _callback: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a METH_O method with the GIL held.
    unsafe { ffi::PyLong_FromLong(0) }
}

/// `cancel(msg=None)`: False, as for a done future.
unsafe extern "C" fn cancel(
    _slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a METH_VARARGS | METH_KEYWORDS method with the GIL held.
    unsafe {
        let py = Python::assume_attached();
        let checked = positional(args, py, "cancel", 0, 1)
            .and_then(|_| only_keyword(kwargs, py, "cancel", "msg"));
        to_c(
            py,
            checked.map(|_| pyo3::types::PyBool::new(py, false).to_owned().into_any()),
        )
    }
}

/// `get_loop()`: the running loop.
unsafe extern "C" fn get_loop(
    _slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: as `done`.
    unsafe {
        let py = Python::assume_attached();
        to_c(py, required_loop(py))
    }
}

/// `add_done_callback(fn, *, context=None)`: `loop.call_soon(fn, self,
/// context=context)` on the running loop.
unsafe extern "C" fn add_done_callback(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: as `cancel`; `slf` is a live Ready, borrowed for the call.
    unsafe {
        let py = Python::assume_attached();
        let me = Borrowed::from_ptr(py, slf);
        let scheduled = (|| -> PyResult<Bound<'_, PyAny>> {
            let args = positional(args, py, "add_done_callback", 1, 1)?;
            let context = only_keyword(kwargs, py, "add_done_callback", "context")?;
            let callback = args.get_item(0)?;
            let event_loop = required_loop(py)?;
            let call_soon = intern!(py, "call_soon");
            match context {
                Some(context) if !context.is_none() => {
                    let kw = PyDict::new(py);
                    kw.set_item(intern!(py, "context"), context)?;
                    event_loop.call_method(call_soon, (callback, me), Some(&kw))?;
                }
                _ => {
                    event_loop.call_method1(call_soon, (callback, me))?;
                }
            }
            Ok(py.None().into_bound(py))
        })();
        to_c(py, scheduled)
    }
}

/// `_asyncio_future_blocking`: False in a running loop (a future, never
/// blocking: it is done), None outside one (not a future: see above).
unsafe extern "C" fn get_blocking(_slf: *mut ffi::PyObject, _: *mut c_void) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a getter with the GIL held.
    unsafe {
        let py = Python::assume_attached();
        to_c(
            py,
            running_loop(py).map(|l| match l {
                Some(_) => pyo3::types::PyBool::new(py, false).to_owned().into_any(),
                None => py.None().into_bound(py),
            }),
        )
    }
}

/// Setting `_asyncio_future_blocking` (asyncio's task step writes False to a
/// future a coroutine yielded) is accepted and changes nothing; deleting it is an
/// AttributeError.
unsafe extern "C" fn set_blocking(
    _slf: *mut ffi::PyObject,
    value: *mut ffi::PyObject,
    _: *mut c_void,
) -> c_int {
    if value.is_null() {
        // SAFETY: CPython calls a setter with the GIL held.
        let py = unsafe { Python::assume_attached() };
        PyAttributeError::new_err("cannot delete _asyncio_future_blocking").restore(py);
        return -1;
    }
    0
}

/// Adds the future methods and `_asyncio_future_blocking` to the module's `Ready`
/// type (`ready::register` made it).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let tp = m.getattr("Ready")?.cast_into::<PyType>()?;
    let noargs = |name: &'static CStr, f: ffi::PyCFunction, doc: &'static CStr| {
        method(name, f, ffi::METH_NOARGS, doc)
    };
    let with_keywords =
        |name: &'static CStr, f: ffi::PyCFunctionWithKeywords, doc: &'static CStr| {
            ffi::PyMethodDef {
                ml_name: name.as_ptr(),
                ml_meth: ffi::PyMethodDefPointer {
                    PyCFunctionWithKeywords: f,
                },
                ml_flags: ffi::METH_VARARGS | ffi::METH_KEYWORDS,
                ml_doc: doc.as_ptr(),
            }
        };
    let defs = [
        noargs(
            c"done",
            done,
            c"done($self, /)\n--\n\nTrue: the result exists.",
        ),
        noargs(
            c"cancelled",
            cancelled,
            c"cancelled($self, /)\n--\n\nFalse.",
        ),
        noargs(c"exception", exception, c"exception($self, /)\n--\n\nNone."),
        noargs(
            c"result",
            result,
            c"result($self, /)\n--\n\nThe result (RuntimeError once awaited).",
        ),
        noargs(
            c"get_loop",
            get_loop,
            c"get_loop($self, /)\n--\n\nThe loop running in this thread.",
        ),
        method(
            c"remove_done_callback",
            remove_done_callback,
            ffi::METH_O,
            c"remove_done_callback($self, fn, /)\n--\n\n0: a done future's callbacks \
              are already scheduled.",
        ),
        with_keywords(
            c"cancel",
            cancel,
            c"cancel($self, /, msg=None)\n--\n\nFalse: a done future is not cancelled.",
        ),
        with_keywords(
            c"add_done_callback",
            add_done_callback,
            c"add_done_callback($self, fn, /, *, context=None)\n--\n\nSchedules \
              fn(self) with the running loop's call_soon, as a done future does.",
        ),
    ];
    for def in defs {
        add_method(&tp, def)?;
    }
    let getset: &'static mut ffi::PyGetSetDef = Box::leak(Box::new(ffi::PyGetSetDef {
        name: c"_asyncio_future_blocking".as_ptr(),
        get: Some(get_blocking),
        set: Some(set_blocking),
        doc: c"False in a running loop (a done future), None outside one.".as_ptr(),
        closure: ptr::null_mut(),
    }));
    // SAFETY: `tp` is a live type object; `getset` is a valid, 'static getset
    // entry. The result is a new reference to a getset_descriptor or NULL with an
    // exception set.
    let descr = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewGetSet(tp.as_type_ptr(), getset))?
    };
    tp.setattr("_asyncio_future_blocking", descr)?;
    Ok(())
}
