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

import mmap
import os
import struct

HEADER_SIZE = 48  # one copy of the WAL-index header
_VERSION = struct.pack("=I", 3007000)  # WALINDEX_MAX_VERSION, native byte order as SQLite writes it
_IS_INIT = 12  # offset of the isInit byte
_SALTS = slice(32, 40)  # aSalt[2] in the header: the bytes 16–24 of the -wal file's header, as they are


def _wal_salts(wal_path: str) -> bytes | None:
    try:
        with open(wal_path, "rb") as wal:
            head = wal.read(24)
    except OSError:
        return None
    return head[16:24] if len(head) == 24 else None


class WalIndexHeader:
    def __init__(self, mapping: mmap.mmap) -> None:
        self._mapping = mapping

    @classmethod
    def open(cls, database_path: str) -> WalIndexHeader | None:
        """The header of ``database_path``'s WAL-index, or None when it cannot be mapped or vouched for.

        SQLite names the ``-wal`` and ``-shm`` files after the database's real path (symbolic links
        followed), and so does this. A ``-shm`` file that is not the one SQLite uses (left over from
        another file once at that path) would never change, so it is checked against the WAL it indexes:
        the header repeats the two salts of the ``-wal`` file's own header."""
        real = os.path.realpath(database_path)
        try:
            fd = os.open(real + "-shm", os.O_RDONLY)
        except OSError:
            return None
        try:
            if os.fstat(fd).st_size < 2 * HEADER_SIZE:
                return None
            header = cls(mmap.mmap(fd, 2 * HEADER_SIZE, prot=mmap.PROT_READ))
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)  # the mapping keeps its own reference to the file
        current = header.read()
        if current is None or current[_SALTS] != _wal_salts(real + "-wal"):
            header.close()
            return None
        return header

    def read(self) -> bytes | None:
        """The header's 48 bytes when both copies agree and it is initialised; None when unsure."""
        # Two separate reads, the first copy first: the copy SQLite writes last is read first.
        first = self._mapping[:HEADER_SIZE]
        second = self._mapping[HEADER_SIZE : 2 * HEADER_SIZE]
        if first != second or first[_IS_INIT] != 1 or first[:4] != _VERSION:
            return None
        return first

    def close(self) -> None:
        self._mapping.close()
