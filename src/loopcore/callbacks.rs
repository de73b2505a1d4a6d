//! What the core calls for a transport, captured once: the transport's helper
//! methods (taken from its class when the transport is added), its context, and
//! its protocol's receiving callbacks (taken when the protocol is set). No method
//! is looked up by name when a completion is delivered.

use pyo3::exceptions::{PyKeyboardInterrupt, PySystemExit};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};
use pyo3::PyVisit;

/// A helper method of the transport (`ringio.loop._transport.RingSocketTransport`)
/// that the core calls on the rare paths: EOF, errors, flow control, the end of a
/// drain.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Method {
    /// `_ringio_eof()`: the peer shut down its side.
    Eof,
    /// `_ringio_read_error(errno)`.
    ReadError,
    /// `_ringio_write_error(errno)`.
    WriteError,
    /// `_maybe_pause_protocol()`: the queue crossed the high-water mark.
    Pause,
    /// `_maybe_resume_protocol()`: the queue fell to the low-water mark.
    Resume,
    /// `_ringio_drained()`: close() was called and the queue has drained.
    Drained,
    /// `_ringio_empty()`: the queue drained while loop.sendfile() waits for it.
    Empty,
}

impl Method {
    /// The method's Python name (looked up once per transport; in messages).
    pub(super) fn name(self) -> &'static str {
        match self {
            Method::Eof => "_ringio_eof",
            Method::ReadError => "_ringio_read_error",
            Method::WriteError => "_ringio_write_error",
            Method::Pause => "_maybe_pause_protocol",
            Method::Resume => "_maybe_resume_protocol",
            Method::Drained => "_ringio_drained",
            Method::Empty => "_ringio_empty",
        }
    }

    const ALL: [Method; 7] = [
        Method::Eof,
        Method::ReadError,
        Method::WriteError,
        Method::Pause,
        Method::Resume,
        Method::Drained,
        Method::Empty,
    ];
}

/// The functions of the transport's class behind each [`Method`], and its
/// `_fatal_error`: called as `f(transport, *args)`. Taken from the class, not the
/// instance, so that holding them makes no reference cycle with the transport.
pub(super) struct TransportMethods {
    methods: [Py<PyAny>; Method::ALL.len()],
    fatal_error: Py<PyAny>,
}

impl TransportMethods {
    pub(super) fn of(class: &Bound<'_, PyType>) -> PyResult<Self> {
        let py = class.py();
        let mut methods = Vec::with_capacity(Method::ALL.len());
        for m in Method::ALL {
            methods.push(class.getattr(m.name())?.unbind());
        }
        let methods = methods
            .try_into()
            .unwrap_or_else(|_| unreachable!("one function per method"));
        Ok(Self {
            methods,
            fatal_error: class.getattr(intern!(py, "_fatal_error"))?.unbind(),
        })
    }

    fn get(&self, m: Method) -> &Py<PyAny> {
        &self.methods[m as usize]
    }

    fn clone_ref(&self, py: Python<'_>) -> Self {
        Self {
            methods: std::array::from_fn(|i| self.methods[i].clone_ref(py)),
            fatal_error: self.fatal_error.clone_ref(py),
        }
    }
}

/// The transport's methods its writer calls (`TransportWriter.write`), from its
/// class: called as `f(transport, *args)`, outside the transport's context.
pub(super) struct WriterMethods {
    /// `_ringio_write_lost()`: a write after connection_lost was scheduled.
    pub(super) write_lost: Py<PyAny>,
    /// `_maybe_pause_protocol()`.
    pub(super) pause: Py<PyAny>,
    /// `_ringio_write_error(errno)`: a send the write made at once failed.
    pub(super) write_error: Py<PyAny>,
}

impl WriterMethods {
    pub(super) fn of(class: &Bound<'_, PyType>) -> PyResult<Self> {
        let py = class.py();
        Ok(Self {
            write_lost: class.getattr(intern!(py, "_ringio_write_lost"))?.unbind(),
            pause: class.getattr(Method::Pause.name())?.unbind(),
            write_error: class.getattr(Method::WriteError.name())?.unbind(),
        })
    }

    pub(super) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.write_lost)?;
        visit.call(&self.pause)?;
        visit.call(&self.write_error)
    }
}

