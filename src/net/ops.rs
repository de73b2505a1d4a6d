//! One op of the Watcher (`Op`): made, queued, submitted with its SQE (and
//! link timeout), expired in user space, finished into an `OpResult`.

use std::cmp::Reverse;
use std::io;

use io_uring::{opcode, squeue, types};
use pyo3::exceptions::{PyEOFError, PyOSError};
use pyo3::prelude::*;

use crate::buffers::View;
use crate::ring::prep;

use super::addr::SockAddr;
use super::conn::queue;
use super::view::OpResult;
use super::watcher::WatcherCore;
use super::{
    ConnFreedError, WatcherClosedError, MAX_RW, OP_ACCEPT, OP_CONNECT, OP_READ, OP_WRITE, TAG_OP,
    TAG_TIMEOUT,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Read,
    ReadFull,
    Write,
    Accept,
    Connect,
    ReadFrom,
    WriteTo,
}

impl Kind {
    pub(super) fn operation(self) -> i32 {
        match self {
            Kind::Read | Kind::ReadFull | Kind::ReadFrom => OP_READ,
            Kind::Write | Kind::WriteTo => OP_WRITE,
            Kind::Accept => OP_ACCEPT,
            Kind::Connect => OP_CONNECT,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Why {
    Freed,
    Closed,
}

pub(super) enum Fail {
    Os(i32),
    Eof,
    Timeout,
    Freed,
    Closed,
    Py(PyErr),
}

impl From<Why> for Fail {
    fn from(w: Why) -> Self {
        match w {
            Why::Freed => Fail::Freed,
            Why::Closed => Fail::Closed,
        }
    }
}

/// Storage the kernel reads or writes through pointers for connect/recvmsg/sendmsg.
pub(super) struct Msg {
    pub(super) addr: SockAddr,
    pub(super) iov: libc::iovec,
    pub(super) hdr: libc::msghdr,
}

// SAFETY: the raw pointers in `iov`/`hdr` point into this same boxed struct or into
// buffers the op holds; the struct is only touched through the watcher's `&mut self`.
unsafe impl Send for Msg {}
// SAFETY: as above; nothing reads it through a shared reference concurrently.
unsafe impl Sync for Msg {}

pub(super) struct Op {
    pub(super) kind: Kind,
    pub(super) cid: u64,
    pub(super) serial: u64,
    pub(super) ctx: Py<PyAny>,
    pub(super) conn: Py<PyAny>,
    pub(super) bufobj: Option<Py<PyAny>>,
    /// The user's buffer export: pins its memory until the op is dropped.
    pub(super) view: Option<View>,
    /// Fallback receive buffer when the kernel has no buffer rings.
    pub(super) own: Option<Box<[u8]>>,
    pub(super) done: usize,
    pub(super) deadline: Option<f64>,
    pub(super) ts: types::Timespec,
    /// In the kernel: its own SQE, or (a stream write) covered by its
    /// connection's send in flight.
    pub(super) in_kernel: bool,
    /// A stream write queued in its connection's send queue.
    pub(super) in_sendq: bool,
    pub(super) cancel: Option<Why>,
    pub(super) msg: Option<Box<Msg>>,
}

impl Op {
    pub(super) fn len(&self) -> usize {
        self.view.as_ref().map_or(0, View::len)
    }
}

/// Marks an SQE's fd as a fixed-file index when it is one.
pub(super) fn on(sqe: squeue::Entry, fixed: bool) -> squeue::Entry {
    if fixed {
        sqe.flags(squeue::Flags::FIXED_FILE)
    } else {
        sqe
    }
}

pub(super) fn timespec(deadline: f64) -> types::Timespec {
    let d = deadline.max(0.0);
    let secs = d.trunc() as u64;
    let nsec = ((d - d.trunc()) * 1e9) as u32;
    types::Timespec::new().sec(secs).nsec(nsec.min(999_999_999))
}

impl WatcherCore {
    pub(super) fn new_op(
        &mut self,
        kind: Kind,
        cid: u64,
        ctx: Py<PyAny>,
        conn: Py<PyAny>,
        deadline: Option<f64>,
    ) -> usize {
        self.serial += 1;
        let op = Box::new(Op {
            kind,
            cid,
            serial: self.serial,
            ctx,
            conn,
            bufobj: None,
            view: None,
            own: None,
            done: 0,
            deadline,
            ts: timespec(deadline.unwrap_or(0.0)),
            in_kernel: false,
            in_sendq: false,
            cancel: None,
            msg: None,
        });
        let slot = if let Some(s) = self.op_free.pop() {
            self.ops[s] = Some(op);
            s
        } else {
            self.ops.push(Some(op));
            self.ops.len() - 1
        };
        if let Some(d) = deadline {
            let ns = (d.max(0.0) * 1e9) as u64;
            self.deadlines.push(Reverse((ns, slot, self.serial)));
        }
        slot
    }

    pub(super) fn op(&mut self, slot: usize) -> &mut Op {
        self.ops[slot].as_mut().expect("live op")
    }

    /// Completes an op: removes it, builds its OpResult into `ready`.
    pub(super) fn finish(
        &mut self,
        py: Python<'_>,
        slot: usize,
        fail: Option<Fail>,
        buffer: Option<Py<PyAny>>,
        swap: bool,
        address: Option<Py<PyAny>>,
    ) {
        let op = self.ops[slot].take().expect("live op");
        self.op_free.push(slot);
        // A send in flight may be reading its buffer (see `send::fill_send_queue`).
        debug_assert!(
            !(op.in_sendq && op.in_kernel),
            "finishing a write the kernel reads"
        );
        if let Some(c) = self.conn_any(op.cid) {
            if op.in_sendq {
                c.in_sendq -= 1;
                if op.done < op.len() {
                    // Not sent in full: what is left of it must not be sent.
                    queue(&mut c.sendq).remove_shared(&slot);
                }
            }
            let q = match op.kind {
                Kind::Read | Kind::ReadFull | Kind::ReadFrom => &mut c.reads,
                Kind::Write | Kind::WriteTo | Kind::Connect => &mut c.writes,
                Kind::Accept => &mut c.accepts,
            };
            if q.front() == Some(&slot) {
                q.pop_front();
            } else if let Some(pos) = q.iter().position(|s| *s == slot) {
                q.remove(pos);
            }
        }
        let error = match fail {
            None => py.None(),
            Some(f) => {
                let e = match f {
                    Fail::Os(errno) => PyOSError::new_err((errno, crate::errors::strerror(errno))),
                    Fail::Eof => PyEOFError::new_err("end of stream"),
                    Fail::Timeout => PyOSError::new_err((libc::ETIMEDOUT, "deadline exceeded")),
                    Fail::Freed => ConnFreedError::new_err((
                        libc::ECANCELED,
                        "the connection was freed while the op was pending",
                    )),
                    Fail::Closed => WatcherClosedError::new_err((
                        libc::ECANCELED,
                        "the Watcher was closed while the op was pending",
                    )),
                    Fail::Py(e) => e,
                };
                e.into_value(py).into_any()
            }
        };
        let buffer = match buffer {
            Some(b) => b,
            None => op
                .bufobj
                .as_ref()
                .map_or_else(|| py.None(), |b| b.clone_ref(py)),
        };
        let res = OpResult {
            operation: op.kind.operation(),
            context: op.ctx,
            conn: op.conn,
            buffer,
            is_swap_buffer: swap,
            size: op.done,
            error,
            address: address.unwrap_or_else(|| py.None()),
        };
        // Dropping `op.view` here releases the user's buffer export.
        match Py::new(py, res) {
            Ok(r) => self.ready.push(r),
            Err(e) => e.restore(py),
        }
    }

    pub(super) fn queue(&mut self, py: Python<'_>, slot: usize, cid: u64, kind: Kind) {
        if let Some(d) = self.op(slot).deadline {
            if d <= crate::sys::monotonic() {
                self.finish(py, slot, Some(Fail::Timeout), None, false, None);
                return;
            }
        }
        let c = self.conn(cid).expect("checked by the caller");
        match kind {
            Kind::Read | Kind::ReadFull | Kind::ReadFrom => c.reads.push_back(slot),
            Kind::Write | Kind::WriteTo | Kind::Connect => c.writes.push_back(slot),
            Kind::Accept => c.accepts.push_back(slot),
        }
        self.pump(py, cid, kind);
    }

    /// Builds and pushes the SQE (and link timeout) for op `slot` at its progress.
    /// Submits `slot`; where the kernel queue refuses it, completes the op with that
    /// error instead. Returns whether it went in.
    pub(super) fn submit_or_fail(&mut self, py: Python<'_>, slot: usize) -> bool {
        match self.submit_op(slot) {
            Ok(()) => true,
            Err(e) => {
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                self.finish(py, slot, Some(Fail::Os(errno)), None, false, None);
                false
            }
        }
    }

    pub(super) fn submit_op(&mut self, slot: usize) -> io::Result<()> {
        let bufsize = self.bufsize;
        let bgid = self.bgid;
        let has_pool = self.pool.is_some();
        let cid = self.op(slot).cid;
        let (fd, fixed) = match self.conn_ref(cid) {
            Some(c) => c.target(),
            None => return Err(io::Error::from_raw_os_error(libc::EBADF)),
        };
        let ud = ((slot as u64) << 2) | TAG_OP;
        let op = self.ops[slot].as_mut().expect("live op");
        let done = op.done;
        let sqe = match op.kind {
            Kind::Read | Kind::ReadFull => {
                if let Some(v) = &op.view {
                    let len = (v.len() - done).min(MAX_RW) as u32;
                    // SAFETY: pointer math only; done < len of the pinned export.
                    opcode::Recv::new(fd, unsafe { v.ptr().add(done) }, len).build()
                } else if has_pool {
                    opcode::Recv::new(fd, std::ptr::null_mut(), bufsize as u32)
                        .buf_group(bgid)
                        .build()
                        .flags(squeue::Flags::BUFFER_SELECT)
                } else {
                    let own = op
                        .own
                        .get_or_insert_with(|| vec![0u8; bufsize].into_boxed_slice());
                    opcode::Recv::new(fd, own.as_mut_ptr(), own.len() as u32).build()
                }
            }
            Kind::Connect => {
                let m = op.msg.as_ref().expect("connect address");
                opcode::Connect::new(
                    fd,
                    &m.addr.storage as *const _ as *const libc::sockaddr,
                    m.addr.len,
                )
                .build()
            }
            Kind::ReadFrom | Kind::WriteTo => {
                let select = op.kind == Kind::ReadFrom && op.view.is_none() && has_pool;
                let (base, len) = match (&op.view, op.kind) {
                    (Some(v), _) => (v.ptr(), v.len()),
                    (None, Kind::ReadFrom) if has_pool => (std::ptr::null_mut(), bufsize),
                    (None, _) => {
                        let own = op
                            .own
                            .get_or_insert_with(|| vec![0u8; bufsize].into_boxed_slice());
                        (own.as_mut_ptr(), own.len())
                    }
                };
                let m = op.msg.get_or_insert_with(|| {
                    Box::new(Msg {
                        addr: SockAddr::empty(),
                        // SAFETY: iovec is plain old data; zero is valid.
                        iov: unsafe { std::mem::zeroed() },
                        // SAFETY: msghdr is plain old data; zero is valid.
                        hdr: unsafe { std::mem::zeroed() },
                    })
                });
                m.iov.iov_base = base.cast();
                m.iov.iov_len = len;
                m.hdr.msg_name = (&mut m.addr.storage as *mut libc::sockaddr_storage).cast();
                m.hdr.msg_iov = &mut m.iov;
                m.hdr.msg_iovlen = 1;
                if op.kind == Kind::ReadFrom {
                    m.hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
                    let e = opcode::RecvMsg::new(fd, &mut m.hdr);
                    if select {
                        e.buf_group(bgid)
                            .build()
                            .flags(squeue::Flags::BUFFER_SELECT)
                    } else {
                        e.build()
                    }
                } else {
                    m.hdr.msg_namelen = m.addr.len;
                    prep::sendmsg(fd, &m.hdr)
                }
            }
            Kind::Accept => unreachable!("accepts use the connection's multishot accept"),
            Kind::Write => unreachable!("stream writes use the connection's send queue"),
        };
        let sqe = on(sqe, fixed).user_data(ud);
        op.in_kernel = true;
        if op.deadline.is_some() {
            let ts: *const types::Timespec = &op.ts;
            let link = opcode::LinkTimeout::new(ts)
                .flags(types::TimeoutFlags::ABS)
                .build()
                .user_data(TAG_TIMEOUT);
            self.push(&[sqe.flags(squeue::Flags::IO_LINK), link])
        } else {
            self.push(&[sqe])
        }
        .inspect_err(|_| self.op(slot).in_kernel = false)
    }

    /// Queued (not in the kernel) ops past their deadline complete with TimeoutError.
    pub(super) fn expire(&mut self, py: Python<'_>) -> Option<f64> {
        let now = crate::sys::monotonic();
        let now_ns = (now * 1e9) as u64;
        while let Some(Reverse((ns, slot, serial))) = self.deadlines.peek().copied() {
            let live = self
                .ops
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|o| o.serial == serial);
            if !live {
                self.deadlines.pop();
                continue;
            }
            if ns > now_ns {
                return Some(ns as f64 * 1e-9);
            }
            self.deadlines.pop();
            let op = self.ops[slot].as_ref().expect("live op");
            if op.in_kernel {
                continue; // its link timeout fires in the kernel
            }
            let (cid, kind) = (op.cid, op.kind);
            self.finish(py, slot, Some(Fail::Timeout), None, false, None);
            self.pump(py, cid, kind);
        }
        None
    }
}
