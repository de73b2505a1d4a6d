//! One description of an I/O operation, shared by every engine.
//!
//! An [`Op`] names what to do (command, fd, buffers, offset, flags). It holds the
//! Python objects it was given; the buffer *views* handed to the kernel are acquired
//! only when the op is submitted and released when its completion is reaped, so a
//! finished op no longer pins its buffers.

pub mod fs;

use std::os::fd::RawFd;
use std::sync::Mutex;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::{PyTraverseError, PyVisit};

use crate::buffers::View;
use crate::errors;

/// The offset of a read or write at the file's current position (io_uring).
pub const STREAM_OFFSET: i64 = -1;

/// Most iovecs one vectored op may carry (the kernel's UIO_MAXIOV).
pub const MAX_IOVECS: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpCode {
    Read,
    Write,
    Readv,
    Writev,
    Fsync,
    Fdsync,
    Poll,
    Noop,
    // Path and file-table operations (io_uring only).
    OpenAt,
    Close,
    Statx,
    Ftruncate,
    Fallocate,
    RenameAt,
    UnlinkAt,
    MkdirAt,
    SymlinkAt,
    LinkAt,
}

impl OpCode {
    pub fn name(self) -> &'static str {
        match self {
            OpCode::Read => "pread",
            OpCode::Write => "pwrite",
            OpCode::Readv => "preadv",
            OpCode::Writev => "pwritev",
            OpCode::Fsync => "fsync",
            OpCode::Fdsync => "fdsync",
            OpCode::Poll => "poll",
            OpCode::Noop => "noop",
            OpCode::OpenAt => "openat",
            OpCode::Close => "close",
            OpCode::Statx => "statx",
            OpCode::Ftruncate => "ftruncate",
            OpCode::Fallocate => "fallocate",
            OpCode::RenameAt => "renameat",
            OpCode::UnlinkAt => "unlinkat",
            OpCode::MkdirAt => "mkdirat",
            OpCode::SymlinkAt => "symlinkat",
            OpCode::LinkAt => "linkat",
        }
    }

    /// True where the kernel writes into the op's buffers.
    pub fn fills_buffers(self) -> bool {
        matches!(self, OpCode::Read | OpCode::Readv)
    }
}

pub enum Target {
    Nothing,
    One(Py<PyAny>),
    Many(Vec<Py<PyAny>>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Idle,
    InFlight,
    Done,
}

pub struct Status {
    pub state: State,
    /// The driver's token while in flight.
    pub token: u64,
    pub res: Option<i64>,
    /// AIO's second result word; io_uring's CQE flags.
    pub res2: i64,
}

#[pyclass(module = "ringio._core", frozen)]
pub struct Op {
    pub code: OpCode,
    pub fd: RawFd,
    /// The object the fd came from, kept alive while the op exists.
    pub file: Option<Py<PyAny>>,
    pub target: Target,
    pub offset: i64,
    pub rw_flags: i32,
    pub ioprio: Option<u16>,
    pub resfd: Option<RawFd>,
    pub poll_events: u32,
    pub data: Py<PyAny>,
    pub status: Mutex<Status>,
    /// Arguments of path and file-table operations.
    pub fs: Option<Box<fs::FsArgs>>,
}

impl Op {
    pub fn status(&self) -> std::sync::MutexGuard<'_, Status> {
        // A panic while holding this lock cannot leave Status inconsistent (plain
        // field stores), so a poisoned lock is still usable.
        crate::sync::lock(&self.status)
    }

    /// Acquires the buffer views this op hands to the kernel.
    pub fn acquire_views(&self, py: Python<'_>) -> PyResult<Vec<View>> {
        let get = |obj: &Py<PyAny>| {
            let obj = obj.bind(py);
            if self.code.fills_buffers() {
                View::writable(obj)
            } else {
                View::readable(obj)
            }
        };
        match &self.target {
            Target::Nothing => Ok(Vec::new()),
            Target::One(obj) => Ok(vec![get(obj)?]),
            Target::Many(objs) => objs.iter().map(get).collect(),
        }
    }

    pub fn completed(&self, res: i64, res2: i64) {
        let mut status = self.status();
        status.state = State::Done;
        status.res = Some(res);
        status.res2 = res2;
    }

