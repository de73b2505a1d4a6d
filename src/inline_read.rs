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

use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::pytype::{
    gc_dealloc, gc_heap_type_with_flags, object_member_offset, slot, slot_in_place, take_field,
    traverse,
};
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
/// to once the gate has passed; `gate_slot` says where the files of one type keep
/// their gate.
#[repr(C)]
struct InlineRead {
    ob_base: ffi::PyObject,
    vectorcall: Option<ffi::vectorcallfunc>,
    dict: *mut ffi::PyObject,
    full: *mut ffi::PyObject,
    queued: *mut ffi::PyObject,
    kind: u8,
    gate_slot: GateSlot,
}

/// Where the instances of one file type keep `_gate`. The files declare it in
/// `__slots__`, so it is an object pointer at a fixed offset of the instance: read
/// there, a read of the gate costs a few instructions, where `getattr` cost about
/// 150 (the type's lookup, the instance dict's), a tenth of a cached `pread`'s
/// instructions in user space. A slot's `member_descriptor` is a data descriptor,
/// which attribute lookup finds before the instance dict, and reading the slot is
/// what it does; that holds for an instance of exactly `of_type` while that type is
/// unchanged (CPython gives a type a new `tp_version_tag` whenever it or a base is
/// modified). Files of any other type, and a type whose `_gate` is not such a slot,
/// are read with `getattr`.
#[repr(C)]
struct GateSlot {
    /// The type looked at first (a strong reference), or NULL before the first call.
    of_type: *mut ffi::PyObject,
    /// `of_type`'s `tp_version_tag` when its `_gate` was looked up (0: none was
    /// assigned, and its files are read with `getattr`).
    version_tag: c_uint,
    /// Where its instances keep `_gate`; -1 where that is not a slot.
    offset: ffi::Py_ssize_t,
}

impl GateSlot {
    /// Where `file` keeps its gate, if its type is `of_type`, unchanged since the
    /// lookup, and keeps the gate in a slot.
    ///
    /// # Safety
    /// The GIL is held; `file` is a live object.
    unsafe fn place(&self, file: *mut ffi::PyObject) -> Option<*mut *mut ffi::PyObject> {
        if self.offset < 0 {
            return None;
        }
        // SAFETY: the GIL is held and `file` is live; `of_type` is NULL or the live
        // type on which `learn` found a writable object slot at `offset` while its
        // tag was `version_tag`.
        unsafe {
            slot_in_place(
                file,
                self.of_type as *mut ffi::PyTypeObject,
                self.version_tag,
                self.offset,
            )
        }
    }

    /// Looks up where instances of `file`'s type keep `_gate`, when no type was
    /// looked at yet or the one looked at is `file`'s and was modified since (the
    /// files of every other type, and of a type whose `_gate` is no slot, keep
    /// using `getattr`).
    fn learn(&mut self, file: &Bound<'_, PyAny>) {
        let py = file.py();
        let tp = file.get_type();
        // SAFETY: `tp` is a live type; only its size and version tag are read.
        let (basicsize, tag_now) = unsafe {
            (
                (*tp.as_type_ptr()).tp_basicsize,
                (*tp.as_type_ptr()).tp_version_tag,
            )
        };
        if !self.of_type.is_null() && (self.of_type != tp.as_ptr() || self.version_tag == tag_now) {
            // Another type, or this one unchanged: nothing new to learn.
            return;
        }
        let lookup = || -> PyResult<Option<ffi::Py_ssize_t>> {
            let member = py.import("types")?.getattr("MemberDescriptorType")?;
            let member = member.cast_into::<PyType>()?;
            // A type's attribute lookup walks its MRO; a member descriptor's
            // `__get__(None, type)` is the descriptor itself.
            let descr = tp.getattr(pyo3::intern!(py, "_gate"))?;
            Ok(object_member_offset(&descr, &member, basicsize))
        };
        let offset = lookup().unwrap_or_else(|e| {
            discard(py, e);
            None
        });
        // SAFETY: as above; read after the lookup, which assigns a tag to a type
        // that has none (unless the interpreter ran out of tags: then 0).
        let version_tag = unsafe { (*tp.as_type_ptr()).tp_version_tag };
        let previous = std::mem::replace(&mut self.of_type, tp.into_any().unbind().into_ptr());
        // SAFETY: `previous` is NULL or the reference this slot held.
        unsafe { ffi::Py_XDECREF(previous) };
        self.version_tag = version_tag;
        self.offset = offset.unwrap_or(-1);
    }
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

/// The file's gate: its `_gate` attribute (in place where `slot` knows the place,
/// else with `getattr`), if that is a `ReadGate` that passes.
fn passing_gate<'py>(
    slot: &mut GateSlot,
    file: &Bound<'py, PyAny>,
) -> Option<Bound<'py, ReadGate>> {
    let py = file.py();
    // SAFETY: the GIL is held and `file` is live.
    let gate = match unsafe { slot.place(file.as_ptr()) } {
        // SAFETY: the place holds NULL (unset: no attribute) or a reference the
        // file owns, from which a new one is made.
        Some(place) => unsafe { Bound::from_borrowed_ptr_or_opt(py, *place) }?,
        None => {
            slot.learn(file);
            file.getattr(pyo3::intern!(py, "_gate"))
                .map_err(|e| discard(py, e))
                .ok()?
        }
    };
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
            if let Some(gate) = passing_gate(&mut (*me).gate_slot, &file) {
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
            (*me).gate_slot = GateSlot {
                of_type: ptr::null_mut(),
                version_tag: 0,
                offset: -1,
            };
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
        traverse(
            slf,
            &[
                (*me).dict,
                (*me).full,
                (*me).queued,
                (*me).gate_slot.of_type,
            ],
            visit,
            arg,
        )
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
        ffi::Py_XDECREF(take_field(&mut (*me).gate_slot.of_type));
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
