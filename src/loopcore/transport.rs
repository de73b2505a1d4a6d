//! One stream transport's state (`Conn`): its receive, its send queue of chunks
//! and the flags of its lifecycle.

use std::os::fd::RawFd;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::conn::lifecycle::Lifecycle;
use crate::conn::recv::{Arm, ReceiveSize};
use crate::conn::send::SendQueue;

use super::callbacks::Callbacks;

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
    /// The receive: the pool's multishot receive, or (`recv_big`) the readiness
    /// poll of large receives.
    pub(super) recv: Arm,
    /// The kernel reported EOF or an error: the receive is never re-armed.
    pub(super) recv_done: bool,
    /// Received while reading was paused: delivered, in order, on resume.
    pub(super) backlog: Vec<u8>,
    pub(super) pending_eof: bool,
    pub(super) pending_err: Option<i32>,
    /// Written bytes (`bytes` of 2 KiB or more are kept by reference).
    pub(super) send: SendQueue<Py<PyBytes>>,
    /// Open, closing (close(): connection_lost once the queue has drained), lost
    /// (connection_lost scheduled, asyncio's `_conn_lost`: writes are dropped) or
    /// released (the transport is gone; the slot waits only for the kernel's
    /// last CQEs).
    pub(super) life: Lifecycle,
    /// write_eof(): SHUT_WR once the queue has drained.
    pub(super) eof: bool,
    pub(super) shut: bool,
    /// loop.sendfile() runs on the socket: write() is refused; `want_empty` asks
    /// for `_ringio_empty` once the queue has drained.
    pub(super) sendfile: bool,
    pub(super) want_empty: bool,
    pub(super) proto_paused: bool,
    /// The CQE batch that last delivered data: an EOF or error in the same batch
    /// waits for the next select, as asyncio reads data and EOF in two iterations
    /// (a handshake's waiter must see the transport still open).
    pub(super) data_batch: u64,
    /// `groups[group]` holds this transport's receives of CQE batch `group_batch`.
    pub(super) group_batch: u64,
    pub(super) group: usize,
    /// In `CoreState::starved`, waiting for buffers.
    pub(super) starved: bool,
    /// Its last receive from the pool filled a whole buffer.
    pub(super) filled: bool,
    /// Large receives: its readiness poll reported data that is not read yet (its
    /// turn is pending in `CoreState::ready_large` or as a `Readable` action, or it
    /// waits for reading to resume).
    pub(super) readable: bool,
    /// ... and it reported the peer's EOF or an error (whose report ends the
    /// stream): the transport keeps its turns until a receive finds it, since no
    /// further wake-up will come.
    pub(super) hup: bool,
    /// Bytes received per CQE batch (moving average): they pick the receive,
    /// large (`size.large()`) or the pool's. The armed one is large when
    /// `recv_big`; when they differ, the receive is cancelled and re-armed.
    pub(super) size: ReceiveSize,
    pub(super) recv_big: bool,
    pub(super) high: usize,
    pub(super) low: usize,
    pub(super) dirty: bool,
    /// Its last send left bytes queued (the socket buffer was full, or more was
    /// written meanwhile): the next send waits for room (a send the kernel may
    /// complete later) instead of one that ends at submission
    /// (`prep::send_all_now`).
    pub(super) send_waits: bool,
}

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
            recv: Arm::Off,
            recv_done: false,
            backlog: Vec::new(),
            pending_eof: false,
            pending_err: None,
            send: SendQueue::new(),
            life: Lifecycle::Open,
            eof: false,
            shut: false,
            sendfile: false,
            want_empty: false,
            proto_paused: false,
            data_batch: 0,
            group_batch: 0,
            group: 0,
            starved: false,
            filled: false,
            readable: false,
            hup: false,
            size: ReceiveSize::default(),
            recv_big: false,
            high: 64 * 1024,
            low: 16 * 1024,
            dirty: false,
            send_waits: false,
        }
    }

    /// Frees the transport's state, when the core lets go of it without waiting
    /// for its ops (`close_all`, the core's `Drop`). `kernel_done`: the ring the
    /// ops went to was shut down (every CQE of the core has arrived), so the
    /// kernel no longer reads any of it. Otherwise what a send in flight points
    /// at is leaked, never freed (`SendQueue::dispose`). (A receive in flight uses
    /// only the ring's provided buffers, which the ring's engine owns, not this
    /// Conn.)
    pub(super) fn dispose(self, kernel_done: bool) {
        self.send.dispose(kernel_done);
    }

    /// Its next send may end at submission (`prep::send_all_now`): its last send
    /// did not fall short, and a completion that empties the queue calls no Python
    /// code: the transport is open, not closing, owes no shutdown or "queue empty"
    /// report, and its protocol is not paused (which an emptied queue would resume;
    /// the conditions of `send_done_is_quiet` once nothing is queued).
    pub(super) fn sends_quietly(&self) -> bool {
        !self.send_waits
            && self.life.is_live()
            && !self.life.is_closing()
            && !self.proto_paused
            && (!self.eof || self.shut)
            && !self.want_empty
    }

    /// Nothing of this transport is in the kernel.
    pub(super) fn idle(&self) -> bool {
        !self.recv.in_kernel() && !self.send.in_flight()
    }

    /// The receive's final CQE arrived.
    pub(super) fn recv_finished(&mut self) {
        let ended = self.recv.finished();
        debug_assert!(ended.is_ok(), "a final CQE of no receive: {ended:?}");
    }

    /// Received bytes are still delivered: the transport is open or closing and
    /// the kernel has not ended its receive.
    pub(super) fn receiving(&self) -> bool {
        self.life.is_live() && !self.recv_done
    }
}
