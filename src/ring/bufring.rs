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

/// The buffers' memory. Shared (`Arc`) with every view of a buffer handed to
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
    // NORESERVE: a large pool is mostly never touched; don't charge it to the
    // commit limit. (Only an accounting hint, which Miri does not model.)
    let noreserve = if cfg!(miri) { 0 } else { libc::MAP_NORESERVE };
    // SAFETY: an anonymous private mapping with no address hint; the result is
    // checked against MAP_FAILED before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | noreserve,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

/// The ring of entries the kernel takes provided buffers from: a page-aligned,
/// zeroed mapping of `nbufs` `BufRingEntry`s, written only through `&mut self`. The
/// kernel reads the entries between its head and the published tail; an entry is
/// pushed past the published tail and becomes visible with `publish`.
pub struct EntryRing {
    ring: *mut BufRingEntry,
    ring_bytes: usize,
    nbufs: u16,
    tail: u16,
}

// SAFETY: the mapping is only written through `&mut self` and read by the kernel;
// the struct moves between threads only together with its owner's ring.
unsafe impl Send for EntryRing {}
// SAFETY: no `&self` method writes through the raw pointer.
unsafe impl Sync for EntryRing {}

impl EntryRing {
    /// Maps a ring of `nbufs` entries (a power of two, <= 32768).
    pub fn new(nbufs: u16) -> io::Result<Self> {
        assert!(nbufs.is_power_of_two() && nbufs <= 32768);
        let page = 4096;
        let ring_bytes =
            (nbufs as usize * std::mem::size_of::<BufRingEntry>()).div_ceil(page) * page;
        let ring = mmap_anon(ring_bytes)?.cast::<BufRingEntry>();
        Ok(Self {
            ring,
            ring_bytes,
            nbufs,
            tail: 0,
        })
    }

    /// Registers the ring with `ring` as buffer group `bgid`.
    pub fn register(&self, ring: &IoUring, bgid: u16) -> io::Result<()> {
        // SAFETY: `self.ring` is a page-aligned, zeroed mapping of nbufs entries that
        // stays mapped until Drop, which the owners run after unregistering it or
        // after the ring fd is closed, as the crate's contract requires.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(self.ring as u64, self.nbufs, bgid, 0)
        }
    }

    /// Puts a buffer (`addr`, `len` bytes, id `bid`) at the tail; the kernel sees it
    /// after `publish`.
    pub fn push(&mut self, addr: u64, len: u32, bid: u16) {
        let idx = (self.tail & (self.nbufs - 1)) as usize;
        // SAFETY: idx < nbufs, so the entry lies inside the ring mapping; the kernel
        // only reads entries between its head and the published tail, and this one
        // is past the published tail until `publish`.
        let entry = unsafe { &mut *self.ring.add(idx) };
        entry.set_addr(addr);
        entry.set_len(len);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
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

    /// The buffer ids of the `n` entries before the tail (tests).
    #[cfg(test)]
    fn last_bids(&self, n: u16) -> Vec<u16> {
        (0..n)
            .map(|i| {
                let idx = (self.tail.wrapping_sub(n).wrapping_add(i) & (self.nbufs - 1)) as usize;
                // SAFETY: idx < nbufs, inside the ring mapping; nothing else writes it here.
                unsafe { (*self.ring.add(idx)).bid() }
            })
            .collect()
    }
}

impl Drop for EntryRing {
    fn drop(&mut self) {
        // SAFETY: the mapping came from `mmap_anon(ring_bytes)`; its owner drops it
        // only after unregistering it or closing the ring, so the kernel no longer
        // reads it.
        unsafe { libc::munmap(self.ring.cast(), self.ring_bytes) };
    }
}

pub struct BufRing {
    pub mem: Arc<PoolMem>,
    entries: EntryRing,
    pub bufsize: usize,
    pub nbufs: u16,
    pub bgid: u16,
    /// Buffers currently in the ring (the kernel may pick them).
    available: usize,
    /// Buffers neither in the ring nor in use, the most recently returned last. The
    /// ring is topped up from the end, so that a small working set of buffers that
    /// are still in the CPU caches cycles instead of every buffer of the pool in
    /// turn (a FIFO ring of 256 x 64 KiB walks 16 MiB, all of it cold).
    spare: Vec<u16>,
    /// How many buffers `refill` keeps in the ring: starts small, doubles (up to
    /// `nbufs`) each time the kernel ran out (`grow`).
    target: usize,
    /// The most `grow` may provide (<= nbufs; see `set_cap`).
    cap: usize,
    registered: bool,
}

/// Buffers a new ring provides before the kernel first runs out of them.
const INITIAL_TARGET: usize = 8;

impl BufRing {
    /// Maps `nbufs` (a power of two, <= 32768) buffers of `bufsize` bytes and
    /// registers them with `ring` as group `bgid`; the first `INITIAL_TARGET` of
    /// them are provided, the rest wait as spares.
    pub fn new(ring: &IoUring, nbufs: u16, bufsize: usize, bgid: u16) -> io::Result<Self> {
        let mut this = Self::unregistered(nbufs, bufsize, bgid)?;
        this.entries.register(ring, bgid)?;
        this.registered = true;
        this.refill();
        Ok(this)
    }