    /// The OSError for a failed completion, explaining O_DIRECT misalignment.
    pub fn completion_error(&self, py: Python<'_>, res: i64) -> PyErr {
        let errno = (-res) as i32;
        let named = |p: &&std::ffi::CString| !p.as_bytes().is_empty();
        if let Some(path) = self.fs.as_ref().and_then(|f| f.path.as_ref()).filter(named) {
            let path2 = self.fs.as_ref().and_then(|f| f.path2.as_ref());
            return errors::path_error(py, errno, path.as_bytes(), path2.map(|p| p.as_bytes()));
        }
        let detail = if errno == libc::EINVAL && crate::sys::is_direct(self.fd) {
            Some(self.misalignment_hint(py))
        } else {
            None
        };
        errors::os_error(py, errno, Some(self.fd), detail.as_deref())
    }

    fn misalignment_hint(&self, py: Python<'_>) -> String {
        let (mem, off) = match crate::sys::dio_alignment(self.fd) {
            Some(a) => (a.memory.to_string(), a.offset.to_string()),
            None => (
                "the logical block size".to_owned(),
                "the logical block size".to_owned(),
            ),
        };
        let mut lengths = Vec::new();
        let mut addresses = Vec::new();
        if let Ok(views) = self.acquire_views(py) {
            for v in &views {
                addresses.push(format!("{:#x}", v.ptr() as usize));
                lengths.push(v.len().to_string());
            }
        }
        format!(
            "O_DIRECT I/O needs buffer addresses aligned to {mem} bytes and offset and \
             lengths to multiples of {off} (offset {}, lengths [{}], addresses [{}])",
            self.offset,
            lengths.join(", "),
            addresses.join(", ")
        )
    }
}

#[pymethods]
impl Op {
    /// The cyclic GC sees what an op holds, so a cycle through it (an op whose
    /// `data` is a future resolved with the op's own Completion) can be collected.
    /// An op in flight is also held by its engine's in-flight table, which the GC
    /// does not see: it, its data and its buffers always stay alive until the
    /// completion arrives.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.data)?;
        visit.call(&self.file)?;
        match &self.target {
            Target::Nothing => {}
            Target::One(obj) => visit.call(obj)?,
            Target::Many(objs) => {
                for obj in objs {
                    visit.call(obj)?;
                }
            }
        }
        Ok(())
    }

    #[getter]
    fn command(&self) -> &'static str {
        self.code.name()
    }
    #[getter]
    fn fd(&self) -> RawFd {
        self.fd
    }
    #[getter]
    fn file(&self, py: Python<'_>) -> Py<PyAny> {
        match &self.file {
            Some(f) => f.clone_ref(py),
            None => self.fd.into_pyobject(py).unwrap().into_any().unbind(),
        }
    }
    #[getter]
    fn offset(&self) -> i64 {
        self.offset
    }
    #[getter]
    fn rw_flags(&self) -> i32 {
        self.rw_flags
    }
    #[getter]
    fn priority(&self) -> Option<u16> {
        self.ioprio
    }
    #[getter]
    fn resfd(&self) -> Option<RawFd> {
        self.resfd
    }
    #[getter]
    fn events(&self) -> u32 {
        self.poll_events
    }
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyAny> {
        self.data.clone_ref(py)
    }
    /// The buffer (or list of buffers for vectored ops) as given; None for fsync/poll.
    #[getter]
    fn buffer(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match &self.target {
            Target::Nothing => py.None(),
            Target::One(b) => b.clone_ref(py),
            Target::Many(bs) => PyList::new(py, bs.iter().map(|b| b.clone_ref(py)))?
                .into_any()
                .unbind(),
        })
    }
    /// Total bytes the op covers.
    #[getter]
    fn nbytes(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.acquire_views(py)?.iter().map(View::len).sum())
    }
    /// "idle", "in_flight" or "done".
    #[getter]
    fn state(&self) -> &'static str {
        match self.status().state {
            State::Idle => "idle",
            State::InFlight => "in_flight",
            State::Done => "done",
        }
    }
    /// The kernel's result once done: bytes transferred, poll mask, 0, or -errno.
    #[getter]
    fn result(&self) -> Option<i64> {
        self.status().res
    }
    #[getter]
    fn res2(&self) -> i64 {
        self.status().res2
    }

    /// The fields a completed statx op filled in, as a dict (None before then).
    fn statx_result(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let Some(buf) = self.fs.as_ref().and_then(|f| f.statx.as_ref()) else {
            return Err(PyValueError::new_err("not a statx op"));
        };
        let status = self.status();
        if status.state != State::Done || status.res != Some(0) {
            return Ok(None);
        }
        // SAFETY: the op is done, so the kernel no longer writes the buffer.
        let fields = fs::statx_fields(unsafe { buf.bytes() });
        Ok(Some(fields.into_pyobject(py)?.into_any().unbind()))
    }

    fn __repr__(&self) -> String {
        format!(
            "<ringio Op {} fd={} offset={} state={}>",
            self.code.name(),
            self.fd,
            self.offset,
            self.state()
        )
    }
}

