//! What ringio's hand-made Python types share. `LineIter`, `Ready` and `Started` are
//! built from slots with `PyType_FromSpec`, not `#[pyclass]`, because they
//! need `am_send` (an `await` that completes without raising StopIteration): the
//! slot and method entries, the GC-tracked heap type, and its dealloc; and where an
//! instance keeps a `__slots__` entry (`object_member_offset`, `slot_in_place`), for
//! the native code that reads Python objects' slots in place.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

pub fn slot(id: c_int, pfunc: *mut c_void) -> ffi::PyType_Slot {
    ffi::PyType_Slot { slot: id, pfunc }
}

/// A method entry; METH_O, METH_NOARGS and METH_VARARGS all take a PyCFunction.
pub fn method(
    name: &'static CStr,
    f: ffi::PyCFunction,
    flags: c_int,
    doc: &'static CStr,
) -> ffi::PyMethodDef {
    ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunction: f },
        ml_flags: flags,
        ml_doc: doc.as_ptr(),
    }
}

/// Sets `def` on `class` as a `method_descriptor` named by its `ml_name`: a C-level
/// method added to a class made elsewhere (a class statement's, or a spec's).
pub fn add_method(class: &Bound<'_, PyType>, def: ffi::PyMethodDef) -> PyResult<()> {
    let py = class.py();
    // The entry lives as long as the class, which is never freed (held for the
    // process): leaked once, when the class is made.
    let def: &'static mut ffi::PyMethodDef = Box::leak(Box::new(def));
    // SAFETY: `ml_name` is a 'static C string (`method` takes a `&'static CStr`).
    let name = unsafe { CStr::from_ptr(def.ml_name) };
    // SAFETY: `class` is a live type object; `def` is a valid, 'static method entry
    // whose function has the calling convention its flags name. The result is a
    // new reference to a method_descriptor (it holds the class) or NULL with an
    // exception set.
    let descr = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(class.as_type_ptr(), def))?
    };
    let name = name
        .to_str()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    class.setattr(name, descr)
}

/// A GC-tracked heap type named `name` whose instances are `basicsize` bytes, from
/// `slots` (which end with the zero slot). CPython copies what it keeps of the
/// slots; what they point at (a method table, the doc) must be 'static.
pub fn gc_heap_type<'py>(
    py: Python<'py>,
    name: &'static CStr,
    basicsize: usize,
    slots: &mut [ffi::PyType_Slot],
) -> PyResult<Bound<'py, PyType>> {
    gc_heap_type_with_flags(py, name, basicsize, 0, slots)
}

/// `gc_heap_type` with `flags` beside the default ones (a method descriptor's
/// `Py_TPFLAGS_METHOD_DESCRIPTOR`, `Py_TPFLAGS_HAVE_VECTORCALL`).
pub fn gc_heap_type_with_flags<'py>(
    py: Python<'py>,
    name: &'static CStr,
    basicsize: usize,
    flags: std::ffi::c_ulong,
    slots: &mut [ffi::PyType_Slot],
) -> PyResult<Bound<'py, PyType>> {
    let mut spec = ffi::PyType_Spec {
        name: name.as_ptr(),
        basicsize: basicsize as c_int,
        itemsize: 0,
        flags: (ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_HAVE_GC | flags) as _,
        slots: slots.as_mut_ptr(),
    };
    // SAFETY: the spec and slots are valid for the call (the caller's contract for
    // what the slots point at).
    let tp = unsafe { ffi::PyType_FromSpec(&mut spec) };
    // SAFETY: a new reference to the type, or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, tp)? }
        .cast_into::<PyType>()
        .map_err(Into::into)
}

/// `tp_dealloc` of a `gc_heap_type` instance whose references `clear` drops.
///
/// # Safety
/// The object's last reference is gone and the GIL is held; `clear` is its type's
/// `tp_clear`.
pub unsafe fn gc_dealloc(
    slf: *mut ffi::PyObject,
    clear: unsafe extern "C" fn(*mut ffi::PyObject) -> c_int,
) {
    // SAFETY: the caller's contract; nothing keeps the memory.
    unsafe { gc_dealloc_keeping(slf, clear, |_| false) }
}

