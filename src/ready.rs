//! `Ready`: an awaitable whose result exists when it is made. `await` takes the
//! result at the first `send` (CPython's `am_send`), so an operation that finished
//! without waiting (a read served from the page cache) costs no coroutine frame, no
//! Future and no task wake-up.
//!
//! It has `send`, `throw` and `close` as well as `__await__`, so
//! `collections.abc.Coroutine` (and with it `asyncio.iscoroutine`) recognises it:
//! `asyncio.create_task(f.pread(n, off))` works whether the read was served at once
//! or not. The operation has already happened when the object exists, so one that
//! is never awaited has still happened (a coroutine would not have started).
//!
//! In a running loop it is also a done asyncio future (ready_future.rs adds those
//! methods to the type), so that `asyncio.gather` and the other helpers take it
//! with no task made for it.

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::fastpath;
use crate::pytype::{
    coroutine_type, gc_dealloc_keeping, stop_iteration, thrown, traverse, CoroutineType,
};

/// The type, made once at module import.
static READY_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The object layout. `value` is a strong reference, or NULL once taken.
#[repr(C)]
struct Ready {
    ob_base: ffi::PyObject,
    value: *mut ffi::PyObject,
}

pub(crate) const REUSED: &str = "cannot reuse an already awaited ringio result";

/// How many dead `Ready`s are kept for reuse.
const KEPT_MAX: usize = 32;

/// Dead `Ready`s, kept for the next ones as CPython keeps dead floats and tuples: a
/// cached read makes one and drops it at its `await`, and the allocation and the
/// free, GC bookkeeping included, were about a tenth of such a read's instructions
/// in user space. Each of the first `KEPT_LEN` entries is the memory of a `Ready`
/// that `ready_dealloc` untracked, cleared (`value` NULL) and whose type reference
/// it released. Only touched with the GIL held (the module keeps the GIL on
/// free-threaded builds, and PyO3 modules are not loaded in subinterpreters), so
/// relaxed atomics, plain loads and stores, are enough.
static KEPT: [AtomicPtr<ffi::PyObject>; KEPT_MAX] =
    [const { AtomicPtr::new(ptr::null_mut()) }; KEPT_MAX];
static KEPT_LEN: AtomicUsize = AtomicUsize::new(0);

/// A new `Ready` of type `tp` with `value` NULL, tracked by the GC: a kept one
/// made live again, else a new allocation. NULL with an exception set on failure.
///
/// # Safety
/// The GIL is held; `tp` is the Ready type.
unsafe fn alloc_ready(tp: *mut ffi::PyTypeObject) -> *mut ffi::PyObject {
    let len = KEPT_LEN.load(Ordering::Relaxed);
    if len == 0 {
        // SAFETY: PyType_GenericAlloc zero-fills the object (so `value` starts
        // NULL) and starts GC tracking.
        return unsafe { ffi::PyType_GenericAlloc(tp, 0) };
    }
    KEPT_LEN.store(len - 1, Ordering::Relaxed);
    let obj = KEPT[len - 1].load(Ordering::Relaxed);
    // SAFETY: `obj` is the memory of a dead Ready (see `KEPT`), now out of the
    // list, of the size of every Ready (the type is no base type: no subclass
    // makes larger ones): PyObject_Init gives it its type (a new reference to it)
    // and a first reference, and the GC tracks it again, as PyType_GenericAlloc
    // leaves a new one.
    unsafe {
        ffi::PyObject_Init(obj, tp);
        ffi::PyObject_GC_Track(obj as *mut c_void);
    }
    obj
}

/// A new `Ready` holding `value` (the reference moves into it).
pub fn ready<'py>(py: Python<'py>, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let tp = READY_TYPE
        .get(py)
        .ok_or_else(|| PyRuntimeError::new_err("ringio._core.Ready is not registered"))?;
    // SAFETY: `tp` is the Ready type; the result is a new reference with `value`
    // NULL, or NULL with an exception set.
    unsafe {
        let obj = alloc_ready(tp.as_ptr() as *mut ffi::PyTypeObject);
        let obj = Bound::from_owned_ptr_or_err(py, obj)?;
        (*(obj.as_ptr() as *mut Ready)).value = value.into_ptr();
        Ok(obj)
    }
}

