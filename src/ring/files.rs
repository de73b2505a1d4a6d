//! The fixed-file table of a ring: slots for registered sockets, and the kernel's
//! range for direct accepts.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use io_uring::IoUring;

const IORING_REGISTER_FILE_ALLOC_RANGE: u32 = 25;

/// Restricts the kernel's direct-descriptor allocator to [off, off + len).
fn file_alloc_range(ring_fd: RawFd, off: u32, len: u32) -> io::Result<()> {
    #[repr(C)]
    struct Range {
        off: u32,
        len: u32,
        resv: u64,
    }
    let r = Range { off, len, resv: 0 };
    // SAFETY: `r` is a valid io_uring_file_index_range that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring_fd,
            IORING_REGISTER_FILE_ALLOC_RANGE,
            &r as *const Range,
            0u32,
        )
    };
    crate::sys::cvt(rc).map(drop)
}

/// A sparse fixed-file table: slots [0, cap) are handed out to register sockets in;
/// the rest is the kernel's range for direct accepts.
pub struct FileTable {
    cap: u32,
    next: u32,
    free: Vec<u32>,
}

impl FileTable {
    /// Registers a table sized from RLIMIT_NOFILE (the kernel refuses one larger);
    /// half is ours, half for direct accepts. Cap 0 when the kernel refuses.
    pub fn setup(ring: &IoUring) -> Self {
        let mut nofile = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `nofile` is a valid out-parameter.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut nofile) };
        let table = (nofile.rlim_cur.min(1 << 16) as u32) & !1;
        let cap = if table >= 64
            && ring.submitter().register_files_sparse(table).is_ok()
            && file_alloc_range(ring.as_raw_fd(), table / 2, table / 2).is_ok()
        {
            table / 2
        } else {
            0
        };
        Self {
            cap,
            next: 0,
            free: Vec::new(),
        }
    }

    /// Whether the kernel accepted the table: sockets can be registered in it.
    pub fn has_slots(&self) -> bool {
        self.cap > 0
    }

    /// Registers `fd` in a free slot of ours; None when the table is full or the
    /// kernel refuses (the caller dups the fd instead).
    pub fn register(&mut self, ring: &IoUring, fd: RawFd) -> Option<u32> {
        let mut slot = self.free.pop();
        if slot.is_none() && self.next < self.cap {
            slot = Some(self.next);
            self.next += 1;
        }
        let slot = slot?;
        match ring.submitter().register_files_update(slot, &[fd]) {
            Ok(_) => Some(slot),
            Err(_) => {
                self.free.push(slot);
                None
            }
        }
    }

    /// Empties `slot` (the ring drops its file reference); `ours`: it goes back to
    /// our half (a direct-accept slot belongs to the kernel's allocator).
    pub fn clear(&mut self, ring: Option<&IoUring>, slot: u32, ours: bool) {
        if let Some(ring) = ring {
            let _ = ring.submitter().register_files_update(slot, &[-1]);
        }
        if ours {
            self.free.push(slot);
        }
    }
}
