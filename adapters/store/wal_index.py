"""Whether any connection has committed to a WAL-mode SQLite file, read without a transaction.

Why: the read cache (``read_cache.py``) must learn on every request whether the database changed.
``PRAGMA data_version`` answers that, but only by opening and closing a read transaction, which takes
and drops a shared-memory lock; with several gunicorn workers on one file that costs 35–45 µs of CPU per
request here (measured: a bare route plus one pragma vs the bare route, docs/performance.md) — about a
third of the whole overhead of an authenticated request.

How: in WAL mode every connection of every process shares the WAL-index, the ``-shm`` file next to the
database, mapped in memory. Its first 96 bytes are two copies of the WAL-index header, which every
commit rewrites (its change counter, frame count and checksums move): the committing connection writes
the second copy, then the first; a reader that finds both copies equal has a consistent header
(https://www.sqlite.org/walformat.html, "The WAL-Index Header", unix VFS). So while the header reads
the same, nothing was committed; this module maps the file read-only and answers the header's bytes.

When it cannot tell, it says so (``read`` answers None) and the caller asks SQLite the usual way: the
file is missing or too short (not in WAL mode, another VFS, a file system without shared mappings), the
two copies differ (a commit is being published right now), or the header is not initialised or of a
version other than the one described there. The mapping is only valid while a connection of this
process holds the database open (SQLite deletes the ``-shm`` file when the last connection closes), so
the caller keeps one mapping per connection, made after the connection was opened.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import threading

HEADER_SIZE = 48  # one copy of the WAL-index header
_VERSION = struct.pack("=I", 3007000)  # WALINDEX_MAX_VERSION, native byte order as SQLite writes it
_IS_INIT = 12  # offset of the isInit byte
_SALTS = slice(32, 40)  # aSalt[2] in the header: the bytes 16–24 of the -wal file's header, as they are

# Why not Python's ``mmap.mmap``: it keeps a duplicate of the descriptor and closes it with the mapping, and
# POSIX drops every fcntl lock a process holds on a file as soon as it closes *any* descriptor of that
# file. SQLite holds such a lock on the ``-shm`` file (its "dead man switch" byte) to tell other processes
# that the WAL-index is in use; without it, the next process to open the database resets the file to 3
# bytes, and every process that has it mapped dies of SIGBUS when it next touches it (gunicorn workers
# did, when a new worker or ``community-api backup`` opened the database). So the file is mapped with
# libc's ``mmap``, from a descriptor opened once per ``-shm`` file per process and never closed; unmapping
# closes nothing.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value
_MAPPED = 2 * HEADER_SIZE
_descriptors: dict[tuple[int, int], int] = {}  # (device, inode) of a -shm file -> a descriptor, kept open
_descriptors_lock = threading.Lock()


def _descriptor(shm_path: str) -> int | None:
    """A read-only descriptor of ``shm_path``'s file, the same one for every call in this process."""
    try:
        seen = os.stat(shm_path)
    except OSError:
        return None
    with _descriptors_lock:
        fd = _descriptors.get((seen.st_dev, seen.st_ino))
        if fd is not None:
            return fd
        try:
            fd = os.open(shm_path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        opened = os.fstat(fd)
        # Kept even if the path changed file in between (closing it is what must never happen); the
        # inode is then checked below like any other, and a stale one is never trusted.
        _descriptors[(opened.st_dev, opened.st_ino)] = fd
        return fd if (opened.st_dev, opened.st_ino) == (seen.st_dev, seen.st_ino) else None


def _wal_salts(wal_path: str) -> bytes | None:
    # Reading the -wal file with a descriptor that is closed again is harmless: SQLite locks the database
    # and the -shm files, never the -wal file.
    try:
        with open(wal_path, "rb") as wal:
            head = wal.read(24)
    except OSError:
        return None
    return head[16:24] if len(head) == 24 else None


class WalIndexHeader:
    def __init__(self, address: int) -> None:
        self._address: int | None = address

    @classmethod
    def open(cls, database_path: str) -> WalIndexHeader | None:
        """The header of ``database_path``'s WAL-index, or None when it cannot be mapped or vouched for.

        SQLite names the ``-wal`` and ``-shm`` files after the database's real path (symbolic links
        followed), and so does this. A ``-shm`` file that is not the one SQLite uses (left over from
        another file once at that path) would never change, so it is checked against the WAL it indexes:
        the header repeats the two salts of the ``-wal`` file's own header."""
        real = os.path.realpath(database_path)
        header = cls.map(real + "-shm")
        if header is None:
            return None
        current = header.read()
        if current is None or current[_SALTS] != _wal_salts(real + "-wal"):
            header.close()
            return None
        return header

    @classmethod
    def map(cls, shm_path: str) -> WalIndexHeader | None:
        """The first bytes of ``shm_path`` mapped, unchecked (``open`` checks them)."""
        fd = _descriptor(shm_path)
        if fd is None:
            return None
        try:
            if os.fstat(fd).st_size < _MAPPED:
                return None
        except OSError:
            return None
        address = _libc.mmap(None, _MAPPED, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            return None
        return cls(address)

    def read(self) -> bytes | None:
        """The header's 48 bytes when both copies agree and it is initialised; None when unsure."""
        # Two separate reads, the first copy first: the copy SQLite writes last is read first.
        address = self._address
        if address is None:
            return None
        first = ctypes.string_at(address, HEADER_SIZE)
        second = ctypes.string_at(address + HEADER_SIZE, HEADER_SIZE)
        if first != second or first[_IS_INIT] != 1 or first[:4] != _VERSION:
            return None
        return first

    def close(self) -> None:
        address, self._address = self._address, None
        if address is not None:
            _libc.munmap(address, _MAPPED)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit libc may already be torn down
            return
