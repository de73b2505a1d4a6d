//! A provided-buffer ring (IORING_REGISTER_PBUF_RING) and the memory behind it.
//!
//! The io-uring crate has no safe type for this: the ring of `BufRingEntry` is
//! shared with the kernel, which consumes entries from the head while we add them
//! at the tail. The tail is published with a release store so the kernel never
//! sees an entry before its fields.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

/// The buffers' memory. Shared (`Arc`) with every [`super::RingView`] handed to
/// Python, so a view kept past `close()` still points at mapped memory.
pub struct PoolMem {
    base: *mut u8,
    bytes: usize,
}

// SAFETY: the mapping is plain memory; every access is either the kernel writing a
// buffer it took from the ring, or Python reading a view of a buffer the watcher
// handed out (with the GIL held). PoolMem itself has no interior state.
unsafe impl Send for PoolMem {}
// SAFETY: as above; shared references only read `base`/`bytes`.
unsafe impl Sync for PoolMem {}

impl PoolMem {
    pub fn ptr(&self, off: usize) -> *mut u8 {
        debug_assert!(off <= self.bytes);
        // SAFETY: `off` is within the mapping (bid * bufsize + len <= bytes).
        unsafe { self.base.add(off) }
    }
}

impl Drop for PoolMem {
    fn drop(&mut self) {
        // SAFETY: `base`/`bytes` came from a successful mmap in `mmap_anon`; the last
        // reference is gone, and the kernel no longer owns any buffer (the watcher
        // waits for every CQE, or leaks the Arc, before dropping its own reference).
        unsafe { libc::munmap(self.base.cast(), self.bytes) };
    }
}

fn mmap_anon(bytes: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping with no address hint; the result is
    // checked against MAP_FAILED before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

pub struct BufRing {
    pub mem: Arc<PoolMem>,
    ring: *mut BufRingEntry,
    ring_bytes: usize,
    pub bufsize: usize,
    pub nbufs: u16,
    pub bgid: u16,
    tail: u16,
    /// Buffers currently in the ring (the kernel may pick them).
    pub available: usize,
    registered: bool,
}

// SAFETY: the ring memory is only touched through `&mut self` (pushes) and by the
// kernel; the struct moves between threads only together with its watcher.
unsafe impl Send for BufRing {}
// SAFETY: no `&self` method writes through the raw pointers.
unsafe impl Sync for BufRing {}

impl BufRing {
    /// Maps `nbufs` (a power of two, <= 32768) buffers of `bufsize` bytes and
    /// registers them with `ring` as group `bgid`, every buffer initially provided.
    pub fn new(ring: &IoUring, nbufs: u16, bufsize: usize, bgid: u16) -> io::Result<Self> {
        assert!(nbufs.is_power_of_two() && nbufs <= 32768);
        let data_bytes = bufsize * nbufs as usize;
        let base = mmap_anon(data_bytes)?;
        let mem = Arc::new(PoolMem {
            base,
            bytes: data_bytes,
        });
        let page = 4096;
        let ring_bytes =
            (nbufs as usize * std::mem::size_of::<BufRingEntry>()).div_ceil(page) * page;
        let ring_ptr = mmap_anon(ring_bytes)?.cast::<BufRingEntry>();
        let mut this = Self {
            mem,
            ring: ring_ptr,
            ring_bytes,
            bufsize,
            nbufs,
            bgid,
            tail: 0,
            available: 0,
            registered: false,
        };
        // SAFETY: `ring_ptr` is a page-aligned, zeroed mapping of nbufs entries that
        // stays mapped until Drop, which happens after unregister (or after the ring
        // fd is closed), as the crate's contract requires.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(ring_ptr as u64, nbufs, bgid, 0)?;
        }
        this.registered = true;
        for bid in 0..nbufs {
            this.push(bid);
        }
        this.publish();
        Ok(this)
    }

    /// Puts buffer `bid` back at the tail (visible to the kernel after `publish`).
    pub fn push(&mut self, bid: u16) {
        debug_assert!(bid < self.nbufs);
        let idx = (self.tail & (self.nbufs - 1)) as usize;
        // SAFETY: idx < nbufs, so the entry lies inside the ring mapping; the kernel
        // only reads entries between its head and the published tail, and this one
        // is past the published tail until `publish`.
        let entry = unsafe { &mut *self.ring.add(idx) };
        entry.set_addr(self.mem.ptr(bid as usize * self.bufsize) as u64);
        entry.set_len(self.bufsize as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        self.available += 1;
    }

    /// Makes every pushed entry visible to the kernel.
    pub fn publish(&mut self) {
        // SAFETY: `self.ring` is the first entry of the registered ring, so the tail
        // field is the `resv` field of entry 0, a properly aligned u16 that lives as
        // long as the mapping; the release store orders the entry writes before it.
        unsafe {
            let tail = BufRingEntry::tail(self.ring) as *mut u16;
            AtomicU16::from_ptr(tail).store(self.tail, Ordering::Release);
        }
    }

    pub fn buffer(&self, bid: u16) -> usize {
        bid as usize * self.bufsize
    }

    pub fn unregister(&mut self, ring: &IoUring) {
        if self.registered {
            let _ = ring.submitter().unregister_buf_ring(self.bgid);
            self.registered = false;
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping came from `mmap_anon(ring_bytes)`; the watcher drops the
        // BufRing only after unregistering it or closing the ring, so the kernel no
        // longer reads it.
        unsafe { libc::munmap(self.ring.cast(), self.ring_bytes) };
    }
}
