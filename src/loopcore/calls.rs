//! The loop's hottest methods as native calls: `call_soon`, `call_later`,
//! `call_at`, `create_task`, `create_future`, `is_running` and `get_debug` of one
//! `ringio.EventLoop`.
//!
//! asyncio's C tasks and futures call back into the loop for every task step
//! (`call_soon`), for every future and task they make (`get_debug`) and, for a
//! task started eagerly (3.12+), to ask whether it runs (`is_running`); servers
//! arm a timer per request (`call_later`) and start a task per request
//! (`create_task`); every wait on a stream, lock, event or sleep makes a future
//! (`create_future`). Each of these is a Python method of asyncio's loop
//! (uvloop's are C). Here each makes the objects asyncio's makes (an
//! `asyncio.Handle`, a `TimerHandle` pushed on `loop._scheduled` as `heapq` pushes
//! it, an `asyncio.Task`, an `asyncio.Future`) without a Python frame. The loop installs the bound
//! methods as instance attributes, which attribute and method lookups find before
//! the class's methods, for each method its class does not override. Where asyncio
//! does more than the common case (debug mode, a closed loop, a task factory, a
//! `time()` of the loop's own, a task name), the call goes to the class's Python
//! method, which does what asyncio's does.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};

use super::handles::HandleSlots;
use super::instance_slots::{self as attrs, LoopState};
use super::timers;

/// The native methods of one loop. It holds the loop (a cycle through the
/// loop's `__dict__`, which the GC sees through `__traverse__` and the loop's
/// `close()` breaks by removing the methods).
#[pyclass(module = "ringio._core.loop", frozen)]
pub struct LoopCalls {
    event_loop: Py<PyAny>,
    loop_dict: Py<PyDict>,
    /// Where the loop keeps `_debug`, `_closed`, `_ready` and the rest.
    state: LoopState,
    /// The loop's class: its Python methods are the fallbacks.
    class: Py<PyType>,
    ready: Py<PyAny>,
    append: Py<PyAny>,
    task_type: Py<PyAny>,
    future_type: Py<PyAny>,
    /// `{"loop": event_loop}`, the keywords of `Future(loop=...)` and of
    /// `Task(coro, loop=...)`, which they and their `__init__` only read.
    loop_kwargs: Py<PyDict>,
    /// CPython 3.14+: `BaseEventLoop.create_task(coro, **kwargs)` is
    /// `Task(coro, loop=loop, **kwargs)` for any keyword (aiohttp passes
    /// `eager_start=True` per request); before, only `context` is passed here.
    task_takes_any_keyword: bool,
}

impl LoopCalls {
    /// The slots, when the common case applies: not in debug mode, not closed, and
    /// `_ready` still the deque whose `append` this holds (asyncio never replaces
    /// it; it does replace `_scheduled` when it rebuilds the heap, so the timer
    /// methods read that one from the loop each time).
    fn common_case<'py>(&self, py: Python<'py>) -> PyResult<Option<&'py HandleSlots>> {
        let Some(slots) = HandleSlots::get(py)? else {
            return Ok(None);
        };
        let event_loop = self.event_loop.bind(py);
        if self.state.flag(event_loop, attrs::DEBUG)?
            || self.state.flag(event_loop, attrs::CLOSED)?
            || !self
                .state
                .get(event_loop, attrs::READY)?
                .is_some_and(|r| r.is(&self.ready))
        {
            return Ok(None);
        }
        Ok(Some(slots))
    }

    /// `Class.<name>(loop, *positional, *args, **kwargs)`: the Python method.
    fn fallback<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyString>,
        positional: &[&Bound<'py, PyAny>],
        args: Option<&Bound<'py, PyTuple>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut call: Vec<Bound<'py, PyAny>> = Vec::with_capacity(positional.len() + 4);
        call.push(self.event_loop.bind(py).clone());
        call.extend(positional.iter().map(|a| (*a).clone()));
        if let Some(a) = args {
            call.extend(a.iter());
        }
        self.class
            .bind(py)
            .getattr(name)?
            .call(PyTuple::new(py, call)?, kwargs)
    }

    fn context_kwargs<'py>(
        py: Python<'py>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let kwargs = PyDict::new(py);
        if let Some(c) = context {
            kwargs.set_item(intern!(py, "context"), c)?;
        }
        Ok(kwargs)
    }

    /// The loop's timer heap, `loop._scheduled`, when it is a list.
    fn scheduled<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        Ok(self
            .state
            .get(self.event_loop.bind(py), attrs::SCHEDULED)?
            .and_then(|s| s.cast_into::<PyList>().ok()))
    }

    /// A `TimerHandle` at `when`, pushed on the heap; where `when` is None or the
    /// common case does not apply, the class's Python method `name`, called with
    /// `first` (the delay or the time the caller gave).
    #[allow(clippy::too_many_arguments)]
    fn timer<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyString>,
        first: &Bound<'py, PyAny>,
        when: Option<Bound<'py, PyAny>>,
        callback: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (Some(when), Some(slots), Some(heap)) =
            (when, self.common_case(py)?, self.scheduled(py)?)
        else {
            let kwargs = Self::context_kwargs(py, context)?;
            return self.fallback(py, name, &[first, callback], Some(args), Some(&kwargs));
        };
        let timer = slots.make_timer(&when, callback, args, self.event_loop.bind(py), context)?;
        Self::schedule(slots, &heap, &timer)?;
        Ok(timer)
    }

    /// `heapq.heappush(heap, timer)`, then `timer._scheduled = True`.
    fn schedule(
        slots: &HandleSlots,
        heap: &Bound<'_, PyList>,
        timer: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        timers::push(slots, heap, timer)?;
        slots.set_scheduled(timer, true)
    }
}