/// One reaped completion: the op it belongs to and the kernel's result fields.
#[pyclass(module = "ringio._core", frozen)]
pub struct Completion {
    pub op: Py<Op>,
    pub res: i64,
    pub res2: i64,
}

#[pymethods]
impl Completion {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.op)
    }

    #[getter]
    fn op(&self, py: Python<'_>) -> Py<Op> {
        self.op.clone_ref(py)
    }
    #[getter]
    fn data(&self, py: Python<'_>) -> Py<PyAny> {
        self.op.get().data.clone_ref(py)
    }
    #[getter]
    fn res(&self) -> i64 {
        self.res
    }
    #[getter]
    fn res2(&self) -> i64 {
        self.res2
    }
    /// The OSError the kernel reported, or None on success.
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        (self.res < 0).then(|| {
            self.op
                .get()
                .completion_error(py, self.res)
                .into_value(py)
                .into_any()
        })
    }
    /// The result, or raises the OSError the kernel reported.
    fn result(&self, py: Python<'_>) -> PyResult<i64> {
        if self.res < 0 {
            Err(self.op.get().completion_error(py, self.res))
        } else {
            Ok(self.res)
        }
    }
    fn __repr__(&self) -> String {
        format!(
            "<ringio Completion {} fd={} res={}>",
            self.op.get().code.name(),
            self.op.get().fd,
            self.res
        )
    }
}

// ---------------------------------------------------------------------------
// Constructors: one small helper per operation.

/// The fd of an int or of any object with fileno(); the object is kept by the op.
pub fn extract_fd(obj: &Bound<'_, PyAny>) -> PyResult<(RawFd, Option<Py<PyAny>>)> {
    if obj.is_instance_of::<pyo3::types::PyInt>() {
        if obj.is_instance_of::<pyo3::types::PyBool>() {
            return Err(PyTypeError::new_err(
                "fd must be an int or have fileno(), not bool",
            ));
        }
        return Ok((checked_fd(obj, "fd")?, None));
    }
    match obj.getattr("fileno") {
        Ok(fileno) => {
            let fd = checked_fd(&fileno.call0()?, "fileno()")?;
            Ok((fd, Some(obj.clone().unbind())))
        }
        Err(_) => Err(PyTypeError::new_err(format!(
            "expected an int fd or an object with fileno(), not '{}'",
            crate::buffers::type_name(obj)
        ))),
    }
}

/// An int fd in 0..=i32::MAX: negative is a ValueError, larger an OverflowError
/// (as os does), never truncated to another fd's number.
fn checked_fd(value: &Bound<'_, PyAny>, what: &str) -> PyResult<RawFd> {
    let fd: i64 = value.extract().map_err(|e: PyErr| {
        if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(value.py()) {
            pyo3::exceptions::PyOverflowError::new_err(format!("{what} is greater than maximum"))
        } else {
            e
        }
    })?;
    if fd < 0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be >= 0, not {fd}"
        )));
    }
    RawFd::try_from(fd).map_err(|_| {
        pyo3::exceptions::PyOverflowError::new_err(format!("{what} is greater than maximum"))
    })
}

pub fn check_offset(offset: i64) -> PyResult<i64> {
    if offset < 0 {
        return Err(PyValueError::new_err(format!(
            "offset must be >= 0, not {offset}"
        )));
    }
    Ok(offset)
}

fn check_priority(priority: Option<i64>) -> PyResult<Option<u16>> {
    match priority {
        None => Ok(None),
        Some(p) if (0..=u16::MAX as i64).contains(&p) => Ok(Some(p as u16)),
        Some(p) => Err(PyValueError::new_err(format!(
            "priority must be an ioprio value from ringio.aio.ioprio(), not {p}"
        ))),
    }
}

