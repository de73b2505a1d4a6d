//! The selector step: flush, submit, one `io_uring_enter`, reap; then the
//! transports' actions run (or wait for `run_deferred`).

use std::time::{Duration, Instant};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::engine::Submitted;
use crate::errors;
use crate::op::{Completion, Op};
use crate::pydriver::ring::Ring;

use super::action::Action;
use super::callbacks::is_fatal;
use super::{untoken, LoopCore, KIND_SEND, LARGE_TURNS};

impl LoopCore {
    /// `select`'s body, with the ops already taken from Python.
    pub(super) fn select_step(
        &self,
        py: Python<'_>,
        ring: &Bound<'_, Ring>,
        mut ops: Vec<Bound<'_, Op>>,
        block: bool,
        timeout: Option<f64>,
        defer: bool,
    ) -> PyResult<Vec<Py<Completion>>> {
        let mut timeout = match timeout {
            Some(t) if t.is_nan() || t < 0.0 => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "timeout must be >= 0 or None",
                ))
            }
            Some(t) => Some(Duration::from_secs_f64(t.min(1e9))),
            None => None,
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let want_block = block;
        let pydriver = ring.get().inner();
        // A blocking wait that ends with nothing for Python (only send completions
        // whose handling calls no Python code: the reply to a request went out, and
        // its CQE arrived before the next request) waits again, in Rust, until the
        // deadline: a Python loop iteration per send completion was half of the
        // iterations with one connection (1.5 selects per request, counted).
        let mut signal_err: Option<PyErr> = None;
        let (raw, mut side, wakers, enter_err, interrupted, early_actions) = loop {
            let ((ring_fd, enter_flags), tokens, to_submit, flush_err, wait, skip_enter) = {
                let mut inner = self.lock();
                if inner.closed {
                    return Err(PyRuntimeError::new_err("the loop core is closed"));
                }
                Self::bind(&mut inner, ring);
                // Deliveries already waiting: this step hands them out (or, deferring,
                // keeps them for the handle queued behind the ready ones).
                let waiting = !(inner.backlog.is_empty()
                    && inner.pending.is_empty()
                    && inner.resumed.is_empty()
                    && inner.ready_large.is_empty());
                let deferred = !(inner.deferred.is_empty() && inner.deferred_resumed.is_empty());
                let block = want_block && !waiting && !deferred;
                let mut driver = pydriver.driver();
                driver.check_open()?;
                driver.check_caller(py)?;
                // A loop-bound Watcher's own wait may have reaped for us meanwhile.
                let block = block && !driver.engine.has_backlog();
                // Sends that end at submission only where the enter waits past them.
                let flush_err = Self::flush(&mut inner, &mut driver.engine, block).err();
                let tokens = if ops.is_empty() {
                    Vec::new()
                } else {
                    driver.begin_submit(py, &ops)?.0
                };
                let to_submit = driver.engine.sq_pending();
                let skip_enter = !block && to_submit == 0 && driver.engine.defers_taskrun();
                // Nothing to submit, reap or hand out (a busy loop of callbacks between
                // two receives): the step below would return no results and change
                // nothing but `deferred_queued`; returning here saves its locks and
                // moves (a fifth of an idle `sleep(0)` round was the step).
                if skip_enter
                    && flush_err.is_none()
                    && ops.is_empty()
                    && !waiting
                    && (defer || !deferred)
                    && !driver.engine.has_backlog()
                    && driver.engine.nothing_to_reap()
                {
                    if !defer {
                        inner.deferred_queued = false;
                    }
                    return Ok(Vec::new());
                }
                // The loop waits for sockets and timers, as `epoll_wait` does: not
                // counted as iowait.
                let (fd, registered) = driver.engine.enter_target();
                let target = (
                    fd,
                    registered | crate::ring::enter::not_iowait(driver.engine.setup().no_iowait),
                );
                // The sends that end at submission post their CQEs before the wait
                // starts (two for one that fell short, which ends the wait at once):
                // the wait asks for one CQE beyond them, when the CQ has room for
                // them and one more (else it could end only on an overflow flush: it
                // waits for one, as before).
                let sent_now = driver.engine.posted_at_submit();
                let wait = match block {
                    false => 0,
                    true if sent_now < driver.engine.cq_room() => 1 + sent_now as u32,
                    true => 1,
                };
                (target, tokens, to_submit, flush_err, wait, skip_enter)
            };
            if let Some(e) = flush_err {
                // A failed buffer-ring registration: the transports stay unarmed; say so.
                return Err(errors::io_error(py, &e, None));
            }
            let block = wait > 0;
            let flags = crate::ring::enter::IORING_ENTER_GETEVENTS | enter_flags;
            let t = if block { timeout } else { None };
            // EINTR: a signal arrived (its Python handler runs below); SQEs the kernel
            // had not consumed stay in the SQ and go in with the next enter.
            let outcome = if skip_enter {
                // Nothing to submit or wait for: the reap below enters only if the
                // kernel flagged task work (a busy loop of callbacks, e.g. tasks
                // waking each other, made one syscall per iteration for nothing).
                Ok(0)
            } else {
                py.detach(|| crate::ring::enter::enter(ring_fd, to_submit, wait, flags, t))
            };
            let mut enter_err = None;
            let mut interrupted = false;
            match outcome {
                Ok(_) => {}
                Err(e) => match e.raw_os_error() {
                    Some(libc::ETIME | libc::EBUSY | libc::EAGAIN) => {}
                    Some(libc::EINTR) => interrupted = true,
                    _ => enter_err = Some(e),
                },
            }
            let (raw, mut side, wakers) = {
                let mut driver = pydriver.driver();
                if !ops.is_empty() {
                    let done = Submitted {
                        accepted: ops.len(),
                        error: None,
                    };
                    driver.finish_submit(py, &ops, &tokens, done)?;
                }
                let mut raw = Vec::new();
                if !driver.is_closed() {
                    driver
                        .engine
                        .reap_after_enter(&mut raw, usize::MAX)
                        .map_err(|e| errors::io_error(py, &e, None))?;
                }
                let mut side = std::mem::take(&mut self.lock().pending);
                driver.engine.take_side(&mut side);
                (raw, side, driver.engine.take_signalled(py))
            };
            ops.clear(); // submitted: a second pass only waits
            let sends_only = block
                && enter_err.is_none()
                && !interrupted
                && raw.is_empty()
                && wakers.is_empty()
                && !side.is_empty()
                && side.iter().all(|c| untoken(c.token).2 == KIND_SEND);
            if !sends_only {
                break (raw, side, wakers, enter_err, interrupted, None);
            }
            // Send completions never resume a transport (`resumed`): absorbing them
            // here leaves the order of deliveries as it was.
            let mut actions = Vec::with_capacity(side.len());
            let quiet = {
                let mut inner = self.lock();
                let mut driver = pydriver.driver();
                Self::take_cqes(&mut inner, &mut driver.engine, &side, &mut actions);
                inner.backlog.is_empty()
                    && inner.resumed.is_empty()
                    && inner.ready_large.is_empty()
                    && actions
                        .iter()
                        .all(|a| Self::send_done_is_quiet(&mut inner, a))
            };
            side.clear();
            if !quiet {
                break (raw, side, wakers, enter_err, interrupted, Some(actions));
            }
            // A signal delivered after the enter returned (its C handler ran while this
            // thread was absorbing the sends) interrupts no later wait: its Python
            // handler runs now, or Ctrl-C would wait for the next completion.
            if let Err(e) = py.check_signals() {
                signal_err = Some(e);
                break (raw, side, wakers, enter_err, interrupted, Some(actions));
            }
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    break (raw, side, wakers, enter_err, interrupted, Some(Vec::new()));
                }
                timeout = Some(d - now);
            }
        };
        let (mut results, resumed) = {
            let mut inner = self.lock();
            // Taken now: what this step's callbacks resume (or defer) is delivered
            // by the next select, which then does not block.
            (
                std::mem::take(&mut inner.backlog),
                std::mem::take(&mut inner.resumed),
            )
        };
        // File ops (`ringio._engines`' loop-ring proactor) carry an asyncio future:
        // settled here, as the eventfd proactor's resolve_futures() does elsewhere.
        let future_types = self.future_types.bind(py);
        results.extend(pydriver.finish_settling(py, &raw, Some(future_types))?);
        // The transports' completions: actions under the lock, then the callbacks.
        let mut actions = early_actions.unwrap_or_default();
        {
            let mut inner = self.lock();
            if !side.is_empty() {
                let mut driver = pydriver.driver();
                Self::take_cqes(&mut inner, &mut driver.engine, &side, &mut actions);
                side.clear();
            }
            let turns = inner.ready_large.len().min(LARGE_TURNS);
            for (slot, gen) in inner.ready_large.drain(..turns) {
                actions.push(Action::Readable(slot, gen));
            }
        }
        let mut failure = None;
        // Loop-bound Watchers with new completions: their wakers only resolve the
        // future a `wait_io_async` awaits (they process the CQEs when it resumes).
        for w in wakers {
            if let Err(e) = w.call0(py) {
                if is_fatal(py, &e) {
                    failure.get_or_insert(e);
                } else {
                    e.write_unraisable(py, None);
                }
            }
        }
        if defer {
            // Handles were ready before this select: the deliveries wait for them
            // (the caller queues `run_deferred` behind them).
            let mut inner = self.lock();
            inner.deferred.extend(actions);
            inner.deferred_resumed.extend(resumed);
        } else {
            // Deliveries deferred by an earlier select whose handle did not run
            // (an exception stopped the loop) go first.
            let (mut all, mut all_resumed) = {
                let mut inner = self.lock();
                inner.deferred_queued = false;
                (
                    std::mem::take(&mut inner.deferred),
                    std::mem::take(&mut inner.deferred_resumed),
                )
            };
            all.extend(actions);
            all_resumed.extend(resumed);
            if failure.is_none() {
                if let Err(e) = self.run_actions(py, all, all_resumed) {
                    failure = Some(e);
                }
            } else {
                self.stash(py, all.into_iter());
                self.lock().resumed.extend(all_resumed);
            }
        }
        if failure.is_none() {
            failure = signal_err;
        }
        if failure.is_none() && interrupted {
            if let Err(e) = py.check_signals() {
                failure = Some(e);
            }
        }
        if failure.is_none() {
            if let Some(e) = enter_err {
                failure = Some(errors::io_error(py, &e, None));
            }
        }
        if let Some(e) = failure {
            // Keep what this step could not hand out: the next select delivers it.
            self.lock().backlog = results;
            return Err(e);
        }
        Ok(results)
    }

    /// Runs a select's deliveries: the transports' actions (protocol callbacks),
    /// then the backlogs of resumed transports. On an exception that stops the
    /// loop (KeyboardInterrupt, SystemExit), what was not delivered is kept for
    /// the next select.
    pub(super) fn run_actions(
        &self,
        py: Python<'_>,
        actions: Vec<Action>,
        resumed: Vec<u32>,
    ) -> PyResult<()> {
        let mut it = actions.into_iter();
        for a in it.by_ref() {
            if let Err(e) = self.run(py, a) {
                self.stash(py, it);
                self.lock().resumed.extend(resumed);
                return Err(e);
            }
        }
        self.deliver_resumed(py, resumed)
    }

    /// Keeps actions that could not run: received bytes, EOF and errors go to
    /// their transports' backlogs (delivered, in order, by the next select).
    pub(super) fn stash(&self, py: Python<'_>, actions: impl Iterator<Item = Action>) {
        {
            let mut inner = self.lock();
            let ring = inner.ring.as_ref().map(|r| r.clone_ref(py));
            for a in actions {
                match a {
                    Action::Data(slot, gen, p) => {
                        if let Some(c) = inner.conn(slot, gen) {
                            p.append_to(ring.as_ref(), py, &mut c.backlog);
                            inner.resumed.push(slot);
                        } else {
                            p.discard(ring.as_ref());
                        }
                    }
                    Action::Eof(slot, gen) => {
                        if let Some(c) = inner.conn(slot, gen) {
                            c.pending_eof = true;
                            inner.resumed.push(slot);
                        }
                    }
                    Action::ReadErr(slot, gen, err) => {
                        if let Some(c) = inner.conn(slot, gen) {
                            c.pending_err = Some(err);
                            inner.resumed.push(slot);
                        }
                    }
                    Action::Readable(slot, gen) => inner.ready_large.push_back((slot, gen)),
                    Action::Call(..) | Action::SendDone(..) => {}
                }
            }
        }
    }
}
