//! A ring fd registered with the thread that uses it (`IORING_REGISTER_RING_FDS`,
//! Linux 5.18).
//!
//! Each `io_uring_enter` on a plain ring fd looks the fd up in the process's file
//! table and takes and drops a reference to the ring's file (`fget`/`fput`, atomic
//! operations on a shared counter once the process has another thread, an io-wq
//! worker included). An enter with `IORING_ENTER_REGISTERED_RING` passes an index
//! into the calling thread's own table instead, which holds a reference for as long
//! as the registration lasts.
//!
//! The table belongs to the thread that registered the fd: the same index names
//! another ring (or none) in any other thread, and in a forked child (whose thread
//! starts with an empty table, and may register rings of its own). So the index is
//! used only on the thread that registered it, in the process that did
//! ([`RegisteredRing::target`]); everywhere else the ring is entered by fd. The
//! registration holds the ring's file until that thread unregisters it or exits:
//! a ring shut down on another thread (which a SINGLE_ISSUER ring refuses anyway)
//! keeps its file until then.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// `io_uring_enter` flag: the fd argument is an index in this thread's table.
pub const IORING_ENTER_REGISTERED_RING: u32 = 16;
const IORING_REGISTER_RING_FDS: libc::c_uint = 20;
const IORING_UNREGISTER_RING_FDS: libc::c_uint = 21;

/// `struct io_uring_rsrc_update`: `offset` u32::MAX asks the kernel for any free
/// index, which it writes back into `offset`.
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number: never reused within the process (a thread id can be,
    /// after the thread exits, and a new thread's table does not hold the old one's
    /// registrations).
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

fn this_thread() -> u64 {
    THREAD.with(|t| *t)
}

/// A ring fd registered in one thread's table.
#[derive(Debug)]
pub struct RegisteredRing {
    index: u32,
    thread: u64,
    /// `crate::sys::fork_generation()` at registration.
    generation: u64,
}

impl RegisteredRing {
    /// Registers `ring_fd` with the calling thread; None where the kernel refuses
    /// (before 5.18, or the thread's 16 entries are taken): that ring is entered by
    /// fd.
    pub fn register(ring_fd: RawFd) -> Option<Self> {
        let mut update = RsrcUpdate {
            offset: u32::MAX,
            resv: 0,
            data: ring_fd as u64,
        };
        let done = ring_fds(ring_fd, IORING_REGISTER_RING_FDS, &mut update);
        done.then(|| Self {
            index: update.offset,
            thread: this_thread(),
            generation: crate::sys::fork_generation(),
        })
    }

    /// What to pass to `io_uring_enter` for this ring from the calling thread: the
    /// index and `IORING_ENTER_REGISTERED_RING` on the registering thread (of this
    /// process), else `ring_fd` and no flag.
    #[inline]
    pub fn target(this: Option<&Self>, ring_fd: RawFd) -> (RawFd, u32) {
        match this {
            Some(r) if r.is_ours() => (r.index as RawFd, IORING_ENTER_REGISTERED_RING),
            _ => (ring_fd, 0),
        }
    }

    /// Whether the calling thread is the one that registered the index, in the
    /// process that did.
    #[inline]
    fn is_ours(&self) -> bool {
        self.thread == this_thread() && !crate::sys::forked_since(self.generation)
    }

    /// Gives the index back, on the registering thread (elsewhere it names
    /// another table's entry, maybe a forked child's own ring's: the registration
    /// then lasts until the registering thread exits). Returns whether it was
    /// given back.
    pub fn unregister(self, ring_fd: RawFd) -> bool {
        if !self.is_ours() {
            return false;
        }
        let mut update = RsrcUpdate {
            offset: self.index,
            resv: 0,
            data: 0,
        };
        ring_fds(ring_fd, IORING_UNREGISTER_RING_FDS, &mut update)
    }
}

/// `io_uring_register(ring_fd, op, update, 1)` for the ring-fd table: whether the
/// kernel took the one entry. Registering, it writes the index it chose into
/// `update.offset`; unregistering, it only reads `offset`.
fn ring_fds(ring_fd: RawFd, op: libc::c_uint, update: &mut RsrcUpdate) -> bool {
    // SAFETY: `update` is one valid io_uring_rsrc_update, borrowed for the call, and
    // the count says one; the kernel reads it and may write its `offset`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring_fd,
            op,
            update as *mut RsrcUpdate,
            1u32,
        )
    };
    rc == 1
}
