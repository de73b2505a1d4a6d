//! Delivery to protocols: each action calls the protocol or the transport's
//! helpers in the transport's context, outside the lock; large-receive turns and
//! resumed transports' backlogs.

use pyo3::exceptions::PyRuntimeError;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::buffers::View;
use crate::conn::recv::Arm;
use crate::pydriver::ring::Ring;

use super::action::{bytes_from_segs, with_bufring, Action, Payload};
use super::callbacks::{call_in_context, Callbacks, Method, Receiver};
use super::pybytes::new_bytes;
use super::transport::Conn;
use super::{CoreState, LoopCore, BIG_BUFSIZE};

impl LoopCore {
    /// Runs one action; Err only for KeyboardInterrupt/SystemExit (or a failing
    /// `_fatal_error`), which stop the batch.
    pub(super) fn run(&self, py: Python<'_>, action: Action) -> PyResult<()> {
        match action {
            Action::Readable(slot, gen) => self.receive_large(py, slot, gen),
            Action::Data(slot, gen, payload) => {
                let (cb, ring) = {
                    let mut inner = self.lock();
                    let ring = inner.ring.as_ref().map(|r| r.clone_ref(py));
                    let Some(c) = inner.conn(slot, gen) else {
                        payload.discard(ring.as_ref());
                        return Ok(());
                    };
                    if !c.life.is_live() {
                        payload.discard(ring.as_ref());
                        return Ok(());
                    }
                    if !c.reading || !c.backlog.is_empty() {
                        // Paused by an earlier callback of this batch: keep the bytes.
                        payload.append_to(ring.as_ref(), py, &mut c.backlog);
                        return Ok(());
                    }
                    (c.callbacks.clone(), ring)
                };
                let Some(cb) = cb else {
                    payload.discard(ring.as_ref());
                    return Ok(());
                };
                self.deliver(py, slot, gen, &cb, payload, ring.as_ref())
            }
            Action::Eof(slot, gen) => {
                match self.end_of_stream(slot, gen, |c| c.pending_eof = true) {
                    Some(cb) => cb.call(py, Method::Eof, None),
                    None => Ok(()),
                }
            }
            Action::ReadErr(slot, gen, e) => {
                match self.end_of_stream(slot, gen, |c| c.pending_err = Some(e)) {
                    Some(cb) => cb.call(py, Method::ReadError, Some(e)),
                    None => Ok(()),
                }
            }
            Action::Call(cb, method, arg) => cb.call(py, method, Some(arg)),
            Action::SendDone(slot, gen) => {
                // Flow control is judged on what the kernel left queued: write()
                // only queues (asyncio's write sends at once), so the water marks
                // are checked here, and in write() only while a send is in flight.
                let flow = {
                    let mut inner = self.lock();
                    let Some(c) = inner.conn(slot, gen) else {
                        return Ok(());
                    };
                    let method = if c.proto_paused && c.send.queued() <= c.low {
                        c.proto_paused = false;
                        Some(Method::Resume)
                    } else if !c.proto_paused && c.send.queued() > c.high {
                        Some(Method::Pause)
                    } else {
                        None
                    };
                    method.zip(c.callbacks.clone())
                };
                if let Some((method, cb)) = flow {
                    cb.call(py, method, None)?;
                }
                let (cb, what) = {
                    let mut inner = self.lock();
                    let Some(c) = inner.conn(slot, gen) else {
                        return Ok(());
                    };
                    if !c.life.is_live() || !c.send.is_idle() {
                        return Ok(());
                    }
                    let what = if c.life.drained() {
                        Some(Method::Drained)
                    } else {
                        if c.eof && !c.shut {
                            c.shut = true;
                            // SAFETY: shutdown(2) on the transport's fd, which stays
                            // open until the transport is released.
                            unsafe { libc::shutdown(c.fd, libc::SHUT_WR) };
                        }
                        if c.want_empty {
                            c.want_empty = false;
                            Some(Method::Empty)
                        } else {
                            None
                        }
                    };
                    (c.callbacks.clone(), what)
                };
                match (cb, what) {
                    (Some(cb), Some(method)) => cb.call(py, method, None),
                    _ => Ok(()),
                }
            }
        }
    }

    /// The callbacks to tell of a receive's end (EOF or a read error) now, or None:
    /// the transport is gone or closing, or it must hear of it later, after its
    /// backlog, when it resumes reading (`defer` marks it pending for then).
    fn end_of_stream(
        &self,
        slot: u32,
        gen: u32,
        defer: impl FnOnce(&mut Conn),
    ) -> Option<Arc<Callbacks>> {
        let mut inner = self.lock();
        let c = inner.conn(slot, gen)?;
        if !c.life.is_live() {
            return None;
        }
        if !c.reading || !c.backlog.is_empty() {
            defer(c);
            return None;
        }
        c.callbacks.clone()
    }

