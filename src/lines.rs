//! Line iteration for `ringio.open` files: `async for line in f` without an async
//! generator.
//!
//! Two objects:
//!
//! * [`LineCursor`] (a PyO3 class): a read position in one chunk the file lent out
//!   (the binary file's read buffer, or the text file's decoded text). The file
//!   keeps it in `_cursor` while it is lent and takes it back (`take()`, which
//!   returns the position) before any other operation touches its buffer. Splitting
//!   happens here: `memchr` on bytes, `PyUnicode_FindChar`/`PyUnicode_Find` on str.
//! * `LineIter` (a type built with `PyType_FromSpec`, because it needs the
//!   `am_send` slot, which PyO3 classes cannot have): what the file's `__aiter__`
//!   returns. When the cursor holds a complete line, `__anext__` stores it and
//!   returns the iterator itself as the awaitable; `await` then gets the line back
//!   from `am_send` as `PYGEN_RETURN`, the way a coroutine returns a value without
//!   suspending: no coroutine, no exception, no allocation but the line. Otherwise
//!   `__anext__` returns the file's `_next_line()` coroutine, which reads through the
//!   file's ordinary async path and lends the rest of the new chunk out.
//!
//! The iterator holds the file and the cursor; the file holds the cursor; the
//! cursor holds its chunk only. So no reference cycle is made, and a file dropped
//! in the middle of an iteration is closed as soon as its last reference goes.

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicIsize, Ordering};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::pytype::{gc_dealloc, gc_heap_type, return_self, slot, traverse};

/// How a chunk is split; the text kinds follow `TextIOWrapper`'s `newline=` (the
/// newline decoder has already turned `\r` and `\r\n` into `\n` for `newline=None`).
pub const KIND_BYTES: u8 = 0;
pub const KIND_LF: u8 = 1;
pub const KIND_CR: u8 = 2;
pub const KIND_CRLF: u8 = 3;
/// `newline=''`: `\n`, `\r` or `\r\n`, kept as they are.
pub const KIND_UNIVERSAL: u8 = 4;

/// Where the next line of a lent chunk starts; see the module notes.
#[pyclass(frozen, module = "ringio._core")]
pub struct LineCursor {
    chunk: Py<PyAny>,
    /// Address of a bytes chunk's data (the object is immutable and held by
    /// `chunk`, so it stays put); 0 for str.
    data: usize,
    end: isize,
    kind: u8,
    /// The next line starts here; -1 once the file took the cursor back.
    pos: AtomicIsize,
    /// Universal newlines: the first `\n` / `\r` at or after some position not
    /// past `pos` (`end` when there is none); -1 when not known yet. Saves
    /// rescanning a chunk that has one kind of line end only.
    next_nl: AtomicIsize,
    next_cr: AtomicIsize,
}

#[pymethods]
impl LineCursor {
    /// `LineCursor(chunk, pos, kind)`: lends `chunk[pos:]` (bytes for KIND_BYTES, str
    /// for the others).
    #[new]
    fn new(chunk: &Bound<'_, PyAny>, pos: isize, kind: u8) -> PyResult<Self> {
        let (data, end) = if kind == KIND_BYTES {
            let b = chunk
                .cast::<PyBytes>()
                .map_err(|_| PyTypeError::new_err("LineCursor: bytes chunk expected"))?;
            (b.as_bytes().as_ptr() as usize, b.as_bytes().len() as isize)
        } else if kind <= KIND_UNIVERSAL {
            let s = chunk
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("LineCursor: str chunk expected"))?;
            // SAFETY: `s` is a str object (checked just above).
            let n = unsafe { ffi::PyUnicode_GetLength(s.as_ptr()) };
            if n < 0 {
                return Err(PyErr::fetch(chunk.py()));
            }
            (0, n)
        } else {
            return Err(PyValueError::new_err(format!(
                "LineCursor: bad kind {kind}"
            )));
        };
        if pos < 0 || pos > end {
            return Err(PyValueError::new_err("LineCursor: position out of range"));
        }
        Ok(LineCursor {
            chunk: chunk.clone().unbind(),
            data,
            end,
            kind,
            pos: AtomicIsize::new(pos),
            next_nl: AtomicIsize::new(-1),
            next_cr: AtomicIsize::new(-1),
        })
    }

    /// Takes the cursor back: returns the position (where the next unread line
    /// starts), and the cursor hands out no more lines. -1 if already taken.
    fn take(&self) -> isize {
        self.pos.swap(-1, Ordering::Relaxed)
    }

    /// The position, or -1 once taken.
    #[getter]
    fn pos(&self) -> isize {
        self.pos.load(Ordering::Relaxed)
    }

    /// The lent chunk.
    #[getter]
    fn chunk(&self, py: Python<'_>) -> Py<PyAny> {
        self.chunk.clone_ref(py)
    }

    /// The next complete line, advancing; None when the chunk holds no complete
    /// line from the position on (or the cursor was taken back).
    fn next_line<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.advance(py)
    }
}

