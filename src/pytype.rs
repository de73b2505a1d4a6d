//! What ringio's hand-made Python types share. `LineIter`, `Ready` and `Deferred`
//! are built from slots with `PyType_FromSpec`, not `#[pyclass]`, because they
//! need `am_send` (an `await` that completes without raising StopIteration): the
//! slot and method entries, the GC-tracked heap type, and its dealloc.

use std::ffi::{c_int, c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

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

/// A GC-tracked heap type named `name` whose instances are `basicsize` bytes, from
/// `slots` (which end with the zero slot). CPython copies what it keeps of the
/// slots; what they point at (a method table, the doc) must be 'static.
pub fn gc_heap_type<'py>(
    py: Python<'py>,
    name: &'static CStr,
    basicsize: usize,
    slots: &mut [ffi::PyType_Slot],
) -> PyResult<Bound<'py, PyType>> {
    let mut spec = ffi::PyType_Spec {
        name: name.as_ptr(),
        basicsize: basicsize as c_int,
        itemsize: 0,
        flags: (ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_HAVE_GC) as _,
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
    // SAFETY: caller's contract. Untracked before clearing so the GC never sees a
    // half-cleared object; the heap type's reference is released last.
    unsafe {
        ffi::PyObject_GC_UnTrack(slf as *mut c_void);
        clear(slf);
        let tp = ffi::Py_TYPE(slf);
        ffi::PyObject_GC_Del(slf as *mut c_void);
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
