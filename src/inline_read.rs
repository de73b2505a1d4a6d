//! File methods whose cached case is one native call: `pread` and `preadinto` of
//! `ringio.open`'s binary files. A read the page cache can serve costs the call,
//! the `preadv2(RWF_NOWAIT)` and a `Ready`; no Python frame of the file's runs.
//!
//! Whether a file may be read inline right now depends on its state (closed, an op
//! cancelled while still in the kernel, a write buffer not yet written out, the
//! engine closed, a file that refuses RWF_NOWAIT). That state lives in Python; the
//! files mirror it into `ReadGate`s, which this code reads without a lookup. A gate
//! that is shut sends the call to the file's Python method, which checks the state
//! itself and opens the gate again when all is clear. So a gate must be shut
//! whenever the state stops being clear (the files do so where it changes); a gate
//! shut when it need not be only costs the Python method's frame.

use std::ffi::{c_int, c_void};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::pytype::{gc_dealloc, gc_heap_type_with_flags, slot, take_field, traverse};
use crate::ready;

/// Whether one file (or engine) lets reads be served inline, and what such a read
/// needs: the fd and whether it is a memory filesystem's file. A gate passes when
/// it and every gate above it (`parent`: a buffered file's raw file, a raw file's
/// engine) are open.
#[pyclass(module = "ringio._core", frozen)]
pub struct ReadGate {
    fd: RawFd,
    memory: bool,
    parent: Option<Py<ReadGate>>,
    open: AtomicBool,
}

impl ReadGate {
    /// This gate and every gate above it are open.
    fn passes(&self, py: Python<'_>) -> bool {
        let mut gate = self;
        loop {
            if !gate.open.load(Ordering::Relaxed) {
                return false;
            }
            match &gate.parent {
                Some(parent) => gate = parent.bind(py).get(),
                None => return true,
            }
        }
    }
}

#[pymethods]
impl ReadGate {
    #[new]
    #[pyo3(signature = (fd=-1, memory=false, parent=None, *, open=false))]
    fn new(fd: RawFd, memory: bool, parent: Option<Py<ReadGate>>, open: bool) -> Self {
        Self {
            fd,
            memory,
            parent,
            open: AtomicBool::new(open),
        }
    }

    /// This gate's own state (see `passes` for the whole chain's).
    #[getter]
    fn get_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    #[setter]
    fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::Relaxed);
    }

    #[getter]
    fn fd(&self) -> RawFd {
        self.fd
    }

    #[getter]
    fn memory(&self) -> bool {
        self.memory
    }

    #[getter]
    fn parent(&self, py: Python<'_>) -> Option<Py<ReadGate>> {
        self.parent.as_ref().map(|p| p.clone_ref(py))
    }

    /// Whether this gate and every gate above it are open: a read through it is
    /// served inline.
    #[getter(passes)]
    fn passes_py(&self, py: Python<'_>) -> bool {
        self.passes(py)
    }
}

/// Which read an `InlineRead` makes: `(self, n, offset)` returning bytes, or
/// `(self, buffer, offset)` returning the count.
const PREAD: u8 = 0;
const PREADINTO: u8 = 1;

/// The descriptor's layout. `full` is the file's Python method (every check, every
/// case), `queued` the coroutine function a read the page cache cannot serve goes
/// to once the gate has passed.
#[repr(C)]
struct InlineRead {
    ob_base: ffi::PyObject,
    vectorcall: Option<ffi::vectorcallfunc>,
    dict: *mut ffi::PyObject,
    full: *mut ffi::PyObject,
    queued: *mut ffi::PyObject,
    kind: u8,
}

/// Drops an error at once. These slots are called by CPython, not through PyO3's
/// entry points, where a dropped `PyErr` would leave its exception in PyO3's
/// deferred-decref pool (see `pytype::stop_iteration`): it goes to the interpreter,
/// which releases it.
fn discard(py: Python<'_>, err: PyErr) {
    err.restore(py);
    // SAFETY: the GIL is held; clears the error just set.
    unsafe { ffi::PyErr_Clear() };
}

/// The file's gate: its `_gate` attribute, if that is a `ReadGate` that passes.
fn passing_gate<'py>(file: &Bound<'py, PyAny>) -> Option<Bound<'py, ReadGate>> {
    let py = file.py();
    let gate = file
        .getattr(pyo3::intern!(py, "_gate"))
        .map_err(|e| discard(py, e))
        .ok()?;
    let gate = gate.cast_into::<ReadGate>().ok()?;
    gate.get().passes(py).then_some(gate)
}

/// An exact int's value as a non-negative i64; None for anything else (the
/// Python method then reports it as it always has).
fn plain_index(obj: &Bound<'_, PyAny>) -> Option<i64> {
    // SAFETY: `obj` is a live object; PyLong_CheckExact reads its type only.
    if unsafe { ffi::PyLong_CheckExact(obj.as_ptr()) } == 0 {
        return None;
    }
    // SAFETY: an exact int; on overflow it returns -1 with an exception set, which
    // is cleared here (the Python method raises its own).
    let v = unsafe { ffi::PyLong_AsLongLong(obj.as_ptr()) };
    if v < 0 {
        // SAFETY: the GIL is held; clears the OverflowError, if any.
        unsafe { ffi::PyErr_Clear() };
        return None;
    }
    Some(v)
}