impl LineCursor {
    /// The next complete line of the chunk, advancing past it; None when there is
    /// none (the rest is a partial line, or the cursor is spent or taken back).
    #[inline]
    fn advance<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let pos = self.pos.load(Ordering::Relaxed);
        if pos < 0 || pos >= self.end {
            return Ok(None);
        }
        let Some(stop) = self.line_end(py, pos)? else {
            return Ok(None);
        };
        let line = if self.kind == KIND_BYTES {
            let start = (self.data + pos as usize) as *const u8;
            // SAFETY: `start..start + (stop - pos)` lies inside the bytes object held by
            // `self.chunk` (0 <= pos < stop <= end = its length); bytes never change.
            let slice = unsafe { std::slice::from_raw_parts(start, (stop - pos) as usize) };
            PyBytes::new(py, slice).into_any()
        } else {
            // SAFETY: `chunk` is a str and 0 <= pos < stop <= its length.
            let raw = unsafe { ffi::PyUnicode_Substring(self.chunk.as_ptr(), pos, stop) };
            // SAFETY: a new reference, or NULL with an exception set.
            unsafe { Bound::from_owned_ptr_or_err(py, raw)? }
        };
        self.pos.store(stop, Ordering::Relaxed);
        Ok(Some(line))
    }

    /// Index just past the line end of the line starting at `pos` (< end), if the
    /// chunk holds it.
    #[inline]
    fn line_end(&self, py: Python<'_>, pos: isize) -> PyResult<Option<isize>> {
        let end = self.end;
        match self.kind {
            KIND_BYTES => {
                let start = self.data + pos as usize;
                // SAFETY: the `end - pos` bytes from `start` are inside the bytes
                // object held by `self.chunk`.
                let hit = unsafe {
                    libc::memchr(start as *const c_void, b'\n' as c_int, (end - pos) as usize)
                };
                Ok((!hit.is_null()).then(|| (hit as usize - self.data) as isize + 1))
            }
            KIND_LF => Ok(self.find_char(py, '\n', pos)?.map(|i| i + 1)),
            KIND_CR => Ok(self.find_char(py, '\r', pos)?.map(|i| i + 1)),
            KIND_CRLF => {
                let crlf = pyo3::intern!(py, "\r\n");
                // SAFETY: both are str objects; the range is within the chunk.
                let i =
                    unsafe { ffi::PyUnicode_Find(self.chunk.as_ptr(), crlf.as_ptr(), pos, end, 1) };
                match i {
                    -2 => Err(PyErr::fetch(py)),
                    -1 => Ok(None),
                    i => Ok(Some(i + 2)),
                }
            }
            _ => {
                let nl = self.cached_find(py, &self.next_nl, '\n', pos)?;
                let cr = self.cached_find(py, &self.next_cr, '\r', pos)?;
                if nl < cr {
                    Ok(Some(nl + 1))
                } else if cr < end {
                    if cr + 1 == end {
                        // A lone \r at the end: only at EOF (the newline decoder
                        // keeps a final \r back); the file's readline() decides.
                        Ok(None)
                    } else if nl == cr + 1 {
                        Ok(Some(cr + 2))
                    } else {
                        Ok(Some(cr + 1))
                    }
                } else {
                    Ok(None)
                }
            }
        }
    }

    #[inline]
    fn find_char(&self, py: Python<'_>, c: char, pos: isize) -> PyResult<Option<isize>> {
        // SAFETY: `chunk` is a str object and pos..end lies within it.
        let i = unsafe { ffi::PyUnicode_FindChar(self.chunk.as_ptr(), c as u32, pos, self.end, 1) };
        match i {
            -2 => Err(PyErr::fetch(py)),
            -1 => Ok(None),
            i => Ok(Some(i)),
        }
    }

    /// The first `c` at or after `pos` (`end` if none), through `cache`.
    #[inline]
    fn cached_find(
        &self,
        py: Python<'_>,
        cache: &AtomicIsize,
        c: char,
        pos: isize,
    ) -> PyResult<isize> {
        let known = cache.load(Ordering::Relaxed);
        if known >= pos {
            return Ok(known);
        }
        let at = self.find_char(py, c, pos)?.unwrap_or(self.end);
        cache.store(at, Ordering::Relaxed);
        Ok(at)
    }
}

// ----------------------------------------------------------------------------------
// LineIter: the raw type
// ----------------------------------------------------------------------------------

