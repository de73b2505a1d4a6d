//! asyncio's own `Handle`, made, queued and read without Python frames.
//!
//! `loop.call_soon` is the hottest call of an event loop: every task step and every
//! future's callbacks come through it, from asyncio's C tasks and futures. As a
//! Python method it costs a frame, eight attribute stores and two calls; here it is
//! one native call that makes the same object asyncio's `call_soon` makes (an
//! `asyncio.Handle`, so that everything asyncio and its users do with a handle
//! still works). The fields are the class's `__slots__`, each a
//! `member_descriptor` whose `PyMemberDef` gives the field's place in an instance,
//! where they are read and written as the descriptor would (see [`Slot`]). Where a
//! field is not such a slot (an interpreter whose `Handle` differs),
//! [`HandleSlots::get`] is None and the loop keeps its Python `call_soon`.

use std::ffi::c_int;

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};

use crate::pytype::object_member_offset;

/// One slot of `asyncio.Handle`: its `member_descriptor`, that type's
/// `tp_descr_get`/`tp_descr_set`, and where the slot lives in an instance.
///
/// An instance of the slot's class (or a subclass, which keeps its base's layout)
/// holds the slot's object reference at `offset`: the `PyMemberDef` of a
/// `__slots__` entry is a writable `Py_T_OBJECT_EX` member. Those instances are
/// read and written there directly, as `PyMember_GetOne` and `PyMember_SetOne`
/// do, without the descriptor's two calls (a fifth of a `call_soon` and its run);
/// anything else goes through the descriptor, which raises what attribute access
/// raises.
struct Slot {
    descr: Py<PyAny>,
    get: ffi::descrgetfunc,
    set: ffi::descrsetfunc,
    /// The class whose `__slots__` made the slot.
    owner: Py<PyType>,
    /// A subclass of `owner` whose instances the core makes itself (the loop's
    /// `TimerHandle`), recognised by identity before `PyType_IsSubtype` walks the
    /// MRO (a walk per field read or written of every timer, 0.2 % of an aiohttp
    /// request's instructions).
    made_here: Py<PyType>,
    offset: ffi::Py_ssize_t,
}

impl Slot {
    fn of(
        class: &Bound<'_, PyType>,
        name: &str,
        member: &Bound<'_, PyType>,
        made_here: &Bound<'_, PyType>,
    ) -> PyResult<Option<Self>> {
        if !made_here.is_subclass(class)? {
            return Ok(None);
        }
        let Some(descr) = class
            .getattr(intern!(class.py(), "__dict__"))?
            .get_item(name)
            .ok()
        else {
            return Ok(None);
        };
        // SAFETY: `class` is a live type object; only its size is read.
        let basicsize = unsafe { (*class.as_type_ptr()).tp_basicsize };
        let Some(offset) = object_member_offset(&descr, member, basicsize) else {
            return Ok(None);
        };
        let kind = member.as_type_ptr();
        // SAFETY: `kind` is a live type object (`types.MemberDescriptorType`, held
        // by `member`); PyType_GetSlot accepts any type since CPython 3.10 and
        // returns the slot's function pointer or NULL.
        let (get, set) = unsafe {
            (
                ffi::PyType_GetSlot(kind, ffi::Py_tp_descr_get),
                ffi::PyType_GetSlot(kind, ffi::Py_tp_descr_set),
            )
        };
        if get.is_null() || set.is_null() {
            return Ok(None);
        }
        // SAFETY: the pointers are the type's tp_descr_get and tp_descr_set, whose C
        // types are descrgetfunc and descrsetfunc.
        let (get, set) = unsafe {
            (
                std::mem::transmute::<*mut std::ffi::c_void, ffi::descrgetfunc>(get),
                std::mem::transmute::<*mut std::ffi::c_void, ffi::descrsetfunc>(set),
            )
        };
        Ok(Some(Slot {
            descr: descr.unbind(),
            get,
            set,
            owner: class.clone().unbind(),
            made_here: made_here.clone().unbind(),
            offset,
        }))
    }

