//! The loop's `TimerHandle`: asyncio's `TimerHandle`, subclassed with no field of
//! its own, whose `cancel()` is one native call.
//!
//! Every `asyncio.timeout`, `wait_for` and server keep-alive timer arms a timer and
//! cancels it. asyncio's `TimerHandle.cancel` is three Python frames (its own,
//! `loop._timer_handle_cancelled` and `Handle.cancel`); here it is a
//! `method_descriptor`, the kind of method a C type has, that does what those
//! three do. The class is a subclass so that everything asyncio and its users do
//! with a timer still works (`isinstance(h, asyncio.TimerHandle)`, its `when()`,
//! `cancelled()`, comparisons and repr, which names it `TimerHandle`); its
//! instances have `TimerHandle`'s layout and slots, which [`HandleSlots`] reads.
//! Where the timer's loop has its own `_timer_handle_cancelled`, that method is
//! called, as asyncio's `cancel` calls it.

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use super::handles::HandleSlots;
use crate::pytype::{add_method, method};

/// `BaseEventLoop._timer_handle_cancelled`: a loop whose method this is counts the
/// cancelled timer itself, inline.
static BASE_TIMER_CANCELLED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The subclass of `asyncio.TimerHandle` named `TimerHandle` (module
/// `ringio.loop._loop`), made once per process, with `cancel` set to the native
/// method.
pub(super) fn make_class<'py>(
    py: Python<'py>,
    base: &Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__slots__", PyTuple::empty(py))?;
    namespace.set_item("__module__", "ringio.loop._loop")?;
    namespace.set_item("__qualname__", "TimerHandle")?;
    namespace.set_item(
        "__doc__",
        "asyncio's TimerHandle as ringio's loop makes it: cancel() is one native call.",
    )?;
    let class = py
        .get_type::<PyType>()
        .call1(("TimerHandle", (base,), namespace))?
        .cast_into::<PyType>()?;
    add_method(
        &class,
        method(
            c"cancel",
            cancel,
            ffi::METH_NOARGS,
            c"cancel($self, /)\n--\n\nCancels the call (asyncio's TimerHandle.cancel).",
        ),
    )?;
    Ok(class)
}

/// `timer.cancel()` of an instance of the class above (the method descriptor has
/// checked the type): asyncio's `TimerHandle.cancel`.
unsafe extern "C" fn cancel(
    slf: *mut ffi::PyObject,
    _unused: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a METH_NOARGS method with the GIL held and `slf` a
    // borrowed reference to an instance of the method's class.
    unsafe {
        let py = Python::assume_attached();
        let timer = Borrowed::from_ptr(py, slf);
        match cancel_timer(&timer) {
            Ok(()) => ffi::Py_NewRef(ffi::Py_None()),
            Err(e) => {
                e.restore(py);
                std::ptr::null_mut()
            }
        }
    }
}

fn cancel_timer(timer: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = timer.py();
    let Some(slots) = HandleSlots::get(py)? else {
        // Unreachable: the class is made only where the slots were found.
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "asyncio.TimerHandle has no slots",
        ));
    };
    // TimerHandle.cancel: `if not self._cancelled:
    // self._loop._timer_handle_cancelled(self)`, then Handle.cancel.
    if slots.cancelled(timer)?.is_truthy()? {
        return Ok(());
    }
    let event_loop = slots.event_loop(timer)?;
    let notify = event_loop.getattr(intern!(py, "_timer_handle_cancelled"))?;
    if is_base_timer_cancelled(py, &notify)? {
        // BaseEventLoop._timer_handle_cancelled: `if handle._scheduled:
        // self._timer_cancelled_count += 1`.
        if slots.scheduled(timer)?.is_truthy()? {
            let count = intern!(py, "_timer_cancelled_count");
            event_loop.setattr(count, event_loop.getattr(count)?.add(1)?)?;
        }
    } else {
        notify.call1((timer,))?;
    }
    // Handle.cancel.
    if slots.cancelled(timer)?.is_truthy()? {
        return Ok(());
    }
    slots.set_cancelled(timer)?;
    if event_loop
        .call_method0(intern!(py, "get_debug"))?
        .is_truthy()?
    {
        // As asyncio keeps it in debug mode: the callback and its arguments, for
        // the slow-callback warning.
        slots.set_repr(timer, timer.repr()?.as_any())?;
    }
    slots.clear_call(timer)
}

/// Whether `method` is `BaseEventLoop._timer_handle_cancelled` bound to a loop.
fn is_base_timer_cancelled(py: Python<'_>, method: &Bound<'_, PyAny>) -> PyResult<bool> {
    let base = BASE_TIMER_CANCELLED.get_or_try_init(py, || -> PyResult<_> {
        Ok(py
            .import("asyncio.base_events")?
            .getattr("BaseEventLoop")?
            .getattr("_timer_handle_cancelled")?
            .unbind())
    })?;
    // `PyMethod_Type` is CPython's static type object of bound methods; only its
    // address is taken.
    let method_type = &raw mut PyMethod_Type;
    if !std::ptr::eq(method.get_type().as_type_ptr(), method_type) {
        return Ok(false);
    }
    // SAFETY: `method` is a bound method (its exact type checked above):
    // PyMethod_Function returns its function, a borrowed reference that lives as
    // long as `method`; only its address is compared.
    let function = unsafe { PyMethod_Function(method.as_ptr()) };
    Ok(std::ptr::eq(function, base.as_ptr()))
}

unsafe extern "C" {
    /// `types.MethodType` and its function (CPython's classobject.c; not in
    /// pyo3-ffi).
    static mut PyMethod_Type: ffi::PyTypeObject;
    fn PyMethod_Function(method: *mut ffi::PyObject) -> *mut ffi::PyObject;
}

/// `_core.loop.timer_handle_type()`: the loop's `TimerHandle` class, or None where
/// this interpreter's `asyncio.TimerHandle` has no slots the core can set (the
/// loop then makes asyncio's own).
#[pyfunction]
pub fn timer_handle_type(py: Python<'_>) -> PyResult<Option<Py<PyType>>> {
    Ok(HandleSlots::get(py)?.map(|s| s.ring_timer_type(py).clone().unbind()))
}
