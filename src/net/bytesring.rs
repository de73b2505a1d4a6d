//! A provided-buffer ring whose buffers are the storage of Python `bytes` objects.
//!
//! The loop core receives large messages through it: the kernel copies a received
//! message straight into a `bytes` object, which is shrunk to the received length
//! and handed to `protocol.data_received` as it is, instead of being received into
//! the pool of `BufRing` and copied out into a new `bytes` (at 100 KiB per message
//! that copy, out of buffers the kernel filled a whole batch earlier, cost about as
//! much as the kernel's own copy). Each buffer handed to the kernel is a new,
//! uninitialised `bytes` of `bufsize` bytes that no Python code can reach until its
//! CQE has been handled; the ring holds the only reference.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

extern "C" {
    // Not in the limited API, but exported by every CPython 3 (and documented):
    // shrinking a bytes object that nothing else references is a realloc in place.
    fn _PyBytes_Resize(
        bytes: *mut *mut pyo3::ffi::PyObject,
        newsize: pyo3::ffi::Py_ssize_t,
    ) -> std::os::raw::c_int;
}

pub struct BytesRing {
    ring: *mut BufRingEntry,
    ring_bytes: usize,
    nbufs: u16,
    pub bufsize: usize,
    tail: u16,
    /// The `bytes` behind each buffer id, while it is in the ring (or handed out by
    /// the kernel and not yet taken).
    objs: Vec<Option<Py<PyBytes>>>,
    /// Buffer ids with no object.
    free: Vec<u16>,
    /// Buffers currently in the ring (the kernel may pick them).
    pub available: usize,
    /// How many buffers `refill` keeps in the ring (<= nbufs).
    window: usize,
}

// SAFETY: the entry ring is only written through `&mut self` and read by the kernel;
// the objects are only touched with the GIL held (refill/take take a `Python`
// token); the struct moves between threads only together with its engine.
unsafe impl Send for BytesRing {}
// SAFETY: no `&self` method writes through the raw pointer or touches the objects.
unsafe impl Sync for BytesRing {}

