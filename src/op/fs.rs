//! Path and file-table operations (openat, statx, renameat, ...): io_uring only.
//!
//! Their arguments live in [`FsArgs`], owned by the op, so path strings and the
//! statx output buffer stay valid for as long as the kernel may use them.

use std::cell::UnsafeCell;
use std::ffi::CString;
use std::os::fd::RawFd;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::op::{common, extract_fd, new_status, Op, OpCode, Target};

/// struct statx is 256 bytes; the kernel writes it, Python reads it once done.
pub struct StatxBuf(Box<UnsafeCell<[u8; 256]>>);

// SAFETY: the kernel writes the buffer while the op is in flight, and Rust reads it
// only once the op is done (after the completion was reaped, under the GIL).
unsafe impl Send for StatxBuf {}
// SAFETY: as above; there is never a concurrent Rust reader and writer.
unsafe impl Sync for StatxBuf {}

impl StatxBuf {
    fn new() -> Self {
        Self(Box::new(UnsafeCell::new([0; 256])))
    }

    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.0.get().cast()
    }

    /// # Safety
    /// Only once the statx op is done, so that the kernel no longer writes it.
    pub unsafe fn bytes(&self) -> &[u8; 256] {
        // SAFETY: upheld by the caller.
        unsafe { &*self.0.get() }
    }
}

pub struct FsArgs {
    pub dirfd: RawFd,
    pub path: Option<CString>,
    pub dirfd2: RawFd,
    pub path2: Option<CString>,
    pub flags: i32,
    pub mode: u32,
    pub length: u64,
    pub statx: Option<StatxBuf>,
}

impl Default for FsArgs {
    fn default() -> Self {
        Self {
            dirfd: libc::AT_FDCWD,
            path: None,
            dirfd2: libc::AT_FDCWD,
            path2: None,
            flags: 0,
            mode: 0,
            length: 0,
            statx: None,
        }
    }
}

/// A path argument as the os module takes it: str, bytes or os.PathLike.
pub fn path_arg(obj: &Bound<'_, PyAny>) -> PyResult<CString> {
    let py = obj.py();
    let encoded = py
        .import("os")?
        .call_method1("fsencode", (obj,))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "expected str, bytes or os.PathLike object, not {}",
                crate::buffers::type_name(obj)
            ))
        })?;
    let bytes = encoded.cast::<PyBytes>()?.as_bytes().to_vec();
    CString::new(bytes).map_err(|_| PyValueError::new_err("embedded null byte"))
}

fn dir_fd(dir_fd: Option<i64>) -> PyResult<RawFd> {
    match dir_fd {
        None => Ok(libc::AT_FDCWD),
        Some(fd) if (0..=i32::MAX as i64).contains(&fd) => Ok(fd as RawFd),
        Some(fd) => Err(PyValueError::new_err(format!(
            "dir_fd must be >= 0, not {fd}"
        ))),
    }
}

fn fs_op(
    py: Python<'_>,
    code: OpCode,
    fd: RawFd,
    file: Option<Py<PyAny>>,
    args: FsArgs,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let c = common(py, 0, None, None, data)?;
    Ok(Op {
        code,
        fd,
        file,
        target: Target::Nothing,
        offset: 0,
        rw_flags: 0,
        ioprio: None,
        resfd: None,
        poll_events: 0,
        data: c.data,
        status: new_status(),
        fs: Some(Box::new(args)),
    })
}

/// Open `path` (relative to `dir_fd`); completes with the new fd. O_CLOEXEC is
/// always added, as os.open does.
#[pyfunction]
#[pyo3(signature = (path, flags, mode=0o666, *, dir_fd=None, data=None))]
pub fn openat(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    flags: i32,
    mode: u32,
    dir_fd: Option<i64>,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let args = FsArgs {
        dirfd: self::dir_fd(dir_fd)?,
        path: Some(path_arg(path)?),
        flags: flags | libc::O_CLOEXEC,
        mode,
        ..FsArgs::default()
    };
    fs_op(
        py,
        OpCode::OpenAt,
        -1,
        Some(path.clone().unbind()),
        args,
        data,
    )
}

/// Close an fd through the ring.
#[pyfunction]
#[pyo3(signature = (fd, *, data=None))]
pub fn close(py: Python<'_>, fd: &Bound<'_, PyAny>, data: Option<Py<PyAny>>) -> PyResult<Op> {
    let (fd, file) = extract_fd(fd)?;
    fs_op(py, OpCode::Close, fd, file, FsArgs::default(), data)
}

