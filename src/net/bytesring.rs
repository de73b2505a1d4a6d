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

use io_uring::IoUring;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::bufring::EntryRing;

extern "C" {
    // Not in the limited API, but exported by every CPython 3 (and documented):
    // shrinking a bytes object that nothing else references is a realloc in place.
    fn _PyBytes_Resize(
        bytes: *mut *mut pyo3::ffi::PyObject,
        newsize: pyo3::ffi::Py_ssize_t,
    ) -> std::os::raw::c_int;
}

pub struct BytesRing {
    entries: EntryRing,
    pub bufsize: usize,
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

// SAFETY: the objects are only touched with the GIL held (refill/take take a
// `Python` token); the entry ring is Send itself; the struct moves between threads
// only together with its engine.
unsafe impl Send for BytesRing {}
// SAFETY: no `&self` method touches the objects or writes the entry ring.
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
        this.entries.register(ring, bgid)?;
        Ok(this)
    }

    fn unregistered(nbufs: u16, bufsize: usize, window: usize) -> io::Result<Self> {
        Ok(Self {
            entries: EntryRing::new(nbufs)?,
            bufsize,
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
        let rc = if crate::loopcore::receive_alloc_fails() {
            // SAFETY: `raw` is an owned reference, given up here as a failing
            // `_PyBytes_Resize` gives it up; it is not used again but as NULL.
            unsafe { pyo3::ffi::Py_DECREF(raw) };
            raw = std::ptr::null_mut();
            -1
        } else {
            // SAFETY: `raw` is the only reference to a bytes object (never shared
            // with Python code), as `_PyBytes_Resize` requires; on failure it
            // releases the object and sets `raw` to NULL.
            unsafe { _PyBytes_Resize(&mut raw, n as pyo3::ffi::Py_ssize_t) }
        };
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
        self.entries.push(addr, self.bufsize as u32, bid);
        self.available += 1;
    }

    fn publish(&mut self) {
        self.entries.publish();
    }
}