    /// Where `obj` keeps this slot, if `obj` is an instance of the slot's class.
    fn place(&self, obj: &Bound<'_, PyAny>) -> Option<*mut *mut ffi::PyObject> {
        let owner = self.owner.as_ptr() as *mut ffi::PyTypeObject;
        let made_here = self.made_here.as_ptr() as *mut ffi::PyTypeObject;
        // SAFETY: `obj` is live; Py_TYPE reads its type, PyType_IsSubtype walks
        // the MRO of two live types. `made_here` was a subclass of `owner` when
        // `of` checked, so its instances have the owner's layout: a class's
        // `__bases__` can only be replaced by bases of the same layout.
        let instance = unsafe {
            let kind = ffi::Py_TYPE(obj.as_ptr());
            kind == owner || kind == made_here || ffi::PyType_IsSubtype(kind, owner) != 0
        };
        // SAFETY: an instance of the owner (or a subclass, which extends its
        // layout) is at least the owner's basicsize, which `of` checked the
        // offset against.
        instance.then(|| unsafe {
            (obj.as_ptr() as *mut u8).offset(self.offset) as *mut *mut ffi::PyObject
        })
    }

    /// Sets the slot of an instance that its class's allocator has just made
    /// (all its slots NULL), before anything else has seen it: a store, with no
    /// type check and no old value to release.
    ///
    /// # Safety
    /// `obj` must come from the `tp_alloc` of the slot's class or of a subclass
    /// (so that it has the class's layout), with this slot not set yet.
    #[inline]
    unsafe fn init(&self, obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) {
        // SAFETY: by the caller's contract `obj` has the owner's layout, where
        // `offset` is a writable object slot (`of`), and holds NULL there.
        unsafe {
            let place = (obj.as_ptr() as *mut u8).offset(self.offset) as *mut *mut ffi::PyObject;
            debug_assert!((*place).is_null());
            *place = value.clone().into_ptr();
        }
    }

    /// `obj.<slot>`, as attribute access finds it (the descriptor is a data
    /// descriptor of `obj`'s class or a base).
    fn read<'py>(&self, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = obj.py();
        if let Some(place) = self.place(obj) {
            // SAFETY: `place` is the slot of a live instance: NULL (unset: the
            // descriptor below raises AttributeError) or a reference the instance
            // holds, from which a new one is made.
            if let Some(value) = unsafe { Bound::from_borrowed_ptr_or_opt(py, *place) } {
                return Ok(value);
            }
        }
        // SAFETY: called as the descriptor protocol calls tp_descr_get: the
        // descriptor, the instance and its type, all live for the call; the result
        // is a new reference, or NULL with an exception set (the descriptor checks
        // that `obj` is an instance of its class, and raises AttributeError for an
        // unset slot).
        unsafe {
            let r = (self.get)(self.descr.as_ptr(), obj.as_ptr(), obj.get_type().as_ptr());
            Bound::from_owned_ptr_or_err(py, r)
        }
    }

    /// `obj.<slot> = value`.
    fn write(&self, obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Some(place) = self.place(obj) {
            // SAFETY: `place` is the slot of a live instance; as PyMember_SetOne
            // does for Py_T_OBJECT_EX: the new reference is stored before the old
            // one (if any) is released, since releasing it may run any code.
            unsafe {
                let old = std::mem::replace(&mut *place, value.clone().into_ptr());
                ffi::Py_XDECREF(old);
            }
            return Ok(());
        }
        // SAFETY: called as attribute assignment calls tp_descr_set: the descriptor,
        // the instance and the new value, all live for the call; the descriptor
        // checks the instance's class, takes its own reference to `value` and
        // releases the old one; a negative result has an exception set.
        let rc: c_int = unsafe { (self.set)(self.descr.as_ptr(), obj.as_ptr(), value.as_ptr()) };
        if rc < 0 {
            Err(PyErr::fetch(obj.py()))
        } else {
            Ok(())
        }
    }
}

/// `asyncio.Handle`'s and `asyncio.TimerHandle`'s allocators and slots, and
/// `contextvars.copy_context`.
pub(super) struct HandleSlots {
    handle_type: Py<PyType>,
    alloc: ffi::allocfunc,
    timer_type: Py<PyType>,
    /// The loop's subclass of `TimerHandle` (`timer_handle.rs`), which the core's
    /// `call_later` and `call_at` make.
    ring_timer_type: Py<PyType>,
    ring_timer_alloc: ffi::allocfunc,
    when: Slot,
    scheduled: Slot,
    callback: Slot,
    args: Slot,
    cancelled: Slot,
    event_loop: Slot,
    source_traceback: Slot,
    repr: Slot,
    context: Slot,
    copy_context: Py<PyAny>,
}