/// What became of a read tried inline.
enum Inline<'py> {
    /// Served from the page cache: a `Ready`.
    Served(Bound<'py, PyAny>),
    /// Not (all) cached, or refused by the kernel: the queued path reads it.
    Queue,
    /// Arguments the Python method reports on: it takes the call.
    Python,
}

/// Tries the read inline (`pread_ready`, `preadinto_ready`). A read refused (by
/// the kernel: EOPNOTSUPP on a file that cannot do RWF_NOWAIT, an fd closed behind
/// our back; or a buffer that is not writable) shuts the file's gate, so that its
/// Python method takes the next read and learns why; this one goes to the queued
/// path, as the Python method sends it.
fn read_inline<'py>(
    kind: u8,
    gate: &Bound<'py, ReadGate>,
    target: &Bound<'py, PyAny>,
    offset: i64,
) -> Inline<'py> {
    let py = gate.py();
    let g = gate.get();
    let served = if kind == PREAD {
        let Some(n) = plain_index(target) else {
            return Inline::Python;
        };
        ready::pread_ready(py, g.fd, n as usize, offset, g.memory)
    } else {
        ready::preadinto_ready(py, g.fd, target, offset, g.memory)
    };
    match served {
        Ok(Some(ready)) => Inline::Served(ready),
        Ok(None) => Inline::Queue,
        Err(e) => {
            discard(py, e);
            g.open.store(false, Ordering::Relaxed);
            Inline::Queue
        }
    }
}

/// `method(file, target, offset)`: served inline where the gate passes and the
/// page cache holds the data; `queued(...)` where the gate passes but the data is
/// not cached; `full(...)` for anything else (a shut gate, other arguments).
unsafe extern "C" fn inline_read_vectorcall(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held; `callable` is an InlineRead;
    // `args` holds `nargs` borrowed references (and the keyword values after
    // them when `kwnames` is not NULL).
    unsafe {
        let py = Python::assume_attached();
        let me = callable as *mut InlineRead;
        let (full, queued) = ((*me).full, (*me).queued);
        if full.is_null() || queued.is_null() {
            PyRuntimeError::new_err("InlineRead was cleared").restore(py);
            return ptr::null_mut();
        }
        let nargs = ffi::PyVectorcall_NARGS(nargsf);
        if kwnames.is_null() && nargs == 3 {
            let file = Borrowed::from_ptr(py, *args);
            if let Some(gate) = passing_gate(&file) {
                let target = Borrowed::from_ptr(py, *args.add(1));
                let offset = Borrowed::from_ptr(py, *args.add(2));
                if let Some(offset) = plain_index(&offset) {
                    match read_inline((*me).kind, &gate, &target, offset) {
                        Inline::Served(ready) => return ready.into_ptr(),
                        Inline::Queue => {
                            return ffi::PyObject_Vectorcall(queued, args, nargsf, kwnames)
                        }
                        Inline::Python => {}
                    }
                }
            }
        }
        ffi::PyObject_Vectorcall(full, args, nargsf, kwnames)
    }
}

/// `tp_call`: calls made with a tuple go through the vectorcall.
unsafe extern "C" fn inline_read_call(
    callable: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held; the type has a vectorcall slot.
    unsafe { ffi::PyVectorcall_Call(callable, args, kwargs) }
}

unsafe extern "C" {
    /// A bound method of `func` for `self_` (CPython's `types.MethodType`); not in
    /// pyo3-ffi.
    fn PyMethod_New(func: *mut ffi::PyObject, self_: *mut ffi::PyObject) -> *mut ffi::PyObject;
}

/// `__get__`: the descriptor itself from the class, a bound method from an
/// instance (as a function's).
unsafe extern "C" fn inline_read_get(
    slf: *mut ffi::PyObject,
    obj: *mut ffi::PyObject,
    _tp: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held on a live InlineRead.
    unsafe {
        if obj.is_null() || obj == ffi::Py_None() {
            ffi::Py_INCREF(slf);
            return slf;
        }
        PyMethod_New(slf, obj)
    }
}

