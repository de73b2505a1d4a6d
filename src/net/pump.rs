//! Moving a connection's queues forward: the head read, write or accept goes to
//! the kernel, or the multishot is armed or cancelled.

use std::io;
use std::os::fd::AsRawFd;

use io_uring::opcode;
use pyo3::prelude::*;

use crate::conn::recv::{step, Arm, Step};
use crate::ring::prep;

use super::conn::{mshot_ud, Accepted, HOLD_PER_CONN};
use super::ops::{on, Fail, Kind};
use super::watcher::WatcherCore;
use super::TAG_INTERNAL;

impl WatcherCore {
    pub(super) fn cancel_mshot(&mut self, cid: u64) -> io::Result<()> {
        let (accept, direct) = self
            .conn_ref(cid)
            .map_or((false, false), |c| (c.mshot_accept, c.accept_direct));
        let ud = self.ring().tag(mshot_ud(cid, accept, accept && direct));
        let sqe = prep::cancel(ud).user_data(TAG_INTERNAL);
        self.push(&[sqe])?;
        if let Some(c) = self.conn(cid) {
            let cancelled = c.mshot.cancel();
            debug_assert!(cancelled.is_ok(), "{cancelled:?}");
        }
        Ok(())
    }

    /// Serves queued reads from the read-ahead, EOF and errors; puts the head read
    /// into the kernel (multishot receive or a single receive) when it needs data.
    pub(super) fn pump_reads(&mut self, py: Python<'_>, cid: u64) {
        loop {
            let Some(c) = self.conn(cid) else { return };
            let Some(&slot) = c.reads.front() else { break };
            if c.read_busy {
                break;
            }
            if c.backlog_len() > 0 {
                self.serve_backlog(py, cid, slot);
                continue;
            }
            if let Some(errno) = c.rerr.take() {
                self.finish(py, slot, Some(Fail::Os(errno)), None, false, None);
                continue;
            }
            if c.eof {
                self.finish(py, slot, Some(Fail::Eof), None, false, None);
                continue;
            }
            if c.starved {
                break;
            }
            let (mshot, mshot_accept, (fd, fixed)) = (c.mshot, c.mshot_accept, c.target());
            let op = self.ops[slot].as_ref().expect("live op");
            let wants_mshot = op.kind == Kind::Read
                && op.view.is_none()
                && op.deadline.is_none()
                && self.pool.is_some()
                && self.mshot_recv_ok;
            // The multishot kind is "accept?": a receive (false) is wanted for a
            // read without a buffer or a deadline.
            match step(mshot, mshot_accept, wants_mshot.then_some(false), true) {
                Step::Arm(_) => {
                    let sqe = on(prep::recv_multishot(fd, self.bgid), fixed)
                        .user_data(mshot_ud(cid, false, false));
                    if self.push(&[sqe]).is_ok() {
                        let c = self.conn(cid).expect("conn");
                        let armed = c.mshot.arm();
                        debug_assert!(armed.is_ok(), "{armed:?}");
                        c.mshot_accept = false;
                    }
                }
                Step::Cancel => {
                    let _ = self.cancel_mshot(cid);
                }
                Step::Nothing if mshot == Arm::Off => {
                    // No multishot: a single receive for this read.
                    if !self.submit_or_fail(py, slot) {
                        continue;
                    }
                    self.conn(cid).expect("conn").read_busy = true;
                }
                Step::Nothing => {}
            }
            break;
        }
        // Read-ahead bound: no read wants the data and enough is buffered: stop the
        // kernel reading this connection (TCP flow control then pushes back).
        let limit = self.bufsize;
        if let Some(c) = self.conn(cid) {
            if c.reads.is_empty()
                && c.mshot == Arm::On
                && !c.mshot_accept
                && (c.heap_bytes >= limit || c.held >= HOLD_PER_CONN)
            {
                let _ = self.cancel_mshot(cid);
            }
        }
    }

