//! SQE staging: binding the core to the loop's ring, then the receive arms and
//! cancels and the sends that dirty transports need before the next enter.

use io_uring::{opcode, types};
use pyo3::prelude::*;

use crate::uring::py::Ring;
use crate::uring::INTERNAL_TOKEN;

use super::transport::Recv;
use super::{
    recv_token, token, Inner, LoopCore, BGID, BUFSIZE, KIND_SEND, MAX_IOV, MAX_SEND, NBUFS,
};

impl LoopCore {
    /// Binds the core to `ring` (the selector makes a new ring when the loop moves
    /// to another thread). Transports re-arm their receive on the new ring; a send
    /// in flight on the old one can complete there unseen: its chunks are leaked
    /// (the old ring may still read them) and counted as sent.
    pub(super) fn bind(inner: &mut Inner, ring: &Bound<'_, Ring>) {
        if inner
            .ring
            .as_ref()
            .is_some_and(|r| r.as_ptr() == ring.as_ptr())
        {
            return;
        }
        let had_ring = inner.ring.is_some();
        inner.ring = Some(ring.clone().unbind());
        if !had_ring {
            return;
        }
        let mut slots = Vec::new();
        for (slot, c) in inner.conns.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            c.recv = Recv::Off;
            if c.send_inflight {
                c.send_inflight = false;
                for _ in 0..c.iov.len() {
                    if let Some(ch) = c.queue.pop_front() {
                        std::mem::forget(ch);
                    }
                }
                c.head_off = 0;
                c.queued = c.queue.iter().map(|ch| ch.slice().1).sum();
            }
            slots.push(slot as u32);
        }
        for s in slots {
            inner.mark(s);
            inner.maybe_free(s);
        }
    }

    /// Pushes the SQEs that dirty transports need: arm or cancel the receive, send
    /// the queue, cancel what a released transport left in flight.
    pub(super) fn flush(
        inner: &mut Inner,
        engine: &mut crate::uring::UringEngine,
    ) -> std::io::Result<()> {
        Self::unstarve(inner, engine);
        let dirty = std::mem::take(&mut inner.dirty);
        let mut result = Ok(());
        for slot in dirty {
            let Some(Some(c)) = inner.conns.get_mut(slot as usize) else {
                continue;
            };
            c.dirty = false;
            let gen = c.gen;
            let fd = types::Fd(c.fd);
            let stop = c.released || c.lost;
            if c.reading && !stop && c.recv == Recv::Off && !c.recv_done && !c.starved {
                let sqe = if c.big {
                    // Large receives: readiness, then a receive straight into a new
                    // `bytes` per turn, transports served in the order their data
                    // came (see `receive_large`).
                    opcode::PollAdd::new(fd, (libc::POLLIN | libc::POLLRDHUP) as u32)
                        .multi(true)
                        .build()
                        .user_data(recv_token(slot, gen, true))
                } else {
                    if let Err(e) = engine.ensure_bufring(NBUFS, BUFSIZE, BGID) {
                        result = Err(e);
                        continue;
                    }
                    opcode::RecvMulti::new(fd, BGID)
                        .build()
                        .user_data(recv_token(slot, gen, false))
                };
                engine.push_side(sqe, true)?;
                c.recv = Recv::On;
                c.recv_big = c.big;
            } else if (stop || !c.reading || c.big != c.recv_big || c.recv_done)
                && c.recv == Recv::On
            {
                // Stopped, or moving to the other buffer group: the final CQE
                // re-arms (see `absorb_cqes`).
                let sqe = opcode::AsyncCancel::new(recv_token(slot, gen, c.recv_big))
                    .build()
                    .user_data(INTERNAL_TOKEN);
                engine.push_side(sqe, false)?;
                c.recv = Recv::Cancelling;
            }
            if c.send_inflight {
                if stop && !c.send_cancelled {
                    // Aborted: a send the peer never makes room for would pin the
                    // socket open forever.
                    let sqe = opcode::AsyncCancel::new(token(slot, gen, KIND_SEND))
                        .build()
                        .user_data(INTERNAL_TOKEN);
                    engine.push_side(sqe, false)?;
                    c.send_cancelled = true;
                }
            } else if !c.queue.is_empty() && !c.released {
                c.iov.clear();
                let mut total = 0usize;
                for (i, ch) in c.queue.iter().enumerate() {
                    let (mut p, mut n) = ch.slice();
                    if i == 0 {
                        // SAFETY: head_off < the head chunk's length (a fully sent
                        // chunk is popped), so the pointer stays inside the chunk.
                        p = unsafe { p.add(c.head_off) };
                        n -= c.head_off;
                    }
                    c.iov.push(libc::iovec {
                        iov_base: p as *mut libc::c_void,
                        iov_len: n,
                    });
                    total += n;
                    if c.iov.len() >= MAX_IOV || total >= MAX_SEND / 2 {
                        break;
                    }
                }
                let ud = token(slot, gen, KIND_SEND);
                let sqe = if c.iov.len() == 1 {
                    let v = c.iov[0];
                    opcode::Send::new(fd, v.iov_base as *const u8, v.iov_len.min(MAX_SEND) as u32)
                        .flags(libc::MSG_NOSIGNAL)
                        .build()
                        .user_data(ud)
                } else {
                    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
                    *c.msg = unsafe { std::mem::zeroed() };
                    c.msg.msg_iov = c.iov.as_mut_ptr();
                    // usize on glibc, c_int on musl.
                    c.msg.msg_iovlen = c.iov.len() as _;
                    opcode::SendMsg::new(fd, &*c.msg as *const libc::msghdr)
                        .flags(libc::MSG_NOSIGNAL as u32)
                        .build()
                        .user_data(ud)
                };
                engine.push_side(sqe, true)?;
                c.send_inflight = true;
                c.send_cancelled = false;
            }
        }
        result
    }

    /// Lets starved transports re-arm (marks them dirty): as many as the buffers
    /// now in the ring can serve at the recent buffers-per-transport rate, and at
    /// least one, so every starved transport gets its turn.
    pub(super) fn unstarve(inner: &mut Inner, engine: &crate::uring::UringEngine) {
        if inner.starved.is_empty() {
            return;
        }
        let available = engine.bufring.as_ref().map_or(0, |br| br.available);
        let per = inner.bufs_avg.div_ceil(16).max(1);
        let mut budget = (available / per).max(1);
        while budget > 0 {
            let Some((slot, gen)) = inner.starved.pop_front() else {
                break;
            };
            let Some(c) = inner.conn(slot, gen) else {
                continue;
            };
            if !c.starved {
                continue;
            }
            c.starved = false;
            if c.reading && !c.released && !c.lost {
                budget -= 1;
            }
            inner.mark(slot);
        }
    }
}
