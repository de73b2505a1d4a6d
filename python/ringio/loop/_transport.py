"""`RingSocketTransport`: asyncio's socket transport with its I/O on the loop's ring.

Semantics are those of ``asyncio.selector_events._SelectorSocketTransport``; what
changes is where the bytes move (``docs/loop.md``, "The ring stream transport"):

* receiving is a multishot io_uring ``RECV`` into provided buffers, run by the loop's
  native core (``ringio._core.loop.LoopCore``), which calls ``protocol.data_received``
  (or ``get_buffer``/``buffer_updated``) itself during the selector step;
* ``write`` is native (``ringio._core.loop.TransportWriter.write``, bound as the instance's
  ``write``): it queues the data, and the core sends every transport's queue with
  the loop's next ``io_uring_enter``.

This class keeps the rare paths in Python: connection setup, close/abort, EOF,
errors (through ``_fatal_error`` exactly as asyncio), flow control callbacks.
"""

from __future__ import annotations

import contextvars
import socket
import warnings
from asyncio import constants, protocols, transports, trsock
from asyncio.log import logger
from typing import Any

from . import _asyncio_compat as _compat


class RingSocketTransport(_compat.FlowControlMixin, transports.Transport):  # type: ignore[name-defined,misc]
    """A stream socket transport whose reads and writes run on the loop's ring."""

    _start_tls_compatible = True
    # loop.sendfile(): asyncio's native path (sock_sendfile on the raw socket once
    # the queue has drained, see _make_empty_waiter), as for selector transports.
    _sendfile_compatible = _compat.SendfileMode.TRY_NATIVE
    _empty_waiter: Any = None

    # Set early: __del__ and __repr__ must work even if __init__ failed.
    _sock: socket.socket | None = None
    _cid: tuple[int, int] | None = None
    _context: contextvars.Context | None = None

    def __init__(
        self,
        loop: Any,
        sock: socket.socket,
        protocol: Any,
        waiter: Any = None,
        extra: Any = None,
        server: Any = None,
    ) -> None:
        self._core = loop._loop_ring.core
        super().__init__(extra, loop)
        self._extra["socket"] = trsock.TransportSocket(sock)
        try:
            self._extra["sockname"] = sock.getsockname()
        except OSError:
            self._extra["sockname"] = None
        if "peername" not in self._extra:
            try:
                self._extra["peername"] = sock.getpeername()
            except OSError:
                self._extra["peername"] = None
        self._sock = sock
        self._sock_fd = sock.fileno()
        # The protocol's callbacks (data_received, get_buffer/buffer_updated,
        # eof_received, pause/resume_writing, connection_lost after the peer's EOF
        # or an error) run in a copy of the context that made the transport, as
        # with asyncio's reader handle; connection_made in a copy of its own, as
        # asyncio's call_soon makes it.
        self._context = contextvars.copy_context()
        self._cid = self._core.add(self._sock_fd, self, self._context)
        slot, gen = self._cid
        # The hot path: transport.write is the native writer's bound method.
        self.write = self._core_writer(slot, gen).write  # type: ignore[method-assign]
        self._core.set_limits(slot, gen, self._high_water, self._low_water)
        self._protocol_connected = False
        self.set_protocol(protocol)
        self._server = server
        self._conn_lost = 0
        self._closing = False
        self._eof = False
        self._paused = False
        if self._server is not None:
            _compat.server_attach(self._server, self)
        loop._transports[self._sock_fd] = self
        _compat.set_nodelay(sock)
        self._loop.call_soon(self._protocol.connection_made, self)
        # Only start reading once connection_made() has been called.
        self._loop.call_soon(self._start_reading)
        if waiter is not None:
            self._loop.call_soon(_compat.set_result_unless_cancelled, waiter, None)

    def _core_writer(self, slot: int, gen: int) -> Any:
        from .._core.loop import TransportWriter

        return TransportWriter(self._core, slot, gen, self)

    def __repr__(self) -> str:
        info = [self.__class__.__name__]
        if self._sock is None:
            info.append("closed")
        elif self._closing:
            info.append("closing")
        info.append(f"fd={getattr(self, '_sock_fd', None)}")
        if self._sock is not None and self._cid is not None:
            info.append("read=" + ("polling" if self.is_reading() else "idle"))
            info.append(f"write=<bufsize={self.get_write_buffer_size()}>")
        return "<{}>".format(" ".join(info))

    def __del__(self, _warn: Any = warnings.warn) -> None:
        if self._sock is not None:
            _warn(f"unclosed transport {self!r}", ResourceWarning, source=self)
            self._sock.close()

    # ------------------------------------------------------------ protocol

    def set_protocol(self, protocol: Any) -> None:
        slot, gen = self._cid  # type: ignore[misc]
        self._core.set_protocol(
            slot, gen, protocol, isinstance(protocol, protocols.BufferedProtocol)
        )
        self._protocol = protocol
        self._protocol_connected = True

    def get_protocol(self) -> Any:
        return self._protocol

    # ------------------------------------------------------------- reading

    def _start_reading(self) -> None:
        if self._closing or self._paused:
            return
        self._core.set_reading(*self._cid, True)  # type: ignore[misc]

    def is_reading(self) -> bool:
        return not self._paused and not self._closing

    def pause_reading(self) -> None:
        if self._closing or self._paused:
            return
        self._paused = True
        self._core.set_reading(*self._cid, False)  # type: ignore[misc]
        if self._loop.get_debug():
            logger.debug("%r pauses reading", self)

    def resume_reading(self) -> None:
        if self._closing or not self._paused:
            return
        self._paused = False
        self._core.set_reading(*self._cid, True)  # type: ignore[misc]
        if self._loop.get_debug():
            logger.debug("%r resumes reading", self)

    def _ringio_eof(self) -> None:
        """The peer shut down its side (called by the core)."""
        if self._loop.get_debug():
            logger.debug("%r received EOF", self)
        try:
            keep_open = self._protocol.eof_received()
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(exc, "Fatal error: protocol.eof_received() call failed.")
            return
        if keep_open:
            # Nothing more can be received; the protocol may still write.
            self._core.set_reading(*self._cid, False)  # type: ignore[misc]
        else:
            self.close()

    def _ringio_read_error(self, errno: int) -> None:
        self._fatal_error(_os_error(errno), "Fatal read error on socket transport")

    # ------------------------------------------------------------- writing

    def write(self, data: Any) -> None:  # replaced per instance by the native writer
        raise RuntimeError("transport is not initialised")

    def writelines(self, list_of_data: Any) -> None:
        # One write of the joined data. asyncio's socket transport takes a
        # memoryview of each item since 3.12 (and joins them before: 3.11): the
        # same TypeError as asyncio's for an item that is not bytes-like.
        if _compat.PY312:
            list_of_data = [memoryview(data) for data in list_of_data]
        self.write(b"".join(list_of_data))

    def _ringio_write_lost(self) -> None:
        """A write after connection_lost was scheduled: dropped, as in asyncio."""
        if self._conn_lost >= constants.LOG_THRESHOLD_FOR_CONNLOST_WRITES:
            logger.warning("socket.send() raised exception.")
        self._conn_lost += 1

    def _ringio_write_error(self, errno: int) -> None:
        exc = _os_error(errno)
        self._fatal_error(exc, "Fatal write error on socket transport")
        if self._empty_waiter is not None and not self._empty_waiter.done():
            self._empty_waiter.set_exception(exc)

    def _make_empty_waiter(self) -> Any:
        if self._empty_waiter is not None:
            raise RuntimeError("Empty waiter is already set")
        self._empty_waiter = self._loop.create_future()
        if self._core.set_sendfile(*self._cid, True):  # type: ignore[misc]
            self._empty_waiter.set_result(None)
        return self._empty_waiter

    def _reset_empty_waiter(self) -> None:
        self._empty_waiter = None
        if self._cid is not None:
            self._core.set_sendfile(*self._cid, False)

    def _ringio_empty(self) -> None:
        """The queue drained while loop.sendfile() waits for it."""
        if self._empty_waiter is not None and not self._empty_waiter.done():
            self._empty_waiter.set_result(None)

    def _ringio_drained(self) -> None:
        """close() was called and the last queued byte has been sent."""
        self._conn_lost += 1
        self._call_connection_lost(None)

    def get_write_buffer_size(self) -> int:
        if self._cid is None:
            return 0
        return self._core.buffer_size(*self._cid)  # type: ignore[no-any-return]

    def _set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        super()._set_write_buffer_limits(high, low)
        if self._cid is not None:
            self._core.set_limits(*self._cid, self._high_water, self._low_water)

    def _maybe_pause_protocol(self) -> None:
        super()._maybe_pause_protocol()
        if self._protocol_paused and self._cid is not None:
            self._core.note_paused(*self._cid)

    def write_eof(self) -> None:
        if self._closing or self._eof:
            return
        self._eof = True
        self._core.write_eof(*self._cid)  # type: ignore[misc]

    def can_write_eof(self) -> bool:
        return True

    # ------------------------------------------------------------- closing

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._core.close(*self._cid):  # type: ignore[misc]
            self._conn_lost += 1
            self._loop.call_soon(self._call_connection_lost, None)

    def abort(self) -> None:
        self._force_close(None)

    def _fatal_error(self, exc: BaseException, message: str = "Fatal error on transport") -> None:
        if isinstance(exc, OSError):
            if self._loop.get_debug():
                logger.debug("%r: %s", self, message, exc_info=True)
        else:
            self._loop.call_exception_handler(
                {
                    "message": message,
                    "exception": exc,
                    "transport": self,
                    "protocol": self._protocol,
                }
            )
        self._force_close(exc)

    def _force_close(self, exc: BaseException | None) -> None:
        if self._conn_lost:
            return
        self._core.abort(*self._cid)  # type: ignore[misc]
        self._closing = True
        self._conn_lost += 1
        self._loop.call_soon(self._call_connection_lost, exc)

    def _call_connection_lost(self, exc: BaseException | None) -> None:
        try:
            if self._protocol_connected:
                self._protocol.connection_lost(exc)
        finally:
            # Cancel the kernel's ops first: they hold the file, which would keep
            # the connection open after close().
            self._core.release(*self._cid)  # type: ignore[misc]
            self._sock.close()  # type: ignore[union-attr]
            self._sock = None
            self._protocol = None
            self._loop = None
            server = self._server
            if server is not None:
                _compat.server_detach(server, self)
                self._server = None
        if self._empty_waiter is not None and not self._empty_waiter.done():
            self._empty_waiter.set_exception(ConnectionError("Connection is closed by peer"))


def _os_error(errno: int) -> OSError:
    import os

    err = OSError(errno, os.strerror(errno))
    # OSError(errno, msg) already maps to ConnectionResetError, BrokenPipeError, ...
    return err
