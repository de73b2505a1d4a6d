"""Text ``ringio.open`` files (``AsyncTextFile``), over a buffered binary one, as
``io.TextIOWrapper`` is.
"""

from __future__ import annotations

import codecs
import errno
import io
import operator
import os
import warnings
from collections.abc import Iterable
from typing import Any

from .._core import (
    LineCursor,
)
from .base import _LINE_KINDS, CHUNK_MIN, OFF_T_MAX, TEXT_CHUNK_MAX, _Base, _closed_error, _index
from .buffered import AsyncBufferedFile
from .lines import LineReading


class AsyncTextFile(LineReading[str], _Base):
    """A text file over a buffered binary one (like ``io.TextIOWrapper``).

    Reads decode a whole chunk at a time; ``tell()`` cookies are the stdlib's, so
    they can be passed to ``seek()`` (and mean the same thing as CPython's).
    """

    _CHUNK = CHUNK_MIN

    def __init__(
        self, buffer: AsyncBufferedFile, encoding: str, errors: str | None,
        newline: str | None, line_buffering: bool, mode: str,
    ) -> None:  # fmt: skip
        self.buffer = buffer
        self.mode = mode
        if errors is None:
            errors = "strict"
        self._encoding = encoding
        self._errors = errors
        self._line_buffering = line_buffering
        self._readuniversal = not newline
        self._readtranslate = newline is None
        self._readnl = newline
        self._writetranslate = newline != ""
        self._writenl = newline or os.linesep
        self._decoder: Any = None
        self._encoder: Any = None
        self._decoded = ""  # text decoded and not yet returned from here on
        self._used = 0
        # Line iteration: the cursor the rest of _decoded is lent to (see _lend).
        self._cursor: LineCursor | None = None
        self._line_kind = _LINE_KINDS[newline]
        self._snapshot: tuple[int, bytes] | None = None
        self._b2cratio = 0.0
        self._seekable = self._telling = buffer._seekable
        self._chunk = self._CHUNK
        self._eof = False
        # While a read that may take several chunks runs (see _mark): each chunk's
        # bytes and the snapshot made with it, to put the text back if it raises.
        self._chunk_log: list[tuple[bytes, tuple[int, bytes] | None]] | None = None
        if self._seekable and buffer._writable:
            # Like TextIOWrapper: no BOM in the middle of a file.
            pos = buffer.raw._pos or 0
            if pos != 0:
                try:
                    self._get_encoder().setstate(0)
                except LookupError:
                    pass

    # -- properties -------------------------------------------------------------------
    def __repr__(self) -> str:
        state = " [closed]" if self.closed else ""
        return (
            f"<ringio AsyncTextFile name={self.name!r} mode={self.mode!r} "
            f"encoding={self._encoding!r}{state}>"
        )

    @property
    def closed(self) -> bool:  # type: ignore[override]
        return self.buffer.closed

    @property
    def name(self) -> Any:
        return self.buffer.name

    @property
    def encoding(self) -> str:
        return self._encoding

    @property
    def errors(self) -> str:
        return self._errors

    @property
    def newlines(self) -> Any:
        return getattr(self._decoder, "newlines", None) if self._decoder else None

    @property
    def line_buffering(self) -> bool:
        return self._line_buffering

    def fileno(self) -> int:
        return self.buffer.fileno()

    def readable(self) -> bool:
        return self.buffer.readable()

    def writable(self) -> bool:
        return self.buffer.writable()

    def seekable(self) -> bool:
        return self.buffer.seekable()

    def isatty(self) -> bool:
        return self.buffer.isatty()

    def _check_closed(self) -> None:
        if self.buffer.closed:
            raise _closed_error()

    def _check_readable(self) -> None:
        self._check_closed()
        if not self.buffer._readable:
            raise io.UnsupportedOperation("not readable")

    def _check_writable(self) -> None:
        self._check_closed()
        if not self.buffer._writable:
            raise io.UnsupportedOperation("not writable")

    # -- codec state ------------------------------------------------------------------
    def _get_encoder(self) -> Any:
        self._encoder = codecs.getincrementalencoder(self._encoding)(self._errors)
        return self._encoder

    def _get_decoder(self) -> Any:
        decoder = codecs.getincrementaldecoder(self._encoding)(self._errors)
        if self._readuniversal:
            decoder = io.IncrementalNewlineDecoder(decoder, self._readtranslate)
        self._decoder = decoder
        return decoder

    def _set_decoded(self, chars: str) -> None:
        self._decoded = chars
        self._used = 0

    def _unlines(self) -> None:
        """Takes back the decoded text lent to line iteration: _used is where its
        next unread line starts. Every method that looks at _decoded/_used calls
        this first."""
        c = self._cursor
        if c is not None:
            self._cursor = None
            pos = c.take()
            if pos >= 0:
                self._used = pos

    def _lend(self) -> None:
        """Lends the rest of the decoded text to line iteration."""
        if self._cursor is None and self._used < len(self._decoded):
            self._cursor = LineCursor(self._decoded, self._used, self._line_kind)

    def _take(self, n: int | None = None) -> str:
        used = self._used
        chars = self._decoded[used:] if n is None else self._decoded[used : used + n]
        self._used = used + len(chars)
        return chars

    async def _read_chunk(self) -> bool:
        """Reads and decodes the next chunk into the decoded text; False at EOF."""
        decoder = self._decoder or self._get_decoder()
        if self._telling:
            dec_buffer, dec_flags = decoder.getstate()
        chunk = await self.buffer.read1(self._chunk)
        self._chunk = min(self._chunk * 2, TEXT_CHUNK_MAX)
        eof = not chunk
        text = decoder.decode(chunk, eof)
        self._set_decoded(text)
        self._b2cratio = len(chunk) / len(text) if text else 0.0
        if self._telling:
            self._snapshot = (dec_flags, dec_buffer + chunk)
        if self._chunk_log is not None:
            self._chunk_log.append((chunk, self._snapshot))
        return not eof

    def _mark(self) -> tuple[Any, ...]:
        """Where a read that may take several chunks starts; `_restore` puts back
        what it took if it raises (is cancelled): the text it consumed, and the
        decoded chunks it read since, as one decoded text whose snapshot covers
        them all (so tell() stays right)."""
        self._unlines()
        outer = self._chunk_log is not None
        if not outer:
            self._chunk_log = []
        assert self._chunk_log is not None
        return (self._decoded, self._used, self._snapshot, len(self._chunk_log), outer)

    def _unmark(self, mark: tuple[Any, ...]) -> None:
        if not mark[4]:
            self._chunk_log = None

    def _restore(self, mark: tuple[Any, ...], taken: str) -> None:
        decoded0, used0, snap0, start, outer = mark
        log = self._chunk_log[start:] if self._chunk_log is not None else []
        if not outer:
            self._chunk_log = None
        self._unlines()
        # What was consumed since the mark is `taken`; what follows it is the rest
        # of the current decoded text.
        self._decoded = decoded0[:used0] + taken + self._decoded[self._used :]
        self._used = used0
        if not log:
            return  # the same decoded text as at the mark: its snapshot holds
        if not self._telling:
            self._snapshot = None
        elif snap0 is not None:
            self._snapshot = (snap0[0], snap0[1] + b"".join(c for c, _ in log))
        elif not decoded0 and log[0][1] is not None:
            first = log[0][1]
            self._snapshot = (first[0], first[1] + b"".join(c for c, _ in log[1:]))
        else:
            self._snapshot = None

    # -- reading ----------------------------------------------------------------------
    async def read(self, size: int | None = -1) -> str:
        """Reads up to `size` characters (all, to EOF, when negative or None)."""
        self._check_readable()
        size = _index(size)
        self._unlines()
        decoder = self._decoder or self._get_decoder()
        if size < 0:
            await self.buffer.flush()
            data = await self.buffer.readall()
            result = self._take() + decoder.decode(data, final=True)
            self._set_decoded("")
            self._snapshot = None
            self._chunk = self._CHUNK
            return result
        result = self._take(size)
        if len(result) == size:
            return result
        self._used -= len(result)
        mark = self._mark()
        self._used += len(result)
        eof = False
        try:
            while len(result) < size and not eof:
                eof = not await self._read_chunk()
                result += self._take(size - len(result))
        except BaseException:
            self._restore(mark, result)
            raise
        self._unmark(mark)
        return result

    def _find_eol(self, text: str, start: int) -> tuple[int, int]:
        """(index after the line end, or -1) and where to resume searching."""
        if self._readtranslate:
            i = text.find("\n", start)
            return (i + 1 if i >= 0 else -1), len(text)
        if self._readuniversal:
            # \r, \n or \r\n; the newline decoder never leaves a lone \r at the
            # end of a chunk unless at EOF.
            nl = text.find("\n", start)
            cr = text.find("\r", start, nl if nl >= 0 else len(text))
            if cr >= 0:
                if cr + 1 < len(text) and text[cr + 1] == "\n":
                    return cr + 2, 0
                return cr + 1, 0
            return (nl + 1 if nl >= 0 else -1), len(text)
        nlstr = self._readnl
        assert nlstr is not None
        i = text.find(nlstr, start)
        if i >= 0:
            return i + len(nlstr), 0
        return -1, max(len(text) - len(nlstr) + 1, 0)

    async def readline(self, size: int | None = -1) -> str:
        """Reads one line, with its line ending (translated per `newline`)."""
        self._check_readable()
        size = _index(size)
        if self._cursor is not None:
            self._unlines()
        decoded, used = self._decoded, self._used
        end, _ = self._find_eol(decoded, used)
        if end >= 0 and (size < 0 or end - used <= size):
            self._used = end
            return decoded[used:end]
        mark = self._mark()
        parts: list[str] = []
        try:
            line = await self._readline_slow(size, parts)
        except BaseException:
            self._restore(mark, "".join(parts))
            raise
        self._unmark(mark)
        return line

    async def _readline_slow(self, size: int, parts: list[str]) -> str:
        # As _pyio does, the line is gathered across chunks and each chunk replaces
        # the decoded text (so tell() snapshots stay right); but in parts: of the
        # chunk where the line ends only the line's part is copied.
        first = self._take()
        end, _ = self._find_eol(first, 0)
        if end >= 0 or (size >= 0 and len(first) >= size):
            if end < 0 or (size >= 0 and end > size):
                end = size
            self._used -= len(first) - end
            return first[:end]
        parts.append(first)
        total = len(first)  # < size when size >= 0
        crlf = self._readnl == "\r\n"
        while True:
            while await self._read_chunk():
                if self._decoded:
                    break
            text = self._decoded
            if not text:
                self._set_decoded("")
                self._snapshot = None
                return "".join(parts)
            if crlf and text[0] == "\n" and parts[-1].endswith("\r"):
                end = 1  # the \r\n straddles the chunks
            else:
                end, _ = self._find_eol(text, 0)
            if end >= 0 or (size >= 0 and total + len(text) >= size):
                if end < 0 or (size >= 0 and total + end > size):
                    end = size - total
                self._used = end
                parts.append(text[:end])
                return "".join(parts)
            parts.append(text)
            total += len(text)
            self._used = len(text)

    # -- line reading's hooks (lines.LineReading) ----------------------------------------
    def _lines_begin(self) -> Any:
        return self._mark()

    def _lines_undo(self, mark: Any, taken: list[str]) -> None:
        self._restore(mark, "".join(taken))

    async def _lines_done(self, mark: Any) -> None:
        self._unmark(mark)

    def _before_next_line(self) -> None:
        # Like TextIOWrapper.__next__: no tell() while iterating (no snapshots).
        self._telling = False
        self._snapshot = None

    def _after_last_line(self) -> None:
        self._telling = self._seekable

    # -- writing ----------------------------------------------------------------------
    async def write(self, s: str) -> int:
        """Writes a str (newlines translated per `newline`); returns its length."""
        self._check_writable()
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        length = len(s)
        haslf = (self._writetranslate or self._line_buffering) and "\n" in s
        if haslf and self._writetranslate and self._writenl != "\n":
            s = s.replace("\n", self._writenl)
        if self._decoded or self._cursor is not None or self._snapshot is not None:
            await self._rewind_to_logical()
        encoder = self._encoder or self._get_encoder()
        b = encoder.encode(s)
        await self.buffer.write(b)
        if self._line_buffering and (haslf or "\r" in s):
            await self.flush()
        return length

    async def _rewind_to_logical(self) -> None:
        """Before writing after reading: puts the binary position back where the
        text read stopped (CPython writes after its read-ahead instead)."""
        self._unlines()
        if self._seekable and self._telling and self.buffer._readable:
            if self._used < len(self._decoded):
                await self.seek(await self.tell())
        self._set_decoded("")
        self._snapshot = None
        if self._decoder:
            self._decoder.reset()

    async def writelines(self, lines: Iterable[str]) -> None:
        """Writes every str of `lines` (no separators added)."""
        self._check_closed()  # as io: even with nothing to write
        for line in lines:
            await self.write(line)

    async def flush(self) -> None:
        """Writes out the buffer."""
        self._check_closed()
        await self.buffer.flush()
        self._telling = self._seekable

    async def fsync(self) -> None:
        await self.flush()
        await self.buffer.fsync()

    async def fdatasync(self) -> None:
        await self.flush()
        await self.buffer.fdatasync()

    async def close(self) -> None:
        """Flushes, then closes (the buffer's close() flushes, after it has ended
        the ops in flight)."""
        self._unlines()  # iteration stops: the next line raises ValueError
        await self.buffer.close()

    def __del__(self) -> None:
        # As io.TextIOWrapper's: the warning names the text file, not its buffer
        # or raw file (whose own __del__s then find the raw file closed).
        raw = getattr(getattr(self, "buffer", None), "raw", None)
        if raw is not None and not raw._closed and raw._closefd:
            warnings.warn(f"unclosed file {self!r}", ResourceWarning, stacklevel=2, source=self)
            raw._close_now()

    # -- position (the stdlib's cookie algorithm, from _pyio) ------------------------
    @staticmethod
    def _pack_cookie(
        position: int, dec_flags: int = 0, bytes_to_feed: int = 0, need_eof: bool = False,
        chars_to_skip: int = 0,
    ) -> int:  # fmt: skip
        return (
            position | (dec_flags << 64) | (bytes_to_feed << 128) | (chars_to_skip << 192)
            | bool(need_eof) << 256
        )  # fmt: skip

    @staticmethod
    def _unpack_cookie(bigint: int) -> tuple[int, int, int, bool, int]:
        rest, position = divmod(bigint, 1 << 64)
        rest, dec_flags = divmod(rest, 1 << 64)
        rest, bytes_to_feed = divmod(rest, 1 << 64)
        need_eof, chars_to_skip = divmod(rest, 1 << 64)
        return position, dec_flags, bytes_to_feed, bool(need_eof), chars_to_skip

    async def tell(self) -> int:
        """An opaque position cookie for seek() (a byte offset in simple cases)."""
        self._check_closed()
        if not self._seekable:
            raise io.UnsupportedOperation("underlying stream is not seekable")
        if not self._telling:
            raise OSError("telling position disabled by next() call")
        await self.flush()
        self._unlines()
        position = await self.buffer.tell()
        decoder = self._decoder
        if decoder is None or self._snapshot is None:
            if self._used < len(self._decoded):
                raise OSError("can't reconstruct logical file position")
            return position
        dec_flags, next_input = self._snapshot
        position -= len(next_input)
        chars_to_skip = self._used
        if chars_to_skip == 0:
            return self._pack_cookie(position, dec_flags)
        saved_state = decoder.getstate()
        try:
            skip_bytes = int(self._b2cratio * chars_to_skip)
            skip_back = 1
            skip_bytes = min(skip_bytes, len(next_input))
            while skip_bytes > 0:
                decoder.setstate((b"", dec_flags))
                n = len(decoder.decode(next_input[:skip_bytes]))
                if n <= chars_to_skip:
                    b, d = decoder.getstate()
                    if not b:
                        dec_flags = d
                        chars_to_skip -= n
                        break
                    skip_bytes -= len(b)
                    skip_back = 1
                else:
                    skip_bytes -= skip_back
                    skip_back = skip_back * 2
            else:
                skip_bytes = 0
                decoder.setstate((b"", dec_flags))
            start_pos = position + skip_bytes
            start_flags = dec_flags
            if chars_to_skip == 0:
                return self._pack_cookie(start_pos, start_flags)
            bytes_fed = 0
            need_eof = False
            chars_decoded = 0
            for i in range(skip_bytes, len(next_input)):
                bytes_fed += 1
                chars_decoded += len(decoder.decode(next_input[i : i + 1]))
                dec_buffer, dec_flags = decoder.getstate()
                if not dec_buffer and chars_decoded <= chars_to_skip:
                    start_pos += bytes_fed
                    chars_to_skip -= chars_decoded
                    start_flags, bytes_fed, chars_decoded = dec_flags, 0, 0
                if chars_decoded >= chars_to_skip:
                    break
            else:
                chars_decoded += len(decoder.decode(b"", final=True))
                need_eof = True
                if chars_decoded < chars_to_skip:
                    raise OSError("can't reconstruct logical file position")
            return self._pack_cookie(start_pos, start_flags, bytes_fed, need_eof, chars_to_skip)
        finally:
            decoder.setstate(saved_state)

    def _reset_encoder(self, position: int) -> None:
        try:
            encoder = self._encoder or self._get_encoder()
        except LookupError:
            return
        if position != 0:
            encoder.setstate(0)
        else:
            encoder.reset()

    async def seek(self, cookie: int, whence: int = 0) -> int:
        """Moves to a tell() cookie (whence 0), or to the end (seek(0, 2))."""
        self._check_closed()
        self._unlines()
        if not self._seekable:
            raise io.UnsupportedOperation("underlying stream is not seekable")
        cookie = operator.index(cookie)
        if whence == os.SEEK_CUR:
            if cookie != 0:
                raise io.UnsupportedOperation("can't do nonzero cur-relative seeks")
            whence = 0
            cookie = await self.tell()
        elif whence == os.SEEK_END:
            if cookie != 0:
                raise io.UnsupportedOperation("can't do nonzero end-relative seeks")
            await self.flush()
            position = await self.buffer.seek(0, whence)
            self._unlines()
            self._set_decoded("")
            self._snapshot = None
            if self._decoder:
                self._decoder.reset()
            self._reset_encoder(position)
            return position
        if whence != 0:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if cookie < 0:
            raise ValueError(f"negative seek position {cookie!r}")
        await self.flush()
        start_pos, dec_flags, bytes_to_feed, need_eof, chars_to_skip = self._unpack_cookie(cookie)
        if start_pos > OFF_T_MAX:  # io.TextIOWrapper reads it as a negative off_t
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        await self.buffer.seek(start_pos)
        self._unlines()
        self._set_decoded("")
        self._snapshot = None
        self._chunk = self._CHUNK
        if cookie == 0 and self._decoder:
            self._decoder.reset()
        elif self._decoder or dec_flags or chars_to_skip or (cookie and self.buffer._readable):
            # A cookie's decoder state applies even before the first read: flags 0
            # are a state too (utf-16/32: byte order known, no BOM expected here),
            # as in io.TextIOWrapper, whose decoder exists from the start.
            self._decoder = self._decoder or self._get_decoder()
            self._decoder.setstate((b"", dec_flags))
            self._snapshot = (dec_flags, b"")
        if chars_to_skip:
            input_chunk = await self.buffer.read(bytes_to_feed)
            self._set_decoded(self._decoder.decode(input_chunk, need_eof))
            self._snapshot = (dec_flags, input_chunk)
            if len(self._decoded) < chars_to_skip:
                raise OSError("can't restore logical file position")
            self._used = chars_to_skip
        self._reset_encoder(cookie)
        return cookie

    async def truncate(self, size: int | None = None) -> int:
        """Resizes the file to `size` (default: the position)."""
        await self.flush()
        if size is None:
            size = await self.tell()
        return await self.buffer.truncate(size)
