//! The one submission/completion model every engine implements.
//!
//! An engine encodes requests for its kernel interface ([`Engine::prepare`]), hands a
//! batch to the kernel in as few syscalls as it can ([`Engine::submit`]), and delivers
//! completions tagged with the token given at prepare time. The [`Driver`] on top is
//! engine-independent: it owns, per in-flight op, the Python op object, the buffer
//! views and iovecs the kernel reads or fills, and the engine's slot, and releases
//! them only when that op's completion has been reaped (or the engine has been shut
//! down, which waits for all in-flight I/O).

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::buffers::View;
use crate::errors::{self, PartialSubmitError};
use crate::op::{Op, OpCode, State};

/// An op resolved to raw addresses, ready for an engine to encode.
pub struct Request<'a> {
    pub op: &'a Op,
    /// For single-buffer ops: the buffer; for vectored ops: unused.
    pub buf: *mut u8,
    pub len: usize,
    pub iovecs: &'a [libc::iovec],
}

#[derive(Clone, Copy, Debug)]
pub struct RawCompletion {
    pub token: u64,
    pub res: i64,
    /// AIO: the event's res2. io_uring: the CQE flags.
    pub res2: i64,
    /// io_uring multishot: more completions will follow for this op.
    pub more: bool,
}

/// How far a batch got: the kernel took the first `accepted`; `error` is why the
/// next one was refused.
pub struct Submitted {
    pub accepted: usize,
    pub error: Option<io::Error>,
}

pub enum CancelOutcome {
    /// The kernel will deliver the op's completion (with -ECANCELED) through the ring.
    Requested,
    /// The kernel completed the op synchronously; here is its completion.
    Completed(RawCompletion),
}

pub trait Engine: Send {
    /// Per-op state the kernel may refer to until completion (it must not move).
    type Slot: Send;
    type Waiter: Waiter;
    type Launch: Send;

    fn waiter(&self) -> Self::Waiter;

    /// Refuses a caller the kernel would refuse (a DEFER_TASKRUN ring belongs to
    /// the thread that created it), before anything is queued.
    fn check_caller(&self) -> io::Result<()> {
        Ok(())
    }

