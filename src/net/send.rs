//! A connection's stream writes on `conn::send`'s queue: each write request is
//! queued by reference (its op keeps the caller's buffer pinned), one send at a
//! time covers the head of the queue (one `send`, or one `sendmsg` of several
//! requests), and the bytes it sent are attributed to the requests in order: a
//! request fully sent completes with its own result, the partly sent head goes on
//! with the next send (gaio's semantics: a write completes when all its bytes are
//! sent, or fails with the bytes sent so far).

use io_uring::{opcode, types};
use pyo3::prelude::*;

use crate::conn::send::{SendEnd, SendOp};
use crate::ring::prep;

use super::conn::queue;
use super::ops::{on, Fail, Kind, Why};
use super::watcher::WatcherCore;
use super::{TAG_OP, TAG_TIMEOUT};

impl WatcherCore {
    /// Queues the stream writes at the head of `cid`'s write queue that are not
    /// queued yet: from the first one not in the send queue up to the first op
    /// that is not a write, or a write of nothing (which completes when it is the
    /// head of the queue, after every write before it).
    fn fill_send_queue(&mut self, cid: u64) {
        let idx = (cid & 0xffff_ffff) as usize;
        let Some(c) = self.conns[idx].as_mut() else {
            return;
        };
        for &slot in c.writes.range(c.in_sendq as usize..) {
            let op = self.ops[slot].as_mut().expect("live op");
            let len = op.len();
            if op.kind != Kind::Write || len == 0 {
                break;
            }
            let ptr = op.view.as_ref().expect("write data").ptr() as *const u8;
            // SAFETY: the op in `slot` holds the caller's buffer export (pinned,
            // and a read-only export of it is immutable while held) until it is
            // finished. It is finished only after its chunk left the queue: sent
            // (advanced past), removed by `finish` (`remove_shared`, which the
            // send in flight's chunks never are: their ops are `in_kernel` and
            // finish only after the send's completion), or, once the connection
            // is freed, dropped by `discard`, which keeps the in-flight ones.
            unsafe { queue(&mut c.sendq).write_shared(slot, ptr, len) };
            op.in_sendq = true;
            c.in_sendq += 1;
        }
    }

    /// Starts a send of the head of `cid`'s send queue, with a link timeout at
    /// the earliest deadline among the requests it covers. False when its SQE
    /// could not be pushed: the head request then failed with that error.
    fn start_send(&mut self, py: Python<'_>, cid: u64) -> bool {
        let idx = (cid & 0xffff_ffff) as usize;
        let Some(c) = self.conns[idx].as_mut() else {
            return true;
        };
        let (fd, fixed) = c.target();
        let Some(send) = queue(&mut c.sendq).start_send() else {
            return true;
        };
        let sqe = match send {
            SendOp::One { ptr, len } => prep::send(fd, ptr, len),
            SendOp::Msg(msg) => prep::sendmsg(fd, msg),
        };
        let covered = queue(&mut c.sendq).in_flight_chunks();
        let head = *c.writes.front().expect("a queued write");
        let mut earliest: Option<(f64, usize)> = None;
        for &slot in c.writes.iter().take(covered) {
            let op = self.ops[slot].as_mut().expect("live op");
            op.in_kernel = true;
            if let Some(d) = op.deadline {
                if earliest.is_none_or(|(e, _)| d < e) {
                    earliest = Some((d, slot));
                }
            }
        }
        let sqe = on(sqe, fixed).user_data(((head as u64) << 2) | TAG_OP);
        let pushed = match earliest {
            Some((_, slot)) => {
                // The op is boxed and lives until the send's completion.
                let ts: *const types::Timespec = &self.op(slot).ts;
                let link = opcode::LinkTimeout::new(ts)
                    .flags(types::TimeoutFlags::ABS)
                    .build()
                    .user_data(TAG_TIMEOUT);
                self.push(&[sqe.flags(io_uring::squeue::Flags::IO_LINK), link])
            }
            None => self.push(&[sqe]),
        };
        let Err(e) = pushed else { return true };
        let c = self.conns[idx].as_mut().expect("conn");
        queue(&mut c.sendq).start_failed();
        for &slot in c.writes.iter().take(covered) {
            self.ops[slot].as_mut().expect("live op").in_kernel = false;
        }
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        self.finish(py, head, Some(Fail::Os(errno)), None, false, None);
        false
    }

    /// Puts `cid`'s stream writes into the kernel: a send of the head of its
    /// send queue, unless one is in flight. The head of the write queue is a
    /// stream write.
    pub(super) fn pump_stream_writes(&mut self, py: Python<'_>, cid: u64) -> bool {
        self.fill_send_queue(cid);
        self.start_send(py, cid)
    }

    /// The send in flight of connection `cid` completed with `res`.
    pub(super) fn send_done(&mut self, py: Python<'_>, cid: u64, res: i32) {
        let mut covered = std::mem::take(&mut self.covered);
        covered.clear();
        let Some(c) = self.conn_any(cid) else {
            return;
        };
        let live = c.life.is_live();
        covered.extend(c.writes.iter().take(queue(&mut c.sendq).in_flight_chunks()));
        let end = queue(&mut c.sendq).finish_send(res);
        for &slot in &covered {
            self.op(slot).in_kernel = false;
        }
        // Freed or closed: a request not fully sent fails with why.
        let why = |cancel: Option<Why>| cancel.or((!live).then_some(Why::Freed));
        match end {
            SendEnd::Sent(mut n) => {
                for (i, &slot) in covered.iter().enumerate() {
                    let op = self.op(slot);
                    let take = n.min(op.len() - op.done);
                    op.done += take;
                    n -= take;
                    let fail = if op.done == op.len() {
                        None
                    } else if let Some(w) = why(op.cancel) {
                        Some(w.into())
                    } else if res == 0 && i == 0 {
                        // Nothing sent of a non-empty request: the stream is gone.
                        Some(Fail::Os(libc::EPIPE))
                    } else {
                        // Partly sent or not reached: it goes on with the next send.
                        continue;
                    };
                    self.finish(py, slot, fail, None, false, None);
                }
            }
            SendEnd::Retry | SendEnd::Failed(_) => {
                // A link timeout cancels the send at the earliest deadline: only
                // the requests whose deadline has passed fail; an error fails the
                // head; the others are sent again (and meet the error themselves).
                let timed_out =
                    res == -libc::ECANCELED || res == -libc::EINTR || res == -libc::ETIME;
                let now = crate::sys::monotonic();
                let mut failed = false;
                for &slot in &covered {
                    let op = self.op(slot);
                    let fail = if let Some(w) = why(op.cancel) {
                        w.into()
                    } else if timed_out && op.deadline.is_some_and(|d| now >= d - 0.002) {
                        Fail::Timeout
                    } else {
                        continue;
                    };
                    failed = true;
                    self.finish(py, slot, Some(fail), None, false, None);
                }
                if !failed {
                    self.finish(py, covered[0], Some(Fail::Os(-res)), None, false, None);
                }
            }
        }
        self.covered = covered;
        self.pump_writes(py, cid);
    }
}