/// `gc_dealloc`, but the memory goes to `keep` once the object is untracked and
/// cleared, and is freed only where `keep` returns false (a type that reuses its
/// dead objects' memory).
///
/// # Safety
/// As `gc_dealloc`. Memory that `keep` takes is untracked and cleared, and its
/// type's reference is released after `keep` returns: whoever makes it live again
/// takes a new one (`PyObject_Init` does).
pub unsafe fn gc_dealloc_keeping(
    slf: *mut ffi::PyObject,
    clear: unsafe extern "C" fn(*mut ffi::PyObject) -> c_int,
    keep: impl FnOnce(*mut ffi::PyObject) -> bool,
) {
    // SAFETY: caller's contract. Untracked before clearing so the GC never sees a
    // half-cleared object; the heap type's reference is released last, whether the
    // memory is kept or freed.
    unsafe {
        ffi::PyObject_GC_UnTrack(slf as *mut c_void);
        clear(slf);
        let tp = ffi::Py_TYPE(slf);
        if !keep(slf) {
            ffi::PyObject_GC_Del(slf as *mut c_void);
        }
        ffi::Py_DECREF(tp as *mut ffi::PyObject);
    }
}

/// `__await__`, `__iter__` and `__aiter__` of an object that is its own iterator.
///
/// # Safety
/// Called by CPython with the GIL held on a live object.
pub unsafe extern "C" fn return_self(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: caller's contract.
    unsafe { ffi::Py_INCREF(slf) };
    slf
}

/// `tp_traverse` of a `gc_heap_type` instance whose references are `fields` (NULL
/// ones are skipped); a heap type's instance also visits its type.
///
/// # Safety
/// Called by the GC, with the GIL held, on a live object; `fields` are its fields.
pub unsafe fn traverse(
    slf: *mut ffi::PyObject,
    fields: &[*mut ffi::PyObject],
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: caller's contract: every non-NULL field is an object it holds.
    unsafe {
        for &field in fields {
            if !field.is_null() {
                let r = visit(field, arg);
                if r != 0 {
                    return r;
                }
            }
        }
        visit(ffi::Py_TYPE(slf) as *mut ffi::PyObject, arg)
    }
}

/// Takes a field's reference (NULL if none), leaving NULL in the field.
///
/// # Safety
/// The GIL must be held; `field` points into a live object.
pub unsafe fn take_field(field: *mut *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: caller's contract.
    unsafe { std::mem::replace(&mut *field, ptr::null_mut()) }
}

/// An `am_send` slot: one step of an awaitable, with the yielded or returned value
/// in the out-parameter.
pub type AmSend = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *mut ffi::PyObject,
    *mut *mut ffi::PyObject,
) -> ffi::PySendResult;

/// What a hand-made awaitable that asyncio takes for a coroutine (it has `send`,
/// `throw` and `close` beside `__await__`: `Ready`, `Started`) is made
/// of: its slots and its three methods with their docs.
pub struct CoroutineType {
    pub name: &'static CStr,
    pub doc: &'static CStr,
    pub basicsize: usize,
    pub new: ffi::newfunc,
    pub dealloc: ffi::destructor,
    pub traverse: ffi::traverseproc,
    pub clear: ffi::inquiry,
    pub next: ffi::iternextfunc,
    pub am_send: AmSend,
    pub send: (ffi::PyCFunction, &'static CStr),
    pub throw: (ffi::PyCFunction, &'static CStr),
    pub close: (ffi::PyCFunction, &'static CStr),
}

/// The GC-tracked heap type of `spec`: its own iterator and awaitable
/// (`__iter__` and `__await__` return it).
pub fn coroutine_type<'py>(py: Python<'py>, spec: CoroutineType) -> PyResult<Bound<'py, PyType>> {
    // CPython keeps pointers into the method table: it must live as long as the
    // type, so it is leaked once (one per type, made at module import).
    let methods: &'static mut [ffi::PyMethodDef] = Box::leak(Box::new([
        method(c"send", spec.send.0, ffi::METH_O, spec.send.1),
        method(c"throw", spec.throw.0, ffi::METH_VARARGS, spec.throw.1),
        method(c"close", spec.close.0, ffi::METH_NOARGS, spec.close.1),
        ffi::PyMethodDef::zeroed(),
    ]));
    let mut slots = [
        slot(ffi::Py_tp_new, spec.new as *mut c_void),
        slot(ffi::Py_tp_dealloc, spec.dealloc as *mut c_void),
        slot(ffi::Py_tp_traverse, spec.traverse as *mut c_void),
        slot(ffi::Py_tp_clear, spec.clear as *mut c_void),
        slot(ffi::Py_tp_iter, return_self as *mut c_void),
        slot(ffi::Py_tp_iternext, spec.next as *mut c_void),
        slot(ffi::Py_am_await, return_self as *mut c_void),
        slot(ffi::Py_am_send, spec.am_send as *mut c_void),
        slot(ffi::Py_tp_methods, methods.as_mut_ptr() as *mut c_void),
        slot(ffi::Py_tp_doc, spec.doc.as_ptr() as *mut c_void),
        slot(0, ptr::null_mut()),
    ];
    gc_heap_type(py, spec.name, spec.basicsize, &mut slots)
}

