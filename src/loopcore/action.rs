//! What a CQE batch leaves to do for a transport (`Action`), the received bytes it
//! carries (`Payload`), and the copy of provided buffers into `bytes`.

use std::sync::Arc;

use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::pydriver::ring::Ring;
use crate::ring::bufring::BufRing;

use super::callbacks::{Callbacks, Method};
use super::pybytes::receive_alloc_fails;

pub(super) enum Payload {
    Raw(Vec<u8>),
    /// Provided buffers (id, length) still out of the ring, copied out (and given
    /// back) only when the action runs: building every `bytes` of a batch up front
    /// kept them all alive at once (1,000 x 100 KiB grew and trimmed the heap, so
    /// every received byte was page-faulted anew); one at a time, malloc reuses
    /// the same memory.
    Segs(Vec<(u16, usize)>),
    /// A `bytes` the kernel received into directly (a large-receive turn).
    Obj(Py<PyBytes>),
}

/// A new `bytes` holding the provided buffers `segs`, which go back to the kernel.
pub(super) fn bytes_from_segs(
    py: Python<'_>,
    br: &mut BufRing,
    segs: &[(u16, usize)],
) -> PyResult<Py<PyBytes>> {
    let total: usize = segs.iter().map(|s| s.1).sum();
    let raw = if receive_alloc_fails() {
        PyMemoryError::new_err(()).restore(py);
        std::ptr::null_mut()
    } else {
        // SAFETY: a NULL source asks CPython for an uninitialised bytes of `total`
        // bytes (PyO3's PyBytes::new_with would zero it first, a memset of every
        // received byte); it is filled below before any Python code can see it.
        unsafe { pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), total as isize) }
    };
    let obj = if raw.is_null() {
        Err(PyErr::fetch(py))
    } else {
        // SAFETY: `raw` is a new, owned, non-NULL reference to a bytes object.
        Ok(unsafe { Bound::from_owned_ptr(py, raw) })
    };
    if let Ok(o) = &obj {
        // SAFETY: `o` is a bytes object of `total` bytes; its storage is ours to
        // fill until it is shared.
        let dst = unsafe { pyo3::ffi::PyBytes_AsString(o.as_ptr()) }.cast::<u8>();
        let mut off = 0;
        for &(bid, n) in segs {
            // SAFETY: the kernel filled `n` bytes of buffer `bid` and handed it to us;
            // it is not back in the ring until `give` below; dst has room for
            // `total` >= off + n bytes and does not overlap the pool.
            unsafe { std::ptr::copy_nonoverlapping(br.mem.ptr(br.buffer(bid)), dst.add(off), n) };
            off += n;
        }
    }
    give_back(br, segs);
    Ok(obj?.cast_into::<PyBytes>()?.unbind())
}

/// Appends the provided buffers `segs` to `out`; they go back to the kernel.
pub(super) fn extend_from_segs(br: &mut BufRing, segs: &[(u16, usize)], out: &mut Vec<u8>) {
    for &(bid, n) in segs {
        // SAFETY: as in bytes_from_segs: filled by the kernel, ours until `give`.
        let data = unsafe { std::slice::from_raw_parts(br.mem.ptr(br.buffer(bid)), n) };
        out.extend_from_slice(data);
    }
    give_back(br, segs);
}

pub(super) fn give_back(br: &mut BufRing, segs: &[(u16, usize)]) {
    for &(bid, _) in segs {
        br.give(bid);
    }
    br.refill();
}

/// Runs `f` on the buffer ring of `ring` (None once the ring was shut down: its
/// buffers are gone and nothing is left to copy or give back).
pub(super) fn with_bufring<R>(
    ring: Option<&Py<Ring>>,
    f: impl FnOnce(Option<&mut BufRing>) -> R,
) -> R {
    let Some(ring) = ring else { return f(None) };
    let pydriver = ring.get().inner();
    let mut driver = pydriver.driver();
    f(driver.engine.bufring.as_mut())
}

impl Payload {
    /// The bytes, as one buffer; provided buffers are copied out and given back.
    pub(super) fn into_vec(self, ring: Option<&Py<Ring>>, py: Python<'_>) -> Vec<u8> {
        match self {
            Payload::Raw(v) => v,
            other => {
                let mut out = Vec::new();
                other.append_to(ring, py, &mut out);
                out
            }
        }
    }

    /// Drops the bytes (their transport is gone); provided buffers go back.
    pub(super) fn discard(self, ring: Option<&Py<Ring>>) {
        if let Payload::Segs(segs) = self {
            with_bufring(ring, |br| {
                if let Some(br) = br {
                    give_back(br, &segs);
                }
            });
        }
    }

    /// Appends the bytes to `out` (a paused transport's backlog).
    pub(super) fn append_to(self, ring: Option<&Py<Ring>>, py: Python<'_>, out: &mut Vec<u8>) {
        match self {
            Payload::Obj(o) => out.extend_from_slice(o.as_bytes(py)),
            Payload::Segs(segs) => with_bufring(ring, |br| {
                if let Some(br) = br {
                    extend_from_segs(br, &segs, out);
                }
            }),
            Payload::Raw(v) => out.extend_from_slice(&v),
        }
    }
}

pub(super) enum Action {
    Data(u32, u32, Payload),
    /// A large-receive transport's socket is readable: receive into a new `bytes`
    /// and deliver it (see `receive_large`).
    Readable(u32, u32),
    Eof(u32, u32),
    ReadErr(u32, u32, i32),
    /// A helper method of the transport to call with an errno (a failed send).
    Call(Arc<Callbacks>, Method, i32),
    /// A send completed: resume the protocol (if below the low-water mark), then
    /// act on an empty queue (close, write_eof, sendfile's empty waiter).
    SendDone(u32, u32),
}
