//! Connections come and go (register, adopt a direct accept, free) and the
//! Watcher shuts down: cancel everything, wait for every CQE, then free.

use std::io;
use std::time::{Duration, Instant};

use io_uring::squeue;
use pyo3::prelude::*;

use crate::ring::prep;

use super::conn::{Accepted, Conn, Seg};
use super::ops::{Fail, Why};
use super::watcher::WatcherCore;
use super::TAG_INTERNAL;

impl WatcherCore {
    /// Registers a kernel-allocated direct descriptor as a connection.
    pub(super) fn adopt_direct(&mut self, idx: u32) -> u64 {
        let idx_conn = self.new_conn_index();
        let gen = self.conn_gens[idx_conn];
        self.conns[idx_conn] = Some(Conn::new(None, Some(idx), true, gen));
        self.nconns += 1;
        ((gen as u64) << 32) | idx_conn as u64
    }

    pub(super) fn new_conn_index(&mut self) -> usize {
        let idx = match self.conn_free.pop() {
            Some(i) => i as usize,
            None => {
                self.conns.push(None);
                self.conn_gens.push(0);
                self.conns.len() - 1
            }
        };
        self.conn_gens[idx] = self.conn_gens[idx].wrapping_add(1);
        idx
    }

    /// Clears a fixed-file slot (the ring drops its reference to the socket).
    pub(super) fn clear_slot(&mut self, slot: u32, ours: bool) {
        if let Some(ring) = self.ring.as_mut() {
            ring.clear_slot(slot, ours);
        }
    }

    /// Frees a connection (gaio's Free: no draining, it is lost at once): queued
    /// ops fail now, the kernel's are cancelled, our reference (fixed slot or dup)
    /// is dropped. While the kernel still has an op of it, the connection stays
    /// lost in its index (see [`reap`](Self::reap)).
    pub(super) fn release_conn(&mut self, py: Python<'_>, cid: u64) -> io::Result<()> {
        let idx = (cid & 0xffff_ffff) as usize;
        let Some(c) = self.conn(cid) else {
            return Ok(());
        };
        c.life.lose();
        // The queued stream writes fail below: nothing more of them is sent
        // (a send in flight keeps what it covers until its completion).
        if let Some(q) = c.sendq.as_mut() {
            q.discard();
        }
        let slots: Vec<usize> = c
            .reads
            .iter()
            .chain(&c.writes)
            .chain(&c.accepts)
            .copied()
            .collect();
        let in_kernel = c.in_kernel();
        let cancel_all = c.cancel_all();
        for slot in slots {
            let op = self.op(slot);
            op.cancel = Some(Why::Freed);
            if !op.in_kernel {
                self.finish(py, slot, Some(Fail::Freed), None, false, None);
            }
        }
        let mut result = Ok(());
        if in_kernel {
            // The cancel looks the file up when the kernel takes it: submit before
            // the slot is cleared or the dup closed.
            result = self.push(&[cancel_all]).and_then(|()| self.submit_now());
        }
        self.nconns -= 1;
        let c = self.conns[idx].as_mut().expect("conn");
        let (fd, slot, direct) = (c.fd.take(), c.slot.take(), c.direct);
        let accepted = std::mem::take(&mut c.accepted);
        let backlog = std::mem::take(&mut c.backlog);
        (c.backlog_bytes, c.heap_bytes, c.held) = (0, 0, 0);
        if let Some(slot) = slot {
            self.clear_slot(slot, !direct);
        }
        for acc in &accepted {
            if let Accepted::Direct(i) = acc {
                self.clear_slot(*i, false);
            }
        }
        // Held read-ahead buffers go back to the ring.
        for seg in &backlog {
            if let Seg::Ring { bid, .. } = *seg {
                self.held_total -= 1;
                self.return_held(bid);
            }
        }
        // Closes a dup and any accepted-but-unclaimed fds (an op in the kernel
        // holds its own reference to the file).
        drop((fd, accepted));
        self.reap(cid);
        result
    }

    /// Releases connection `cid` if it is lost and the kernel has no op of it
    /// left: its index may then be reused.
    pub(super) fn reap(&mut self, cid: u64) {
        let idx = (cid & 0xffff_ffff) as usize;
        let Some(c) = self.conn_any(cid) else { return };
        if c.life.is_live() || c.in_kernel() {
            return;
        }
        c.life.release();
        self.conns[idx] = None;
        self.conn_free.push(idx as u32);
    }