/// `pread_ready(fd, n, offset)`: up to `n` bytes at `offset` as a `Ready` when the
/// page cache holds them all (or holds them up to the end of the file); None when
/// the read would wait for the device. Raises the kernel's OSError otherwise
/// (EOPNOTSUPP where the file cannot do RWF_NOWAIT). See `pread_nowait`.
#[pyfunction]
#[pyo3(signature = (fd, n, offset, memory=false))]
pub fn pread_ready<'py>(
    py: Python<'py>,
    fd: i32,
    n: usize,
    offset: i64,
    memory: bool,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match fastpath::read_cached(py, fd, n, offset, memory)? {
        Some(data) => Ok(Some(ready(py, data.into_any())?)),
        None => Ok(None),
    }
}

/// `preadinto_ready(fd, buffer, offset)`: the byte count of a read into `buffer` at
/// `offset` as a `Ready` when the page cache held all of it (or all up to the end
/// of the file); None when the read would wait for the device (the buffer may then
/// hold some of the bytes, which the caller's queued read overwrites). See
/// `preadinto_nowait`.
#[pyfunction]
#[pyo3(signature = (fd, buffer, offset, memory=false))]
pub fn preadinto_ready<'py>(
    py: Python<'py>,
    fd: i32,
    buffer: &Bound<'py, PyAny>,
    offset: i64,
    memory: bool,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match fastpath::preadinto_nowait(py, fd, buffer, offset, memory)? {
        Some(count) => Ok(Some(ready(py, count.into_pyobject(py)?.into_any())?)),
        None => Ok(None),
    }
}

/// Takes the value, or sets RuntimeError (awaited twice).
///
/// # Safety
/// The GIL must be held; `slf` is a live Ready.
unsafe fn take(py: Python<'_>, slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: caller's contract; the field's reference moves to the caller.
    unsafe {
        let r = slf as *mut Ready;
        let value = (*r).value;
        if value.is_null() {
            PyRuntimeError::new_err(REUSED).restore(py);
        }
        (*r).value = ptr::null_mut();
        value
    }
}

/// The value, borrowed, or NULL once taken (no exception set).
///
/// # Safety
/// The GIL must be held; `slf` is a live Ready.
pub(crate) unsafe fn peek(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: caller's contract.
    unsafe { (*(slf as *mut Ready)).value }
}