/// The object layout. Every pointer field is a strong reference or NULL.
#[repr(C)]
struct LineIter {
    ob_base: ffi::PyObject,
    /// The file (its `_cursor` and `_next_line()`); NULL for a stand-alone
    /// awaitable (see `anext`).
    file: *mut ffi::PyObject,
    /// The cursor in use: the file's `_cursor` when it was last looked at.
    cursor: *mut ffi::PyObject,
    /// The line the pending `await` returns.
    ready: *mut ffi::PyObject,
}

/// Allocates an instance holding `file` (a new strong reference is taken); NULL
/// with an exception set on failure.
///
/// # Safety
/// The GIL must be held; `file` must be NULL or a valid object.
unsafe fn alloc_iter(tp: *mut ffi::PyTypeObject, file: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: `tp` is our heap type; PyType_GenericAlloc zero-fills the object
    // (every pointer field starts NULL) and starts GC tracking.
    let obj = unsafe { ffi::PyType_GenericAlloc(tp, 0) };
    if obj.is_null() {
        return obj;
    }
    if !file.is_null() {
        // SAFETY: `obj` has our layout; `file` is valid (caller's contract).
        unsafe {
            ffi::Py_INCREF(file);
            (*(obj as *mut LineIter)).file = file;
        }
    }
    obj
}

/// `LineIter(file)`.
unsafe extern "C" fn iter_new(
    tp: *mut ffi::PyTypeObject,
    args: *mut ffi::PyObject,
    kwargs: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held and a valid args tuple.
    unsafe {
        let py = Python::assume_attached();
        let nkw = if kwargs.is_null() {
            0
        } else {
            ffi::PyDict_Size(kwargs)
        };
        if ffi::PyTuple_Size(args) != 1 || nkw != 0 {
            PyTypeError::new_err("LineIter(file) takes exactly one positional argument")
                .restore(py);
            return ptr::null_mut();
        }
        alloc_iter(tp, ffi::PyTuple_GetItem(args, 0))
    }
}

/// Swaps a field for a new value (a reference the field now owns) and releases the old one.
///
/// # Safety
/// The GIL must be held; `field` points into a live `LineIter`.
#[inline]
unsafe fn set_field(field: *mut *mut ffi::PyObject, value: *mut ffi::PyObject) {
    // SAFETY: caller's contract; the old value is released after the field
    // changed, so a finaliser it runs sees a consistent object.
    unsafe {
        let old = *field;
        *field = value;
        ffi::Py_XDECREF(old);
    }
}

/// The next line from the iterator's cursor, or from the file's current cursor;
/// None when neither holds a complete line.
///
/// # Safety
/// The GIL must be held and `it` must be a live `LineIter` with a file.
unsafe fn next_ready_line<'py>(
    py: Python<'py>,
    it: *mut LineIter,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    // SAFETY: `it` is live (caller's contract); the cursor field is NULL or a
    // LineCursor we hold a reference to.
    unsafe {
        let cur = (*it).cursor;
        if !cur.is_null() {
            let cursor = Borrowed::from_ptr(py, cur).cast_unchecked::<LineCursor>();
            if let Some(line) = cursor.get().advance(py)? {
                return Ok(Some(line));
            }
        }
        // Spent or taken back: the file may have lent a new chunk since.
        let file = Borrowed::from_ptr(py, (*it).file);
        let lent = file.getattr(pyo3::intern!(py, "_cursor"))?;
        let Ok(cursor) = lent.cast_into::<LineCursor>() else {
            set_field(&mut (*it).cursor, ptr::null_mut());
            return Ok(None);
        };
        if cursor.as_ptr() == cur {
            return Ok(None); // the same one, already found empty
        }
        let line = cursor.get().advance(py)?;
        set_field(&mut (*it).cursor, cursor.into_ptr());
        Ok(line)
    }
}

/// `__anext__`: the iterator itself with the line ready, or the file's
/// `_next_line()` coroutine.
unsafe extern "C" fn iter_anext(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held; `slf` is a LineIter.
    unsafe {
        let py = Python::assume_attached();
        let it = slf as *mut LineIter;
        if (*it).file.is_null() {
            PyTypeError::new_err("this LineIter is an awaitable, not an iterator").restore(py);
            return ptr::null_mut();
        }
        match next_ready_line(py, it) {
            Ok(Some(line)) => {
                if (*it).ready.is_null() {
                    (*it).ready = line.into_ptr();
                    ffi::Py_INCREF(slf);
                    slf
                } else {
                    // An earlier __anext__() result not awaited yet: this line
                    // gets an awaitable of its own.
                    let aw = alloc_iter(ffi::Py_TYPE(slf), ptr::null_mut());
                    if !aw.is_null() {
                        (*(aw as *mut LineIter)).ready = line.into_ptr();
                    }
                    aw
                }
            }
            Ok(None) => {
                let file = Borrowed::from_ptr(py, (*it).file);
                match file.call_method0(pyo3::intern!(py, "_next_line")) {
                    Ok(coro) => coro.into_ptr(),
                    Err(e) => {
                        e.restore(py);
                        ptr::null_mut()
                    }
                }
            }
            Err(e) => {
                e.restore(py);
                ptr::null_mut()
            }
        }
    }
}

