//! Proactor networking on io_uring: the core of `ringio.Watcher` (gaio's model).
//!
//! The watcher owns its own ring, or shares an event loop's. Each registered
//! connection (a fixed-file slot, else a dup of the user's socket fd) has FIFO queues
//! of reads and writes; only the head of each queue is in the kernel (for stream
//! writes: one send covering the head requests of the connection's send queue), so
//! a connection's bytes keep their order. Reads without a buffer use a
//! provided-buffer ring and, where no deadline is set, a multishot receive; reads
//! with a deadline carry an absolute (CLOCK_MONOTONIC) link timeout, so thousands of
//! deadlines are kernel hrtimers (O(log n) each). Ops queued behind another op wait in
//! a user-space heap of deadlines. Every buffer the kernel may touch is held by the
//! op (or the shared buffer ring) until the op's final CQE is reaped; `close()`
//! cancels everything and waits for every CQE before memory is released.

mod addr;
mod complete;
mod conn;
mod lifecycle;
mod ops;
mod pump;
mod readahead;
pub(crate) mod ring;
mod send;
mod view;
mod watcher;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

use view::{OpResult, RingView};
use watcher::WatcherCore;

pyo3::create_exception!(
    _core,
    WatcherClosedError,
    PyOSError,
    "The Watcher was closed: an op pending at close, or a call after close."
);
pyo3::create_exception!(
    _core,
    ConnFreedError,
    PyOSError,
    "The connection was freed (Watcher.free) while this op was pending."
);

pub const OP_READ: i32 = 0;
pub const OP_WRITE: i32 = 1;
pub const OP_ACCEPT: i32 = 2;
pub const OP_CONNECT: i32 = 3;

const TAG_OP: u64 = 0;
const TAG_TIMEOUT: u64 = 1;
const TAG_MSHOT: u64 = 2;
const TAG_INTERNAL: u64 = 3;
/// Bits of a connection's generation in a multishot's user_data (which must fit
/// the 50 bits a loop-bound Watcher has): a stale CQE is recognised as long as its
/// slot was not reused 2^18 times meanwhile.
const GEN_BITS: u32 = 18;
const MAX_RW: usize = 0x7fff_f000;
/// Accepted connections a listener may hold unclaimed (no accept() pending) before
/// the watcher stops its multishot accept; the kernel's listen backlog takes over.
const ACCEPT_BACKLOG: usize = 1024;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<WatcherCore>()?;
    m.add_class::<OpResult>()?;
    m.add_class::<RingView>()?;
    m.add("WatcherClosedError", py.get_type::<WatcherClosedError>())?;
    m.add("ConnFreedError", py.get_type::<ConnFreedError>())?;
    m.add("OP_READ", OP_READ)?;
    m.add("OP_WRITE", OP_WRITE)?;
    m.add("OP_ACCEPT", OP_ACCEPT)?;
    m.add("OP_CONNECT", OP_CONNECT)?;
    Ok(())
}