#[pymethods]
impl LoopCalls {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.event_loop)?;
        visit.call(&self.loop_dict)?;
        self.state.traverse(&visit)?;
        visit.call(&self.class)?;
        visit.call(&self.ready)?;
        visit.call(&self.append)?;
        visit.call(&self.task_type)?;
        visit.call(&self.future_type)?;
        visit.call(&self.loop_kwargs)
    }

    /// The native methods of `event_loop`, an instance of `loop_class`, whose Python
    /// methods they fall back to.
    #[new]
    #[pyo3(signature = (event_loop, loop_class))]
    fn new(event_loop: &Bound<'_, PyAny>, loop_class: &Bound<'_, PyType>) -> PyResult<Self> {
        let py = event_loop.py();
        if HandleSlots::get(py)?.is_none() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "this interpreter's asyncio.Handle has no slots LoopCalls can set",
            ));
        }
        let ready = event_loop.getattr(intern!(py, "_ready"))?;
        let loop_kwargs = PyDict::new(py);
        loop_kwargs.set_item(intern!(py, "loop"), event_loop)?;
        Ok(Self {
            event_loop: event_loop.clone().unbind(),
            loop_dict: event_loop
                .getattr(intern!(py, "__dict__"))?
                .cast_into::<PyDict>()?
                .unbind(),
            state: LoopState::of_loop(&event_loop.get_type())?,
            class: loop_class.clone().unbind(),
            append: ready.getattr(intern!(py, "append"))?.unbind(),
            ready: ready.unbind(),
            task_type: py.import("asyncio.tasks")?.getattr("Task")?.unbind(),
            future_type: py.import("asyncio.futures")?.getattr("Future")?.unbind(),
            loop_kwargs: loop_kwargs.unbind(),
            task_takes_any_keyword: py.version_info() >= (3, 14),
        })
    }

    /// Whether this interpreter's `asyncio.Handle` and `TimerHandle` have the
    /// slots these methods set.
    #[staticmethod]
    fn available(py: Python<'_>) -> PyResult<bool> {
        Ok(HandleSlots::get(py)?.is_some())
    }

    /// asyncio's `loop.call_soon(callback, *args, context=None)`.
    #[pyo3(signature = (callback, *args, context=None))]
    fn call_soon<'py>(
        &self,
        py: Python<'py>,
        callback: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Some(slots) = self.common_case(py)? else {
            let kwargs = Self::context_kwargs(py, context)?;
            return self.fallback(
                py,
                intern!(py, "call_soon"),
                &[callback],
                Some(args),
                Some(&kwargs),
            );
        };
        let handle = slots.make(callback, args, self.event_loop.bind(py), context)?;
        self.append.bind(py).call1((&handle,))?;
        Ok(handle)
    }

    /// asyncio's `loop.call_later(delay, callback, *args, context=None)`: a timer
    /// at `loop.time() + delay`.
    #[pyo3(signature = (delay, callback, *args, context=None))]
    fn call_later<'py>(
        &self,
        py: Python<'py>,
        delay: &Bound<'py, PyAny>,
        callback: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let own_time = self.loop_dict.bind(py).contains(intern!(py, "time"))?;
        let when = if own_time || delay.is_none() {
            None
        } else {
            // BaseEventLoop.time() is time.monotonic(); `+` as Python's, for any
            // delay (a TypeError here is the one asyncio's call_later raises first).
            Some(pyo3::types::PyFloat::new(py, crate::sys::monotonic()).add(delay)?)
        };
        let name = intern!(py, "call_later");
        self.timer(py, name, delay, when, callback, args, context)
    }

    /// asyncio's `loop.call_at(when, callback, *args, context=None)`.
    #[pyo3(signature = (when, callback, *args, context=None))]
    fn call_at<'py>(
        &self,
        py: Python<'py>,
        when: &Bound<'py, PyAny>,
        callback: &Bound<'py, PyAny>,
        args: &Bound<'py, PyTuple>,
        context: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let at = (!when.is_none()).then(|| when.clone());
        self.timer(
            py,
            intern!(py, "call_at"),
            when,
            at,
            callback,
            args,
            context,
        )
    }

    /// asyncio's `loop.create_task(coro, *, name=None, context=None)` (3.14: any
    /// keyword of `asyncio.Task`): `asyncio.Task(coro, loop=loop, **keywords)`
    /// when the loop has no task factory and the keywords are ones passed here
    /// (before 3.14 at most `context`; on 3.14 any but `loop`, which asyncio's
    /// `Task(coro, loop=self, **kwargs)` refuses with a TypeError).
    #[pyo3(signature = (coro, **kwargs))]
    fn create_task<'py>(
        &self,
        py: Python<'py>,
        coro: &Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let loop_key = intern!(py, "loop");
        let keywords_ok = match kwargs.filter(|k| !k.is_empty()) {
            None => true,
            Some(k) if self.task_takes_any_keyword => !k.contains(loop_key)?,
            Some(k) => k.len() == 1 && k.contains(intern!(py, "context"))?,
        };
        let no_factory = self
            .state
            .get(self.event_loop.bind(py), attrs::TASK_FACTORY)?
            .is_some_and(|f| f.is_none());
        if !(keywords_ok && no_factory && self.common_case(py)?.is_some()) {
            return self.fallback(py, intern!(py, "create_task"), &[coro], None, kwargs);
        }
        let task_kwargs = match kwargs.filter(|k| !k.is_empty()) {
            Some(k) => {
                let k = k.copy()?;
                k.set_item(loop_key, self.event_loop.bind(py))?;
                k
            }
            None => self.loop_kwargs.bind(py).clone(),
        };
        self.task_type.bind(py).call((coro,), Some(&task_kwargs))
    }

    /// asyncio's `loop.create_future()`: `asyncio.Future(loop=loop)`, called with
    /// a keywords dict made once (the vectorcall of a type without one of its own,
    /// as asyncio's C `Future` before CPython 3.14, builds that dict per call).
    fn create_future<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.future_type
            .bind(py)
            .call(PyTuple::empty(py), Some(self.loop_kwargs.bind(py)))
    }

    /// asyncio's `loop.is_running()`: `loop._thread_id is not None`.
    fn is_running<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.state.get(self.event_loop.bind(py), attrs::THREAD_ID)? {
            Some(thread) => Ok(pyo3::types::PyBool::new(py, !thread.is_none())
                .to_owned()
                .into_any()),
            None => self.fallback(py, intern!(py, "is_running"), &[], None, None),
        }
    }

    /// asyncio's `loop.get_debug()`: `loop._debug`. A C caller (asyncio's futures
    /// and tasks, once per object made) runs it without the frame the Python method
    /// needs: `loop.create_future()` 141 → 126 ns (2026-11-28, CPython 3.11). From
    /// Python code, `Handle.cancel`'s `self._loop.get_debug()` went 74 → 64 ns; a
    /// bound method taken once and called in a loop is 2.5 ns slower than the
    /// Python one.
    fn get_debug<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.state.get(self.event_loop.bind(py), attrs::DEBUG)? {
            Some(debug) => Ok(debug),
            None => self.fallback(py, intern!(py, "get_debug"), &[], None, None),
        }
    }
}