/// Takes the ready line, or sets RuntimeError (awaited twice).
///
/// # Safety
/// The GIL must be held; `slf` is a live LineIter.
unsafe fn take_ready(py: Python<'_>, slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: caller's contract; the field's reference moves to the caller.
    unsafe {
        let it = slf as *mut LineIter;
        let line = (*it).ready;
        if line.is_null() {
            PyRuntimeError::new_err("cannot reuse an already awaited __anext__() result")
                .restore(py);
        }
        (*it).ready = ptr::null_mut();
        line
    }
}

/// `am_send`: the awaitable is complete from the start; `await` returns the line.
unsafe extern "C" fn iter_send(
    slf: *mut ffi::PyObject,
    _arg: *mut ffi::PyObject,
    result: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    // SAFETY: called by CPython with the GIL held; `result` is writable.
    unsafe {
        let line = take_ready(Python::assume_attached(), slf);
        *result = line;
        if line.is_null() {
            ffi::PySendResult::PYGEN_ERROR
        } else {
            ffi::PySendResult::PYGEN_RETURN
        }
    }
}

/// `__next__` (callers that do not use `am_send`): StopIteration(line).
unsafe extern "C" fn iter_next(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: called by CPython with the GIL held.
    unsafe {
        let py = Python::assume_attached();
        let line = take_ready(py, slf);
        if line.is_null() {
            return ptr::null_mut();
        }
        crate::pytype::stop_iteration(line)
    }
}

unsafe extern "C" fn iter_traverse(
    slf: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: called by the GC on a live LineIter; its fields are NULL or objects it holds.
    unsafe {
        let o = slf as *mut LineIter;
        traverse(slf, &[(*o).file, (*o).cursor, (*o).ready], visit, arg)
    }
}

unsafe extern "C" fn iter_clear(slf: *mut ffi::PyObject) -> c_int {
    // SAFETY: called with the GIL held on a live LineIter.
    unsafe {
        let it = slf as *mut LineIter;
        set_field(&mut (*it).file, ptr::null_mut());
        set_field(&mut (*it).cursor, ptr::null_mut());
        set_field(&mut (*it).ready, ptr::null_mut());
    }
    0
}

unsafe extern "C" fn iter_dealloc(slf: *mut ffi::PyObject) {
    // SAFETY: called by CPython for the last reference, with the GIL held.
    unsafe { gc_dealloc(slf, iter_clear) }
}

/// Creates `LineIter` and adds it and `LineCursor` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<LineCursor>()?;
    for (name, value) in [
        ("LINES_BYTES", KIND_BYTES),
        ("LINES_LF", KIND_LF),
        ("LINES_CR", KIND_CR),
        ("LINES_CRLF", KIND_CRLF),
        ("LINES_UNIVERSAL", KIND_UNIVERSAL),
    ] {
        m.add(name, value)?;
    }
    let mut slots = [
        slot(ffi::Py_tp_new, iter_new as *mut c_void),
        slot(ffi::Py_tp_dealloc, iter_dealloc as *mut c_void),
        slot(ffi::Py_tp_traverse, iter_traverse as *mut c_void),
        slot(ffi::Py_tp_clear, iter_clear as *mut c_void),
        slot(ffi::Py_tp_iter, return_self as *mut c_void),
        slot(ffi::Py_tp_iternext, iter_next as *mut c_void),
        slot(ffi::Py_am_aiter, return_self as *mut c_void),
        slot(ffi::Py_am_anext, iter_anext as *mut c_void),
        slot(ffi::Py_am_await, return_self as *mut c_void),
        slot(ffi::Py_am_send, iter_send as *mut c_void),
        slot(
            ffi::Py_tp_doc,
            c"LineIter(file): `async for` over a ringio file's lines; see ringio/_io/lines.py."
                .as_ptr() as *mut c_void,
        ),
        slot(0, ptr::null_mut()),
    ];
    let tp = gc_heap_type(
        py,
        c"ringio._core.LineIter",
        std::mem::size_of::<LineIter>(),
        &mut slots,
    )?;
    m.add("LineIter", tp)?;
    Ok(())
}
