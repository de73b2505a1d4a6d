//! CQE handling: each completion of an op or of a connection's multishot
//! (receive or accept) settles ops and pumps the connection's queues again.

use std::os::fd::{FromRawFd, OwnedFd};

use io_uring::cqueue;
use pyo3::prelude::*;

use super::addr::SockAddr;
use crate::conn::recv::Arm;

use super::conn::{Accepted, GEN_MASK};
use super::ops::{Fail, Kind, Why};
use super::watcher::WatcherCore;
use super::{addr, ACCEPT_BACKLOG, TAG_MSHOT, TAG_OP};

impl WatcherCore {
    /// Handles every collected CQE.
    pub(super) fn process(&mut self, py: Python<'_>) {
        while !self.cqes.is_empty() {
            let batch = std::mem::take(&mut self.cqes);
            for &(ud, res, flags) in &batch {
                let more = cqueue::more(flags);
                match ud & 3 {
                    TAG_OP => {
                        self.inflight -= 1;
                        self.on_op(py, (ud >> 2) as usize, res, flags);
                    }
                    TAG_MSHOT => {
                        if !more {
                            self.inflight -= 1;
                        }
                        self.on_mshot(py, ud, res, flags, more);
                    }
                    _ => self.inflight -= 1,
                }
            }
            let mut batch = batch;
            batch.clear();
            if self.cqes.is_empty() {
                self.cqes = batch;
            }
        }
    }

    pub(super) fn on_mshot(&mut self, py: Python<'_>, ud: u64, res: i32, flags: u32, more: bool) {
        let idx = (ud & 0xffff_ffff) >> 4;
        let gen = self
            .conns
            .get(idx as usize)
            .and_then(Option::as_ref)
            .filter(|c| u64::from(c.gen) & GEN_MASK == (ud >> 32) & GEN_MASK)
            .map_or(0, |c| c.gen);
        let cid = (u64::from(gen) << 32) | idx;
        let is_accept = ud & 4 != 0;
        let is_direct = ud & 8 != 0;
        let bid = cqueue::buffer_select(flags);
        // A freed connection stays (lost) until its multishot's final CQE.
        let live = match self.conn_any(cid) {
            Some(c) => {
                if !more {
                    c.mshot_finished();
                }
                c.life.is_live()
            }
            None => false,
        };
        if !live {
            // Freed: give back its buffer, close an fd it accepted.
            if let Some(bid) = bid {
                self.give_back(bid);
            }
            if is_accept && res >= 0 {
                if is_direct {
                    self.clear_slot(res as u32, false);
                } else {
                    // SAFETY: a multishot accept CQE's result is a new fd nobody else owns.
                    drop(unsafe { OwnedFd::from_raw_fd(res) });
                }
            }
            self.reap(cid);
            return;
        }
        let c = self.conn(cid).expect("live");
        if c.mshot_accept {
            if res >= 0 {
                c.accepted.push_back(if is_direct {
                    Accepted::Direct(res as u32)
                } else {
                    // SAFETY: a multishot accept CQE's result is a new fd nobody else owns.
                    Accepted::Fd(unsafe { OwnedFd::from_raw_fd(res) })
                });
                let over = c.accepts.is_empty()
                    && c.accepted.len() >= ACCEPT_BACKLOG
                    && c.mshot == Arm::On;
                if over {
                    let _ = self.cancel_mshot(cid);
                }
            } else if res != -libc::ECANCELED {
                c.rerr = Some(-res);
            }
            self.pump_accepts(py, cid);
            return;
        }
        if res > 0 {
            let n = res as usize;
            let bid = bid.expect("multishot receive CQE carries a buffer");
            let head = c.reads.front().copied();
            let direct = c.backlog_len() == 0
                && head.is_some_and(|s| {
                    let op = self.ops[s].as_ref().expect("live op");
                    op.kind == Kind::Read && op.view.is_none() && !op.in_kernel
                });
            if direct {
                let slot = head.expect("head");
                match self.ring_view(py, bid, n) {
                    Ok(view) => {
                        self.op(slot).done = n;
                        self.finish(py, slot, None, Some(view), true, None);
                    }
                    Err(e) => self.finish(py, slot, Some(Fail::Py(e)), None, false, None),
                }
            } else {
                self.keep_read_ahead(cid, bid, n);
            }
        } else {
            match -res {
                0 => c.eof = true,
                libc::ENOBUFS => {
                    c.starved = true;
                    self.starved.push(cid);
                    self.pool.as_mut().expect("pool").grow();
                }
                libc::ECANCELED => {}
                libc::EINVAL if !more => {
                    // No multishot receive on this kernel: single receives from now.
                    self.mshot_recv_ok = false;
                }
                e => c.rerr = Some(e),
            }
            if let Some(bid) = bid {
                self.give_back(bid);
            }
        }
        self.pump_reads(py, cid);
    }

