//! Calls served inline when the kernel needs no I/O for them (data in the page
//! cache, a path whose every step is in the dentry cache): no kernel queue, no
//! future.

use std::os::fd::RawFd;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffers::View;
use crate::errors;
use crate::sys;

/// Reads of at least this size release the GIL for the copy.
const RELEASE_GIL_FROM: usize = 64 * 1024;

/// `preadv2(fd, n, offset, RWF_NOWAIT)` straight into a new bytes object: one copy
/// from the page cache, no zero-fill, no second buffer. Returns None where the data
/// is not (all) cached (EAGAIN: the caller goes through the kernel queue instead); raises
/// the kernel's OSError otherwise (EOPNOTSUPP where the file cannot do RWF_NOWAIT).
/// `memory`: the caller knows the file is on a memory filesystem (see
/// `on_memory_filesystem`), so the read is a plain one, one call.
/// `head`, `head_from`: the result starts with `head[head_from:]`, the read's bytes
/// behind them (a buffered file's unread bytes, a partial line, and the next chunk
/// in one object, without a second copy of the chunk); None as before where the
/// cache does not hold the read.
#[pyfunction]
#[pyo3(signature = (fd, n, offset, memory=false, *, head=None, head_from=0))]
pub fn pread_nowait(
    py: Python<'_>,
    fd: RawFd,
    n: usize,
    offset: i64,
    memory: bool,
    head: Option<&Bound<'_, PyBytes>>,
    head_from: usize,
) -> PyResult<Option<Py<PyBytes>>> {
    let head = match head {
        Some(b) => b.as_bytes().get(head_from..).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err("head_from is past the end of head")
        })?,
        None => &[],
    };
    Ok(read_cached_after(py, head, fd, n, offset, memory)?.map(Bound::unbind))
}

/// `pread_nowait` into a writable buffer: the byte count when the page cache held
/// all of `buffer`'s length (less only at the end of the file), None when it did
/// not (the buffer may then hold some of the bytes: the caller reads again through
/// the kernel queue, which overwrites them).
#[pyfunction]
#[pyo3(signature = (fd, buffer, offset, memory=false))]
pub fn preadinto_nowait(
    py: Python<'_>,
    fd: RawFd,
    buffer: &Bound<'_, PyAny>,
    offset: i64,
    memory: bool,
) -> PyResult<Option<usize>> {
    check(py, fd, offset)?;
    let export = match HeldWritable::get(buffer) {
        Some(held) => Export::Held(held),
        // Not a writable C-contiguous buffer: View says why (or takes it).
        None => Export::View(View::writable(buffer)?),
    };
    let (addr, n) = export.span();
    // SAFETY: `export` keeps the buffer exported, and writable for `n` bytes at
    // `addr`, until it is dropped after the read.
    let read = move || unsafe { fill_nowait(fd, addr, n, offset, memory) };
    let res = if n >= RELEASE_GIL_FROM {
        py.detach(read)
    } else {
        read()
    };
    drop(export);
    res.map_err(|errno| errors::os_error(py, errno, Some(fd), None))
}

/// A writable, C-contiguous export of a caller's buffer for the length of one call
/// made with the GIL held (taken again after a read that released it), released
/// with `PyBuffer_Release` at once. A `View` is released through PyO3's attach,
/// which outside PyO3's entry points (`InlineRead`'s calls) checks the GIL state
/// each time: 70-90 ns of a cached 4 KiB `preadinto` on CPython 3.11.
struct HeldWritable(ffi::Py_buffer);

impl HeldWritable {
    /// The export, or None (and no error set) where `obj` has no writable
    /// C-contiguous buffer.
    fn get(obj: &Bound<'_, PyAny>) -> Option<Self> {
        // SAFETY: all-zero is a valid empty Py_buffer, which PyObject_GetBuffer
        // fills in (or leaves unused on failure, which then sets an error that is
        // cleared here). PyBUF_WRITABLE without PyBUF_ND asks for a writable
        // C-contiguous span of bytes or a refusal.
        unsafe {
            let mut buf: ffi::Py_buffer = std::mem::zeroed();
            if ffi::PyObject_GetBuffer(obj.as_ptr(), &mut buf, ffi::PyBUF_WRITABLE) != 0 {
                ffi::PyErr_Clear();
                return None;
            }
            Some(Self(buf))
        }
    }
}

