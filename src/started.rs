//! `Started`: the awaitable of an operation that was started when the method was
//! called (an O_DIRECT `preadinto` into the caller's aligned buffer, or a `pread`
//! into an aligned bounce buffer): it awaits the op's future as `return await
//! future` in a coroutine would, with no coroutine frame. Each `send` goes to the
//! future's own iterator (`future.__await__()`), so a task sees the future itself,
//! as from a coroutine awaiting it. With a bounce buffer, the result is the bytes
//! the read brought from `skip` on, at most `n` of them, instead of its count.
//!
//! It has `send`, `throw` and `close` as well as `__await__`, so
//! `collections.abc.Coroutine` (and with it `asyncio.iscoroutine`) recognises it:
//! `asyncio.create_task(f.preadinto(buf, off))` works. The op runs whether or not it
//! is awaited; `close()` and `throw()` leave it and its future alone, as they leave
//! alone a future that a closed coroutine was awaiting.

use std::ffi::{c_int, c_void};
use std::ptr;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyType};

use crate::buffers::AlignedBuffer;
use crate::pytype::{
    close_inner, coroutine_type, gc_dealloc, send_or_stop, take_field, throw_into, traverse,
    CoroutineType,
};

/// The type, made once at module import.
static STARTED_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The object layout. `inner` is a strong reference to the future's iterator, or
/// NULL once the await has finished; `bounce` a strong reference to the
/// `AlignedBuffer` the op reads into, or NULL when the count is the result.
#[repr(C)]
struct Started {
    ob_base: ffi::PyObject,
    inner: *mut ffi::PyObject,
    bounce: *mut ffi::PyObject,
    skip: usize,
    n: usize,
}

const REUSED: &str = "cannot reuse an already awaited ringio operation";

/// A bounce buffer's part that is the result: `n` bytes at most from `skip` on.
pub struct Bounce<'py> {
    pub buffer: Bound<'py, AlignedBuffer>,
    pub skip: usize,
    pub n: usize,
}

/// A new `Started` awaiting `future` (an asyncio future), whose result is the
/// future's, or the bytes of `bounce` that the read (whose count the future
/// gives) brought.
pub fn started<'py>(
    py: Python<'py>,
    future: &Bound<'py, PyAny>,
    bounce: Option<Bounce<'py>>,
) -> PyResult<Bound<'py, PyAny>> {
    let tp = STARTED_TYPE
        .get(py)
        .ok_or_else(|| PyRuntimeError::new_err("ringio._core.Started is not registered"))?;
    // SAFETY: `tp` is the Started heap type.
    unsafe { new_started(py, tp.as_ptr() as *mut ffi::PyTypeObject, future, bounce) }
}

/// # Safety
/// The GIL is held (`py`); `tp` is the Started type or a subtype.
unsafe fn new_started<'py>(
    py: Python<'py>,
    tp: *mut ffi::PyTypeObject,
    future: &Bound<'py, PyAny>,
    bounce: Option<Bounce<'py>>,
) -> PyResult<Bound<'py, PyAny>> {
    let inner = future.call_method0(pyo3::intern!(py, "__await__"))?;
    // SAFETY: caller's contract; PyType_GenericAlloc zero-fills the object (so the
    // fields start NULL and 0) and starts GC tracking, and returns a new reference
    // or NULL with an exception set. The references move into the fields.
    unsafe {
        let obj = Bound::from_owned_ptr_or_err(py, ffi::PyType_GenericAlloc(tp, 0))?;
        let s = obj.as_ptr() as *mut Started;
        (*s).inner = inner.into_ptr();
        if let Some(b) = bounce {
            (*s).bounce = b.buffer.into_any().into_ptr();
            (*s).skip = b.skip;
            (*s).n = b.n;
        }
        Ok(obj)
    }
}

/// The bytes a read of `got` bytes into the bounce buffer brought, from `skip` on
/// and at most `n` (none when it ended before `skip`).
///
/// # Safety
/// The GIL is held; `s` is a live Started with a bounce buffer, whose read has
/// completed (nothing writes into the buffer any more).
unsafe fn bounced<'py>(
    py: Python<'py>,
    s: *mut Started,
    got: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let got: usize = got.extract()?;
    // SAFETY: caller's contract: `bounce` is an AlignedBuffer that Started holds.
    unsafe {
        let any = Borrowed::from_ptr(py, (*s).bounce);
        let buffer = any.cast::<AlignedBuffer>()?;
        let all = buffer.get().as_slice();
        let skip = (*s).skip.min(all.len());
        let end = got.min(all.len()).min(skip + (*s).n).max(skip);
        Ok(PyBytes::new(py, &all[skip..end]).into_any())
    }
}

