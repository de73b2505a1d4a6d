//! Small syscall helpers that the libc crate does not wrap in the form ringio needs.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

pub fn cvt(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `pread(fd, buf, len, offset)` as the bare system call: see `preadv2_one`.
///
/// # Safety
/// `buf..buf + len` is writable memory that nothing else uses during the call.
pub unsafe fn pread_raw(fd: RawFd, buf: *mut libc::c_void, len: usize, offset: i64) -> isize {
    // SAFETY: the caller's contract; pread64 takes (fd, buf, count, pos).
    unsafe { libc::syscall(libc::SYS_pread64, fd, buf, len, offset) as isize }
}

/// `preadv2(fd, [buf..buf + len], offset, flags)` as the bare system call. glibc's
/// `pread` and `preadv2` are thread cancellation points: once the process has
/// started a second thread (any thread pool, asyncio's default executor) glibc
/// brackets each call with `__pthread_enable_asynccancel` and
/// `__pthread_disable_asynccancel`. No ringio thread is cancelled with
/// `pthread_cancel`, and these reads do not wait (RWF_NOWAIT, or a memory
/// filesystem's pages), so the bare call does the same read without that cost.
/// The offset goes in `pos_l` whole: a 64-bit kernel ignores `pos_h`.
///
/// # Safety
/// `buf..buf + len` is writable memory that nothing else uses during the call.
pub unsafe fn preadv2_one(
    fd: RawFd,
    buf: *mut libc::c_void,
    len: usize,
    offset: i64,
    flags: libc::c_int,
) -> isize {
    let iov = libc::iovec {
        iov_base: buf,
        iov_len: len,
    };
    // SAFETY: `iov` describes the caller's writable bytes and outlives the call;
    // preadv2 takes (fd, iov, iovcnt, pos_l, pos_h, flags).
    unsafe {
        libc::syscall(
            libc::SYS_preadv2,
            fd,
            &iov as *const libc::iovec,
            1,
            offset,
            0,
            flags,
        ) as isize
    }
}

/// A non-blocking, close-on-exec eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd has no memory arguments; a non-negative result is a new fd we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads and resets an eventfd counter; 0 when it was not signalled.
pub fn eventfd_drain(fd: RawFd) -> u64 {
    let mut value: u64 = 0;
    // SAFETY: `value` is 8 writable bytes, the size an eventfd read requires.
    let n = unsafe { libc::read(fd, (&mut value as *mut u64).cast(), 8) };
    if n == 8 {
        value
    } else {
        0
    }
}

/// Adds 1 to an eventfd counter, so that whoever polls it wakes up.
pub fn eventfd_signal(fd: RawFd) {
    let value: u64 = 1;
    // SAFETY: `value` is 8 readable bytes, the size an eventfd write requires.
    unsafe { libc::write(fd, (&value as *const u64).cast(), 8) };
}

/// What statx(STATX_DIOALIGN) reports for O_DIRECT on an open file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DioAlign {
    pub memory: u32,
    pub offset: u32,
}

const STATX_DIOALIGN: u32 = 0x2000;
const STATX_MASK_OFFSET: usize = 0x00;
const STATX_DIO_MEM_ALIGN_OFFSET: usize = 0x98;
const STATX_DIO_OFFSET_ALIGN_OFFSET: usize = 0x9c;

/// The O_DIRECT alignment the kernel requires for `fd` (Linux 6.1+); None where the
/// kernel or filesystem does not say.
pub fn dio_alignment(fd: RawFd) -> Option<DioAlign> {
    // struct statx is 256 bytes; reading the three u32 fields by offset avoids depending
    // on a libc version that knows the 6.1 fields.
    #[repr(C, align(8))]
    struct StatxBuf([u8; 256]);
    let mut buf = StatxBuf([0; 256]);
    // SAFETY: the path is a valid empty C string, `buf` is 256 writable bytes as
    // struct statx requires, and AT_EMPTY_PATH makes the call refer to `fd` itself.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            STATX_DIOALIGN,
            buf.0.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return None;
    }
    let u32_at = |off: usize| u32::from_ne_bytes(buf.0[off..off + 4].try_into().unwrap());
    if u32_at(STATX_MASK_OFFSET) & STATX_DIOALIGN == 0 {
        return None;
    }
    Some(DioAlign {
        memory: u32_at(STATX_DIO_MEM_ALIGN_OFFSET),
        offset: u32_at(STATX_DIO_OFFSET_ALIGN_OFFSET),
    })
}

/// Whether `fd` was opened with O_DIRECT.
pub fn is_direct(fd: RawFd) -> bool {
    // SAFETY: F_GETFL takes no pointer argument.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    flags >= 0 && flags & libc::O_DIRECT != 0
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory arguments.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

static FORK_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Counts fork()s in this process's ancestry, so that kernel contexts created
/// before a fork are recognised (and left alone) in the child.
pub fn install_fork_handler() {
    // SAFETY: the handler only increments an atomic, which is async-signal-safe.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork_in_child)) };
}

pub fn fork_generation() -> u64 {
    FORK_GENERATION.load(std::sync::atomic::Ordering::Relaxed)
}

pub fn forked_since(generation: u64) -> bool {
    fork_generation() != generation
}

/// `time.monotonic()` (CLOCK_MONOTONIC in seconds): what `loop.time()`, and so every
/// asyncio timer's `_when`, reads.
pub fn monotonic() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on
    // Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The filesystem type of an open fd (`statfs.f_type`), or the errno of fstatfs.
pub fn fs_type(fd: RawFd) -> Result<i64, i32> {
    // SAFETY: all-zero is a valid statfs, and fstatfs fills it in; `st` is owned by
    // this frame and outlives the call.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a writable statfs.
    if unsafe { libc::fstatfs(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EBADF));
    }
    Ok(st.f_type as i64)
}
