//! One registered connection's state: its lifecycle, its op queues and send
//! queue, its multishot, its read-ahead and accepted-but-unclaimed connections.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};

use io_uring::{squeue, types};

use crate::conn::lifecycle::Lifecycle;
use crate::conn::recv::Arm;
use crate::conn::send::SendQueue;
use crate::ring::prep;

use super::{GEN_BITS, TAG_INTERNAL, TAG_MSHOT};

/// A connection accepted by a multishot accept and not yet claimed by accept().
pub(super) enum Accepted {
    Fd(OwnedFd),
    /// A direct descriptor (fixed-file slot) the kernel allocated.
    Direct(u32),
}

pub(super) struct Conn {
    /// Our own reference to the socket: a slot of the ring's fixed-file table (no fd
    /// used, no fd lookup per op), or a private dup when the table is full.
    pub(super) fd: Option<OwnedFd>,
    pub(super) slot: Option<u32>,
    /// The slot came from the kernel's allocator (direct accept), not ours.
    pub(super) direct: bool,
    pub(super) gen: u32,
    /// Open while registered; Lost once freed while the kernel still has an op of
    /// it (the connection keeps its index, and what those ops point at, until
    /// their last completion; then it is released and its index reused).
    pub(super) life: Lifecycle,
    pub(super) reads: VecDeque<usize>,
    pub(super) writes: VecDeque<usize>,
    pub(super) accepts: VecDeque<usize>,
    pub(super) read_busy: bool,
    /// A datagram write or a connect of this connection is in the kernel.
    pub(super) write_busy: bool,
    /// Its stream writes (`Kind::Write`): each request's bytes by reference, keyed
    /// by its op's slot. The requests in it are the first `in_sendq` of `writes`.
    /// Made by the first stream write: an idle connection (most of a server's)
    /// carries no queue.
    pub(super) sendq: Option<Box<SendQueue<usize>>>,
    pub(super) in_sendq: u32,
    /// The connection's multishot op (`conn::recv`'s state machine): a receive
    /// feeding reads and read-ahead, or a listener's accept.
    pub(super) mshot: Arm,
    /// Whether the multishot (when not Off) is an accept rather than a receive.
    pub(super) mshot_accept: bool,
    pub(super) starved: bool,
    /// Read-ahead: data a multishot receive delivered while no read wanted it, in
    /// arrival order. Ring buffers are held out of the ring as they are (zero copy)
    /// within the limits of `hold_ok`; past them the bytes are copied out.
    pub(super) backlog: VecDeque<Seg>,
    /// Bytes in `backlog`; of which copied (`Seg::Heap`) bytes.
    pub(super) backlog_bytes: usize,
    pub(super) heap_bytes: usize,
    /// `Seg::Ring` entries in `backlog`.
    pub(super) held: usize,
    pub(super) accepted: VecDeque<Accepted>,
    pub(super) accept_direct: bool,
    pub(super) eof: bool,
    pub(super) rerr: Option<i32>,
}

impl Conn {
    /// The fd for an SQE and whether it is a fixed-file index.
    pub(super) fn target(&self) -> (types::Fd, bool) {
        match (self.slot, &self.fd) {
            (Some(slot), _) => (types::Fd(slot as i32), true),
            (None, Some(fd)) => (types::Fd(fd.as_raw_fd()), false),
            (None, None) => (types::Fd(-1), false),
        }
    }

    /// A send of its stream writes is in the kernel.
    pub(super) fn sending(&self) -> bool {
        self.sendq.as_ref().is_some_and(|q| q.in_flight())
    }

    /// Whether an op of this connection may be in the kernel.
    pub(super) fn in_kernel(&self) -> bool {
        self.mshot.in_kernel() || self.read_busy || self.write_busy || self.sending()
    }

    /// An SQE that cancels every op of this connection's file (its link timeouts
    /// go with them).
    pub(super) fn cancel_all(&self) -> squeue::Entry {
        let (fd, fixed) = self.target();
        prep::cancel_all_on(fd.0, fixed).user_data(TAG_INTERNAL)
    }

    pub(super) fn new(fd: Option<OwnedFd>, slot: Option<u32>, direct: bool, gen: u32) -> Self {
        Conn {
            fd,
            slot,
            direct,
            gen,
            life: Lifecycle::Open,
            reads: VecDeque::new(),
            writes: VecDeque::new(),
            accepts: VecDeque::new(),
            read_busy: false,
            write_busy: false,
            sendq: None,
            in_sendq: 0,
            mshot: Arm::Off,
            mshot_accept: false,
            starved: false,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            heap_bytes: 0,
            held: 0,
            accepted: VecDeque::new(),
            accept_direct: false,
            eof: false,
            rerr: None,
        }
    }

    /// Its multishot's final CQE arrived.
    pub(super) fn mshot_finished(&mut self) {
        let ended = self.mshot.finished();
        debug_assert!(ended.is_ok(), "a final CQE of no multishot: {ended:?}");
    }

    pub(super) fn backlog_len(&self) -> usize {
        self.backlog_bytes
    }
}

/// A piece of read-ahead (see `Conn::backlog`).
pub(super) enum Seg {
    /// `len` bytes at `off` of ring buffer `bid`, which stays out of the ring (the
    /// kernel cannot reuse it) until a read consumes it or the connection is freed.
    Ring { bid: u16, off: usize, len: usize },
    /// Bytes copied out of the ring; `pos` of them already consumed.
    Heap { data: Vec<u8>, pos: usize },
}

/// Ring buffers of read-ahead past which a connection's multishot receive is
/// cancelled while no read is pending (TCP flow control takes over).
pub(super) const HOLD_PER_CONN: usize = 16;

/// The connection's send queue, made when first needed.
pub(super) fn queue(q: &mut Option<Box<SendQueue<usize>>>) -> &mut SendQueue<usize> {
    q.get_or_insert_with(Default::default)
}

pub(super) const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

/// user_data of a connection's multishot: generation (its low GEN_BITS), index,
/// direct and accept bits, tag (the index is < 2^28).
pub(super) fn mshot_ud(cid: u64, accept: bool, direct: bool) -> u64 {
    (((cid >> 32) & GEN_MASK) << 32)
        | ((cid & 0xffff_ffff) << 4)
        | (u64::from(direct) << 3)
        | (u64::from(accept) << 2)
        | TAG_MSHOT
}