/// The protocol's receiving callbacks, bound when the protocol is set.
pub(super) enum Receiver {
    /// No protocol set yet: received bytes are dropped.
    None,
    /// `protocol.data_received`.
    Data(Py<PyAny>),
    /// A BufferedProtocol's `get_buffer` and `buffer_updated`.
    Buffered {
        get_buffer: Py<PyAny>,
        buffer_updated: Py<PyAny>,
    },
}

/// Everything the core calls for one transport. Shared (`Arc`) by the transport's
/// state and the actions of a CQE batch that are not delivered yet; replaced as a
/// whole when the protocol changes.
pub(super) struct Callbacks {
    pub(super) transport: Py<PyAny>,
    /// The `contextvars.Context` the protocol's callbacks run in (copied when the
    /// transport was made, as asyncio's reader handle and uvloop's transport do).
    pub(super) context: Option<Py<PyAny>>,
    methods: TransportMethods,
    pub(super) receiver: Receiver,
}

impl Callbacks {
    pub(super) fn new(transport: &Bound<'_, PyAny>, context: Option<Py<PyAny>>) -> PyResult<Self> {
        Ok(Self {
            methods: TransportMethods::of(&transport.get_type())?,
            transport: transport.clone().unbind(),
            context: context.filter(|c| !c.is_none(transport.py())),
            receiver: Receiver::None,
        })
    }

    /// The same transport with the receiving callbacks of `protocol`.
    pub(super) fn with_protocol(
        &self,
        protocol: &Bound<'_, PyAny>,
        buffered: bool,
    ) -> PyResult<Self> {
        let py = protocol.py();
        let receiver = if buffered {
            Receiver::Buffered {
                get_buffer: protocol.getattr(intern!(py, "get_buffer"))?.unbind(),
                buffer_updated: protocol.getattr(intern!(py, "buffer_updated"))?.unbind(),
            }
        } else {
            Receiver::Data(protocol.getattr(intern!(py, "data_received"))?.unbind())
        };
        Ok(Self {
            transport: self.transport.clone_ref(py),
            context: self.context.as_ref().map(|c| c.clone_ref(py)),
            methods: self.methods.clone_ref(py),
            receiver,
        })
    }

    /// For the GC: every Python object held (once per `Callbacks`).
    pub(super) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.transport)?;
        visit.call(&self.context)?;
        for f in &self.methods.methods {
            visit.call(f)?;
        }
        visit.call(&self.methods.fatal_error)?;
        match &self.receiver {
            Receiver::None => {}
            Receiver::Data(f) => visit.call(f)?,
            Receiver::Buffered {
                get_buffer,
                buffer_updated,
            } => {
                visit.call(get_buffer)?;
                visit.call(buffer_updated)?;
            }
        }
        Ok(())
    }

    /// `f(*args)` in the transport's context (when it has one).
    pub(super) fn invoke<'py>(
        &self,
        py: Python<'py>,
        f: &Bound<'py, PyAny>,
        args: Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match &self.context {
            Some(c) => call_in_context_tuple(c.bind(py), f, &args),
            None => f.call1(args),
        }
    }

    /// Calls the transport's method `m` (with `arg`) in the transport's context:
    /// the method calls the protocol (`eof_received`, `pause_writing`, ...) or
    /// schedules `connection_lost`, whose handle copies the context current when
    /// it is made.
    pub(super) fn call(&self, py: Python<'_>, m: Method, arg: Option<i32>) -> PyResult<()> {
        let t = self.transport.bind(py);
        let args = match arg {
            Some(a) => PyTuple::new(py, [t.clone(), a.into_pyobject(py)?.into_any()])?,
            None => PyTuple::new(py, [t])?,
        };
        match self.invoke(py, self.methods.get(m).bind(py), args) {
            Ok(_) => Ok(()),
            Err(e) if is_fatal(py, &e) => Err(e),
            // The transport's helpers do not raise; if one does, report it the way
            // asyncio reports a failing callback rather than lose it.
            Err(e) => self.fatal_error(py, e, &format!("Fatal error in transport {}()", m.name())),
        }
    }

    /// `transport._fatal_error(exc, message)` in the transport's context (it
    /// schedules connection_lost). KeyboardInterrupt and SystemExit are not
    /// reported: they propagate.
    pub(super) fn fatal_error(&self, py: Python<'_>, e: PyErr, message: &str) -> PyResult<()> {
        if is_fatal(py, &e) {
            return Err(e);
        }
        let args = PyTuple::new(
            py,
            [
                self.transport.bind(py).clone(),
                e.value(py).clone().into_any(),
                PyString::new(py, message).into_any(),
            ],
        )?;
        self.invoke(py, self.methods.fatal_error.bind(py), args)
            .map(drop)
    }
}