/// Sets StopIteration(value), taking the reference to `value`; returns NULL, for
/// the slot to return. Raw C calls only: the hand-made types' slots are called by
/// CPython, not through PyO3's entry points, and a `Py<T>` dropped there waits in
/// PyO3's deferred-decref pool until some PyO3 entry point runs. CPython 3.12+
/// takes an `await`'s result through `tp_iternext` (this StopIteration), so a loop
/// of awaits of native results that calls no PyO3 function would keep every
/// result alive.
///
/// # Safety
/// The GIL must be held; `value` is a strong reference.
pub unsafe fn stop_iteration(value: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: caller's contract; PyTuple_Pack takes its own reference to `value`,
    // and PyErr_SetObject to the tuple, so both are released here. A 1-tuple as
    // the value makes StopIteration(v), whose .value is v even when v is a tuple.
    unsafe {
        if raise_spare_stop_iteration(value) {
            return ptr::null_mut();
        }
        let args = ffi::PyTuple_Pack(1, value);
        ffi::Py_DECREF(value);
        if !args.is_null() {
            ffi::PyErr_SetObject(ffi::PyExc_StopIteration, args);
            ffi::Py_DECREF(args);
        }
    }
    ptr::null_mut()
}

/// The StopIteration `stop_iteration` raises again, or NULL: one strong
/// reference, held here. Only touched with the GIL held (the module keeps the GIL
/// on free-threaded builds, and PyO3 modules are not loaded in subinterpreters).
static SPARE_STOP: AtomicPtr<ffi::PyObject> = AtomicPtr::new(ptr::null_mut());

/// The largest `bytes` or `str` a spare StopIteration carries: it keeps the last
/// value alive until the next one replaces it.
const SPARE_VALUE_MAX: ffi::Py_ssize_t = 64 * 1024;

/// Raises StopIteration(value) with the spare exception object, when nothing else
/// holds it and it is as made (no traceback, context, cause, notes or attributes);
/// a new spare otherwise. False, with `value` untouched, for values other than a
/// `bytes` or `str` of at most `SPARE_VALUE_MAX` or an `int` (values whose
/// lifetime nobody can observe, so the spare may keep the last one).
///
/// Why: CPython 3.12+ takes every `await` of a native awaitable and every item of
/// `async for` through this exception; making and freeing one per line cost a third
/// of `async for line in f` on CPython 3.14 (2026-11-28: 0.56x → 0.75x `for line in
/// f` as text, 0.43x → 0.56x as bytes). The interpreter only reads `value` and
/// drops its reference, so the object comes back with one reference, ours. A caller
/// that catches the exception and keeps it holds a reference, and that object is
/// never changed again; one that caught it gave it a traceback, and it is not
/// reused.
///
/// # Safety
/// The GIL must be held; `value` is a strong reference, moved in when this returns
/// true.
unsafe fn raise_spare_stop_iteration(value: *mut ffi::PyObject) -> bool {
    // SAFETY: the GIL is held (caller's contract), so nothing else reads or writes
    // SPARE_STOP or the spare's fields meanwhile; `value` is a live object.
    unsafe {
        let plain = (ffi::PyBytes_CheckExact(value) != 0
            && ffi::PyBytes_Size(value) <= SPARE_VALUE_MAX)
            || (ffi::PyUnicode_CheckExact(value) != 0
                && ffi::PyUnicode_GetLength(value) <= SPARE_VALUE_MAX)
            || ffi::PyLong_CheckExact(value) != 0;
        if !plain {
            return false;
        }
        let args = ffi::PyTuple_New(1);
        if args.is_null() {
            ffi::PyErr_Clear();
            return false;
        }
        let mut exc = SPARE_STOP.load(Ordering::Relaxed);
        if exc.is_null() || !spare_is_as_made(exc) {
            let made = ffi::PyObject_CallNoArgs(ffi::PyExc_StopIteration);
            if made.is_null() {
                ffi::PyErr_Clear();
                ffi::Py_DECREF(args);
                return false;
            }
            ffi::Py_XDECREF(SPARE_STOP.swap(made, Ordering::Relaxed));
            exc = made;
        }
        // args = (value,) and value = value, as StopIteration(value) sets them.
        ffi::Py_INCREF(value);
        ffi::PyTuple_SET_ITEM(args, 0, value);
        let stop = exc as *mut ffi::PyStopIterationObject;
        ffi::Py_XDECREF(std::mem::replace(&mut (*stop).args, args));
        ffi::Py_XDECREF(std::mem::replace(&mut (*stop).value, value));
        // Raised while an exception is handled, it has that one as its context,
        // as PyErr_SetObject chains it (such a spare is then not raised again).
        let handled = ffi::PyErr_GetHandledException();
        if handled.is_null() || handled == ffi::Py_None() {
            ffi::Py_XDECREF(handled);
        } else {
            ffi::PyException_SetContext(exc, handled);
        }
        // PyErr_Restore takes a reference to the type and one to the exception.
        ffi::Py_INCREF(exc);
        ffi::Py_INCREF(ffi::PyExc_StopIteration);
        ffi::PyErr_Restore(ffi::PyExc_StopIteration, exc, ptr::null_mut());
        true
    }
}