static HANDLE_SLOTS: PyOnceLock<Option<HandleSlots>> = PyOnceLock::new();

/// The `tp_alloc` of a class statement's type (PyType_GenericAlloc).
fn allocator(kind: &Bound<'_, PyType>) -> Option<ffi::allocfunc> {
    // SAFETY: `kind` is a live type object; PyType_GetSlot returns its tp_alloc or
    // NULL.
    let alloc = unsafe { ffi::PyType_GetSlot(kind.as_type_ptr(), ffi::Py_tp_alloc) };
    if alloc.is_null() {
        return None;
    }
    // SAFETY: the pointer is the type's tp_alloc, whose C type is allocfunc.
    Some(unsafe { std::mem::transmute::<*mut std::ffi::c_void, ffi::allocfunc>(alloc) })
}

impl HandleSlots {
    /// The slots, found once per process; None where `asyncio.Handle` has no
    /// such slots.
    pub(super) fn get(py: Python<'_>) -> PyResult<Option<&HandleSlots>> {
        HANDLE_SLOTS
            .get_or_try_init(py, || Self::find(py))
            .map(Option::as_ref)
    }

    fn find(py: Python<'_>) -> PyResult<Option<HandleSlots>> {
        let events = py.import("asyncio.events")?;
        let handle_type = events.getattr("Handle")?.cast_into::<PyType>()?;
        let timer_type = events.getattr("TimerHandle")?.cast_into::<PyType>()?;
        let member = py
            .import("types")?
            .getattr("MemberDescriptorType")?
            .cast_into::<PyType>()?;
        let Some(alloc) = allocator(&handle_type) else {
            return Ok(None);
        };
        let ring_timer_type = super::timer_handle::make_class(py, &timer_type)?;
        let (Some(when), Some(scheduled)) = (
            Slot::of(&timer_type, "_when", &member, &ring_timer_type)?,
            Slot::of(&timer_type, "_scheduled", &member, &ring_timer_type)?,
        ) else {
            return Ok(None);
        };
        let slot = |name: &str| Slot::of(&handle_type, name, &member, &ring_timer_type);
        let (
            Some(callback),
            Some(args),
            Some(cancelled),
            Some(event_loop),
            Some(source_traceback),
            Some(repr),
            Some(context),
        ) = (
            slot("_callback")?,
            slot("_args")?,
            slot("_cancelled")?,
            slot("_loop")?,
            slot("_source_traceback")?,
            slot("_repr")?,
            slot("_context")?,
        )
        else {
            return Ok(None);
        };
        let Some(ring_timer_alloc) = allocator(&ring_timer_type) else {
            return Ok(None);
        };
        Ok(Some(HandleSlots {
            handle_type: handle_type.unbind(),
            alloc,
            timer_type: timer_type.unbind(),
            ring_timer_type: ring_timer_type.unbind(),
            ring_timer_alloc,
            when,
            scheduled,
            callback,
            args,
            cancelled,
            event_loop,
            source_traceback,
            repr,
            context,
            copy_context: py.import("contextvars")?.getattr("copy_context")?.unbind(),
        }))
    }