/// `InlineRead(full, queued, kind)`; kind is "pread" or "preadinto".
unsafe extern "C" fn inline_read_new(
    tp: *mut ffi::PyTypeObject,
    args: *mut ffi::PyObject,
    kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and a valid args tuple.
    unsafe {
        let py = Python::assume_attached();
        let made = (|| -> PyResult<*mut ffi::PyObject> {
            if !kwargs.is_null() && ffi::PyDict_Size(kwargs) != 0 {
                return Err(PyTypeError::new_err(
                    "InlineRead takes no keyword arguments",
                ));
            }
            let args = Borrowed::from_ptr(py, args);
            let (full, queued, kind): (Bound<'_, PyAny>, Bound<'_, PyAny>, String) =
                args.extract()?;
            let kind = match kind.as_str() {
                "pread" => PREAD,
                "preadinto" => PREADINTO,
                _ => {
                    return Err(PyValueError::new_err(
                        "InlineRead's kind is 'pread' or 'preadinto'",
                    ))
                }
            };
            if !full.is_callable() || !queued.is_callable() {
                return Err(PyTypeError::new_err(
                    "InlineRead(full, queued, kind) takes two callables",
                ));
            }
            let obj = ffi::PyType_GenericAlloc(tp, 0);
            if obj.is_null() {
                return Err(PyErr::fetch(py));
            }
            let me = obj as *mut InlineRead;
            (*me).vectorcall = Some(inline_read_vectorcall);
            (*me).full = full.clone().into_ptr();
            (*me).queued = queued.into_ptr();
            (*me).kind = kind;
            let obj = Bound::from_owned_ptr(py, obj);
            // The Python method's name, doc and module, for help() and inspect.
            for name in ["__name__", "__qualname__", "__doc__", "__module__"] {
                match full.getattr(name) {
                    Ok(value) => obj.setattr(name, value)?,
                    Err(e) => discard(py, e),
                }
            }
            obj.setattr("__wrapped__", &full)?;
            Ok(obj.into_ptr())
        })();
        made.unwrap_or_else(|e| {
            e.restore(py);
            ptr::null_mut()
        })
    }
}

unsafe extern "C" fn inline_read_traverse(
    slf: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: called by the GC on a live InlineRead; its fields are NULL or held.
    unsafe {
        let me = slf as *mut InlineRead;
        traverse(slf, &[(*me).dict, (*me).full, (*me).queued], visit, arg)
    }
}

unsafe extern "C" fn inline_read_clear(slf: *mut ffi::PyObject) -> c_int {
    // SAFETY: called with the GIL held on a live InlineRead; each field's
    // reference is taken once.
    unsafe {
        let me = slf as *mut InlineRead;
        ffi::Py_XDECREF(take_field(&mut (*me).dict));
        ffi::Py_XDECREF(take_field(&mut (*me).full));
        ffi::Py_XDECREF(take_field(&mut (*me).queued));
    }
    0
}

unsafe extern "C" fn inline_read_dealloc(slf: *mut ffi::PyObject) {
    // SAFETY: called by CPython for the last reference, with the GIL held.
    unsafe { gc_dealloc(slf, inline_read_clear) }
}

/// The `InlineRead` type: a method descriptor (`Py_TPFLAGS_METHOD_DESCRIPTOR`), so
/// `file.pread(n, offset)` calls it with the file first and no bound method made,
/// as for a function; with an instance dict for the Python method's name and doc
/// (and `inspect.markcoroutinefunction`'s mark).
fn register_type(py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
    let members: &'static mut [ffi::PyMemberDef] = Box::leak(Box::new([
        ffi::PyMemberDef {
            name: c"__vectorcalloffset__".as_ptr(),
            type_code: ffi::Py_T_PYSSIZET,
            offset: std::mem::offset_of!(InlineRead, vectorcall) as ffi::Py_ssize_t,
            flags: ffi::Py_READONLY,
            doc: ptr::null(),
        },
        ffi::PyMemberDef {
            name: c"__dictoffset__".as_ptr(),
            type_code: ffi::Py_T_PYSSIZET,
            offset: std::mem::offset_of!(InlineRead, dict) as ffi::Py_ssize_t,
            flags: ffi::Py_READONLY,
            doc: ptr::null(),
        },
        ffi::PyMemberDef::default(),
    ]));
    let mut slots = [
        slot(ffi::Py_tp_new, inline_read_new as *mut c_void),
        slot(ffi::Py_tp_dealloc, inline_read_dealloc as *mut c_void),
        slot(ffi::Py_tp_traverse, inline_read_traverse as *mut c_void),
        slot(ffi::Py_tp_clear, inline_read_clear as *mut c_void),
        slot(ffi::Py_tp_call, inline_read_call as *mut c_void),
        slot(ffi::Py_tp_descr_get, inline_read_get as *mut c_void),
        slot(ffi::Py_tp_members, members.as_mut_ptr() as *mut c_void),
        slot(
            ffi::Py_tp_doc,
            c"InlineRead(full, queued, kind): a file method whose cached reads are \
              one native call; see src/inline_read.rs."
                .as_ptr() as *mut c_void,
        ),
        slot(0, ptr::null_mut()),
    ];
    gc_heap_type_with_flags(
        py,
        c"ringio._core.InlineRead",
        std::mem::size_of::<InlineRead>(),
        ffi::Py_TPFLAGS_METHOD_DESCRIPTOR | ffi::Py_TPFLAGS_HAVE_VECTORCALL,
        &mut slots,
    )
}

/// Adds `ReadGate` and `InlineRead` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("InlineRead", register_type(py)?)?;
    m.add_class::<ReadGate>()?;
    Ok(())
}