/// Sets StopIteration(value), taking the reference to `value`; always NULL.
///
/// # Safety
/// The GIL must be held; `value` is a strong reference or NULL with an exception set.
unsafe fn stop_with(value: *mut ffi::PyObject) -> *mut ffi::PyObject {
    if value.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `value` is a strong reference (caller's contract), moved here.
    unsafe { stop_iteration(value) }
}

/// `am_send`: complete from the start; `await` returns the value.
unsafe extern "C" fn ready_am_send(
    slf: *mut ffi::PyObject,
    _arg: *mut ffi::PyObject,
    result: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    // SAFETY: called by CPython with the GIL held; `result` is writable.
    unsafe {
        let value = take(Python::assume_attached(), slf);
        *result = value;
        if value.is_null() {
            ffi::PySendResult::PYGEN_ERROR
        } else {
            ffi::PySendResult::PYGEN_RETURN
        }
    }
}

/// `__next__` and `send(arg)` (callers that do not use `am_send`): StopIteration(value).
unsafe extern "C" fn ready_next(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held.
    unsafe {
        let py = Python::assume_attached();
        stop_with(take(py, slf))
    }
}

unsafe extern "C" fn ready_send(
    slf: *mut ffi::PyObject,
    _arg: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: as `ready_next`.
    unsafe { ready_next(slf) }
}

/// `throw(exc)`: as a coroutine that has not started, the exception comes straight
/// back (and the value is dropped: the awaiter will never take it).
unsafe extern "C" fn ready_throw(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and an args tuple.
    unsafe {
        let py = Python::assume_attached();
        ffi::Py_XDECREF(take_quiet(slf));
        thrown(&Borrowed::from_ptr(py, args)).restore(py);
        ptr::null_mut()
    }
}

/// `close()`: drops the value.
unsafe extern "C" fn ready_close(
    slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held on a live Ready.
    unsafe {
        ffi::Py_XDECREF(take_quiet(slf));
        ffi::Py_IncRef(ffi::Py_None());
        ffi::Py_None()
    }
}

/// The value (a strong reference) or NULL, with no exception set.
///
/// # Safety
/// The GIL must be held; `slf` is a live Ready.
unsafe fn take_quiet(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: caller's contract.
    unsafe {
        let r = slf as *mut Ready;
        let value = (*r).value;
        (*r).value = ptr::null_mut();
        value
    }
}

/// `Ready(value)`: for the Python layers' own results (a cached `readinto`'s count).
unsafe extern "C" fn ready_new(
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
        if ffi::PyTuple_Size(args) != 1 || nkw != 0 {
            PyTypeError::new_err("Ready(value) takes exactly one positional argument").restore(py);
            return ptr::null_mut();
        }
        let obj = alloc_ready(tp);
        if !obj.is_null() {
            let value = ffi::PyTuple_GetItem(args, 0);
            ffi::Py_INCREF(value);
            (*(obj as *mut Ready)).value = value;
        }
        obj
    }
}

unsafe extern "C" fn ready_traverse(
    slf: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: called by the GC on a live Ready; `value` is NULL or an object it holds.
    unsafe {
        let o = slf as *mut Ready;
        traverse(slf, &[(*o).value], visit, arg)
    }
}

unsafe extern "C" fn ready_clear(slf: *mut ffi::PyObject) -> c_int {
    // SAFETY: called with the GIL held on a live Ready.
    unsafe { ffi::Py_XDECREF(take_quiet(slf)) };
    0
}

/// `tp_dealloc`: as `gc_dealloc`, but the memory is kept for the next `Ready`
/// while `KEPT` has room.
unsafe extern "C" fn ready_dealloc(slf: *mut ffi::PyObject) {
    // SAFETY: called by CPython for the last reference, with the GIL held; what
    // `KEPT` takes is untracked, cleared, and its type reference is released after.
    unsafe {
        gc_dealloc_keeping(slf, ready_clear, |dead| {
            let len = KEPT_LEN.load(Ordering::Relaxed);
            if len == KEPT_MAX {
                return false;
            }
            KEPT[len].store(dead, Ordering::Relaxed);
            KEPT_LEN.store(len + 1, Ordering::Relaxed);
            true
        })
    }
}

/// Creates `Ready` and adds it and `pread_ready` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let tp = coroutine_type(
        py,
        CoroutineType {
            name: c"ringio._core.Ready",
            doc: c"Ready(value): an awaitable that returns value at once; see src/ready.rs.",
            basicsize: std::mem::size_of::<Ready>(),
            new: ready_new,
            dealloc: ready_dealloc,
            traverse: ready_traverse,
            clear: ready_clear,
            next: ready_next,
            am_send: ready_am_send,
            send: (ready_send, c"send(arg): StopIteration(value)."),
            throw: (ready_throw, c"throw(exc): raises exc."),
            close: (ready_close, c"close(): drops the value."),
        },
    )?;
    let _ = READY_TYPE.set(py, tp.clone().unbind());
    m.add("Ready", tp)?;
    m.add_function(wrap_pyfunction!(pread_ready, m)?)?;
    m.add_function(wrap_pyfunction!(preadinto_ready, m)?)?;
    Ok(())
}