    /// Cancels everything and waits for every CQE; then the memory can go.
    pub(super) fn shutdown(&mut self, py: Python<'_>) {
        let Some(ring) = self.ring.as_ref() else {
            return;
        };
        let dead = ring.is_dead();
        self.closed = true;
        // Accepted, never claimed: a direct one is a slot of the table to empty
        // (on our own ring, dropping the ring does that).
        let mut unclaimed = Vec::new();
        for c in self.conns.iter_mut().flatten() {
            for acc in c.accepted.drain(..) {
                if let Accepted::Direct(i) = acc {
                    unclaimed.push(i);
                }
            }
        }
        if self.on_loop && !dead {
            for i in unclaimed {
                self.clear_slot(i, false);
            }
        }
        for q in self
            .conns
            .iter_mut()
            .flatten()
            .filter_map(|c| c.sendq.as_mut())
        {
            q.discard();
        }
        for op in self.ops.iter_mut().flatten() {
            op.cancel = Some(Why::Closed);
        }
        // Ops not in the kernel complete now.
        let queued: Vec<usize> = self
            .ops
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().filter(|o| !o.in_kernel).map(|_| i))
            .collect();
        for slot in queued {
            self.finish(py, slot, Some(Fail::Closed), None, false, None);
        }
        let wrong_thread = self.one_thread && std::thread::current().id() != self.owner;
        if !self.on_loop {
            let cancel_all = prep::cancel_everything().user_data(TAG_INTERNAL);
            let _ = self.push(&[cancel_all]);
        } else if !dead && !wrong_thread {
            // The loop's ring is shared: cancel by file, ours only (every op of
            // ours is on one of our connections; link timeouts go with their op).
            let cancels: Vec<squeue::Entry> = self
                .conns
                .iter()
                .flatten()
                .filter(|c| c.life.is_live() && c.in_kernel())
                .map(Conn::cancel_all)
                .collect();
            for sqe in cancels {
                let _ = self.push(&[sqe]);
            }
        }
        let started = Instant::now();
        while self.inflight > 0 {
            let ring = self.ring.as_mut().expect("open");
            if dead || (self.on_loop && wrong_thread) {
                // The loop's shutdown reaped our CQEs for us (or, from another
                // thread, we cannot enter its ring): take what is there.
                ring.collect(&mut self.cqes);
            } else {
                let _ = ring.wait(py, Some(Duration::from_millis(100)), &mut self.cqes);
            }
            // Conns go away first so nothing gets re-armed while we drain.
            self.process(py);
            let stuck = (dead || (self.on_loop && wrong_thread)) && self.inflight > 0;
            if stuck || started.elapsed() > Duration::from_secs(10) {
                // The kernel still owns buffers: leak them rather than free them
                // under it (never expected for socket ops, which all cancel).
                for op in self.ops.drain(..).flatten() {
                    std::mem::forget(op);
                }
                // A send in flight reads its queue's iovecs and msghdr.
                for c in self.conns.iter_mut().flatten() {
                    if let Some(q) = c.sendq.take() {
                        q.dispose(false);
                    }
                }
                if let Some(p) = self.pool.take() {
                    std::mem::forget(p);
                }
                if let Some(ring) = self.ring.take() {
                    ring.leave();
                    if !ring.is_loop() {
                        std::mem::forget(ring);
                    }
                }
                self.conns.clear();
                return;
            }
        }
        if self.on_loop && !dead {
            // The table is the loop's: empty our slots (the sockets close with them).
            let slots: Vec<(u32, bool)> = self
                .conns
                .iter()
                .flatten()
                .filter_map(|c| c.slot.map(|s| (s, !c.direct)))
                .collect();
            for (slot, ours) in slots {
                self.clear_slot(slot, ours);
            }
        }
        if let (Some(pool), Some(ring)) = (self.pool.as_mut(), self.ring.as_ref()) {
            ring.drop_bufring(pool);
        }
        self.conns.clear();
        self.nconns = 0;
        if let Some(ring) = self.ring.take() {
            ring.leave();
        }
        self.pool = None;
    }
}