    /// `asyncio.Handle(callback, args, event_loop, context)` outside debug mode:
    /// its `__init__`'s fields, set on a new instance (`context` None: a copy of
    /// the current context).
    pub(super) fn make<'py>(
        &self,
        callback: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        event_loop: &Bound<'py, PyAny>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.fill(
            self.alloc,
            &self.handle_type,
            callback,
            args,
            event_loop,
            context,
        )
    }

    /// `asyncio.TimerHandle(when, callback, args, event_loop, context)` outside
    /// debug mode, as an instance of the loop's subclass: a handle's fields,
    /// `_when`, and `_scheduled` False.
    pub(super) fn make_timer<'py>(
        &self,
        when: &Bound<'py, PyAny>,
        callback: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        event_loop: &Bound<'py, PyAny>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timer = self.fill(
            self.ring_timer_alloc,
            &self.ring_timer_type,
            callback,
            args,
            event_loop,
            context,
        )?;
        // SAFETY: `timer` is the instance `fill` has just made with the loop's
        // `TimerHandle`'s allocator; `fill` sets only `Handle`'s slots.
        unsafe {
            self.when.init(&timer, when);
            self.scheduled
                .init(&timer, pyo3::types::PyBool::new(when.py(), false).as_any());
        }
        Ok(timer)
    }

    fn fill<'py>(
        &self,
        alloc: ffi::allocfunc,
        kind: &Py<PyType>,
        callback: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        event_loop: &Bound<'py, PyAny>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = callback.py();
        let context = match context {
            Some(c) if !c.is_none() => c.clone(),
            _ => self.copy_context.bind(py).call0()?,
        };
        // SAFETY: tp_alloc of a live type (`Handle` or `TimerHandle`, whose
        // allocator it is) with no items: a new reference to an instance whose
        // slots are all NULL (unset), or NULL with an exception set. The slots are
        // set below before the handle is seen by anything else.
        let handle = unsafe { Bound::from_owned_ptr_or_err(py, alloc(kind.as_ptr().cast(), 0))? };
        let none = py.None().into_bound(py);
        // SAFETY: `handle` was just made by the allocator of `kind`, `Handle` or
        // one of its subclasses (the callers pass `Handle`, `TimerHandle` or the
        // loop's `TimerHandle`), and nothing else has seen it; each slot is set
        // once.
        unsafe {
            self.context.init(&handle, &context);
            self.event_loop.init(&handle, event_loop);
            self.callback.init(&handle, callback);
            self.args.init(&handle, args.as_any());
            self.cancelled
                .init(&handle, pyo3::types::PyBool::new(py, false).as_any());
            self.repr.init(&handle, &none);
            self.source_traceback.init(&handle, &none);
        }
        Ok(handle)
    }

    /// Whether `obj` is an instance of `TimerHandle` itself or of the loop's
    /// subclass (which adds nothing to it but a native `cancel`), not of another
    /// subclass.
    pub(super) fn is_timer(&self, obj: &Bound<'_, PyAny>) -> bool {
        let py = obj.py();
        let kind = obj.get_type();
        kind.is(self.ring_timer_type.bind(py)) || kind.is(self.timer_type.bind(py))
    }

    /// The loop's subclass of `TimerHandle`.
    pub(super) fn ring_timer_type<'py>(&self, py: Python<'py>) -> &Bound<'py, PyType> {
        self.ring_timer_type.bind(py)
    }

    /// A timer's `_loop`.
    pub(super) fn event_loop<'py>(&self, timer: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.event_loop.read(timer)
    }

    /// A timer's `_scheduled`.
    pub(super) fn scheduled<'py>(&self, timer: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.scheduled.read(timer)
    }

    /// `handle._cancelled = True`.
    pub(super) fn set_cancelled(&self, handle: &Bound<'_, PyAny>) -> PyResult<()> {
        self.cancelled
            .write(handle, pyo3::types::PyBool::new(handle.py(), true).as_any())
    }

    /// `handle._repr = text`.
    pub(super) fn set_repr(
        &self,
        handle: &Bound<'_, PyAny>,
        text: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.repr.write(handle, text)
    }

    /// `handle._callback = None; handle._args = None`, as a cancelled handle has.
    pub(super) fn clear_call(&self, handle: &Bound<'_, PyAny>) -> PyResult<()> {
        let none = handle.py().None().into_bound(handle.py());
        self.callback.write(handle, &none)?;
        self.args.write(handle, &none)
    }

    /// A `TimerHandle`'s `_when`.
    pub(super) fn when<'py>(&self, timer: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.when.read(timer)
    }

    /// `timer._scheduled = value`.
    pub(super) fn set_scheduled(&self, timer: &Bound<'_, PyAny>, value: bool) -> PyResult<()> {
        self.scheduled
            .write(timer, pyo3::types::PyBool::new(timer.py(), value).as_any())
    }

    /// A handle's `_cancelled`, `_context`, `_callback` and `_args`, read through the
    /// slots (for instances of `Handle` and `TimerHandle`, which inherits them).
    pub(super) fn cancelled<'py>(&self, handle: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.cancelled.read(handle)
    }

    pub(super) fn call_parts<'py>(
        &self,
        handle: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        Ok((
            self.context.read(handle)?,
            self.callback.read(handle)?,
            self.args.read(handle)?,
        ))
    }
}
