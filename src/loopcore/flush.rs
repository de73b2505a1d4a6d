//! SQE staging: binding the core to the loop's ring, then the receive arms and
//! cancels and the sends that dirty transports need before the next enter.

use std::os::fd::AsRawFd;

use io_uring::{opcode, types};
use pyo3::prelude::*;

use crate::pydriver::ring::Ring;
use crate::ring::owner;

use crate::conn::recv::{rearm_budget, step, Step};
use crate::conn::send::SendOp;
use crate::ring::prep;

use super::{
    recv_token, token, wake_token, CoreState, LoopCore, BGID, BUFSIZE, KIND_SEND, NBUFS, WAKE_SINK,
};

impl LoopCore {
    /// Binds the core to `ring` (the selector makes a new ring when the loop moves
    /// to another thread). Transports re-arm their receive on the new ring; a send
    /// in flight on the old one can complete there unseen: its chunks are leaked
    /// (the old ring may still read them) and counted as sent.
    pub(super) fn bind(inner: &mut CoreState, ring: &Bound<'_, Ring>) {
        if inner
            .ring
            .as_ref()
            .is_some_and(|r| r.as_ptr() == ring.as_ptr())
        {
            return;
        }
        let had_ring = inner.ring.is_some();
        inner.ring = Some(ring.clone().unbind());
        // The wake-up read was on the old ring, or on none yet; its completion, if
        // it consumed the counter, is not seen here: the next wake-up writes.
        inner.wake_armed = false;
        inner.wake_signalled = false;
        if !had_ring {
            return;
        }
        let mut slots = Vec::new();
        for (slot, c) in inner.conns.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            c.recv.forget();
            c.send.forget_in_flight();
            slots.push(slot as u32);
        }
        for s in slots {
            inner.mark(s);
            inner.maybe_free(s);
        }
    }

    /// Pushes the SQEs that dirty transports need: arm or cancel the receive, send
    /// the queue, cancel what a released transport left in flight. With
    /// `end_at_submit` (the enter that follows waits), the sends that may end at
    /// submission do (`prep::send_all_now`).
    pub(super) fn flush(
        inner: &mut CoreState,
        engine: &mut crate::uring::UringEngine,
        end_at_submit: bool,
    ) -> std::io::Result<()> {
        Self::unstarve(inner, engine);
        if let Some(fd) = inner
            .wake
            .as_ref()
            .filter(|_| !inner.wake_armed && !inner.wake_failed)
        {
            // The kernel writes through this pointer: WAKE_SINK is a static, there as
            // long as the process; only its address is taken.
            let sink = std::ptr::addr_of_mut!(WAKE_SINK).cast::<u8>();
            let sqe = prep::read(types::Fd(fd.as_raw_fd()), sink, 8).user_data(wake_token());
            engine.push_side(sqe, true)?;
            inner.wake_armed = true;
        }
        let dirty = std::mem::take(&mut inner.dirty);
        let mut result = Ok(());
        for slot in dirty {
            let Some(Some(c)) = inner.conns.get_mut(slot as usize) else {
                continue;
            };
            c.dirty = false;
            let gen = c.gen;
            let fd = types::Fd(c.fd);
            let stop = !c.life.is_live();
            let wanted = (c.reading && !stop && !c.recv_done).then_some(c.size.large());
            match step(c.recv, c.recv_big, wanted, !c.starved) {
                Step::Arm(big) => {
                    let sqe = if big {
                        // Large receives: readiness, then a receive straight into a
                        // new `bytes` per turn, transports served in the order their
                        // data came (see `receive_large`).
                        opcode::PollAdd::new(fd, (libc::POLLIN | libc::POLLRDHUP) as u32)
                            .multi(true)
                            .build()
                            .user_data(recv_token(slot, gen, true))
                    } else {
                        if let Err(e) = engine.ensure_bufring(NBUFS, BUFSIZE, BGID) {
                            result = Err(e);
                            continue;
                        }
                        prep::recv_multishot(fd, BGID).user_data(recv_token(slot, gen, false))
                    };
                    engine.push_side(sqe, true)?;
                    let armed = c.recv.arm();
                    debug_assert!(armed.is_ok(), "{armed:?}");
                    c.recv_big = big;
                }
                Step::Cancel => {
                    // Stopped, or moving to the other buffer group: the final CQE
                    // re-arms (see `batch_actions`).
                    let sqe =
                        prep::cancel(recv_token(slot, gen, c.recv_big)).user_data(owner::INTERNAL);
                    engine.push_side(sqe, false)?;
                    let cancelled = c.recv.cancel();
                    debug_assert!(cancelled.is_ok(), "{cancelled:?}");
                }
                Step::Nothing => {}
            }
            if c.send.in_flight() {
                if stop && c.send.cancel_due() {
                    // Aborted: a send the peer never makes room for would pin the
                    // socket open forever.
                    let sqe = prep::cancel(token(slot, gen, KIND_SEND)).user_data(owner::INTERNAL);
                    engine.push_side(sqe, false)?;
                    c.send.cancel_pushed();
                }
            } else if c.life.is_released() {
                // Nothing more is sent; the queue went with the release.
            } else if let Some(op) = c.send.start_send() {
                let ud = token(slot, gen, KIND_SEND);
                // A send whose completion, when it sends everything, calls no Python
                // code ends during its submission, with a linked check that posts a
                // second CQE when it falls short: the blocking enter that submits it
                // then waits past its CQE (`select_step`). Any other send may wait
                // for room in the socket buffer, as a non-blocking socket's would.
                let now = end_at_submit && c.sends_quietly() && c.send.in_flight_covers_queue();
                let pushed = match (op, now) {
                    (SendOp::One { ptr, len }, true) => {
                        engine.push_side_send_now(prep::send_all_now(fd, ptr, len).user_data(ud))
                    }
                    (SendOp::Msg(msg), true) => {
                        engine.push_side_send_now(prep::sendmsg_all_now(fd, msg).user_data(ud))
                    }
                    (_, false) => Ok(false),
                };
                let pushed = match pushed {
                    Ok(false) => engine.push_side(
                        match op {
                            SendOp::One { ptr, len } => prep::send(fd, ptr, len),
                            SendOp::Msg(msg) => prep::sendmsg(fd, msg),
                        }
                        .user_data(ud),
                        true,
                    ),
                    other => other.map(drop),
                };
                if let Err(e) = pushed {
                    c.send.start_failed();
                    return Err(e);
                }
            }
        }
        result
    }

    /// Lets starved transports re-arm (marks them dirty): as many as the buffers
    /// now in the ring can serve at the recent buffers-per-transport rate, and at
    /// least one, so every starved transport gets its turn.
    pub(super) fn unstarve(inner: &mut CoreState, engine: &crate::uring::UringEngine) {
        if inner.starved.is_empty() {
            return;
        }
        let available = engine.bufring.as_ref().map_or(0, |br| br.available());
        let mut budget = rearm_budget(available, inner.bufs_avg);
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
            if c.reading && c.life.is_live() {
                budget -= 1;
            }
            inner.mark(slot);
        }
    }
}
