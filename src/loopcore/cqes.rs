//! The core's side CQEs become actions under the lock (no Python code runs here),
//! and the receive window follows the batch's moving averages.

use io_uring::cqueue;

use crate::conn::send::SendEnd;
use crate::engine::RawCompletion;

use super::action::{Action, Payload};
use super::callbacks::Method;
use super::{
    untoken, wake_token, CoreState, LoopCore, BIG_BIT, BUFSIZE, CACHE_BUDGET, KIND_RECV, MIN_WINDOW,
};

/// One transport's receives from the pool in a CQE batch, delivered as one
/// `data_received` call.
pub(super) struct ReceiveGroup {
    slot: u32,
    /// Index of its `Data` action in the batch's actions.
    action: usize,
    /// (buffer id, length) of each receive, in order.
    segs: Vec<(u16, usize)>,
}

impl LoopCore {
    /// Buffer `bid` of a CQE whose bytes are not wanted goes back to its group.
    pub(super) fn recycle(engine: &mut crate::uring::UringEngine, bid: u16) {
        if let Some(br) = engine.bufring.as_mut() {
            br.consumed();
            br.give(bid);
            br.refill();
        }
    }

    /// Turns side CQEs into actions (under the lock; no Python code runs here).
    pub(super) fn take_cqes(
        inner: &mut CoreState,
        engine: &mut crate::uring::UringEngine,
        cqes: &[RawCompletion],
        actions: &mut Vec<Action>,
    ) {
        inner.batch += 1;
        let batch = inner.batch;
        let mut groups: Vec<ReceiveGroup> = Vec::new();
        Self::batch_actions(inner, engine, cqes, actions, batch, &mut groups);
        let (bufs, bytes) = groups.iter().fold((0, 0), |(b, n), g| {
            (
                b + g.segs.len(),
                n + g.segs.iter().map(|s| s.1).sum::<usize>(),
            )
        });
        if let Some(recv) = (bytes * 16).checked_div(bufs) {
            // Moving averages over batches (x16 fixed point, weight 1/8), started
            // at the first batch's figures. (bufs > 0: there is a group.)
            let per = bufs * 16 / groups.len();
            if inner.recv_avg == 0 {
                (inner.recv_avg, inner.bufs_avg) = (recv, per);
            }
            inner.recv_avg = (inner.recv_avg * 7 + recv) / 8;
            inner.bufs_avg = (inner.bufs_avg * 7 + per) / 8;
            if let Some(br) = engine.bufring.as_mut() {
                let per_buf = (inner.recv_avg / 16).max(1);
                br.set_cap((CACHE_BUDGET / per_buf).max(MIN_WINDOW));
            }
        }
        for ReceiveGroup {
            slot,
            action: at,
            segs,
        } in groups
        {
            if let Action::Data(s, _, p) = &mut actions[at] {
                debug_assert_eq!(*s, slot);
                *p = Payload::Segs(segs);
            }
        }
    }