/// `am_send`: one step of the future's iterator (it yields the future while that
/// is pending, and returns its result, or raises its exception, once it is done).
unsafe extern "C" fn started_am_send(
    slf: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
    result: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    // SAFETY: called by CPython with the GIL held; `slf` is a Started, `arg` a valid
    // object and `result` writable.
    unsafe {
        let s = slf as *mut Started;
        let inner = (*s).inner;
        if inner.is_null() {
            PyRuntimeError::new_err(REUSED).restore(Python::assume_attached());
            *result = ptr::null_mut();
            return ffi::PySendResult::PYGEN_ERROR;
        }
        let status = ffi::PyIter_Send(inner, arg, result);
        if status == ffi::PySendResult::PYGEN_NEXT {
            return status;
        }
        ffi::Py_XDECREF(take_field(&mut (*s).inner)); // finished: returned or raised
        let bounce = (*s).bounce;
        if status == ffi::PySendResult::PYGEN_RETURN && !bounce.is_null() {
            let py = Python::assume_attached();
            let got = Bound::from_owned_ptr(py, *result);
            let made = bounced(py, s, &got);
            ffi::Py_XDECREF(take_field(&mut (*s).bounce));
            match made {
                Ok(data) => *result = data.into_ptr(),
                Err(e) => {
                    e.restore(py);
                    *result = ptr::null_mut();
                    return ffi::PySendResult::PYGEN_ERROR;
                }
            }
        }
        status
    }
}

unsafe extern "C" fn started_next(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held; None is immortal or held.
    unsafe { send_or_stop(slf, ffi::Py_None(), started_am_send) }
}

unsafe extern "C" fn started_send(
    slf: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and a valid argument.
    unsafe { send_or_stop(slf, arg, started_am_send) }
}

/// `throw(...)`: into the future's iterator, which raises it (the future stays
/// as it is); once finished, raised as is.
unsafe extern "C" fn started_throw(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and an args tuple.
    unsafe { throw_into(&mut (*(slf as *mut Started)).inner, args) }
}

/// `close()`: lets go of the future's iterator.
unsafe extern "C" fn started_close(
    slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held on a live Started.
    unsafe { close_inner(&mut (*(slf as *mut Started)).inner) }
}

/// `Started(future)`, `Started(future, bounce, skip, n)`: for the Python layers'
/// own started ops (the kernel AIO engine's).
unsafe extern "C" fn started_tp_new(
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
        let nargs = ffi::PyTuple_Size(args);
        if !(nargs == 1 || nargs == 4) || nkw != 0 {
            PyTypeError::new_err(
                "Started(future) or Started(future, bounce, skip, n): positional arguments only",
            )
            .restore(py);
            return ptr::null_mut();
        }
        let args = Borrowed::from_ptr(py, args);
        let bounce = if nargs == 4 {
            let parts = (|| -> PyResult<Bounce<'_>> {
                Ok(Bounce {
                    buffer: args.get_item(1)?.cast_into::<AlignedBuffer>()?,
                    skip: args.get_item(2)?.extract()?,
                    n: args.get_item(3)?.extract()?,
                })
            })();
            match parts {
                Ok(b) => Some(b),
                Err(e) => {
                    e.restore(py);
                    return ptr::null_mut();
                }
            }
        } else {
            None
        };
        let future = Borrowed::from_ptr(py, ffi::PyTuple_GetItem(args.as_ptr(), 0));
        match new_started(py, tp, &future, bounce) {
            Ok(obj) => obj.into_ptr(),
            Err(e) => {
                e.restore(py);
                ptr::null_mut()
            }
        }
    }
}

unsafe extern "C" fn started_traverse(
    slf: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: called by the GC on a live Started; its fields are NULL or objects it holds.
    unsafe {
        let s = slf as *mut Started;
        traverse(slf, &[(*s).inner, (*s).bounce], visit, arg)
    }
}

unsafe extern "C" fn started_clear(slf: *mut ffi::PyObject) -> c_int {
    // SAFETY: called with the GIL held on a live Started; each field is cleared
    // before its reference is released.
    unsafe {
        let s = slf as *mut Started;
        ffi::Py_XDECREF(take_field(&mut (*s).inner));
        ffi::Py_XDECREF(take_field(&mut (*s).bounce));
    }
    0
}

unsafe extern "C" fn started_dealloc(slf: *mut ffi::PyObject) {
    // SAFETY: called by CPython for the last reference, with the GIL held.
    unsafe { gc_dealloc(slf, started_clear) }
}

/// Creates `Started` in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let tp = coroutine_type(
        py,
        CoroutineType {
            name: c"ringio._core.Started",
            doc: c"Started(future): the awaitable of an operation started at the call; see src/started.rs.",
            basicsize: std::mem::size_of::<Started>(),
            new: started_tp_new,
            dealloc: started_dealloc,
            traverse: started_traverse,
            clear: started_clear,
            next: started_next,
            am_send: started_am_send,
            send: (started_send, c"send(arg): as a coroutine's."),
            throw: (started_throw, c"throw(exc): as a coroutine's."),
            close: (started_close, c"close(): as a coroutine's; the operation goes on."),
        },
    )?;
    let _ = STARTED_TYPE.set(py, tp.clone().unbind());
    m.add("Started", tp)?;
    Ok(())
}