    pub(super) fn on_op(&mut self, py: Python<'_>, slot: usize, res: i32, flags: u32) {
        let Some((cid, kind)) = self
            .ops
            .get(slot)
            .and_then(Option::as_ref)
            .map(|op| (op.cid, op.kind))
        else {
            return;
        };
        if kind == Kind::Write {
            // The send of the connection's send queue, `slot` the first request
            // it covers.
            self.send_done(py, cid, res);
        } else {
            self.op_done(py, slot, res, flags);
        }
        // A freed connection goes once the kernel has given back its last op.
        self.reap(cid);
    }

    fn op_done(&mut self, py: Python<'_>, slot: usize, res: i32, flags: u32) {
        let Some(op) = self.ops.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        op.in_kernel = false;
        let (kind, cid, deadline, cancel) = (op.kind, op.cid, op.deadline, op.cancel);
        let bid = cqueue::buffer_select(flags);
        let alive = self.conn_ref(cid).is_some();
        if let Some(c) = self.conn_any(cid) {
            match kind {
                Kind::Read | Kind::ReadFull | Kind::ReadFrom => c.read_busy = false,
                Kind::WriteTo | Kind::Connect => c.write_busy = false,
                Kind::Write => unreachable!("see send_done"),
                Kind::Accept => {}
            }
        }
        let why = cancel.or((!alive).then_some(Why::Freed));
        let timed_out = |res: i32| {
            (res == -libc::ECANCELED || res == -libc::EINTR || res == -libc::ETIME)
                && deadline.is_some_and(|d| crate::sys::monotonic() >= d - 0.002)
        };
        if res < 0 {
            if let Some(bid) = bid {
                self.give_back(bid);
            }
            let errno = -res;
            if errno == libc::ENOBUFS && why.is_none() {
                // Buffer ring ran dry: retried at the next wait_io, after recycling
                // (and with more buffers provided from now on).
                let c = self.conn(cid).expect("conn");
                c.starved = true;
                self.starved.push(cid);
                if let Some(pool) = self.pool.as_mut() {
                    pool.grow();
                }
                return;
            }
            let fail = if let Some(w) = why {
                w.into()
            } else if timed_out(res) {
                Fail::Timeout
            } else {
                Fail::Os(errno)
            };
            self.finish(py, slot, Some(fail), None, false, None);
            self.pump(py, cid, kind);
            return;
        }
        let n = res as usize;
        match kind {
            Kind::Read | Kind::ReadFull | Kind::ReadFrom => {
                let address = if kind == Kind::ReadFrom {
                    let m = &self.op(slot).msg.as_ref().expect("msg").addr;
                    let mut a = SockAddr::empty();
                    a.storage = m.storage;
                    a.len = self.op(slot).msg.as_ref().expect("msg").hdr.msg_namelen;
                    addr::from_sockaddr(py, &a).ok()
                } else {
                    None
                };
                if n == 0 && kind != Kind::ReadFrom {
                    if let Some(bid) = bid {
                        self.give_back(bid);
                    }
                    if let Some(c) = self.conn(cid) {
                        c.eof = true;
                    }
                    self.finish(py, slot, Some(Fail::Eof), None, false, None);
                } else if let Some(bid) = bid {
                    self.op(slot).done = n;
                    match self.ring_view(py, bid, n) {
                        Ok(v) => self.finish(py, slot, None, Some(v), true, address),
                        Err(e) => self.finish(py, slot, Some(Fail::Py(e)), None, false, None),
                    }
                } else if let Some(own) = self.op(slot).own.take() {
                    self.op(slot).done = n;
                    let b = pyo3::types::PyBytes::new(py, &own[..n]).into_any().unbind();
                    self.finish(py, slot, None, Some(b), false, address);
                } else {
                    let op = self.op(slot);
                    op.done += n;
                    if kind == Kind::ReadFull && op.done < op.len() {
                        if let Some(w) = why {
                            self.finish(py, slot, Some(w.into()), None, false, None);
                        }
                        // else: stays at the head, re-submitted by pump_reads below
                    } else {
                        self.finish(py, slot, None, None, false, address);
                    }
                }
            }
            Kind::Write => unreachable!("see send_done"),
            Kind::WriteTo => {
                self.op(slot).done = n;
                self.finish(py, slot, None, None, false, None);
            }
            Kind::Connect | Kind::Accept => self.finish(py, slot, None, None, false, None),
        }
        self.pump(py, cid, kind);
    }
}