impl Drop for HeldWritable {
    fn drop(&mut self) {
        // SAFETY: the buffer was exported by PyObject_GetBuffer and is released
        // once; the GIL is held (the contract of `get`'s callers).
        unsafe { ffi::PyBuffer_Release(&mut self.0) }
    }
}

/// Either kind of export of a read's target.
enum Export {
    Held(HeldWritable),
    View(View),
}

impl Export {
    fn span(&self) -> (usize, usize) {
        match self {
            Export::Held(held) => (held.0.buf as usize, held.0.len as usize),
            Export::View(view) => (view.ptr() as usize, view.len()),
        }
    }
}

fn check(py: Python<'_>, fd: RawFd, offset: i64) -> PyResult<()> {
    if fd < 0 {
        return Err(errors::os_error(py, libc::EBADF, None, None));
    }
    if offset < 0 {
        return Err(errors::os_error(
            py,
            libc::EINVAL,
            Some(fd),
            Some("negative offset"),
        ));
    }
    Ok(())
}

/// tmpfs (shmem: /dev/shm, and /tmp on many distributions) and ramfs, as
/// `statfs.f_type` reports them.
const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// `on_memory_filesystem(fd)`: whether `fd` is a regular file of a memory
/// filesystem (tmpfs, ramfs); False for an fd that fstatfs or fstat refuses. Such a
/// file refuses RWF_NOWAIT (EOPNOTSUPP, Linux 6.18), and io_uring hands every read
/// and write of it to a kernel worker thread, yet a plain read of it waits for no
/// device: its pages are memory (a tmpfs page swapped out is the one wait it can
/// make, as a major fault of the caller's own memory would be). Its reads and
/// writes are therefore made inline without the flag. Regular files only: /dev is a
/// devtmpfs, which reports tmpfs's type, and a terminal there refuses RWF_NOWAIT
/// too but may wait forever.
#[pyfunction]
pub fn on_memory_filesystem(fd: RawFd) -> bool {
    if !matches!(crate::sys::fs_type(fd), Ok(TMPFS_MAGIC | RAMFS_MAGIC)) {
        return false;
    }
    // SAFETY: all-zero is a valid stat, and fstat fills it in; `st` is owned by
    // this frame and outlives the call.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a writable stat.
    unsafe { libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG }
}

/// Fills `n` bytes at `addr` from `fd` at `offset` with `preadv2(RWF_NOWAIT)`:
/// Ok(Some(count)) when all were read or the file ended first, Ok(None) where the
/// cache stops (EAGAIN, before or after some bytes), Err(errno) for an error before
/// any byte. A read that comes back short is either at the end of the file or only
/// partly cached: reading on tells which (0 at EOF, EAGAIN where the cache stops). A
/// partly cached range is left to the caller's queue, so that a result is short
/// only at the end of the file, as a blocking pread's is. A file of a memory
/// filesystem (`on_memory_filesystem`) is read without the flag: its refusal of it
/// (EOPNOTSUPP) costs one failed call, an fstatfs and an fstat per read, against a
/// kernel worker's wake-up per read through the queue; a caller that knows
/// (`memory`) saves them.
///
/// # Safety
/// `addr..addr + n` must be writable memory that nothing else reads or writes
/// during the call.
unsafe fn fill_nowait(
    fd: RawFd,
    addr: usize,
    n: usize,
    offset: i64,
    memory: bool,
) -> Result<Option<usize>, i32> {
    let mut got = 0usize;
    let mut flags = if memory { 0 } else { libc::RWF_NOWAIT };
    loop {
        let (at, left, pos) = (
            (addr + got) as *mut libc::c_void,
            n - got,
            offset + got as i64,
        );
        let r = if flags == 0 {
            // Without a flag a plain pread reads the same bytes, and the kernel has
            // no iovec to copy in and check (about 3 % of a 4 KiB read of tmpfs).
            // SAFETY: `at..at + left` are the writable bytes left (the caller's
            // contract).
            unsafe { sys::pread_raw(fd, at, left, pos) }
        } else {
            // SAFETY: as above.
            unsafe { sys::preadv2_one(fd, at, left, pos, flags) }
        };
        if r < 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if errno == libc::EOPNOTSUPP && flags != 0 && on_memory_filesystem(fd) {
                flags = 0;
                continue;
            }
            return match errno {
                libc::EAGAIN => Ok(None),
                _ if got > 0 => Ok(Some(got)),
                _ => Err(errno),
            };
        }
        got += r as usize;
        if r == 0 || got == n {
            return Ok(Some(got));
        }
    }
}

