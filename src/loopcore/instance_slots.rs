//! Attributes of Python objects that the core reads at every native call and
//! iteration (the loop's `_debug`, `_closed`, `_ready`, ...; the selector's and the
//! loop ring's queues), read where the instance keeps them.
//!
//! `ringio.EventLoop`, `RingSelector` and `LoopRing` declare them in `__slots__`:
//! each is then an object pointer at a fixed offset of the instance, where an entry
//! of its `__dict__` costs a dict lookup per read (about 110 instructions; a
//! `call_soon` made three, an aiohttp request about 50). A slot's
//! `member_descriptor` is a data descriptor, so attribute lookup finds it before
//! the instance's dict; reading the slot is what the descriptor does. That holds
//! for an instance of exactly the type the descriptors were looked up on, for as
//! long as that type is unchanged: CPython gives a type a new `tp_version_tag` (0
//! until the next lookup) whenever it or one of its bases is modified. Anything
//! else (another type, a modified one, an attribute that is not such a slot) is
//! read with `getattr`.

use std::ffi::c_uint;

use pyo3::exceptions::PyAttributeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};
use pyo3::{PyTraverseError, PyVisit};

use crate::pytype::{object_member_offset, slot_in_place};

/// asyncio's `BaseEventLoop` attributes that the core reads, by index.
pub(super) const LOOP_ATTRS: [&str; 8] = [
    "_debug",
    "_closed",
    "_ready",
    "_scheduled",
    "_stopping",
    "_thread_id",
    "_task_factory",
    "_timer_cancelled_count",
];
pub(super) const DEBUG: usize = 0;
pub(super) const CLOSED: usize = 1;
pub(super) const READY: usize = 2;
pub(super) const SCHEDULED: usize = 3;
pub(super) const STOPPING: usize = 4;
pub(super) const THREAD_ID: usize = 5;
pub(super) const TASK_FACTORY: usize = 6;
pub(super) const TIMER_CANCELLED_COUNT: usize = 7;

/// Where instances of one type keep `N` named attributes.
pub(super) struct InstanceSlots<const N: usize> {
    of_type: Py<PyType>,
    /// `of_type`'s `tp_version_tag` when the descriptors were looked up (0: none
    /// was assigned, and every read takes `getattr`).
    version_tag: c_uint,
    names: [Py<PyString>; N],
    offsets: [Option<ffi::Py_ssize_t>; N],
}

impl<const N: usize> InstanceSlots<N> {
    /// The places of `names` in instances of `of_type`.
    pub(super) fn of(of_type: &Bound<'_, PyType>, names: [&str; N]) -> PyResult<Self> {
        let py = of_type.py();
        let member = py
            .import("types")?
            .getattr("MemberDescriptorType")?
            .cast_into::<PyType>()?;
        // SAFETY: `of_type` is a live type object; only its size is read.
        let basicsize = unsafe { (*of_type.as_type_ptr()).tp_basicsize };
        let names = names.map(|n| PyString::intern(py, n).unbind());
        let mut offsets = [None; N];
        for (name, place) in names.iter().zip(offsets.iter_mut()) {
            // A type's attribute lookup walks its MRO; a member descriptor's
            // `__get__(None, type)` is the descriptor itself.
            if let Ok(descr) = of_type.getattr(name.bind(py)) {
                *place = object_member_offset(&descr, &member, basicsize);
            }
        }
        // SAFETY: as above; read after the lookups, which assign a tag to a type
        // that has none (unless the interpreter ran out of tags: then 0).
        let version_tag = unsafe { (*of_type.as_type_ptr()).tp_version_tag };
        Ok(InstanceSlots {
            of_type: of_type.clone().unbind(),
            version_tag,
            names,
            offsets,
        })
    }