/// Whether the spare StopIteration may be raised again: only SPARE_STOP holds it,
/// and nothing was added to it since it was made.
///
/// # Safety
/// The GIL must be held; `exc` is a live StopIteration.
unsafe fn spare_is_as_made(exc: *mut ffi::PyObject) -> bool {
    // SAFETY: caller's contract; the fields are read only.
    unsafe {
        let stop = exc as *mut ffi::PyStopIterationObject;
        ffi::Py_REFCNT(exc) == 1
            && (*stop).dict.is_null()
            && (*stop).notes.is_null()
            && (*stop).traceback.is_null()
            && (*stop).context.is_null()
            && (*stop).cause.is_null()
            // C's `char suppress_context`, which pyo3-ffi declares as a Rust
            // `char`: its first byte only, read as a byte (the rest is padding).
            && *(ptr::addr_of!((*stop).suppress_context) as *const u8) == 0
    }
}

/// `send(arg)` and `__next__` as generators have them, from an `am_send`: the
/// yielded value, or StopIteration(result) / the error (NULL).
///
/// # Safety
/// The GIL must be held; `slf` is a live object of the type whose `am_send` this
/// is, and `arg` a valid object.
pub unsafe fn send_or_stop(
    slf: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
    am_send: AmSend,
) -> *mut ffi::PyObject {
    // SAFETY: caller's contract.
    unsafe {
        let mut result = ptr::null_mut();
        match am_send(slf, arg, &mut result) {
            ffi::PySendResult::PYGEN_NEXT => result,
            ffi::PySendResult::PYGEN_RETURN => stop_iteration(result),
            _ => ptr::null_mut(),
        }
    }
}

/// `throw(*args)` of an awaitable that drives the iterator in `field`: thrown into
/// it (what it yields is returned; once it returns or raises, the field is
/// cleared and that is raised). With no iterator, raised as a coroutine that has
/// not started (or has finished) raises it.
///
/// # Safety
/// The GIL must be held; `field` points into a live object and holds NULL or a
/// strong reference; `args` is a tuple.
pub unsafe fn throw_into(
    field: *mut *mut ffi::PyObject,
    args: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: caller's contract.
    unsafe {
        let py = Python::assume_attached();
        let args = Borrowed::from_ptr(py, args);
        let inner = *field;
        if inner.is_null() {
            thrown(&args).restore(py);
            return ptr::null_mut();
        }
        let outcome = Borrowed::from_ptr(py, inner)
            .getattr(pyo3::intern!(py, "throw"))
            .and_then(|throw| throw.call1(args.cast::<PyTuple>()?.to_owned()));
        match outcome {
            Ok(yielded) => yielded.into_ptr(),
            Err(e) => {
                // Returned (StopIteration) or raised: the iterator is finished.
                ffi::Py_XDECREF(take_field(field));
                e.restore(py);
                ptr::null_mut()
            }
        }
    }
}