fn check_resfd(resfd: Option<i64>) -> PyResult<Option<RawFd>> {
    match resfd {
        None => Ok(None),
        Some(fd) if (0..=i32::MAX as i64).contains(&fd) => Ok(Some(fd as RawFd)),
        Some(fd) => Err(PyValueError::new_err(format!(
            "resfd must be >= 0, not {fd}"
        ))),
    }
}

pub struct Common {
    pub rw_flags: i32,
    pub ioprio: Option<u16>,
    pub resfd: Option<RawFd>,
    pub data: Py<PyAny>,
}

pub fn common(
    py: Python<'_>,
    rw_flags: i64,
    priority: Option<i64>,
    resfd: Option<i64>,
    data: Option<Py<PyAny>>,
) -> PyResult<Common> {
    let rw_flags = i32::try_from(rw_flags)
        .map_err(|_| PyValueError::new_err(format!("rw_flags out of range: {rw_flags}")))?;
    Ok(Common {
        rw_flags,
        ioprio: check_priority(priority)?,
        resfd: check_resfd(resfd)?,
        data: data.unwrap_or_else(|| py.None()),
    })
}

pub fn new_status() -> Mutex<Status> {
    Mutex::new(Status {
        state: State::Idle,
        token: 0,
        res: None,
        res2: 0,
    })
}

#[allow(clippy::too_many_arguments)]
fn build(
    py: Python<'_>,
    code: OpCode,
    fd: &Bound<'_, PyAny>,
    target: Target,
    offset: i64,
    poll_events: u32,
    c: Common,
) -> PyResult<Op> {
    let (fd, file) = extract_fd(fd)?;
    let op = Op {
        code,
        fd,
        file,
        target,
        offset,
        rw_flags: c.rw_flags,
        ioprio: c.ioprio,
        resfd: c.resfd,
        poll_events,
        data: c.data,
        status: new_status(),
        fs: None,
    };
    // Validate the buffers now so misuse fails where the op is made.
    drop(op.acquire_views(py)?);
    Ok(op)
}

fn buffer_list(bufs: &Bound<'_, PyAny>) -> PyResult<Target> {
    if bufs.is_instance_of::<pyo3::types::PyBytes>()
        || bufs.is_instance_of::<pyo3::types::PyByteArray>()
        || bufs.is_instance_of::<pyo3::types::PyString>()
    {
        return Err(PyTypeError::new_err(
            "vectored ops take a list of buffers, not a single buffer",
        ));
    }
    let items: Vec<Py<PyAny>> = bufs
        .try_iter()
        .map_err(|_| PyTypeError::new_err("vectored ops take a list of buffers"))?
        .map(|b| b.map(Bound::unbind))
        .collect::<PyResult<_>>()?;
    if items.len() > MAX_IOVECS {
        return Err(PyValueError::new_err(format!(
            "at most {MAX_IOVECS} buffers per vectored op, got {}",
            items.len()
        )));
    }
    Ok(Target::Many(items))
}

macro_rules! rw_op {
    ($name:ident, $code:expr, $doc:literal) => {
        #[doc = $doc]
        #[pyfunction]
        #[pyo3(signature = (fd, buf, offset=0, *, rw_flags=0, priority=None, resfd=None, data=None))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            py: Python<'_>,
            fd: &Bound<'_, PyAny>,
            buf: &Bound<'_, PyAny>,
            offset: i64,
            rw_flags: i64,
            priority: Option<i64>,
            resfd: Option<i64>,
            data: Option<Py<PyAny>>,
        ) -> PyResult<Op> {
            let c = common(py, rw_flags, priority, resfd, data)?;
            let offset = check_offset(offset)?;
            build(py, $code, fd, Target::One(buf.clone().unbind()), offset, 0, c)
        }
    };
}

macro_rules! rwv_op {
    ($name:ident, $code:expr, $doc:literal) => {
        #[doc = $doc]
        #[pyfunction]
        #[pyo3(signature = (fd, buffers, offset=0, *, rw_flags=0, priority=None, resfd=None, data=None))]
        #[allow(clippy::too_many_arguments)]
        pub fn $name(
            py: Python<'_>,
            fd: &Bound<'_, PyAny>,
            buffers: &Bound<'_, PyAny>,
            offset: i64,
            rw_flags: i64,
            priority: Option<i64>,
            resfd: Option<i64>,
            data: Option<Py<PyAny>>,
        ) -> PyResult<Op> {
            let c = common(py, rw_flags, priority, resfd, data)?;
            let offset = check_offset(offset)?;
            build(py, $code, fd, buffer_list(buffers)?, offset, 0, c)
        }
    };
}