/// `context.run(f, *args)` with the arguments a tuple holds (see
/// [`call_in_context`]).
pub(super) fn call_in_context_tuple<'py>(
    context: &Bound<'py, PyAny>,
    f: &Bound<'py, PyAny>,
    args: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: a tuple's `len` items are references it holds, and `args` holds the
    // tuple for the call (whoever else drops it, a callback replacing a handle's
    // `_args` say); a tuple's items never change.
    unsafe {
        let items = (*(args.as_ptr() as *mut ffi::PyTupleObject))
            .ob_item
            .as_ptr();
        enter_call_exit(context, f, items, args.len())
    }
}

/// `context.run(f, *args)`. For a `contextvars.Context`, what `Context.run` does:
/// enter it (RuntimeError for one already entered), call `f`, exit; without the
/// method call and the argument tuple that `Context.run` costs from native code (a
/// tenth of a `call_soon` and its run). Any other object's own `run` is called, as
/// asyncio's handles call it.
pub(super) fn call_in_context<'py>(
    context: &Bound<'py, PyAny>,
    f: &Bound<'py, PyAny>,
    args: &[&Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    let mut stack = [std::ptr::null_mut(); 4];
    let heap: Vec<*mut ffi::PyObject>;
    let items: &[*mut ffi::PyObject] = if args.len() <= stack.len() {
        for (slot, a) in stack.iter_mut().zip(args) {
            *slot = a.as_ptr();
        }
        &stack[..args.len()]
    } else {
        heap = args.iter().map(|a| a.as_ptr()).collect();
        &heap
    };
    // SAFETY: each pointer is borrowed from a `Bound` in `args`, alive for the call.
    unsafe { enter_call_exit(context, f, items.as_ptr(), items.len()) }
}

/// The body of `call_in_context` and `call_in_context_tuple`.
///
/// # Safety
/// `items` points at `n` live objects that stay alive for the call.
unsafe fn enter_call_exit<'py>(
    context: &Bound<'py, PyAny>,
    f: &Bound<'py, PyAny>,
    items: *const *mut ffi::PyObject,
    n: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let py = context.py();
    // SAFETY: `context` is live; the check reads its type only.
    if unsafe { ffi::PyContext_CheckExact(context.as_ptr()) } == 0 {
        let mut call = Vec::with_capacity(n + 1);
        call.push(f.clone());
        for k in 0..n {
            // SAFETY: the caller's contract: `items[k]` is live.
            call.push(unsafe { Bound::from_borrowed_ptr(py, *items.add(k)) });
        }
        return context.call_method1(intern!(py, "run"), PyTuple::new(py, call)?);
    }
    // SAFETY: `context` is a Context; PyContext_Enter returns -1 with an exception
    // set when it is already entered.
    if unsafe { ffi::PyContext_Enter(context.as_ptr()) } < 0 {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: the caller's contract for `items`; the result is a new reference or
    // NULL with an exception set.
    let result = unsafe {
        let r = ffi::PyObject_Vectorcall(f.as_ptr(), items, n, std::ptr::null_mut());
        Bound::from_owned_ptr_or_err(py, r)
    };
    // SAFETY: the context entered above, in this thread; the callback's own enters
    // and exits pair up (Context.run sees to that), or Exit reports it.
    if unsafe { ffi::PyContext_Exit(context.as_ptr()) } < 0 {
        return Err(PyErr::fetch(py));
    }
    result
}

/// KeyboardInterrupt and SystemExit stop the loop; every other exception out of a
/// callback is reported.
pub(super) fn is_fatal(py: Python<'_>, e: &PyErr) -> bool {
    e.is_instance_of::<PyKeyboardInterrupt>(py) || e.is_instance_of::<PySystemExit>(py)
}