    fn prepare(&mut self, req: &Request<'_>, token: u64) -> io::Result<Self::Slot>;
    /// Readies a batch for the kernel under the driver's lock; what the kernel
    /// still has to be told goes into the returned `Launch`.
    fn stage(&mut self, batch: &mut [&mut Self::Slot]) -> Self::Launch;
    /// Hands a staged batch to the kernel. Runs with neither the driver's lock nor
    /// the GIL, since the kernel may do the I/O inside the call (buffered kernel
    /// AIO on a socket blocks until data arrives).
    fn launch(launch: Self::Launch) -> Submitted;
    fn cancel(&mut self, slot: &mut Self::Slot) -> io::Result<CancelOutcome>;
    /// Completions already available, without blocking.
    fn reap_now(&mut self, out: &mut Vec<RawCompletion>, max: usize) -> io::Result<()>;
    /// An fd that becomes readable when completions wait (an eventfd).
    fn notify_fd(&self) -> RawFd;
    /// Waits for all `in_flight` ops to finish (cancelling what it can), pushing the
    /// completions it sees to `out`, then releases the kernel context. Until it
    /// returns Ok, the kernel may still use the ops' memory.
    fn shutdown(&mut self, in_flight: usize, out: &mut Vec<RawCompletion>) -> io::Result<()>;
}

/// Blocking waits happen without the driver's lock (and without the GIL), through a
/// handle that can be copied out of the engine.
pub trait Waiter: Send + Sync + Copy {
    fn wait(
        &self,
        out: &mut Vec<RawCompletion>,
        min: usize,
        max: usize,
        timeout: Option<Duration>,
    ) -> io::Result<()>;
}

/// Everything the kernel may touch for one op, kept until its completion.
pub struct InFlight<S> {
    pub op: Py<Op>,
    // Held, never read: owning them is what keeps the kernel's memory valid.
    #[allow(dead_code)]
    views: Vec<View>,
    #[allow(dead_code)]
    iovecs: Box<[libc::iovec]>,
    slot: S,
    cancel_requested: bool,
}

// SAFETY: the iovecs point into buffers owned by `views` (which are Send); the raw
// pointers are never dereferenced by Rust, only handed to the kernel.
unsafe impl<S: Send> Send for InFlight<S> {}

/// Completed ops with their results, and the in-flight entries they released.
pub type Reaped<S> = (Vec<(Py<Op>, RawCompletion)>, Vec<InFlight<S>>);

pub struct Driver<E: Engine> {
    pub engine: E,
    inflight: HashMap<u64, InFlight<E::Slot>>,
    next_token: u64,
    closed: bool,
    /// The fork generation this driver was created in.
    generation: u64,
    /// Submissions between begin_submit and finish_submit: the kernel may be
    /// reading their slots, so close must wait for them.
    launching: usize,
}

impl<E: Engine> Driver<E> {
    pub fn new(engine: E) -> Self {
        Self {
            engine,
            inflight: HashMap::new(),
            next_token: 1,
            closed: false,
            generation: crate::sys::fork_generation(),
            launching: 0,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    pub fn is_launching(&self) -> bool {
        self.launching > 0
    }

    pub fn check_open(&self) -> PyResult<()> {
        self.check_process()?;
        if self.closed {
            Err(PyValueError::new_err("I/O operation on closed context"))
        } else {
            Ok(())
        }
    }

    /// First half of a submission, under the driver's lock with the GIL held:
    /// prepares `ops`, stages them with the engine, and records them as in flight
    /// (before the kernel sees them, so that a concurrent reaper finds them).
    pub fn begin_submit(
        &mut self,
        py: Python<'_>,
        ops: &[Bound<'_, Op>],
    ) -> PyResult<(Vec<u64>, E::Launch)> {
        self.check_open()?;
        self.check_caller(py)?;
        let mut batch: Vec<(u64, InFlight<E::Slot>)> = Vec::with_capacity(ops.len());
        if let Err(e) = self.prepare_all(py, ops, &mut batch) {
            Self::abandon(&batch);
            return Err(e);
        }
        let launch = {
            let mut slots: Vec<&mut E::Slot> = batch.iter_mut().map(|(_, f)| &mut f.slot).collect();
            self.engine.stage(&mut slots)
        };
        self.launching += 1;
        let mut tokens = Vec::with_capacity(batch.len());
        for (token, entry) in batch {
            entry.op.get().status().token = token;
            tokens.push(token);
            self.inflight.insert(token, entry);
        }
        Ok((tokens, launch))
    }

    /// Second half, under the lock again after `E::launch` ran without it: takes
    /// back the ops the kernel refused and reports the error of the first of them
    /// (an `OSError` when none went in, a `PartialSubmitError` naming `submitted`
    /// and `op` otherwise). Returns how many the kernel accepted.
    pub fn finish_submit(
        &mut self,
        py: Python<'_>,
        ops: &[Bound<'_, Op>],
        tokens: &[u64],
        outcome: Submitted,
    ) -> PyResult<usize> {
        self.launching -= 1;
        let accepted = outcome.accepted;
        for token in &tokens[accepted..] {
            if let Some(entry) = self.inflight.remove(token) {
                entry.op.get().status().state = State::Idle;
            }
        }
        match outcome.error {
            None => Ok(accepted),
            Some(err) if accepted == ops.len() => {
                // Queued in the kernel's ring, but entering the kernel failed: they
                // stay in flight (the next enter submits them); report the failure.
                Err(errors::io_error(py, &err, None))
            }
            Some(err) => {
                let op = &ops[accepted];
                let fd = op.get().fd;
                let errno = err.raw_os_error().unwrap_or(libc::EIO);
                if accepted == 0 {
                    Err(errors::os_error(
                        py,
                        errno,
                        Some(fd),
                        Some(op.get().code.name()),
                    ))
                } else {
                    let e = PartialSubmitError::new_err((
                        errno,
                        format!(
                            "{} (fd {fd}): only the first {accepted} of {} ops were submitted",
                            errors::strerror(errno),
                            ops.len()
                        ),
                    ));
                    let v = e.value(py);
                    v.setattr("submitted", accepted)?;
                    v.setattr("op", op)?;
                    v.setattr("fd", fd)?;
                    Err(e)
                }
            }
        }
    }

    fn prepare_all(
        &mut self,
        py: Python<'_>,
        ops: &[Bound<'_, Op>],
        batch: &mut Vec<(u64, InFlight<E::Slot>)>,
    ) -> PyResult<()> {
        for op in ops {
            let o = op.get();
            {
                let mut status = o.status();
                if status.state == State::InFlight {
                    return Err(PyValueError::new_err(format!(
                        "{} op on fd {} is already in flight",
                        o.code.name(),
                        o.fd
                    )));
                }
                // Marked now so that the same op twice in one batch is refused.
                status.state = State::InFlight;
                status.res = None;
            }
            let token = self.next_token;
            self.next_token += 1;
            let entry = match self.prepare_one(py, op, token) {
                Ok(e) => e,
                Err(e) => {
                    o.status().state = State::Idle;
                    return Err(e);
                }
            };
            batch.push((token, entry));
        }
        Ok(())
    }

    fn prepare_one(
        &mut self,
        py: Python<'_>,
        op: &Bound<'_, Op>,
        token: u64,
    ) -> PyResult<InFlight<E::Slot>> {
        let o = op.get();
        let views = o.acquire_views(py)?;
        let vectored = matches!(o.code, OpCode::Readv | OpCode::Writev);
        let iovecs: Box<[libc::iovec]> = if vectored {
            views
                .iter()
                .map(|v| libc::iovec {
                    iov_base: v.ptr().cast(),
                    iov_len: v.len(),
                })
                .collect()
        } else {
            Box::new([])
        };
        let (buf, len) = match (vectored, views.first()) {
            (false, Some(v)) => (v.ptr(), v.len()),
            _ => (std::ptr::null_mut(), 0),
        };
        let req = Request {
            op: o,
            buf,
            len,
            iovecs: &iovecs,
        };
        let slot = self.engine.prepare(&req, token).map_err(|e| {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            errors::os_error(py, errno, (o.fd >= 0).then_some(o.fd), Some(o.code.name()))
        })?;
        Ok(InFlight {
            op: op.clone().unbind(),
            views,
            iovecs,
            slot,
            cancel_requested: false,
        })
    }

    fn abandon(entries: &[(u64, InFlight<E::Slot>)]) {
        for (_, entry) in entries {
            entry.op.get().status().state = State::Idle;
        }
    }

    /// Matches raw completions to their ops. The returned entries still hold the
    /// buffer views: drop them after releasing any lock, since releasing a buffer
    /// may run Python code.
    pub fn complete(&mut self, py: Python<'_>, raw: &[RawCompletion]) -> Reaped<E::Slot> {
        let mut done = Vec::with_capacity(raw.len());
        let mut released = Vec::with_capacity(raw.len());
        for c in raw {
            if c.more {
                // A multishot op stays in flight; it reports each result.
                if let Some(entry) = self.inflight.get(&c.token) {
                    done.push((entry.op.clone_ref(py), *c));
                }
                continue;
            }
            if let Some(entry) = self.inflight.remove(&c.token) {
                let mut c = *c;
                // The kernel ends a cancelled poll with an empty mask; say what happened.
                if entry.cancel_requested && c.res == 0 && entry.op.get().code == OpCode::Poll {
                    c.res = -(libc::ECANCELED as i64);
                }
                entry.op.get().completed(c.res, c.res2);
                done.push((entry.op.clone_ref(py), c));
                released.push(entry);
            }
        }
        (done, released)
    }

    /// The token of `op` if it is in flight here (and not on another driver).
    fn token_of(&self, op: &Bound<'_, Op>) -> Option<u64> {
        let token = op.get().status().token;
        let entry = self.inflight.get(&token)?;
        (entry.op.as_ptr() == op.as_ptr()).then_some(token)
    }

    pub fn cancel(
        &mut self,
        py: Python<'_>,
        op: &Bound<'_, Op>,
    ) -> PyResult<Option<RawCompletion>> {
        self.check_open()?;
        let fd = op.get().fd;
        let Some(entry) = self.token_of(op).and_then(|t| self.inflight.get_mut(&t)) else {
            return Err(PyValueError::new_err("op is not in flight on this context"));
        };
        entry.cancel_requested = true;
        match self.engine.cancel(&mut entry.slot) {
            Ok(CancelOutcome::Requested) => Ok(None),
            Ok(CancelOutcome::Completed(c)) => Ok(Some(c)),
            Err(e) => Err(errors::os_error(
                py,
                e.raw_os_error().unwrap_or(libc::EIO),
                Some(fd),
                Some("the kernel cannot cancel this op; its completion will still arrive"),
            )),
        }
    }

    /// Shuts the engine down (waiting for in-flight I/O) and returns what it held,
    /// with the completions seen meanwhile; an op with none ends with -ECANCELED.
    /// If the engine cannot confirm that the kernel is done (it failed, or this is
    /// a forked child that must not touch the parent's ring), the entries are
    /// leaked rather than freed under the kernel.
    pub fn close(&mut self) -> io::Result<Closed<E::Slot>> {
        if self.closed {
            return Ok((Vec::new(), Vec::new()));
        }
        self.closed = true;
        if crate::sys::forked_since(self.generation) {
            std::mem::forget(std::mem::take(&mut self.inflight));
            return Ok((Vec::new(), Vec::new()));
        }
        let mut seen = Vec::new();
        if let Err(e) = self.engine.shutdown(self.inflight.len(), &mut seen) {
            std::mem::forget(std::mem::take(&mut self.inflight));
            return Err(e);
        }
        let entries: Vec<_> = self.inflight.drain().map(|(_, e)| e).collect();
        let result_of = |token: u64| seen.iter().rev().find(|c| c.token == token && !c.more);
        let mut finals = Vec::with_capacity(entries.len());
        for (token, e) in entries.iter().map(|e| (e.op.get().status().token, e)) {
            let c = result_of(token).copied().unwrap_or(RawCompletion {
                token,
                res: -(libc::ECANCELED as i64),
                res2: 0,
                more: false,
            });
            e.op.get().completed(c.res, c.res2);
            finals.push(c);
        }
        Ok((finals, entries))
    }

    pub fn check_caller(&self, py: Python<'_>) -> PyResult<()> {
        self.engine.check_caller().map_err(|e| {
            errors::os_error(
                py,
                e.raw_os_error().unwrap_or(libc::EEXIST),
                None,
                Some("this ring uses SINGLE_ISSUER and belongs to the thread that created it"),
            )
        })
    }

    /// Refuses use of an engine inherited through fork(): its kernel context
    /// belongs to the parent.
    pub fn check_process(&self) -> PyResult<()> {
        if crate::sys::forked_since(self.generation) {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "this ring/context was created before fork(); the child must create its own",
            ));
        }
        Ok(())
    }
}

/// What `Driver::close` hands back: final completions, and the entries to release.
pub type Closed<S> = (Vec<RawCompletion>, Vec<InFlight<S>>);

impl<E: Engine> Drop for Driver<E> {
    fn drop(&mut self) {
        // The kernel must be done with every buffer before the views are released.
        let _ = self.close();
    }
}