    pub(super) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.of_type)?;
        for name in &self.names {
            visit.call(name)?;
        }
        Ok(())
    }

    /// Where `obj` keeps `names[index]`, if it is an instance of `of_type` and
    /// that type is unmodified since `of`.
    fn place(&self, obj: &Bound<'_, PyAny>, index: usize) -> Option<*mut *mut ffi::PyObject> {
        let offset = self.offsets[index]?;
        // SAFETY: `obj` and `of_type` are live; `of` found a writable object slot at
        // `offset` on `of_type` while its tag was `version_tag`.
        unsafe {
            slot_in_place(
                obj.as_ptr(),
                self.of_type.as_ptr() as *mut ffi::PyTypeObject,
                self.version_tag,
                offset,
            )
        }
    }

    /// `obj.<names[index]>`, or None where it has no such attribute.
    pub(super) fn get<'py>(
        &self,
        obj: &Bound<'py, PyAny>,
        index: usize,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = obj.py();
        if let Some(place) = self.place(obj, index) {
            // SAFETY: the place holds NULL (unset) or a reference the instance
            // owns, from which a new one is made.
            return Ok(unsafe { Bound::from_borrowed_ptr_or_opt(py, *place) });
        }
        match obj.getattr(self.names[index].bind(py)) {
            Ok(value) => Ok(Some(value)),
            Err(e) if e.is_instance_of::<PyAttributeError>(py) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `obj.<names[index]>` is true; a missing attribute counts as true
    /// (the caller then takes the Python path, which fails as asyncio fails).
    pub(super) fn flag(&self, obj: &Bound<'_, PyAny>, index: usize) -> PyResult<bool> {
        if let Some(place) = self.place(obj, index) {
            // SAFETY: the place holds NULL or a reference the instance owns; the
            // value is only compared with the interpreter's singletons, or its
            // exact type read and, for a list or a set (the selector's and the
            // ring's queues), its size, which runs no Python code that could
            // drop the instance's reference meanwhile. Anything else is judged
            // through a reference of its own below.
            unsafe {
                let value = *place;
                if value.is_null() {
                    return Ok(true);
                }
                if value == ffi::Py_True() {
                    return Ok(true);
                }
                if value == ffi::Py_False() || value == ffi::Py_None() {
                    return Ok(false);
                }
                if ffi::PyList_CheckExact(value) != 0 {
                    return Ok(ffi::PyList_GET_SIZE(value) != 0);
                }
                if ffi::PySet_CheckExact(value) != 0 {
                    return Ok(ffi::PySet_GET_SIZE(value) != 0);
                }
            }
        }
        self.get(obj, index)?.map_or(Ok(true), |v| v.is_truthy())
    }
}

/// The loop's attributes ([`LOOP_ATTRS`]).
pub(super) type LoopState = InstanceSlots<{ LOOP_ATTRS.len() }>;

impl LoopState {
    pub(super) fn of_loop(loop_type: &Bound<'_, PyType>) -> PyResult<Self> {
        Self::of(loop_type, LOOP_ATTRS)
    }
}

/// `RingSelector`'s attributes that the native iteration reads.
pub(super) const SELECTOR_ATTRS: [&str; 1] = ["_to_arm"];
pub(super) const TO_ARM: usize = 0;

/// `LoopRing`'s attributes that the native iteration reads.
pub(super) const LOOP_RING_ATTRS: [&str; 5] =
    ["_ring", "_queued", "_backlog", "_cancel_later", "_files"];
pub(super) const RING: usize = 0;
pub(super) const QUEUED: usize = 1;
pub(super) const BACKLOG: usize = 2;
pub(super) const CANCEL_LATER: usize = 3;
pub(super) const FILES: usize = 4;

/// Where the loop, its selector and its loop ring keep what the native iteration
/// reads after every iteration.
pub(super) struct IterationState {
    pub(super) event_loop: LoopState,
    pub(super) selector: InstanceSlots<{ SELECTOR_ATTRS.len() }>,
    pub(super) loop_ring: InstanceSlots<{ LOOP_RING_ATTRS.len() }>,
}

impl IterationState {
    pub(super) fn of(
        event_loop: &Bound<'_, PyAny>,
        selector: &Bound<'_, PyAny>,
        loop_ring: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(IterationState {
            event_loop: LoopState::of_loop(&event_loop.get_type())?,
            selector: InstanceSlots::of(&selector.get_type(), SELECTOR_ATTRS)?,
            loop_ring: InstanceSlots::of(&loop_ring.get_type(), LOOP_RING_ATTRS)?,
        })
    }

    pub(super) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.event_loop.traverse(visit)?;
        self.selector.traverse(visit)?;
        self.loop_ring.traverse(visit)
    }
}