    /// The memory and the entry ring, not yet shared with a kernel ring (pure
    /// userspace: what the unit tests run under Miri).
    fn unregistered(nbufs: u16, bufsize: usize, bgid: u16) -> io::Result<Self> {
        let entries = EntryRing::new(nbufs)?;
        let data_bytes = bufsize * nbufs as usize;
        let base = mmap_anon(data_bytes)?;
        let mem = Arc::new(PoolMem {
            base,
            bytes: data_bytes,
        });
        let this = Self {
            mem,
            entries,
            bufsize,
            nbufs,
            bgid,
            available: 0,
            spare: (0..nbufs).rev().collect(),
            target: INITIAL_TARGET.min(nbufs as usize),
            cap: nbufs as usize,
            registered: false,
        };
        Ok(this)
    }

    /// Takes back buffer `bid`, out of the ring and no longer used (it is provided
    /// again by `refill`, before any buffer returned earlier).
    pub fn give(&mut self, bid: u16) {
        debug_assert!(bid < self.nbufs);
        self.spare.push(bid);
    }

    /// Tops the ring up to its target from the most recently returned spares and
    /// makes them visible to the kernel.
    pub fn refill(&mut self) {
        let before = self.available;
        while self.available < self.target {
            let Some(bid) = self.spare.pop() else { break };
            self.push(bid);
        }
        if self.available != before {
            self.publish();
        }
    }

    /// The kernel ran out of buffers: provide twice as many from now on (up to the cap).
    pub fn grow(&mut self) {
        self.target = (self.target * 2).min(self.cap);
        self.refill();
    }

    /// Limits the window to `cap` buffers (1..=nbufs). Lowering it below the
    /// window shrinks the window as buffers come back; buffers already in the ring
    /// stay there until the kernel uses them.
    pub fn set_cap(&mut self, cap: usize) {
        self.cap = cap.clamp(1, self.nbufs as usize);
        self.target = self.target.min(self.cap);
    }

    /// Buffers the ring provides when topped up.
    pub fn target(&self) -> usize {
        self.target
    }

    /// Buffers in the ring now, which the kernel may pick.
    pub fn available(&self) -> usize {
        self.available
    }

    /// The kernel took a buffer from the ring: a CQE carried IORING_CQE_F_BUFFER.
    /// The buffer is the caller's until it is given back (`give`).
    pub fn consumed(&mut self) {
        debug_assert!(self.available > 0, "a buffer consumed from an empty ring");
        self.available -= 1;
    }

    /// Buffers not in use: in the ring or spare.
    pub fn free(&self) -> usize {
        self.available + self.spare.len()
    }

    /// Puts buffer `bid` at the tail (visible to the kernel after `publish`).
    fn push(&mut self, bid: u16) {
        debug_assert!(bid < self.nbufs);
        let addr = self.mem.ptr(bid as usize * self.bufsize) as u64;
        self.entries.push(addr, self.bufsize as u32, bid);
        self.available += 1;
    }

    /// Makes every pushed entry visible to the kernel.
    fn publish(&mut self) {
        self.entries.publish();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring entries from the kernel's head (0, nothing consumed) to our tail.
    fn provided(r: &BufRing) -> Vec<u16> {
        r.entries.last_bids(r.available() as u16)
    }

    #[test]
    fn provides_a_small_window_refilled_most_recent_first() {
        // The kernel's side is simulated (each buffer it takes is `consumed`, as a
        // CQE with F_BUFFER reports it), so the ring need not be registered: this
        // runs under Miri.
        let mut r = BufRing::unregistered(64, 4096, 7).unwrap();
        r.refill();
        assert_eq!((r.available(), r.free()), (INITIAL_TARGET, 64));
        assert_eq!(provided(&r), (0..8).collect::<Vec<u16>>());
        // The kernel takes 0, 1, 2 (our count drops as their CQEs are handled).
        for _ in 0..3 {
            r.consumed();
        }
        // Given back in the order 2, 0, 1: refill provides the last one given first.
        for bid in [2, 0, 1] {
            r.give(bid);
        }
        r.refill();
        assert_eq!(r.available(), 8);
        assert_eq!(&provided(&r)[5..], &[1, 0, 2]);
        assert_eq!(r.free(), 64);
        // Ran out: twice as many provided, up to nbufs.
        r.grow();
        assert_eq!((r.available(), r.free()), (16, 64));
        for _ in 0..5 {
            r.grow();
        }
        assert_eq!(r.available(), 64);
    }

    #[test]
    fn the_cap_bounds_the_window() {
        let mut r = BufRing::unregistered(64, 4096, 7).unwrap();
        r.set_cap(12);
        r.refill();
        assert_eq!(r.available(), INITIAL_TARGET);
        r.grow();
        assert_eq!((r.target(), r.available()), (12, 12));
        r.grow();
        assert_eq!(r.target(), 12);
        // Lowered below the window: the ring keeps what it has, refills to the cap.
        r.set_cap(4);
        assert_eq!(r.target(), 4);
        for _ in 0..10 {
            r.consumed(); // the kernel takes 10 of the 12
        }
        for bid in 0..10 {
            r.give(bid);
        }
        r.refill();
        assert_eq!(r.available(), 4);
        assert_eq!(r.free(), 64);
        // Raised again: grow doubles up to it.
        r.set_cap(64);
        r.grow();
        assert_eq!(r.target(), 8);
        r.set_cap(0);
        assert_eq!(r.target(), 1);
    }

    #[test]
    #[cfg_attr(miri, ignore = "registers the ring with io_uring")]
    fn registers_with_a_kernel_ring() {
        let Ok(ring) = IoUring::new(8) else { return };
        let Ok(mut r) = BufRing::new(&ring, 64, 4096, 7) else {
            return; // no buffer rings on this kernel
        };
        assert_eq!((r.available(), r.free()), (INITIAL_TARGET, 64));
        r.unregister(&ring);
    }
}