    /// `take_cqes`' loop over one batch: each CQE updates its transport and may
    /// add an action; pool receives are gathered per transport in `groups`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn batch_actions(
        inner: &mut CoreState,
        engine: &mut crate::uring::UringEngine,
        cqes: &[RawCompletion],
        actions: &mut Vec<Action>,
        batch: u64,
        groups: &mut Vec<ReceiveGroup>,
    ) {
        for c in cqes {
            if c.token == wake_token() {
                // `wake()` from some thread: the wait has ended, which is all it is
                // for. The next flush arms the read again; an error other than a
                // cancellation (the ring closing) would recur at every re-arm, so
                // the loop then wakes through asyncio's self-pipe instead.
                inner.wake_armed = false;
                inner.wake_signalled = false;
                let res = c.res as i32;
                if res < 0 && res != -libc::ECANCELED && res != -libc::EINTR {
                    inner.wake_failed = true;
                }
                continue;
            }
            let (slot, gen, kind) = untoken(c.token);
            let flags = c.res2 as u32;
            let bid = cqueue::buffer_select(flags);
            let res = c.res as i32;
            let big = kind == KIND_RECV && c.token & BIG_BIT != 0;
            let Some(conn) = inner.conn(slot, gen) else {
                if let Some(bid) = bid {
                    Self::recycle(engine, bid);
                }
                continue;
            };
            if big {
                // The readiness poll of a large-receive transport.
                if !c.more {
                    conn.recv_finished();
                }
                let live = conn.receiving();
                if res > 0 && live {
                    if res & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) as i32 != 0 {
                        conn.hup = true;
                    }
                    if !conn.readable {
                        conn.readable = true;
                        inner.ready_large.push_back((slot, gen));
                    }
                } else if res < 0 && res != -libc::ECANCELED && live {
                    conn.recv_done = true;
                    actions.push(Action::ReadErr(slot, gen, -res));
                }
                if !c.more {
                    inner.mark(slot);
                }
                inner.maybe_free(slot);
                continue;
            }
            if kind == KIND_RECV {
                if !c.more {
                    conn.recv_finished();
                }
                let live = conn.life.is_live();
                let mut remark = false;
                if res > 0 && live {
                    remark = conn.size.note(res as usize, batch, conn.buffered);
                }
                if res > 0 {
                    let br = engine
                        .bufring
                        .as_mut()
                        .expect("recv CQE without a buffer ring");
                    let bid = bid.expect("a multishot receive CQE carries a buffer");
                    let n = res as usize;
                    conn.filled = n == BUFSIZE;
                    // SAFETY: the kernel filled `n` bytes of buffer `bid` and handed it
                    // to us with this CQE; it is not back in the ring until the push
                    // below, so nothing else writes it while we copy.
                    let data = unsafe { std::slice::from_raw_parts(br.mem.ptr(br.buffer(bid)), n) };
                    // The kernel took it from the ring: it is ours until given back.
                    br.consumed();
                    let mut kept = false;
                    if live {
                        if !conn.reading || !conn.backlog.is_empty() {
                            conn.backlog.extend_from_slice(data);
                        } else if conn.buffered {
                            conn.data_batch = batch;
                            actions.push(Action::Data(slot, gen, Payload::Raw(data.to_vec())));
                        } else {
                            conn.data_batch = batch;
                            // Every receive of this transport in the batch becomes one
                            // data_received call (asyncio reads up to 256 KiB at once);
                            // its buffers go back once copied, after the loop.
                            if conn.group_batch == batch {
                                groups[conn.group].segs.push((bid, n));
                            } else {
                                conn.group_batch = batch;
                                conn.group = groups.len();
                                groups.push(ReceiveGroup {
                                    slot,
                                    action: actions.len(),
                                    segs: vec![(bid, n)],
                                });
                                actions.push(Action::Data(slot, gen, Payload::Segs(Vec::new())));
                            }
                            kept = true;
                        }
                    }
                    if !kept {
                        br.give(bid);
                        br.refill();
                    }
                } else {
                    if let Some(bid) = bid {
                        Self::recycle(engine, bid);
                    }
                    let deferred = conn.data_batch == batch;
                    let mut starved = false;
                    match -res {
                        0 => {
                            conn.recv_done = true;
                            if live && deferred {
                                conn.pending_eof = true;
                            } else if live {
                                actions.push(Action::Eof(slot, gen));
                            }
                        }
                        libc::ECANCELED => {}
                        libc::ENOBUFS if live && !conn.buffered && conn.filled => {
                            // The window ran dry while this transport filled whole
                            // buffers: its messages are large, but a starved
                            // receive's batches cannot show it (each gets a buffer
                            // or two), so the average would keep it waiting for
                            // buffers turn after turn (at 100 KiB x 1,000 every new
                            // client's connections took a second to move). Large
                            // receives need no buffers. (Moving those that ran dry
                            // before any data as well, to let their first receives
                            // there decide, left up to a tenth of 1,000 new 1 KiB
                            // streams connections unanswered for a second.)
                            conn.size.force_large();
                        }
                        libc::ENOBUFS => {
                            // The provided window ran dry: widen it (up to its cap)
                            // and wait for buffers (see `unstarve`).
                            if let Some(br) = engine.bufring.as_mut() {
                                br.grow();
                            }
                            if live && !conn.starved {
                                conn.starved = true;
                                starved = true;
                            }
                        }
                        e => {
                            conn.recv_done = true;
                            if live && deferred {
                                conn.pending_err = Some(e);
                            } else if live {
                                actions.push(Action::ReadErr(slot, gen, e));
                            }
                        }
                    }
                    if live && deferred && res != -libc::ECANCELED && res != -libc::ENOBUFS {
                        inner.resumed.push(slot);
                    }
                    if starved {
                        inner.starved.push_back((slot, gen));
                    }
                }
                if !c.more || remark {
                    inner.mark(slot);
                }
            } else {
                let live = conn.life.is_live();
                let end = conn.send.finish_send(res);
                // A send that found the socket buffer full (EAGAIN from a send that
                // does not wait), or left bytes behind: the next one waits for room.
                conn.send_waits = !conn.send.is_empty();
                match end {
                    // Decided when the action runs: the resume_writing callback
                    // may queue more (asyncio's _write_ready order).
                    SendEnd::Sent(_) if live => actions.push(Action::SendDone(slot, gen)),
                    SendEnd::Sent(_) | SendEnd::Retry => {}
                    SendEnd::Failed(libc::ECANCELED) if !live => {}
                    SendEnd::Failed(e) => {
                        if live {
                            // Dropped with the queue, as asyncio clears its buffer.
                            conn.send.clear();
                            if let Some(cb) = &conn.callbacks {
                                actions.push(Action::Call(cb.clone(), Method::WriteError, e));
                            }
                        }
                    }
                }
                if !live {
                    // Nothing more to send: release the chunks the kernel no longer reads.
                    conn.send.clear();
                }
                inner.mark(slot);
            }
            inner.maybe_free(slot);
        }
    }
}
