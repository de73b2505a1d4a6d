//! io_uring_enter, the one syscall every client of a ring makes.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::types;

pub const IORING_ENTER_GETEVENTS: u32 = 1;
const IORING_ENTER_EXT_ARG: u32 = 8;
/// The wait is not counted as iowait (Linux 6.15, `IORING_FEAT_NO_IOWAIT`; an older
/// kernel refuses the flag with EINVAL). Without it Linux counts a thread waiting in
/// `io_uring_enter` as in iowait whenever any of its requests is in flight: an event
/// loop idle on its connections' armed receives shows its CPU at 100 % iowait,
/// where a loop waiting in `epoll_wait` shows it idle.
const IORING_ENTER_NO_IOWAIT: u32 = 1 << 7;

/// `IORING_ENTER_NO_IOWAIT` where the kernel takes it (`supported`: the ring's
/// `IORING_FEAT_NO_IOWAIT`), else 0: for the waits of an event loop or a Watcher,
/// which wait for sockets and timers as `epoll_wait` does.
pub fn not_iowait(supported: bool) -> u32 {
    if supported {
        IORING_ENTER_NO_IOWAIT
    } else {
        0
    }
}

/// Enters without waiting for completions: submits `to_submit` SQEs and (with
/// GETEVENTS) runs deferred task work. A busy or interrupted kernel is not an error
/// here: whatever was not done is done by the next enter.
pub fn enter_nowait(ring_fd: RawFd, to_submit: u32, flags: u32) -> io::Result<()> {
    match enter(ring_fd, to_submit, 0, flags, None) {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// io_uring_enter calls made through `enter` by this process (tests: the loop's
/// select should enter the kernel once per iteration).
static ENTERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn enter_count() -> u64 {
    ENTERS.load(std::sync::atomic::Ordering::Relaxed)
}

/// io_uring_enter: submits `to_submit` SQEs and, with GETEVENTS in `flags`, waits for
/// `min_complete` CQEs for at most `timeout` (EXT_ARG, Linux 5.11). EINTR and ETIME
/// are returned to the caller.
pub fn enter(
    ring_fd: RawFd,
    to_submit: u32,
    min_complete: u32,
    flags: u32,
    timeout: Option<Duration>,
) -> io::Result<usize> {
    #[repr(C)]
    struct GeteventsArg {
        sigmask: u64,
        sigmask_sz: u32,
        min_wait_usec: u32,
        ts: u64,
    }
    let ts = timeout.map(|t| {
        types::Timespec::new()
            .sec(t.as_secs())
            .nsec(t.subsec_nanos())
    });
    let arg = GeteventsArg {
        sigmask: 0,
        sigmask_sz: 0,
        min_wait_usec: 0,
        ts: ts
            .as_ref()
            .map_or(0, |t| t as *const types::Timespec as u64),
    };
    ENTERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `arg` and the timespec it points to outlive the call; the kernel reads
    // exactly size_of::<GeteventsArg>() bytes, as EXT_ARG specifies.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            ring_fd,
            to_submit,
            min_complete,
            flags | IORING_ENTER_EXT_ARG,
            &arg as *const GeteventsArg,
            std::mem::size_of::<GeteventsArg>(),
        )
    };
    crate::sys::cvt(rc).map(|n| n as usize)
}

/// io_uring_enter that only submits `to_submit` SQEs (no wait, no argument).
pub fn enter_to_submit(ring_fd: RawFd, to_submit: u32) -> io::Result<usize> {
    // SAFETY: no argument pointers; the kernel consumes SQEs that were published in
    // the SQ (with release ordering) before this call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_io_uring_enter,
            ring_fd,
            to_submit,
            0u32,
            0u32,
            0usize,
            0usize,
        )
    };
    crate::sys::cvt(rc).map(|n| n as usize)
}