macro_rules! sync_op {
    ($name:ident, $code:expr, $doc:literal) => {
        #[doc = $doc]
        #[pyfunction]
        #[pyo3(signature = (fd, *, priority=None, resfd=None, data=None))]
        pub fn $name(
            py: Python<'_>,
            fd: &Bound<'_, PyAny>,
            priority: Option<i64>,
            resfd: Option<i64>,
            data: Option<Py<PyAny>>,
        ) -> PyResult<Op> {
            let c = common(py, 0, priority, resfd, data)?;
            build(py, $code, fd, Target::Nothing, 0, 0, c)
        }
    };
}

rw_op!(
    pread,
    OpCode::Read,
    "Read into `buf` at `offset`; completes with the byte count."
);
rw_op!(
    pwrite,
    OpCode::Write,
    "Write `buf` at `offset`; completes with the byte count."
);
rwv_op!(
    preadv,
    OpCode::Readv,
    "Scatter-read into a list of buffers at `offset`."
);
rwv_op!(
    pwritev,
    OpCode::Writev,
    "Gather-write a list of buffers at `offset`."
);
sync_op!(
    fsync,
    OpCode::Fsync,
    "Flush data and metadata of `fd` to stable storage."
);
sync_op!(
    fdsync,
    OpCode::Fdsync,
    "Flush the data of `fd` (and metadata needed to read it)."
);

macro_rules! stream_op {
    ($name:ident, $code:expr, $doc:literal) => {
        #[doc = $doc]
        #[pyfunction]
        #[pyo3(signature = (fd, buf, *, rw_flags=0, priority=None, data=None))]
        pub fn $name(
            py: Python<'_>,
            fd: &Bound<'_, PyAny>,
            buf: &Bound<'_, PyAny>,
            rw_flags: i64,
            priority: Option<i64>,
            data: Option<Py<PyAny>>,
        ) -> PyResult<Op> {
            let c = common(py, rw_flags, priority, None, data)?;
            let target = Target::One(buf.clone().unbind());
            build(py, $code, fd, target, STREAM_OFFSET, 0, c)
        }
    };
}

stream_op!(
    read,
    OpCode::Read,
    "Read into `buf` at the file's current position (pipes, sockets, FIFOs, \
     terminals, or a regular file's offset), advancing it. io_uring only."
);
stream_op!(
    write,
    OpCode::Write,
    "Write `buf` at the file's current position, advancing it. io_uring only."
);

/// Wait until `fd` has one of the poll `events` (select.POLLIN, ...); completes
/// with the ready mask. Kernel AIO can cancel this op.
#[pyfunction]
#[pyo3(signature = (fd, events, *, priority=None, resfd=None, data=None))]
pub fn poll(
    py: Python<'_>,
    fd: &Bound<'_, PyAny>,
    events: u32,
    priority: Option<i64>,
    resfd: Option<i64>,
    data: Option<Py<PyAny>>,
) -> PyResult<Op> {
    let c = common(py, 0, priority, resfd, data)?;
    build(py, OpCode::Poll, fd, Target::Nothing, 0, events, c)
}

/// IOCB_CMD_NOOP: defined in the kernel AIO ABI but never implemented; io_submit
/// rejects it with EINVAL. Exposed so that the ABI is complete and testable.
#[pyfunction]
#[pyo3(signature = (fd, *, data=None))]
pub fn noop(py: Python<'_>, fd: &Bound<'_, PyAny>, data: Option<Py<PyAny>>) -> PyResult<Op> {
    let c = common(py, 0, None, None, data)?;
    build(py, OpCode::Noop, fd, Target::Nothing, 0, 0, c)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Op>()?;
    m.add_class::<Completion>()?;
    for f in [
        wrap_pyfunction!(pread, m)?,
        wrap_pyfunction!(pwrite, m)?,
        wrap_pyfunction!(preadv, m)?,
        wrap_pyfunction!(pwritev, m)?,
        wrap_pyfunction!(fsync, m)?,
        wrap_pyfunction!(fdsync, m)?,
        wrap_pyfunction!(poll, m)?,
        wrap_pyfunction!(noop, m)?,
        wrap_pyfunction!(read, m)?,
        wrap_pyfunction!(write, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