pub const STATX_BASIC_STATS: u32 = 0x7ff;
pub const STATX_BTIME: u32 = 0x800;

/// statx(2) of `path` (or of the fd `dir_fd` itself with `path=""` and
/// AT_EMPTY_PATH in `flags`). Completes with 0; read the result with
/// `Op.stat()`.
#[pyfunction]
#[pyo3(signature = (path, *, dir_fd=None, flags=0, mask=STATX_BASIC_STATS | STATX_BTIME, data=None))]
pub fn statx(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    dir_fd: Option<i64>,
    flags: i32,
    mask: u32,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let args = FsArgs {
        dirfd: self::dir_fd(dir_fd)?,
        path: Some(path_arg(path)?),
        flags,
        mode: mask,
        statx: Some(StatxBuf::new()),
        ..FsArgs::default()
    };
    let fd = args.dirfd;
    fs_op(py, OpCode::Statx, fd, None, args, data)
}

/// Truncate (or extend) an open file to `length` bytes (Linux 6.9).
#[pyfunction]
#[pyo3(signature = (fd, length, *, data=None))]
pub fn ftruncate(
    py: Python<'_>,
    fd: &Bound<'_, PyAny>,
    length: i64,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    if length < 0 {
        return Err(PyValueError::new_err(format!(
            "length must be >= 0, not {length}"
        )));
    }
    let (fd, file) = extract_fd(fd)?;
    let args = FsArgs {
        length: length as u64,
        ..FsArgs::default()
    };
    fs_op(py, OpCode::Ftruncate, fd, file, args, data)
}

/// fallocate(2): allocate (or with `mode` flags punch/zero) a byte range.
#[pyfunction]
#[pyo3(signature = (fd, offset, length, mode=0, *, data=None))]
pub fn fallocate(
    py: Python<'_>,
    fd: &Bound<'_, PyAny>,
    offset: i64,
    length: i64,
    mode: i32,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let (fd, file) = extract_fd(fd)?;
    if length <= 0 {
        return Err(PyValueError::new_err(format!(
            "length must be > 0, not {length}"
        )));
    }
    let args = FsArgs {
        length: length as u64,
        flags: mode,
        ..FsArgs::default()
    };
    let mut op = fs_op(py, OpCode::Fallocate, fd, file, args, data)?;
    op.offset = crate::op::check_offset(offset)?;
    Ok(op)
}

/// renameat2(2): `flags` may be RENAME_NOREPLACE, RENAME_EXCHANGE, ...
#[pyfunction]
#[pyo3(signature = (src, dst, *, src_dir_fd=None, dst_dir_fd=None, flags=0, data=None))]
pub fn renameat(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    src_dir_fd: Option<i64>,
    dst_dir_fd: Option<i64>,
    flags: i32,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let args = FsArgs {
        dirfd: dir_fd(src_dir_fd)?,
        path: Some(path_arg(src)?),
        dirfd2: dir_fd(dst_dir_fd)?,
        path2: Some(path_arg(dst)?),
        flags,
        ..FsArgs::default()
    };
    fs_op(py, OpCode::RenameAt, -1, None, args, data)
}

/// unlinkat(2); with `rmdir=True` it removes an empty directory (AT_REMOVEDIR).
#[pyfunction]
#[pyo3(signature = (path, *, dir_fd=None, rmdir=false, data=None))]
pub fn unlinkat(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    dir_fd: Option<i64>,
    rmdir: bool,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let args = FsArgs {
        dirfd: self::dir_fd(dir_fd)?,
        path: Some(path_arg(path)?),
        flags: if rmdir { libc::AT_REMOVEDIR } else { 0 },
        ..FsArgs::default()
    };
    fs_op(py, OpCode::UnlinkAt, -1, None, args, data)
}

#[pyfunction]
#[pyo3(signature = (path, mode=0o777, *, dir_fd=None, data=None))]
pub fn mkdirat(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    mode: u32,
    dir_fd: Option<i64>,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let args = FsArgs {
        dirfd: self::dir_fd(dir_fd)?,
        path: Some(path_arg(path)?),
        mode,
        ..FsArgs::default()
    };
    fs_op(py, OpCode::MkdirAt, -1, None, args, data)
}

/// Create a symlink at `dst` pointing to `src` (os.symlink's argument order).
#[pyfunction]
#[pyo3(signature = (src, dst, *, dir_fd=None, data=None))]
pub fn symlinkat(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    dir_fd: Option<i64>,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let args = FsArgs {
        path: Some(path_arg(src)?),
        dirfd2: self::dir_fd(dir_fd)?,
        path2: Some(path_arg(dst)?),
        ..FsArgs::default()
    };
    fs_op(py, OpCode::SymlinkAt, -1, None, args, data)
}

