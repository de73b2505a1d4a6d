//! The one place an SQE is pushed onto a submission queue.
//!
//! Once pushed, an SQE belongs to the kernel until its final CQE (the one without
//! IORING_CQE_F_MORE) is reaped: the kernel reads the memory its fields point to
//! (buffers, iovecs, msghdrs, socket addresses, timespecs, paths, statx buffers)
//! whenever it gets to the op, which may be long after the push and after the
//! submitting call has returned. That is the contract of `push`, and every client
//! keeps it the same way: the memory lives in the client's in-flight entry for the
//! op (a boxed op, a held buffer export, the provided-buffer ring) until that CQE.

use io_uring::squeue::{Entry, SubmissionQueue};

/// Pushes one SQE. The caller has made sure the queue has room (a full queue is
/// a bug here, and panics).
///
/// # Safety
///
/// Every pointer `sqe` carries must stay valid, and every buffer the kernel writes
/// through it must stay unaliased, until the SQE's final CQE is reaped; a fixed
/// file or provided-buffer group it names must stay registered until then too.
#[inline]
pub unsafe fn push(sq: &mut SubmissionQueue<'_>, sqe: &Entry) {
    // SAFETY: the caller keeps what `sqe` points to alive until its final CQE.
    unsafe { sq.push(sqe) }.expect("SQ has room");
}