    /// Whether running `action` would call no Python code: a `SendDone` that
    /// crosses no water mark and owes the transport no drained/empty/shutdown step
    /// (the conditions of `run`'s `SendDone` arm, read without acting).
    pub(super) fn send_done_is_quiet(inner: &mut CoreState, action: &Action) -> bool {
        let Action::SendDone(slot, gen) = action else {
            return false;
        };
        let Some(c) = inner.conn(*slot, *gen) else {
            return true;
        };
        let queued = c.send.queued();
        let flow = (c.proto_paused && queued <= c.low) || (!c.proto_paused && queued > c.high);
        if flow {
            return false;
        }
        !c.life.is_live()
            || !c.send.is_idle()
            || !(c.life.is_closing() || (c.eof && !c.shut) || c.want_empty)
    }

    pub(super) fn deliver(
        &self,
        py: Python<'_>,
        slot: u32,
        gen: u32,
        cb: &Callbacks,
        payload: Payload,
        ring: Option<&Py<Ring>>,
    ) -> PyResult<()> {
        // The protocol's callbacks, and `_fatal_error` (which schedules
        // connection_lost), run in the transport's context.
        let ctx = cb.context.as_ref().map(|c| c.bind(py));
        let fail = |e: PyErr, msg: &str| cb.fatal_error(py, e, msg);
        let dr = match &cb.receiver {
            Receiver::Data(dr) => dr,
            Receiver::Buffered {
                get_buffer,
                buffer_updated,
            } => {
                return self.deliver_buffered(
                    py,
                    slot,
                    gen,
                    cb,
                    get_buffer,
                    buffer_updated,
                    payload,
                    ring,
                );
            }
            Receiver::None => {
                payload.discard(ring);
                return Ok(());
            }
        };
        let made = match payload {
            Payload::Raw(v) => new_bytes(py, &v),
            Payload::Obj(o) => Ok(o),
            Payload::Segs(segs) => {
                match with_bufring(ring, |br| br.map(|br| bytes_from_segs(py, br, &segs))) {
                    Some(made) => made,
                    None => return Ok(()), // the ring is gone: the loop is closing
                }
            }
        };
        let arg = match made {
            Ok(b) => b,
            // No memory for the bytes: they are lost, so the stream cannot go on.
            // asyncio fails the transport the same way for a MemoryError in recv.
            Err(e) => return fail(e, "Fatal read error on socket transport"),
        };
        let r = match ctx {
            Some(c) => call_in_context(c, dr.bind(py), &[arg.bind(py).as_any()]),
            None => dr.bind(py).call1((arg,)),
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) => fail(e, "Fatal error: protocol.data_received() call failed."),
        }
    }

    /// Delivers `payload` to a BufferedProtocol: copied into the buffers its
    /// `get_buffer` lends, each followed by `buffer_updated`. What is left when a
    /// callback pauses reading waits in the transport's backlog.
    #[allow(clippy::too_many_arguments)]
    fn deliver_buffered(
        &self,
        py: Python<'_>,
        slot: u32,
        gen: u32,
        cb: &Callbacks,
        get_buffer: &Py<PyAny>,
        buffer_updated: &Py<PyAny>,
        payload: Payload,
        ring: Option<&Py<Ring>>,
    ) -> PyResult<()> {
        let ctx = cb.context.as_ref().map(|c| c.bind(py));
        let fail = |e: PyErr, msg: &str| cb.fatal_error(py, e, msg);
        let data = payload.into_vec(ring, py);
        let mut off = 0;
        while off < data.len() {
            let got = match ctx {
                Some(c) => call_in_context(
                    c,
                    get_buffer.bind(py),
                    &[(-1i32).into_pyobject(py)?.as_any()],
                ),
                None => get_buffer.bind(py).call1((-1,)),
            };
            let buf = match got {
                Ok(b) => b,
                Err(e) => return fail(e, "Fatal error: protocol.get_buffer() call failed."),
            };
            let view = match View::writable(&buf) {
                Ok(v) if !v.is_empty() => v,
                Ok(_) => {
                    let e = PyRuntimeError::new_err("get_buffer() returned an empty buffer");
                    return fail(e, "Fatal error: protocol.get_buffer() call failed.");
                }
                Err(e) => return fail(e, "Fatal error: protocol.get_buffer() call failed."),
            };
            let n = view.len().min(data.len() - off);
            // SAFETY: `view` is a writable, C-contiguous export of at least `n`
            // bytes, held until the copy is done; `data[off..off + n]` is in bounds.
            unsafe { std::ptr::copy_nonoverlapping(data[off..].as_ptr(), view.ptr(), n) };
            drop(view);
            off += n;
            if let Err(e) = cb.invoke(py, buffer_updated.bind(py), PyTuple::new(py, [n])?) {
                return fail(e, "Fatal error: protocol.buffer_updated() call failed.");
            }
            if off < data.len() {
                // The callback may have paused reading or closed: keep the rest.
                let mut inner = self.lock();
                let Some(c) = inner.conn(slot, gen) else {
                    return Ok(());
                };
                if !c.life.is_live() {
                    return Ok(());
                }
                if !c.reading {
                    let mut rest = data[off..].to_vec();
                    rest.extend_from_slice(&c.backlog);
                    c.backlog = rest;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A large-receive transport's turn: one receive (MSG_DONTWAIT) into a new
    /// `bytes` of `BIG_BUFSIZE`, cut to what came and handed to `data_received` at
    /// once, as uvloop reads each ready socket and calls back before the next (the
    /// bytes are still in the cache). A full buffer may have left more: the
    /// transport takes another turn at the next select, after the others ready now.
    /// The kernel writes the object only during the syscall; no Python code can see
    /// it before.
    pub(super) fn receive_large(&self, py: Python<'_>, slot: u32, gen: u32) -> PyResult<()> {
        let fd = {
            let mut inner = self.lock();
            let Some(c) = inner.conn(slot, gen) else {
                return Ok(());
            };
            // Without its readiness poll armed (ended, or cancelled to move to the
            // pool's multishot receive), the receive armed next reports the data:
            // reading it here could race that receive.
            if !c.receiving() || c.recv != Arm::On || !c.recv_big {
                c.readable = false;
                return Ok(());
            }
            if !c.reading || !c.backlog.is_empty() {
                // `set_reading(True)` gives it its turn.
                c.readable = true;
                return Ok(());
            }
            c.readable = false;
            c.fd
        };
        let Some(obj) = super::pybytes::uninit_bytes(py, BIG_BUFSIZE) else {
            return self.fail_receive(py, slot, gen, libc::ENOMEM);
        };
        // SAFETY: `obj` is a new bytes of BIG_BUFSIZE bytes that only this frame
        // references; the kernel writes at most that many into it, during the call.
        let n = unsafe {
            let p = pyo3::ffi::PyBytes_AsString(obj.as_ptr());
            libc::recv(fd, p.cast(), BIG_BUFSIZE, libc::MSG_DONTWAIT)
        };
        if n < 0 {
            let e = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            return match e {
                libc::EAGAIN | libc::EINTR => Ok(()),
                e => self.fail_receive(py, slot, gen, e),
            };
        }
        if n == 0 {
            self.end_receive(slot, gen);
            return self.run(py, Action::Eof(slot, gen));
        }
        let n = n as usize;
        {
            let mut inner = self.lock();
            let batch = inner.batch;
            if let Some(c) = inner.conn(slot, gen) {
                let regroup = c.size.note(n, batch, c.buffered);
                if n == BIG_BUFSIZE || c.hup {
                    // Another turn, after the transports readable now.
                    c.readable = true;
                    inner.ready_large.push_back((slot, gen));
                }
                if regroup {
                    inner.mark(slot);
                }
            }
        }
        let Some(obj) = super::pybytes::shrink(py, obj, n) else {
            return self.fail_receive(py, slot, gen, libc::ENOMEM);
        };
        self.run(py, Action::Data(slot, gen, Payload::Obj(obj)))
    }

    /// The large-receive path is done with this transport (EOF or an error): its
    /// readiness poll is cancelled by the next flush.
    pub(super) fn end_receive(&self, slot: u32, gen: u32) {
        let mut inner = self.lock();
        if let Some(c) = inner.conn(slot, gen) {
            c.recv_done = true;
            c.readable = false;
            inner.mark(slot);
        }
    }

    pub(super) fn fail_receive(
        &self,
        py: Python<'_>,
        slot: u32,
        gen: u32,
        errno: i32,
    ) -> PyResult<()> {
        self.end_receive(slot, gen);
        self.run(py, Action::ReadErr(slot, gen, errno))
    }

    /// Delivers the backlogs of resumed transports (bytes, then EOF or error).
    pub(super) fn deliver_resumed(&self, py: Python<'_>, resumed: Vec<u32>) -> PyResult<()> {
        let mut it = resumed.into_iter();
        while let Some(slot) = it.next() {
            if let Err(e) = self.deliver_one(py, slot) {
                // Interrupted: the others keep their backlog for the next select.
                self.lock().resumed.extend(it);
                return Err(e);
            }
        }
        Ok(())
    }

    pub(super) fn deliver_one(&self, py: Python<'_>, slot: u32) -> PyResult<()> {
        {
            let (gen, data, eof, err, readable) = {
                let mut inner = self.lock();
                let Some(Some(c)) = inner.conns.get_mut(slot as usize) else {
                    return Ok(());
                };
                if !c.reading || !c.life.is_live() {
                    return Ok(());
                }
                (
                    c.gen,
                    std::mem::take(&mut c.backlog),
                    std::mem::take(&mut c.pending_eof),
                    c.pending_err.take(),
                    c.readable,
                )
            };
            if !data.is_empty() {
                self.run(py, Action::Data(slot, gen, Payload::Raw(data)))?;
            }
            if eof {
                self.run(py, Action::Eof(slot, gen))?;
            } else if let Some(e) = err {
                self.run(py, Action::ReadErr(slot, gen, e))?;
            } else if readable {
                self.receive_large(py, slot, gen)?;
            }
        }
        Ok(())
    }
}
