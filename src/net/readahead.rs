//! Ring buffers handed to Python (`RingBuffer`) and recycled, and read-ahead:
//! what a multishot receive brought while no read wanted it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pyo3::prelude::*;

use super::conn::Seg;
use super::ops::{Fail, Kind};
use super::view::{OpResult, RingView};
use super::watcher::WatcherCore;

impl WatcherCore {
    /// Hands ring buffer `bid` (holding `len` bytes) to Python.
    pub(super) fn ring_view(
        &mut self,
        py: Python<'_>,
        bid: u16,
        len: usize,
    ) -> PyResult<Py<PyAny>> {
        self.pool.as_mut().expect("pool").consumed();
        self.hand_out(py, bid, 0, len)
    }

    /// Hands `len` bytes at `off` of ring buffer `bid`, already out of the ring and
    /// counted so, to Python; it goes back to the ring at the next `recycle`.
    pub(super) fn hand_out(
        &mut self,
        py: Python<'_>,
        bid: u16,
        off: usize,
        len: usize,
    ) -> PyResult<Py<PyAny>> {
        let pool = self.pool.as_ref().expect("pool");
        let view = Py::new(
            py,
            RingView {
                mem: pool.mem.clone(),
                off: pool.buffer(bid) + off,
                len,
                bid,
                exports: AtomicUsize::new(0),
                expired: AtomicBool::new(false),
            },
        );
        let view = match view {
            Ok(v) => v,
            Err(e) => {
                self.return_held(bid);
                return Err(e);
            }
        };
        self.fresh.push(view.clone_ref(py));
        Ok(view.into_any())
    }

    /// Puts back a ring buffer that is out of the ring and already counted so.
    pub(super) fn return_held(&mut self, bid: u16) {
        let pool = self.pool.as_mut().expect("pool");
        pool.give(bid);
        pool.refill();
    }

    pub(super) fn give_back(&mut self, bid: u16) {
        let pool = self.pool.as_mut().expect("pool");
        pool.consumed();
        pool.give(bid);
        pool.refill();
    }

    /// The ready results, for `wait` to return: their ring buffers become last
    /// round's, recycled at the next `wait`.
    pub(super) fn take_ready(&mut self) -> Vec<Py<OpResult>> {
        self.handed.append(&mut self.fresh);
        std::mem::take(&mut self.ready)
    }

    /// Returns last round's ring buffers to the kernel (those no export pins).
    pub(super) fn recycle(&mut self, py: Python<'_>) {
        if self.handed.is_empty() && self.pinned.is_empty() {
            return;
        }
        let Some(pool) = self.pool.as_mut() else {
            return;
        };
        let mut keep = Vec::new();
        for v in self.handed.drain(..).chain(self.pinned.drain(..)) {
            let r = v.get();
            if r.exports.load(Ordering::Relaxed) > 0 {
                keep.push(v);
            } else {
                r.expired.store(true, Ordering::Relaxed);
                pool.give(r.bid);
            }
        }
        pool.refill();
        self.pinned = keep;
        let _ = py;
    }

