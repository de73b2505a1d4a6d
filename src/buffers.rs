//! Python buffers lent to the kernel, and page-aligned buffers for O_DIRECT.
//!
//! A [`View`] is an acquired buffer-protocol export. While it exists the exporting
//! object cannot be resized or freed (a `bytearray` raises `BufferError` on resize,
//! an `mmap` refuses to close), so the address handed to the kernel stays valid.
//! ringio keeps each op's views in its in-flight entry until the kernel's completion
//! for that op has been reaped.

use std::alloc::{self, Layout};
use std::os::raw::c_int;
use std::ptr::NonNull;

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

/// `copy_into(target, source, start)`: copies `source[start:start + len(target)]`
/// (less where `source` ends first) into the start of the writable buffer `target`
/// and returns the byte count: a buffered file's `readinto` served from its read
/// buffer, in one copy instead of a slice and a slice assignment.
#[pyfunction]
pub fn copy_into(
    target: &Bound<'_, PyAny>,
    source: &Bound<'_, PyAny>,
    start: usize,
) -> PyResult<usize> {
    let into = View::writable(target)?;
    let from = View::readable(source)?;
    let n = into.len().min(from.len().saturating_sub(start));
    copy_span(&into, &from, start, n);
    Ok(n)
}

/// Copies `from[start..start + n]` to the start of `into`, the two checked by the
/// caller to hold that many bytes (`into` a writable view).
fn copy_span(into: &View, from: &View, start: usize, n: usize) {
    assert!(n <= into.len() && n <= from.len().saturating_sub(start));
    if n > 0 {
        // SAFETY: both views stay exported while borrowed here, so `from` is
        // readable for `start + n` bytes and `into` writable for `n` (asserted
        // above); `ptr::copy` (memmove) is sound even where the two are one object.
        unsafe { std::ptr::copy(from.ptr().add(start), into.ptr(), n) };
    }
}

/// `copy_whole_into(target, source, start)`: as `copy_into` where `source` holds
/// all of `target`'s length from `start`; else -1, with nothing copied (an empty
/// `target` included). A buffered file's `readinto` served from its read buffer
/// only when the buffer holds the whole read, with the checks in the same call.
#[pyfunction]
pub fn copy_whole_into(
    target: &Bound<'_, PyAny>,
    source: &Bound<'_, PyAny>,
    start: usize,
) -> PyResult<isize> {
    let into = View::writable(target)?;
    let from = View::readable(source)?;
    let n = into.len();
    if n == 0 || n > from.len().saturating_sub(start) {
        return Ok(-1);
    }
    copy_span(&into, &from, start, n);
    Ok(n as isize)
}

/// `writable_address(buffer)`: the address and byte length of a writable,
/// C-contiguous buffer, for checking O_DIRECT alignment before a read goes straight
/// into it. Raises TypeError for what a read cannot fill (as a read would). The
/// address is valid only while the caller holds `buffer` unresized.
#[pyfunction]
pub fn writable_address(buffer: &Bound<'_, PyAny>) -> PyResult<(usize, usize)> {
    let view = View::writable(buffer)?;
    Ok((view.ptr() as usize, view.len()))
}

pub struct View {
    buf: PyUntypedBuffer,
}

impl View {
    /// A view the kernel may read from (the source of a write).
    pub fn readable(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let buf = PyUntypedBuffer::get(obj).map_err(|_| {
            PyTypeError::new_err(format!(
                "a bytes-like object is required, not '{}'",
                type_name(obj)
            ))
        })?;
        if !buf.is_c_contiguous() {
            return Err(PyBufferError::new_err("buffer must be C-contiguous"));
        }
        Ok(Self { buf })
    }

    /// A view the kernel may write into (the target of a read).
    pub fn writable(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let view = Self::readable(obj)?;
        if view.buf.readonly() {
            return Err(PyTypeError::new_err(format!(
                "read target must be a writable buffer (bytearray, memoryview, mmap, array, \
                 ringio.aligned), not read-only '{}'",
                type_name(obj)
            )));
        }
        Ok(view)
    }

    pub fn ptr(&self) -> *mut u8 {
        self.buf.buf_ptr().cast()
    }