/// `pread_nowait`'s read, for the callers that wrap its result (`ready.rs`).
pub fn read_cached<'py>(
    py: Python<'py>,
    fd: RawFd,
    n: usize,
    offset: i64,
    memory: bool,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    read_cached_after(py, &[], fd, n, offset, memory)
}

/// `read_cached` into a bytes object that starts with `head`.
fn read_cached_after<'py>(
    py: Python<'py>,
    head: &[u8],
    fd: RawFd,
    n: usize,
    offset: i64,
    memory: bool,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    check(py, fd, offset)?;
    let len = n
        .checked_add(head.len())
        .and_then(|total| ffi::Py_ssize_t::try_from(total).ok())
        .ok_or_else(|| pyo3::exceptions::PyOverflowError::new_err("read size too large"))?;
    // SAFETY: a NULL source asks CPython for an uninitialised bytes object of `len`
    // bytes; it is not visible to any Python code until we return it, so filling it
    // in place is allowed (the documented use of this call).
    let raw = unsafe { ffi::PyBytes_FromStringAndSize(std::ptr::null(), len) };
    // SAFETY: `raw` is a new reference or NULL with an exception set.
    let obj: Bound<'_, PyBytes> = unsafe { Bound::from_owned_ptr_or_err(py, raw)? }.cast_into()?;
    // SAFETY: the object is a bytes object of `len` bytes, owned by us alone.
    let start = unsafe { ffi::PyBytes_AsString(obj.as_ptr()) } as usize;
    // SAFETY: `head` (borrowed from a live object) and the new object's first
    // `head.len()` bytes do not overlap; the object holds `len` >= `head.len()`
    // bytes.
    unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), start as *mut u8, head.len()) };
    let data = start + head.len();
    // SAFETY: the unshared bytes object holds `n` writable bytes at `data` and
    // outlives the call (`obj` is held in this frame).
    let read = move || unsafe { fill_nowait(fd, data, n, offset, memory) };
    let res = if n >= RELEASE_GIL_FROM {
        py.detach(read)
    } else {
        read()
    };
    let got = match res {
        Ok(Some(got)) => got,
        Ok(None) => return Ok(None),
        Err(errno) => return Err(errors::os_error(py, errno, Some(fd), None)),
    };
    if got == n {
        return Ok(Some(obj));
    }
    // Short at the end of the file: an exact-size copy.
    // SAFETY: the first `head.len()` bytes were copied above and the next `got`
    // written by the kernel.
    let filled = unsafe { std::slice::from_raw_parts(start as *const u8, head.len() + got) };
    Ok(Some(PyBytes::new(py, filled)))
}

/// `open_path_cached(path, *, dir_fd=None, follow_symlinks=True)`: an `O_PATH` fd of
/// `path` when its lookup needs no I/O (`openat2` with `RESOLVE_CACHED`: every step
/// in the dentry cache), for a stat made inline; None otherwise: the lookup would
/// read a directory, an error (the caller's queued call raises it as the os module
/// would), or a kernel without `openat2` or `RESOLVE_CACHED` (before 5.12). An
/// `O_PATH` open runs no filesystem's open: a FIFO or a device is not opened, and
/// nothing can wait. The caller closes the fd.
#[pyfunction]
#[pyo3(signature = (path, *, dir_fd=None, follow_symlinks=true))]
pub fn open_path_cached(
    path: &Bound<'_, PyAny>,
    dir_fd: Option<RawFd>,
    follow_symlinks: bool,
) -> PyResult<Option<RawFd>> {
    let path = crate::op::fs::path_arg(path)?;
    let mut flags = libc::O_PATH | libc::O_CLOEXEC;
    if !follow_symlinks {
        flags |= libc::O_NOFOLLOW;
    }
    // The kernel's `struct open_how` (linux/openat2.h), whose layout is fixed by
    // its size argument (libc's type cannot be built outside the crate).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: flags as u64,
        mode: 0,
        resolve: libc::RESOLVE_CACHED,
    };
    // SAFETY: `path` is a NUL-terminated string and `how` a valid open_how, both
    // alive for the call; the kernel reads `size_of::<OpenHow>()` bytes of it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir_fd.unwrap_or(libc::AT_FDCWD),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    Ok((fd >= 0).then_some(fd as RawFd))
}