    /// Serves head read `slot` of `cid` from the connection's read-ahead: a read
    /// without a buffer gets the first piece as it is (a held ring buffer is handed
    /// out without a copy); a read into a buffer gets as much as fits, copied.
    pub(super) fn serve_backlog(&mut self, py: Python<'_>, cid: u64, slot: usize) {
        let idx = (cid & 0xffff_ffff) as usize;
        if self.ops[slot].as_ref().expect("live op").view.is_none() {
            let c = self.conns[idx].as_mut().expect("conn");
            let seg = c.backlog.pop_front().expect("read-ahead");
            let (res, swap) = match seg {
                Seg::Ring { bid, off, len } => {
                    c.held -= 1;
                    c.backlog_bytes -= len;
                    self.held_total -= 1;
                    self.op(slot).done = len;
                    (self.hand_out(py, bid, off, len), true)
                }
                Seg::Heap { data, pos } => {
                    let n = data.len() - pos;
                    c.backlog_bytes -= n;
                    c.heap_bytes -= n;
                    self.op(slot).done = n;
                    let b = pyo3::types::PyBytes::new(py, &data[pos..]);
                    (Ok(b.into_any().unbind()), false)
                }
            };
            match res {
                Ok(b) => self.finish(py, slot, None, Some(b), swap, None),
                Err(e) => self.finish(py, slot, Some(Fail::Py(e)), None, false, None),
            }
            return;
        }
        let op = self.ops[slot].as_mut().expect("live op");
        let v = op.view.as_ref().expect("view");
        let c = self.conns[idx].as_mut().expect("conn");
        let mut released = Vec::new();
        while op.done < v.len() {
            let room = v.len() - op.done;
            let Some(front) = c.backlog.front_mut() else {
                break;
            };
            // SAFETY: pointer math within the pinned view: `done < len` (loop condition).
            let dst = unsafe { v.ptr().add(op.done) };
            let n = match front {
                Seg::Ring { bid, off, len } => {
                    let pool = self.pool.as_ref().expect("pool");
                    let n = room.min(*len);
                    // SAFETY: the buffer is out of the ring (held), so the kernel does
                    // not write it; `off + n <= bufsize` lies inside the mapping; the
                    // view is a pinned writable export with room for `n` bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            pool.mem.ptr(pool.buffer(*bid) + *off),
                            dst,
                            n,
                        )
                    };
                    *off += n;
                    *len -= n;
                    if *len == 0 {
                        released.push(*bid);
                        c.backlog.pop_front();
                        c.held -= 1;
                    }
                    n
                }
                Seg::Heap { data, pos } => {
                    let n = room.min(data.len() - *pos);
                    // SAFETY: `data[pos..pos + n]` is initialised; the view is a pinned
                    // writable export with room for `n` bytes; they cannot overlap.
                    unsafe { std::ptr::copy_nonoverlapping(data[*pos..].as_ptr(), dst, n) };
                    *pos += n;
                    c.heap_bytes -= n;
                    if *pos == data.len() {
                        c.backlog.pop_front();
                    }
                    n
                }
            };
            c.backlog_bytes -= n;
            op.done += n;
        }
        let complete = op.kind != Kind::ReadFull || op.done == op.len();
        for bid in released {
            self.held_total -= 1;
            self.return_held(bid);
        }
        if complete {
            self.finish(py, slot, None, None, false, None);
        }
    }

    /// Keeps `n` bytes the kernel received into ring buffer `bid` as read-ahead of
    /// `cid`: the buffer itself while the hold limits allow, else a copy (and the
    /// buffer goes straight back to the ring).
    pub(super) fn keep_read_ahead(&mut self, cid: u64, bid: u16, n: usize) {
        let idx = (cid & 0xffff_ffff) as usize;
        let pool = self.pool.as_mut().expect("pool");
        let c = self.conns[idx].as_mut().expect("conn");
        // Past HOLD_PER_CONN the multishot is being cancelled; what it still delivers
        // meanwhile is held too, as long as half the ring stays free of read-ahead.
        let hold = (self.held_total + 1) * 2 <= pool.nbufs as usize;
        pool.consumed();
        c.backlog_bytes += n;
        if hold {
            c.backlog.push_back(Seg::Ring {
                bid,
                off: 0,
                len: n,
            });
            c.held += 1;
            self.held_total += 1;
            return;
        }
        // SAFETY: the kernel filled `n` bytes of buffer `bid` and handed it to us (the
        // CQE carried its bid); it is not in the ring until the push below.
        let data = unsafe { std::slice::from_raw_parts(pool.mem.ptr(pool.buffer(bid)), n) };
        match c.backlog.back_mut() {
            Some(Seg::Heap { data: v, .. }) => v.extend_from_slice(data),
            _ => c.backlog.push_back(Seg::Heap {
                data: data.to_vec(),
                pos: 0,
            }),
        }
        c.heap_bytes += n;
        pool.give(bid);
        pool.refill();
    }
}