/// Create a hard link `dst` to `src`.
#[pyfunction]
#[pyo3(signature = (src, dst, *, src_dir_fd=None, dst_dir_fd=None, follow_symlinks=true, data=None))]
#[allow(clippy::too_many_arguments)]
pub fn linkat(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    src_dir_fd: Option<i64>,
    dst_dir_fd: Option<i64>,
    follow_symlinks: bool,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let args = FsArgs {
        dirfd: dir_fd(src_dir_fd)?,
        path: Some(path_arg(src)?),
        dirfd2: dir_fd(dst_dir_fd)?,
        path2: Some(path_arg(dst)?),
        flags: if follow_symlinks {
            libc::AT_SYMLINK_FOLLOW
        } else {
            0
        },
        ..FsArgs::default()
    };
    fs_op(py, OpCode::LinkAt, -1, None, args, data)
}

/// The fields of a completed statx, in the order `os.stat_result` takes them
/// after its ten positional fields: see ringio.uring.stat_result().
pub fn statx_fields(buf: &[u8; 256]) -> StatxFields {
    let u16_at = |o: usize| u16::from_ne_bytes(buf[o..o + 2].try_into().unwrap());
    let u32_at = |o: usize| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap());
    let i64_at = |o: usize| i64::from_ne_bytes(buf[o..o + 8].try_into().unwrap());
    let ts = |o: usize| (i64_at(o), u32_at(o + 8));
    StatxFields {
        mask: u32_at(0x00),
        blksize: u32_at(0x04),
        attributes: u64_at(0x08),
        nlink: u32_at(0x10),
        uid: u32_at(0x14),
        gid: u32_at(0x18),
        mode: u16_at(0x1c),
        ino: u64_at(0x20),
        size: u64_at(0x28),
        blocks: u64_at(0x30),
        atime: ts(0x40),
        btime: ts(0x50),
        ctime: ts(0x60),
        mtime: ts(0x70),
        rdev: (u32_at(0x80), u32_at(0x84)),
        dev: (u32_at(0x88), u32_at(0x8c)),
    }
}

#[derive(IntoPyObject)]
pub struct StatxFields {
    pub mask: u32,
    pub blksize: u32,
    pub attributes: u64,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub mode: u16,
    pub ino: u64,
    pub size: u64,
    pub blocks: u64,
    pub atime: (i64, u32),
    pub btime: (i64, u32),
    pub ctime: (i64, u32),
    pub mtime: (i64, u32),
    pub rdev: (u32, u32),
    pub dev: (u32, u32),
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(openat, m)?,
        wrap_pyfunction!(close, m)?,
        wrap_pyfunction!(statx, m)?,
        wrap_pyfunction!(ftruncate, m)?,
        wrap_pyfunction!(fallocate, m)?,
        wrap_pyfunction!(renameat, m)?,
        wrap_pyfunction!(unlinkat, m)?,
        wrap_pyfunction!(mkdirat, m)?,
        wrap_pyfunction!(symlinkat, m)?,
        wrap_pyfunction!(linkat, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statx_fields_are_read_at_the_kernel_offsets() {
        let buf = StatxBuf::new();
        {
            // What the kernel does while the op is in flight: write through the pointer.
            // SAFETY: as_mut_ptr points at 256 writable bytes owned by `buf`.
            let raw = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr(), 256) };
            raw[0x00..0x04].copy_from_slice(&0x7ffu32.to_ne_bytes());
            raw[0x1c..0x1e].copy_from_slice(&0o100644u16.to_ne_bytes());
            raw[0x28..0x30].copy_from_slice(&123_456_789u64.to_ne_bytes());
            raw[0x70..0x78].copy_from_slice(&(-5i64).to_ne_bytes());
            raw[0x78..0x7c].copy_from_slice(&999u32.to_ne_bytes());
            raw[0x88..0x8c].copy_from_slice(&8u32.to_ne_bytes());
            raw[0x8c..0x90].copy_from_slice(&1u32.to_ne_bytes());
        }
        // SAFETY: the "kernel" above is done writing.
        let f = statx_fields(unsafe { buf.bytes() });
        assert_eq!(f.mask, 0x7ff);
        assert_eq!(f.mode, 0o100644);
        assert_eq!(f.size, 123_456_789);
        assert_eq!(f.mtime, (-5, 999));
        assert_eq!(f.dev, (8, 1));
        assert_eq!(f.nlink, 0);
    }
}
