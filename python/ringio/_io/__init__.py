"""``ringio.open``: asyncio file objects over the file engines (io_uring, kernel AIO),
layered as CPython's ``io`` is.

The objects mirror the standard library's ``open()`` result (``FileIO``,
``BufferedReader/Writer/Random``, ``TextIOWrapper``) with ``await`` wherever the call
may do I/O. The modules, bottom to top:

* ``base``: sizes, argument checks, the lock that serialises a file's I/O, and the
  context-manager and closing surface every file shares;
* ``lines``: ``readlines()`` and ``async for line in f``, written once for bytes and
  str (native: ``_core.LineIter``);
* ``direct``: O_DIRECT through aligned bounce buffers;
* ``positional``: ``pread``/``pwrite``, batches of them, ``readv``/``writev``, ``fsync``;
* ``binary``: what the two binary files share (the public methods' structure,
  the read buffer);
* ``raw``: ``AsyncFileIO`` (unbuffered, like ``io.FileIO``): the fd, the position,
  cancelled ops' bookkeeping, O_DIRECT, positional ops, closing;
* ``buffered``: ``AsyncBufferedFile`` (like ``io.BufferedReader/Writer/Random``),
  wrapping an ``AsyncFileIO`` (``.raw``): read-ahead, the write buffer, line
  iteration over the read buffer;
* ``text``: ``AsyncTextFile`` over a buffered binary file (like ``io.TextIOWrapper``);
* ``open``: ``ringio.open()``, mode parsing and the assembly of the layers.

Design notes, in short (docs/files.md has the long version):

* The position lives in the raw object, not in the fd: every read and write of a
  seekable file is a positioned ``pread``/``pwrite`` at ``self._pos``. Reads first
  try ``preadv2(RWF_NOWAIT)`` inline (the engine's hint), so cached data costs no
  ring round trip and no future.
* Pipes, FIFOs and terminals (not seekable) use the engine's ``read``/``write``.
* Every operation that touches the position or the buffers runs under one lock
  (the raw file's; a buffered file over it uses the same), so the file's I/O is
  serialised. When the awaiting task is cancelled while a write (or a stream
  read) is in the kernel, the raw object remembers it; before its next operation
  it waits for the op's real result (``Outcome``) and applies it: bytes the kernel
  wrote advance the position (and leave the buffered file's write buffer), bytes
  it read from a pipe are kept in the raw file, the first bytes its next read
  returns.
* Line reads and reads to EOF use large chunks (64 KiB growing to 1 MiB) split in
  memory; text is decoded a whole chunk at a time.
* ``async for line in f`` is native (``_core.LineIter``): the file lends the rest of
  its chunk (read buffer, or decoded text) to a ``_core.LineCursor`` kept in
  ``self._cursor``; lines split from it cost no coroutine. Every other operation
  first takes the cursor back (``_unlines()``), which restores the position.
"""

from .buffered import AsyncBufferedFile
from .open import NotAwaitedError, _open, _parse_mode, open
from .raw import AsyncFileIO
from .text import AsyncTextFile

__all__ = ["AsyncBufferedFile", "AsyncFileIO", "AsyncTextFile", "NotAwaitedError", "open"]
# ``ringio.tempfile`` builds its files with these (the same checks as ringio.open).
__all__ += ["_open", "_parse_mode"]