impl BytesRing {
    /// Maps an entry ring of `nbufs` (a power of two, <= 32768) entries and
    /// registers it with `ring` as group `bgid`; `refill` provides `window` of them.
    pub fn new(
        ring: &IoUring,
        nbufs: u16,
        bufsize: usize,
        bgid: u16,
        window: usize,
    ) -> io::Result<Self> {
        let this = Self::unregistered(nbufs, bufsize, window)?;
        // SAFETY: `this.ring` is a page-aligned, zeroed mapping of nbufs entries that
        // stays mapped until Drop, which happens after unregister (or after the ring
        // fd is closed: the engine drops this after its ring).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(this.ring as u64, nbufs, bgid, 0)?;
        }
        Ok(this)
    }

    fn unregistered(nbufs: u16, bufsize: usize, window: usize) -> io::Result<Self> {
        assert!(nbufs.is_power_of_two() && nbufs <= 32768);
        let page = 4096;
        let ring_bytes =
            (nbufs as usize * std::mem::size_of::<BufRingEntry>()).div_ceil(page) * page;
        // SAFETY: an anonymous private mapping with no address hint; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ring: p.cast(),
            ring_bytes,
            nbufs,
            bufsize,
            tail: 0,
            objs: (0..nbufs).map(|_| None).collect(),
            free: (0..nbufs).rev().collect(),
            available: 0,
            window: window.clamp(1, nbufs as usize),
        })
    }

    /// Tops the ring up to its window with new `bytes` objects. Stops early (and
    /// clears the error) when memory runs out: the kernel then reports ENOBUFS.
    pub fn refill(&mut self, py: Python<'_>) {
        let before = self.available;
        while self.available < self.window {
            let Some(&bid) = self.free.last() else { break };
            // SAFETY: a NULL source asks for an uninitialised bytes of `bufsize`
            // bytes; only the kernel writes it before it is shrunk to what it wrote.
            let raw = unsafe {
                pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), self.bufsize as isize)
            };
            if raw.is_null() {
                drop(PyErr::take(py));
                break;
            }
            // SAFETY: `raw` is a new, owned, non-NULL reference to a bytes object.
            let obj: Py<PyBytes> =
                unsafe { Bound::from_owned_ptr(py, raw).cast_into_unchecked() }.unbind();
            // SAFETY: `obj` is a bytes object; its storage lives as long as it does,
            // and it stays in `objs` (alive) while the kernel may write it.
            let addr = unsafe { pyo3::ffi::PyBytes_AsString(obj.as_ptr()) } as u64;
            self.free.pop();
            self.objs[bid as usize] = Some(obj);
            self.push(bid, addr);
        }
        if self.available != before {
            self.publish();
        }
    }

    /// Buffers the ring provides when topped up.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Takes the `bytes` of buffer `bid`, which the kernel filled with `n` bytes and
    /// handed back with a CQE, shrunk to those `n` bytes. None: no memory to shrink
    /// it (CPython then frees it, data included: the loop core fails the transport
    /// with ENOMEM rather than go on with a hole in the stream).
    pub fn take(&mut self, py: Python<'_>, bid: u16, n: usize) -> Option<Py<PyBytes>> {
        self.available -= 1;
        let obj = self.objs.get_mut(bid as usize)?.take()?;
        self.free.push(bid);
        if n == self.bufsize {
            return Some(obj);
        }
        let mut raw = obj.into_ptr();
        // SAFETY: `raw` is the only reference to a bytes object (never shared with
        // Python code), as `_PyBytes_Resize` requires; on failure it releases the
        // object and sets `raw` to NULL.
        let rc = unsafe { _PyBytes_Resize(&mut raw, n as pyo3::ffi::Py_ssize_t) };
        if rc != 0 || raw.is_null() {
            drop(PyErr::take(py));
            return None;
        }
        // SAFETY: `raw` is an owned reference to a bytes object.
        Some(unsafe { Bound::from_owned_ptr(py, raw).cast_into_unchecked() }.unbind())
    }

    /// Buffer `bid` came back from the kernel unused (or its bytes are not wanted):
    /// the same object goes back into the ring.
    pub fn recycle(&mut self, bid: u16) {
        self.available -= 1;
        let addr = match self.objs.get(bid as usize) {
            // SAFETY: as in `refill`: a live bytes object's storage.
            Some(Some(obj)) => (unsafe { pyo3::ffi::PyBytes_AsString(obj.as_ptr()) }) as u64,
            _ => return,
        };
        self.push(bid, addr);
        self.publish();
    }

    fn push(&mut self, bid: u16, addr: u64) {
        let idx = (self.tail & (self.nbufs - 1)) as usize;
        // SAFETY: idx < nbufs, so the entry lies inside the ring mapping; the kernel
        // only reads entries between its head and the published tail, and this one
        // is past the published tail until `publish`.
        let entry = unsafe { &mut *self.ring.add(idx) };
        entry.set_addr(addr);
        entry.set_len(self.bufsize as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        self.available += 1;
    }

    fn publish(&mut self) {
        // SAFETY: `self.ring` is the first entry of the registered ring, so the tail
        // field is the `resv` field of entry 0, a properly aligned u16 that lives as
        // long as the mapping; the release store orders the entry writes before it.
        unsafe {
            let tail = BufRingEntry::tail(self.ring) as *mut u16;
            AtomicU16::from_ptr(tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BytesRing {
    fn drop(&mut self) {
        // SAFETY: the mapping came from mmap(ring_bytes) in `unregistered`; the engine
        // drops this after closing its ring, so the kernel no longer reads it (nor
        // writes the objects, dropped with `objs` after this).
        unsafe { libc::munmap(self.ring.cast(), self.ring_bytes) };
    }
}