/// `close()` of an awaitable that drives the iterator in `field`: clears the field
/// and closes the iterator; None, or NULL with its error.
///
/// # Safety
/// The GIL must be held; `field` points into a live object and holds NULL or a
/// strong reference.
pub unsafe fn close_inner(field: *mut *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: caller's contract.
    unsafe {
        let py = Python::assume_attached();
        let inner = take_field(field);
        if !inner.is_null() {
            let it = Bound::from_owned_ptr(py, inner);
            if let Err(e) = it.call_method0(pyo3::intern!(py, "close")) {
                e.restore(py);
                return ptr::null_mut();
            }
        }
        ffi::Py_IncRef(ffi::Py_None());
        ffi::Py_None()
    }
}

/// The exception that `throw(*args)` raises in a coroutine that has not started
/// (or has finished): `throw(exc)`, `throw(type)`, `throw(type, value[, tb])`.
pub(crate) fn thrown(args: &Bound<'_, PyAny>) -> PyErr {
    let exc = match args.get_item(0) {
        Ok(exc) => exc,
        Err(e) => return PyTypeError::new_err(format!("throw expected at least 1 argument: {e}")),
    };
    if exc.is_instance_of::<pyo3::exceptions::PyBaseException>() {
        return PyErr::from_value(exc);
    }
    let Ok(tp) = exc.cast::<PyType>() else {
        return PyTypeError::new_err(
            "exceptions must be classes or instances deriving from BaseException",
        );
    };
    let made = match args.get_item(1).ok().filter(|a| !a.is_none()) {
        Some(a) if a.is_instance(tp).unwrap_or(false) => Ok(a),
        Some(a) => tp.call1((a,)),
        None => tp.call0(),
    };
    match made {
        Ok(v) => PyErr::from_value(v),
        Err(e) => e,
    }
}

/// Where a `__slots__` entry keeps its object in an instance, if `descr` is one:
/// a `member_descriptor` (exactly `member`, `types.MemberDescriptorType`) whose
/// `PyMemberDef` is a writable `Py_T_OBJECT_EX` member that lies within the first
/// `basicsize` bytes of an instance (the size of the class whose instances are
/// read there).
pub fn object_member_offset(
    descr: &Bound<'_, PyAny>,
    member: &Bound<'_, PyType>,
    basicsize: ffi::Py_ssize_t,
) -> Option<ffi::Py_ssize_t> {
    if !descr.get_type().is(member) {
        return None;
    }
    // SAFETY: `descr` is a `member_descriptor` (its exact type checked above),
    // whose C layout is PyMemberDescrObject on CPython 3.11+; `d_member` points at
    // the PyMemberDef the class keeps for as long as it lives.
    let (type_code, flags, offset) = unsafe {
        let def = (*(descr.as_ptr() as *mut ffi::PyMemberDescrObject)).d_member;
        ((*def).type_code, (*def).flags, (*def).offset)
    };
    let fits = offset >= std::mem::size_of::<ffi::PyObject>() as ffi::Py_ssize_t
        && offset + std::mem::size_of::<*mut ffi::PyObject>() as ffi::Py_ssize_t <= basicsize;
    (type_code == ffi::Py_T_OBJECT_EX && flags & ffi::Py_READONLY == 0 && fits).then_some(offset)
}

/// Where `obj` keeps the `__slots__` entry at `offset` (which `object_member_offset`
/// found on `of_type`), if `obj`'s type is exactly `of_type` and that type's
/// `tp_version_tag` is still `version_tag`: CPython gives a type a new tag whenever
/// it or one of its bases is modified, so the slot's descriptor is then still the
/// one that was looked up. A tag of 0 (none was assigned) reads nothing in place.
///
/// # Safety
/// The GIL is held; `obj` is a live object; `of_type` is NULL or a live type on
/// which `object_member_offset` gave `offset` while its tag was `version_tag`.
pub unsafe fn slot_in_place(
    obj: *mut ffi::PyObject,
    of_type: *mut ffi::PyTypeObject,
    version_tag: std::ffi::c_uint,
    offset: ffi::Py_ssize_t,
) -> Option<*mut *mut ffi::PyObject> {
    // SAFETY: the caller's contract; `of_type` is read only once it is `obj`'s type
    // (so not NULL), and the place is within the instance's basic size.
    unsafe {
        let unchanged = ffi::Py_TYPE(obj) == of_type
            && version_tag != 0
            && (*of_type).tp_version_tag == version_tag;
        unchanged.then(|| (obj as *mut u8).offset(offset) as *mut *mut ffi::PyObject)
    }
}
