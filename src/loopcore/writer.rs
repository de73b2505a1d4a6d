//! `transport.write`: the native writer bound to one transport's slot.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyWeakrefReference};
use pyo3::{PyTraverseError, PyVisit};

use crate::buffers::View;

use super::callbacks::WriterMethods;
use crate::conn::send::SendQueue;

use super::LoopCore;

/// `transport.write` of a ring transport: bound to one transport's slot.
#[pyclass(module = "ringio._core.loop", frozen)]
pub struct TransportWriter {
    pub(super) core: Py<LoopCore>,
    pub(super) slot: u32,
    pub(super) gen: u32,
    /// A weak reference to the Python transport (a strong one would be a cycle the
    /// GC cannot see through this native object).
    pub(super) transport: Py<PyWeakrefReference>,
    methods: WriterMethods,
}

impl TransportWriter {
    /// `f(transport, *arg)`, unless the transport is gone.
    fn call(&self, py: Python<'_>, f: &Py<PyAny>, arg: Option<i32>) -> PyResult<()> {
        if let Some(t) = self.transport.bind(py).upgrade() {
            match arg {
                Some(a) => f.bind(py).call1((t, a))?,
                None => f.bind(py).call1((t,))?,
            };
        }
        Ok(())
    }
}

#[pymethods]
impl TransportWriter {
    /// The writer holds the core (the transport holds the writer's bound
    /// `write`): a cycle the GC must see through. Its fields are immutable, so
    /// there is nothing to clear: the cycle is broken at the transport's
    /// `__dict__` or at the core.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.core)?;
        visit.call(&self.transport)?;
        self.methods.traverse(&visit)
    }

    #[new]
    fn new(
        core: Py<LoopCore>,
        slot: u32,
        gen: u32,
        transport: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(Self {
            core,
            slot,
            gen,
            transport: PyWeakrefReference::new(transport)?.unbind(),
            methods: WriterMethods::of(&transport.get_type())?,
        })
    }

    /// Queues `data` for the next io_uring_enter (asyncio's Transport.write).
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = data.cast::<PyBytes>().ok();
        if bytes.is_none()
            && !data.is_instance_of::<PyByteArray>()
            && !data.is_instance_of::<PyMemoryView>()
        {
            // asyncio's socket transport's words, which changed in 3.14.
            let what = if py.version_info() >= (3, 14) {
                "a bytes, bytearray, or memoryview object"
            } else {
                "a bytes-like object"
            };
            return Err(PyTypeError::new_err(format!(
                "data argument must be {what}, not '{}'",
                data.get_type().name()?
            )));
        }
        let core = self.core.get();
        let mut inner = core.lock();
        let Some(c) = inner.conn(self.slot, self.gen) else {
            drop(inner);
            return self.call(py, &self.methods.write_lost, None);
        };
        if c.eof {
            return Err(PyRuntimeError::new_err(
                "Cannot call write() after write_eof()",
            ));
        }
        if c.sendfile {
            return Err(PyRuntimeError::new_err(
                "unable to write; sendfile is in progress",
            ));
        }
        let view;
        let src: &[u8] = match &bytes {
            Some(b) => b.as_bytes(),
            None => {
                view = View::readable(data)?;
                // SAFETY: `view` is a C-contiguous export of len() bytes, held (so the
                // exporter cannot resize or free it) until the copy below is done.
                unsafe { std::slice::from_raw_parts(view.ptr(), view.len()) }
            }
        };
        if src.is_empty() {
            return Ok(());
        }
        if !c.life.is_live() {
            drop(inner);
            return self.call(py, &self.methods.write_lost, None);
        }
        let n = src.len();
        match &bytes {
            Some(b) if SendQueue::<Py<PyBytes>>::shares(n) => {
                let keep = Bound::<PyBytes>::clone(b).unbind();
                // SAFETY: a `bytes` object is immutable and its storage lives as long
                // as the object, which the queue keeps.
                unsafe { c.send.write_shared(keep, src.as_ptr(), n) }
            }
            _ => c.send.write_copy(src),
        }
        let mut failed = None;
        if c.send.queued() > c.high && !c.send.in_flight() {
            // Over the high-water mark with nothing handed to the kernel yet: try
            // to send now, as asyncio's write() does, so that the water marks
            // judge what the socket could not take (and a writer that never
            // yields still meets a dead connection's error).
            failed = c.send.send_now(c.fd);
        }
        let pause = failed.is_none() && c.send.queued() > c.high && !c.proto_paused;
        inner.mark(self.slot);
        drop(inner);
        if let Some(errno) = failed {
            self.call(py, &self.methods.write_error, Some(errno))?;
        } else if pause {
            self.call(py, &self.methods.pause, None)?;
        }
        Ok(())
    }
}