    pub fn len(&self) -> usize {
        self.buf.len_bytes()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// A zero-filled, fixed-size buffer whose address is aligned for O_DIRECT.
///
/// It exports a writable buffer, so `memoryview(buf)[a:b]`, `bytes(buf)` and every
/// ringio read/write accept it.
#[pyclass(module = "ringio._core", frozen)]
pub struct AlignedBuffer {
    mem: AlignedAlloc,
}

/// A zero-filled heap allocation of `len` bytes at an `align`-aligned address
/// (pure Rust, so its unsafe code runs under Miri).
pub struct AlignedAlloc {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: the allocation is owned exclusively by this object and freed only in Drop;
// its bytes are shared through the buffer protocol exactly as a bytearray's are.
unsafe impl Send for AlignedAlloc {}
// SAFETY: as above; the struct's own fields are never mutated after construction.
unsafe impl Sync for AlignedAlloc {}

#[derive(Debug, PartialEq, Eq)]
pub enum AllocError {
    /// The size rounded up to the alignment overflows isize.
    TooLarge,
    /// The allocator returned null.
    OutOfMemory,
}

impl AlignedAlloc {
    /// `align` must be a power of two (checked by the caller: a non-power is
    /// reported as `TooLarge` here rather than panicking).
    pub fn new(len: usize, align: usize) -> Result<Self, AllocError> {
        // A zero-length buffer still gets a real (one-byte) allocation, so that its
        // address is aligned and distinct like any other.
        let layout =
            Layout::from_size_align(len.max(1), align).map_err(|_| AllocError::TooLarge)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or(AllocError::OutOfMemory)?;
        Ok(Self { ptr, len, layout })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn align(&self) -> usize {
        self.layout.align()
    }
}

impl Drop for AlignedAlloc {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, and freed only here.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[pymethods]
impl AlignedBuffer {
    #[new]
    #[pyo3(signature = (nbytes, alignment=None))]
    pub(crate) fn new(nbytes: isize, alignment: Option<isize>) -> PyResult<Self> {
        if nbytes < 0 {
            return Err(PyValueError::new_err("nbytes must be >= 0"));
        }
        let alignment = match alignment {
            None => crate::sys::page_size(),
            Some(a) if a > 0 && (a as usize).is_power_of_two() => a as usize,
            Some(a) => {
                return Err(PyValueError::new_err(format!(
                    "alignment must be a positive power of two, not {a}"
                )));
            }
        };
        let len = nbytes as usize;
        let mem = AlignedAlloc::new(len, alignment).map_err(|e| match e {
            AllocError::TooLarge => PyValueError::new_err(format!(
                "cannot allocate {len} bytes aligned to {alignment}: too large"
            )),
            AllocError::OutOfMemory => {
                pyo3::exceptions::PyMemoryError::new_err(format!("cannot allocate {len} bytes"))
            }
        })?;
        Ok(Self { mem })
    }

    #[getter]
    fn alignment(&self) -> usize {
        self.mem.align()
    }

    /// The buffer's address, for checking alignment.
    #[getter]
    fn address(&self) -> usize {
        self.mem.as_ptr() as usize
    }

    fn __len__(&self) -> usize {
        self.mem.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<ringio.AlignedBuffer {} bytes, aligned to {}>",
            self.mem.len(),
            self.mem.align()
        )
    }

    /// # Safety
    /// Called by CPython with a valid `Py_buffer` to fill, per the buffer protocol.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        // SAFETY: PyBuffer_FillInfo stores a new reference to `slf` in the view, so the
        // allocation outlives every export; the memory is `len` bytes and writable.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                this.mem.as_ptr().cast(),
                this.mem.len() as ffi::Py_ssize_t,
                0,
                flags,
            )
        };
        if rc < 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    /// # Safety
    /// Called by CPython with the view `__getbuffer__` filled; nothing to release
    /// (the view's reference to this object is dropped by CPython itself).
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

impl AlignedBuffer {
    /// The bytes, for Rust code that holds the object (and with it the allocation).
    ///
    /// # Safety
    /// Nothing writes into the buffer while the slice lives: no read of the kernel's
    /// is in flight into it, and no export of it is written through meanwhile.
    pub(crate) unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: `mem` is `len` initialised (zero-filled) bytes owned by this object,
        // which outlives the borrow; the caller rules out writes meanwhile.
        unsafe { std::slice::from_raw_parts(self.mem.as_ptr(), self.mem.len()) }
    }
}

// AlignedBuffer needs no Drop of its own: every buffer export holds a reference to
// the object, so when it is dropped (freeing `mem`) no export is left.

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_zeroed_and_writable() {
        for align in [1, 8, 512, 4096] {
            for len in [0, 1, 511, 4096, 10_000] {
                let a = AlignedAlloc::new(len, align).unwrap();
                assert_eq!(a.as_ptr() as usize % align, 0, "len {len} align {align}");
                assert_eq!(a.len(), len);
                // SAFETY: the allocation holds `len` initialised (zeroed) bytes.
                let bytes = unsafe { std::slice::from_raw_parts_mut(a.as_ptr(), len) };
                assert!(bytes.iter().all(|b| *b == 0));
                bytes.fill(0xA5);
                assert!(bytes.iter().all(|b| *b == 0xA5));
            }
        }
    }

    #[test]
    fn impossible_layouts_are_errors_not_panics() {
        assert_eq!(
            AlignedAlloc::new(usize::MAX - 10, 4096).err(),
            Some(AllocError::TooLarge)
        );
        assert_eq!(AlignedAlloc::new(16, 3).err(), Some(AllocError::TooLarge));
    }
}
