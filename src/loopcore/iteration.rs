//! The native `_run_once`: asyncio's iteration (timers, select, ready handles)
//! without going back to Python, and `Handle._run` for asyncio's own handles.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::exceptions::PyRuntimeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use crate::op::Completion;
use crate::pydriver::ring::Ring;

use super::callbacks::{call_in_context_tuple, is_fatal};
use super::handles::HandleSlots;
use super::instance_slots::{self as attrs, IterationState};
use super::timers;
use super::LoopCore;

impl LoopCore {
    /// The body of `LoopCore.run_iterations` (see its documentation).
    pub(super) fn run_iterations_impl<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        event_loop: &Bound<'py, PyAny>,
        selector: &Bound<'py, PyAny>,
        loop_ring: &Bound<'py, PyAny>,
        ready: &Bound<'py, PyAny>,
        scheduled: &Bound<'py, PyList>,
    ) -> PyResult<Option<Vec<Py<Completion>>>> {
        let loop_dict = event_loop
            .getattr(intern!(py, "__dict__"))?
            .cast_into::<PyDict>()?;
        let state = match slf.get().iteration_state.get() {
            Some(state) => state,
            None => {
                let state = IterationState::of(event_loop, selector, loop_ring)?;
                slf.get().iteration_state.get_or_init(|| state)
            }
        };
        // The ring of the thread running the loop (the caller checked that there is
        // one); native_iteration_ok returns as soon as it is replaced.
        let ring = state
            .loop_ring
            .get(loop_ring, attrs::RING)?
            .ok_or_else(|| PyRuntimeError::new_err("the loop's ring is not made yet"))?
            .cast_into::<Ring>()?;
        let ring = &ring;
        let stopping_now = || state.event_loop.flag(event_loop, attrs::STOPPING);
        let mut stopping = stopping_now()?;
        let objects = IterationObjects {
            event_loop,
            loop_dict: &loop_dict,
            selector,
            loop_ring,
        };
        loop {
            NATIVE_ITERATIONS.fetch_add(1, Ordering::Relaxed);
            let done = Self::run_once(slf, event_loop, ring, ready, scheduled, stopping)?;
            if done.is_some() || stopping {
                return Ok(done);
            }
            stopping = stopping_now()?;
            if stopping || !Self::native_iteration_ok(&objects, state, ring, scheduled)? {
                return Ok(None);
            }
            // Python's eval loop would run a signal's handler between two iterations.
            py.check_signals()?;
        }
    }

    /// The body of `LoopCore.select_timeout` (see its documentation).
    pub(super) fn select_timeout_impl(
        event_loop: &Bound<'_, PyAny>,
        ready: &Bound<'_, PyAny>,
        scheduled: &Bound<'_, PyList>,
        stopping: bool,
    ) -> PyResult<Option<f64>> {
        let py = event_loop.py();
        let slots = HandleSlots::get(py)?;
        while !scheduled.is_empty() {
            let head = scheduled.get_item(0)?;
            if !timer_cancelled(slots, &head)?.is_truthy()? {
                break;
            }
            let count = event_loop.getattr(intern!(py, "_timer_cancelled_count"))?;
            event_loop.setattr(intern!(py, "_timer_cancelled_count"), count.sub(1)?)?;
            let handle = pop_timer(slots, scheduled)?;
            set_unscheduled(slots, &handle)?;
        }
        Ok(if stopping || ready.len()? > 0 {
            Some(0.0)
        } else if !scheduled.is_empty() {
            let when: f64 = timer_when(slots, &scheduled.get_item(0)?)?.extract()?;
            Some((when - crate::sys::monotonic()).clamp(0.0, MAXIMUM_SELECT_TIMEOUT))
        } else {
            None
        })
    }

    /// The body of `LoopCore.run_ready` (see its documentation).
    pub(super) fn run_ready_impl(
        event_loop: &Bound<'_, PyAny>,
        ready: &Bound<'_, PyAny>,
        scheduled: &Bound<'_, PyList>,
        report_error: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = event_loop.py();
        let slots = HandleSlots::get(py)?;
        if !scheduled.is_empty() {
            let resolution: f64 = event_loop
                .getattr(intern!(py, "_clock_resolution"))?
                .extract()?;
            let end_time = crate::sys::monotonic() + resolution;
            while !scheduled.is_empty() {
                let head = scheduled.get_item(0)?;
                let when: f64 = timer_when(slots, &head)?.extract()?;
                if when >= end_time {
                    break;
                }
                let handle = pop_timer(slots, scheduled)?;
                set_unscheduled(slots, &handle)?;
                ready.call_method1(intern!(py, "append"), (handle,))?;
            }
        }
        let count = ready.len()?;
        if count == 0 {
            return Ok(());
        }
        let kinds = HandleKinds::get(py)?;
        // asyncio's `_ready` is a `collections.deque`: its `popleft` descriptor is
        // called with the deque, without a bound method made per iteration.
        let (popleft, bound) = if ready.get_type().is(kinds.deque.bind(py)) {
            (kinds.deque_popleft.bind(py).clone(), false)
        } else {
            (ready.getattr(intern!(py, "popleft"))?, true)
        };
        for _ in 0..count {
            let handle = if bound {
                popleft.call0()?
            } else {
                popleft.call1((ready,))?
            };
            // asyncio's own handles: run here, their fields read through the slots'
            // descriptors where there are such slots. Any other handle: its own
            // `_cancelled` and `_run` (a subclass may define them).
            if !kinds.is_own(&handle) {
                if !handle.getattr(intern!(py, "_cancelled"))?.is_truthy()? {
                    handle.call_method0(intern!(py, "_run"))?;
                }
                continue;
            }
            let cancelled = match slots {
                Some(s) => s.cancelled(&handle)?,
                None => handle.getattr(intern!(py, "_cancelled"))?,
            };
            if !cancelled.is_truthy()? {
                kinds.run_own(&handle, slots, report_error)?;
            }
        }
        Ok(())
    }

    /// One iteration of the event loop, asyncio's `BaseEventLoop._run_once`, for
    /// the common case that the selector has nothing of its own to arm, submit or
    /// dispatch first (`run_iterations` and `EventLoop._run_once` check that, and
    /// everything it does not do here: debug mode, a `time()` of its own, the
    /// heap rebuild):
    /// cancelled timers leave the head of `scheduled`, the step waits as asyncio's
    /// would (not at all when `ready` has handles or the loop is stopping, else
    /// until the first timer or forever), and the due timers and the handles ready
    /// now run (`run_ready`). When the step left completions for the selector
    /// (polls, `sock_*` ops), they are returned instead and the caller dispatches
    /// them, then calls `run_ready`: asyncio runs I/O callbacks' handles after the
    /// timers that are due. None when the whole iteration ran here.
    pub(super) fn run_once(
        slf: &Bound<'_, Self>,
        event_loop: &Bound<'_, PyAny>,
        ring: &Bound<'_, Ring>,
        ready: &Bound<'_, PyAny>,
        scheduled: &Bound<'_, PyList>,
        stopping: bool,
    ) -> PyResult<Option<Vec<Py<Completion>>>> {
        let (this, py) = (slf.get(), slf.py());
        let timeout = Self::select_timeout_impl(event_loop, ready, scheduled, stopping)?;
        let block = timeout.is_none_or(|t| t > 0.0);
        // Handles ready before the select run before what it receives (asyncio's
        // order): the deliveries go in a handle queued behind them.
        let defer = ready.len()? > 0;
        let done = this.select_step(
            py,
            ring,
            Vec::new(),
            block,
            timeout.filter(|_| block),
            defer,
        )?;
        if defer && this.claim_deferred() {
            event_loop.call_method1(
                intern!(py, "call_soon"),
                (slf.getattr(intern!(py, "run_deferred"))?,),
            )?;
        }
        if !done.is_empty() {
            return Ok(Some(done));
        }
        Self::run_ready_impl(event_loop, ready, scheduled, this.report_error.bind(py))?;
        Ok(None)
    }

    /// `EventLoop._run_once`'s conditions for `run_iterations` that a callback
    /// can change: not in debug mode; the selector has no poll to arm; the loop's
    /// ring (`LoopRing`) has nothing of its own to submit, cancel or dispatch, no
    /// file op waiting for CQ room, and is still this ring;
    /// and asyncio would not rebuild the timer heap now (more than
    /// `_MIN_SCHEDULED_TIMER_HANDLES` timers, over half of them cancelled).
    pub(super) fn native_iteration_ok(
        objects: &IterationObjects<'_, '_>,
        state: &IterationState,
        ring: &Bound<'_, Ring>,
        scheduled: &Bound<'_, PyList>,
    ) -> PyResult<bool> {
        let py = ring.py();
        let IterationObjects {
            event_loop,
            loop_dict,
            selector,
            loop_ring,
        } = *objects;
        // Read from their slots (`InstanceSlots`): seven generic getattrs were a
        // fifth of an idle iteration, reads from the instances' dicts about 3 % of
        // an aiohttp request's instructions. A missing one ends the native
        // iterations.
        if state.event_loop.flag(event_loop, attrs::DEBUG)? {
            return Ok(false);
        }
        // A `time` patched on the instance: timers are judged by it, in asyncio's
        // `_run_once` (which `EventLoop._run_once` then takes).
        if loop_dict.contains(intern!(py, "time"))? {
            return Ok(false);
        }
        if state.selector.flag(selector, attrs::TO_ARM)? {
            return Ok(false);
        }
        for index in [attrs::QUEUED, attrs::BACKLOG, attrs::CANCEL_LATER] {
            if state.loop_ring.flag(loop_ring, index)? {
                return Ok(false);
            }
        }
        // File proactors (`ringio.open` on this loop) stage their ops into the ring
        // themselves and the core settles their futures; Python has work only for
        // ops that waited for CQ room (`after_select`). Returning for every
        // iteration while a proactor merely existed made every later iteration of
        // the loop cost its Python path (sleep(0) 2.6-3.5 -> 4.5-5.0 µs).
        // `_files` is a list (`LoopRing` assigns only lists), read by index: a Python
        // iterator over it, made and dropped every iteration, was 40 of an idle
        // iteration's 900 ns.
        if let Some(files) = state.loop_ring.get(loop_ring, attrs::FILES)? {
            for proactor in files.cast::<PyList>()?.iter() {
                if proactor.getattr(intern!(py, "_queue"))?.is_truthy()? {
                    return Ok(false);
                }
            }
        }
        if !state
            .loop_ring
            .get(loop_ring, attrs::RING)?
            .is_some_and(|r| r.is(ring))
        {
            return Ok(false);
        }
        let timers = scheduled.len();
        if timers > MIN_SCHEDULED_TIMER_HANDLES {
            let cancelled: f64 = state
                .event_loop
                .get(event_loop, attrs::TIMER_CANCELLED_COUNT)?
                .map_or(Ok(f64::INFINITY), |c| c.extract())?;
            if cancelled / timers as f64 > MIN_CANCELLED_TIMER_HANDLES_FRACTION {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The objects whose state `native_iteration_ok` reads.
pub(super) struct IterationObjects<'a, 'py> {
    event_loop: &'a Bound<'py, PyAny>,
    /// The loop's instance dict, where a `time` patched on the loop would be.
    loop_dict: &'a Bound<'py, PyDict>,
    selector: &'a Bound<'py, PyAny>,
    loop_ring: &'a Bound<'py, PyAny>,
}

/// What running the ready handles needs, looked up once: asyncio's own handle
/// classes (whose `_run` this does natively; a subclass's own `_run` is called
/// instead) and the ready queue's `collections.deque`, from the public modules
/// that define them.
pub(super) struct HandleKinds {
    pub(super) handle: Py<PyAny>,
    pub(super) timer_handle: Py<PyAny>,
    /// The loop's `TimerHandle` (where the core makes its timers).
    ring_timer: Option<Py<PyType>>,
    /// `collections.deque` and its `popleft` (a method descriptor).
    pub(super) deque: Py<PyAny>,
    pub(super) deque_popleft: Py<PyAny>,
}

pub(super) static HANDLE_KINDS: PyOnceLock<HandleKinds> = PyOnceLock::new();

impl HandleKinds {
    pub(super) fn get(py: Python<'_>) -> PyResult<&HandleKinds> {
        HANDLE_KINDS.get_or_try_init(py, || {
            let events = py.import("asyncio.events")?;
            let deque = py.import("collections")?.getattr("deque")?;
            Ok(HandleKinds {
                deque_popleft: deque.getattr("popleft")?.unbind(),
                deque: deque.unbind(),
                handle: events.getattr("Handle")?.unbind(),
                timer_handle: events.getattr("TimerHandle")?.unbind(),
                ring_timer: HandleSlots::get(py)?.map(|s| s.ring_timer_type(py).clone().unbind()),
            })
        })
    }

    /// Whether `handle` is an instance of asyncio's `Handle` or `TimerHandle`
    /// themselves or of the loop's `TimerHandle` (which adds only a native
    /// `cancel`), not of another subclass.
    pub(super) fn is_own(&self, handle: &Bound<'_, PyAny>) -> bool {
        let py = handle.py();
        let kind = handle.get_type();
        kind.is(self.handle.bind(py))
            || kind.is(self.timer_handle.bind(py))
            || self
                .ring_timer
                .as_ref()
                .is_some_and(|t| kind.is(t.bind(py)))
    }

    /// `handle._run()` of an instance of asyncio's own classes (`is_own`): its
    /// callback runs in its context; SystemExit and KeyboardInterrupt propagate,
    /// any other exception goes to the loop's exception handler with asyncio's
    /// context (`report_error(handle, exc)`). Done here, it costs a third of the
    /// Python method (which unpacks the arguments into a call of `Context.run`
    /// inside a `try`).
    pub(super) fn run_own(
        &self,
        handle: &Bound<'_, PyAny>,
        slots: Option<&HandleSlots>,
        report_error: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = handle.py();
        let (context, callback, args) = match slots {
            Some(s) => s.call_parts(handle)?,
            None => (
                handle.getattr(intern!(py, "_context"))?,
                handle.getattr(intern!(py, "_callback"))?,
                handle.getattr(intern!(py, "_args"))?,
            ),
        };
        let args = args.cast::<PyTuple>()?;
        match call_in_context_tuple(&context, &callback, args) {
            Ok(_) => Ok(()),
            Err(e) if is_fatal(py, &e) => Err(e),
            Err(e) => report_error.call1((handle, e.into_value(py))).map(drop),
        }
    }
}

/// Native loop iterations so far (all loops of the process).
pub(super) static NATIVE_ITERATIONS: AtomicU64 = AtomicU64::new(0);

/// asyncio's thresholds for rebuilding the timer heap (`base_events`).
pub(super) const MIN_SCHEDULED_TIMER_HANDLES: usize = 100;
pub(super) const MIN_CANCELLED_TIMER_HANDLES_FRACTION: f64 = 0.5;

/// asyncio's own cap on a select's wait (`base_events.MAXIMUM_SELECT_TIMEOUT`).
pub(super) const MAXIMUM_SELECT_TIMEOUT: f64 = 24.0 * 3600.0;

pub(super) static HEAPPOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `heapq.heappop(scheduled)`, natively where asyncio's handles have their slots.
fn pop_timer<'py>(
    slots: Option<&HandleSlots>,
    scheduled: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = scheduled.py();
    match slots {
        Some(s) => timers::pop(s, scheduled),
        None => HEAPPOP
            .get_or_try_init(py, || -> PyResult<_> {
                Ok(py.import("heapq")?.getattr("heappop")?.unbind())
            })?
            .bind(py)
            .call1((scheduled,)),
    }
}

/// A timer's `_cancelled`: through the slot for a `TimerHandle` itself.
fn timer_cancelled<'py>(
    slots: Option<&HandleSlots>,
    timer: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    match slots {
        Some(s) if s.is_timer(timer) => s.cancelled(timer),
        _ => timer.getattr(intern!(timer.py(), "_cancelled")),
    }
}

/// A timer's `_when`: through the slot for a `TimerHandle` itself.
fn timer_when<'py>(
    slots: Option<&HandleSlots>,
    timer: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    match slots {
        Some(s) if s.is_timer(timer) => s.when(timer),
        _ => timer.getattr(intern!(timer.py(), "_when")),
    }
}

/// `timer._scheduled = False`: through the slot for a `TimerHandle` itself.
fn set_unscheduled(slots: Option<&HandleSlots>, timer: &Bound<'_, PyAny>) -> PyResult<()> {
    match slots {
        Some(s) if s.is_timer(timer) => s.set_scheduled(timer, false),
        _ => timer.setattr(intern!(timer.py(), "_scheduled"), false),
    }
}