    pub(super) fn pump_writes(&mut self, py: Python<'_>, cid: u64) {
        loop {
            let Some(c) = self.conn(cid) else { return };
            let Some(&slot) = c.writes.front() else {
                return;
            };
            if c.write_busy || c.sending() {
                return;
            }
            let op = self.ops[slot].as_ref().expect("live op");
            if op.kind == Kind::Write {
                if op.len() == 0 {
                    // Nothing to send: done once every write before it is.
                    self.finish(py, slot, None, None, false, None);
                    continue;
                }
                if self.pump_stream_writes(py, cid) {
                    return;
                }
                continue;
            }
            if !self.submit_or_fail(py, slot) {
                continue;
            }
            self.conn(cid).expect("conn").write_busy = true;
            return;
        }
    }

    pub(super) fn pump_accepts(&mut self, py: Python<'_>, cid: u64) {
        loop {
            let Some(c) = self.conn(cid) else { return };
            let Some(&slot) = c.accepts.front() else {
                break;
            };
            if let Some(fd) = c.accepted.pop_front() {
                self.deliver_accept(py, slot, fd);
                continue;
            }
            if let Some(errno) = c.rerr.take() {
                self.finish(py, slot, Some(Fail::Os(errno)), None, false, None);
                continue;
            }
            if c.mshot == Arm::Off {
                let (fd, fixed) = c.target();
                let direct = c.accept_direct;
                let sqe = opcode::AcceptMulti::new(fd)
                    .allocate_file_index(direct)
                    // CLOEXEC means nothing for a direct descriptor (EINVAL).
                    .flags(if direct { 0 } else { libc::SOCK_CLOEXEC })
                    .build();
                let sqe = on(sqe, fixed).user_data(mshot_ud(cid, true, direct));
                if self.push(&[sqe]).is_ok() {
                    let c = self.conn(cid).expect("conn");
                    let armed = c.mshot.arm();
                    debug_assert!(armed.is_ok(), "{armed:?}");
                    c.mshot_accept = true;
                }
            }
            break;
        }
    }

    pub(super) fn deliver_accept(&mut self, py: Python<'_>, slot: usize, acc: Accepted) {
        let listener = self.op(slot).conn.clone_ref(py);
        let (handle, direct, fd) = match acc {
            Accepted::Fd(fd) => (i64::from(fd.as_raw_fd()), false, Some(fd)),
            Accepted::Direct(idx) => (self.adopt_direct(idx) as i64, true, None),
        };
        match self
            .sock_factory
            .bind(py)
            .call1((listener.bind(py), handle, direct))
        {
            Ok(sock) => {
                // The socket object owns the fd now (a direct conn stays ours).
                if let Some(fd) = fd {
                    std::mem::forget(fd);
                }
                let op = self.op(slot);
                op.conn = sock.unbind();
                let address = Some(listener);
                self.finish(py, slot, None, None, false, address);
            }
            Err(e) => {
                if direct {
                    let _ = self.release_conn(py, handle as u64);
                }
                self.finish(py, slot, Some(Fail::Py(e)), None, false, None)
            }
        }
    }

    pub(super) fn rearm_starved(&mut self, py: Python<'_>) {
        if self.starved.is_empty() || self.pool.as_ref().is_some_and(|p| p.available() == 0) {
            return;
        }
        for cid in std::mem::take(&mut self.starved) {
            if let Some(c) = self.conn(cid) {
                c.starved = false;
                self.pump_reads(py, cid);
            }
        }
    }

    pub(super) fn pump(&mut self, py: Python<'_>, cid: u64, kind: Kind) {
        match kind {
            Kind::Read | Kind::ReadFull | Kind::ReadFrom => self.pump_reads(py, cid),
            Kind::Write | Kind::WriteTo | Kind::Connect => self.pump_writes(py, cid),
            Kind::Accept => self.pump_accepts(py, cid),
        }
    }
}
