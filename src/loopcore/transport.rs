//! One stream transport's state (`Conn`): its receive, its send queue of chunks
//! and the flags of its lifecycle.

use std::collections::VecDeque;
use std::os::fd::RawFd;

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::callbacks::Callbacks;
use super::{BIG_OFF, BIG_ON, MAX_IOV};

/// One queued write.
pub(super) enum Chunk {
    /// A `bytes` object, sent from its own storage (immutable, kept alive here).
    Shared {
        _obj: Py<PyBytes>,
        ptr: *const u8,
        len: usize,
    },
    Owned(Vec<u8>),
}

impl Chunk {
    pub(super) fn slice(&self) -> (*const u8, usize) {
        match self {
            Chunk::Shared { ptr, len, .. } => (*ptr, *len),
            Chunk::Owned(v) => (v.as_ptr(), v.len()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Recv {
    Off,
    On,
    Cancelling,
}

pub(super) struct Conn {
    pub(super) gen: u32,
    pub(super) fd: RawFd,
    /// What the core calls for the Python transport
    /// (`ringio.loop._transport.RingSocketTransport`): its protocol's receiving
    /// callbacks, and its helper methods for the rare paths (EOF, errors, close
    /// after drain, flow control). None once the transport is released.
    pub(super) callbacks: Option<Arc<Callbacks>>,
    /// The protocol is a BufferedProtocol: its receives stay on the pool's
    /// multishot receive (its bytes are copied into the protocol's buffers).
    pub(super) buffered: bool,
    pub(super) reading: bool,
    pub(super) recv: Recv,
    /// The kernel reported EOF or an error: the receive is never re-armed.
    pub(super) recv_done: bool,
    /// Received while reading was paused: delivered, in order, on resume.
    pub(super) backlog: Vec<u8>,
    pub(super) pending_eof: bool,
    pub(super) pending_err: Option<i32>,
    pub(super) queue: VecDeque<Chunk>,
    /// An emptied chunk buffer, reused by the next write.
    pub(super) spare: Option<Vec<u8>>,
    /// Bytes of the queue's head chunk already sent.
    pub(super) head_off: usize,
    pub(super) queued: usize,
    pub(super) send_inflight: bool,
    pub(super) send_cancelled: bool,
    pub(super) iov: Vec<libc::iovec>,
    pub(super) msg: Box<libc::msghdr>,
    /// close(): connection_lost once the queue has drained.
    pub(super) closing: bool,
    /// write_eof(): SHUT_WR once the queue has drained.
    pub(super) eof: bool,
    pub(super) shut: bool,
    /// loop.sendfile() runs on the socket: write() is refused; `want_empty` asks
    /// for `_ringio_empty` once the queue has drained.
    pub(super) sendfile: bool,
    pub(super) want_empty: bool,
    /// connection_lost scheduled (asyncio's `_conn_lost`): writes are dropped.
    pub(super) lost: bool,
    /// The transport is gone; the slot waits only for the kernel's last CQEs.
    pub(super) released: bool,
    pub(super) proto_paused: bool,
    /// The CQE batch that last delivered data: an EOF or error in the same batch
    /// waits for the next select, as asyncio reads data and EOF in two iterations
    /// (a handshake's waiter must see the transport still open).
    pub(super) data_batch: u64,
    /// `groups[group]` holds this transport's receives of CQE batch `group_batch`.
    pub(super) group_batch: u64,
    pub(super) group: usize,
    /// In `Inner::starved`, waiting for buffers.
    pub(super) starved: bool,
    /// Its last receive from the pool filled a whole buffer.
    pub(super) filled: bool,
    /// Large receives: its readiness poll reported data that is not read yet (its
    /// turn is pending in `Inner::ready_large` or as a `Readable` action, or it
    /// waits for reading to resume).
    pub(super) readable: bool,
    /// ... and it reported the peer's EOF or an error (whose report ends the
    /// stream): the transport keeps its turns until a receive finds it, since no
    /// further wake-up will come.
    pub(super) hup: bool,
    /// Bytes received in CQE batch `rx_batch`, and their moving average over the
    /// batches that brought data (x1; None before a batch with data has ended): it
    /// picks the buffer group.
    pub(super) rx_acc: usize,
    pub(super) rx_batch: u64,
    pub(super) rx_avg: Option<usize>,
    /// The receive should take `bytes`-backed buffers (`big`), and the armed one
    /// does (`recv_big`); when they differ, the receive is cancelled and re-armed.
    pub(super) big: bool,
    pub(super) recv_big: bool,
    pub(super) high: usize,
    pub(super) low: usize,
    pub(super) dirty: bool,
}

// SAFETY: the raw pointers (iovecs, msghdr, chunk pointers) point into memory this
// Conn owns (its chunks and boxes); they are only handed to the kernel, and the
// Conn is only touched under the core's mutex.
unsafe impl Send for Conn {}

impl Conn {
    /// A new transport's state: not reading, nothing queued, asyncio's default
    /// water marks (64 KiB high, 16 KiB low).
    pub(super) fn new(gen: u32, fd: RawFd, callbacks: Callbacks) -> Self {
        Conn {
            gen,
            fd,
            callbacks: Some(Arc::new(callbacks)),
            buffered: false,
            reading: false,
            recv: Recv::Off,
            recv_done: false,
            backlog: Vec::new(),
            pending_eof: false,
            pending_err: None,
            queue: VecDeque::new(),
            spare: None,
            head_off: 0,
            queued: 0,
            send_inflight: false,
            send_cancelled: false,
            iov: Vec::new(),
            // SAFETY: msghdr is plain data; all-zero is a valid empty header.
            msg: Box::new(unsafe { std::mem::zeroed() }),
            closing: false,
            eof: false,
            shut: false,
            sendfile: false,
            want_empty: false,
            lost: false,
            released: false,
            proto_paused: false,
            data_batch: 0,
            group_batch: 0,
            group: 0,
            starved: false,
            filled: false,
            readable: false,
            hup: false,
            rx_acc: 0,
            rx_batch: 0,
            rx_avg: None,
            big: false,
            recv_big: false,
            high: 64 * 1024,
            low: 16 * 1024,
            dirty: false,
        }
    }

    /// Frees the transport's state, when the core lets go of it without waiting
    /// for its ops (`close_all`, the core's `Drop`). `kernel_done`: the ring the
    /// ops went to was shut down (every CQE of the core has arrived), so the
    /// kernel no longer reads any of it. Otherwise, with a send in flight, what
    /// the send's SQE points at (the queued chunks, including `bytes` objects
    /// sent from their own storage, the iovecs and the msghdr) is leaked, never
    /// freed: the kernel may still read it, and nothing would be left to see the
    /// send's CQE. Only the chunks the send covers (the first `iov.len()`) are
    /// kept; the Python references and the rest are released. (A receive in
    /// flight uses only the ring's provided buffers, which the ring's engine
    /// owns, not this Conn.)
    pub(super) fn dispose(mut self, kernel_done: bool) {
        if self.send_inflight && !kernel_done {
            self.queue.truncate(self.iov.len());
            let queue = std::mem::take(&mut self.queue);
            let iov = std::mem::take(&mut self.iov);
            // SAFETY: msghdr is plain data; all-zero is a valid empty header.
            let msg = std::mem::replace(&mut self.msg, Box::new(unsafe { std::mem::zeroed() }));
            std::mem::forget((queue, iov, msg));
        }
    }

    pub(super) fn idle(&self) -> bool {
        self.recv == Recv::Off && !self.send_inflight
    }

    /// Drops the first `n` queued bytes (sent).
    pub(super) fn advance(&mut self, mut n: usize) {
        self.queued -= n.min(self.queued);
        while n > 0 {
            let Some(len) = self.queue.front().map(|ch| ch.slice().1) else {
                break;
            };
            let left = len - self.head_off;
            if n >= left {
                n -= left;
                if let Some(Chunk::Owned(mut v)) = self.queue.pop_front() {
                    // Kept for the next write: a ping-pong transport then queues
                    // every message without a malloc/free pair.
                    if self.spare.is_none() && v.capacity() <= 64 * 1024 {
                        v.clear();
                        self.spare = Some(v);
                    }
                }
                self.head_off = 0;
            } else {
                self.head_off += n;
                n = 0;
            }
        }
    }

    /// One non-blocking sendmsg of the queue's head (no send may be in flight).
    /// Returns the errno of a failure other than EAGAIN/EINTR; the queue is then
    /// dropped, as asyncio clears its buffer on a fatal write error.
    pub(super) fn send_now(&mut self) -> Option<i32> {
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(MAX_IOV.min(self.queue.len()));
        for (i, ch) in self.queue.iter().take(MAX_IOV).enumerate() {
            let (p, n) = ch.slice();
            let off = if i == 0 { self.head_off } else { 0 };
            iov.push(libc::iovec {
                // SAFETY: off < n for the head chunk (a fully sent chunk is popped).
                iov_base: unsafe { p.add(off) } as *mut libc::c_void,
                iov_len: n - off,
            });
        }
        // SAFETY: msghdr is plain data; zeroed is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        // usize on glibc, c_int on musl.
        msg.msg_iovlen = iov.len() as _;
        // SAFETY: `msg` points at `iov`, whose entries point into chunks this Conn
        // owns; all outlive the synchronous call, which only reads them.
        let rc = unsafe { libc::sendmsg(self.fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if rc >= 0 {
            self.advance(rc as usize);
            return None;
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno == libc::EAGAIN || errno == libc::EINTR {
            return None;
        }
        self.queue.clear();
        self.queued = 0;
        self.head_off = 0;
        Some(errno)
    }
}

/// Counts `n` bytes received in CQE batch `batch`: the previous batch's bytes
/// (moving average) pick the buffer group. True when the pick changed.
pub(super) fn note_received(conn: &mut Conn, n: usize, batch: u64) -> bool {
    let mut changed = false;
    if conn.rx_batch != batch {
        if conn.rx_batch != 0 {
            // The first batch with data starts the average (an average starting at
            // 0 would take a new connection of 100 KiB messages four batches to move).
            let avg = conn
                .rx_avg
                .map_or(conn.rx_acc, |a| (a * 3 + conn.rx_acc) / 4);
            conn.rx_avg = Some(avg);
            let want = !conn.buffered && avg >= if conn.big { BIG_OFF } else { BIG_ON };
            if want != conn.big {
                conn.big = want;
                changed = true;
            }
        }
        (conn.rx_acc, conn.rx_batch) = (0, batch);
    }
    conn.rx_acc += n;
    changed
}
