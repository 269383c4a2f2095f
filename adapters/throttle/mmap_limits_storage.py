"""A ``limits`` storage in a memory-mapped file, so that every worker process of one host shares the DM
throttle and the platform read pace for a few microseconds a check. Select it with
``mmap:///absolute/path`` (or ``mmap://relative/path``), optionally ``?capacity=N``; importing this module
registers the ``mmap`` scheme. It is the default storage (``adapters/settings.py``).

Why it exists: the read pace counts every platform read exactly across workers, so each data request
writes once to the shared storage. On SQLite that write is a transaction (40–60 µs, and more when two
workers write at once); here it is a few reads and writes of shared memory under a file lock (about 3 µs),
which is what ``make bench`` needed (docs/performance.md, docs/decisions.md).

What it keeps, and how:
- the file is a header and an open-addressing hash table of fixed-size slots. A slot holds a key's
  digest (BLAKE2b, 16 bytes, over the key and its kind: a counter and a moving window of one name are
  two slots), whether it is live, when it expires, a counter's value, and a ring of ``capacity`` entry
  times for a moving window;
- every operation runs under an exclusive ``flock`` on the file, taken on a descriptor of the calling
  thread's own (flock excludes between open file descriptions, so it serialises threads and processes
  alike, and the kernel drops it if the holder dies). Each thread of each process opens its own
  descriptor and mapping on first use, so nothing crosses a ``fork``;
- moving windows follow ``limits``' Redis storage exactly, as the SQLite storage does: a key is a list of
  entry times, newest first, trimmed to ``limit`` entries on each acquisition; the key expires ``expiry``
  seconds after its last acquisition; an entry exactly ``expiry`` seconds old is still inside. An entry's
  time never goes below the newest one already there (a racer's earlier clock reading is raised), so a
  list is ordered and a window read is a binary search. A window's ``limit`` may not exceed the file's
  ``capacity`` (128 by default): the storage refuses it rather than count wrongly;
- counters (the fixed-window strategy, the platform's 429 hold) follow the Redis and memory storages:
  ``incr`` sets the expiry when it creates the counter;
- expired and cleared slots are reused; when live and cleared slots fill 70 % of the table it is rebuilt,
  twice as large when it is more than half live. Other processes see the new size in the header, which
  every operation reads first under the lock, and map the file again before touching a slot;
- the capacity is stored in the file; a process asking for a larger one rebuilds the file empty (the
  throttles' state restarts once, as after an upgrade);
- a file that holds something else (it starts with neither the table's mark nor zeros) is refused, never
  cleared: a URI that names the database by mistake must not wipe it.

The file holds only rate-limit state; it stays valid across restarts (the kernel writes it back), but a
machine crash may lose its last seconds of entries. Do not delete it while the service runs.

It is one module, past the usual 400 lines, on purpose: the file's layout, the table's probing and
rebuilding, and the storage methods all read and write the same slots under the same lock, and none of
them is correct without the others.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import mmap
import os
import struct
import threading
import time
import urllib.parse

from limits.errors import ConfigurationError
from limits.storage import MovingWindowSupport, Storage

from adapters.throttle.storage_uri import file_and_query

MAGIC = b"CDA-THR1"
DEFAULT_CAPACITY = 128
MAX_CAPACITY = 1 << 16
_FULL = 0.7  # live + cleared slots over table size that triggers a rebuild
_HEADER = struct.Struct("<8sIII")  # magic, capacity, slots, used (live or cleared slots)
_HEADER_SIZE = 64
_SLOT = struct.Struct("<16sB7xdqII")  # digest, state, expires_at, value, head, count
_ENTRY = struct.Struct("<d")
_EMPTY, _LIVE, _CLEARED = 0, 1, 2
_COUNTER, _WINDOW = b"c", b"w"


def parse_uri(uri: str) -> tuple[str, int]:
    """The file and the ring capacity of a ``mmap://`` URI: three (or four) slashes then an absolute
    path, or two slashes then a relative one; ``?capacity=N`` (1 … 65536), else 128."""
    path, query = file_and_query(uri)
    if not path:
        raise ConfigurationError(f"an mmap storage URI names a file: {uri}")
    options = urllib.parse.parse_qs(query, keep_blank_values=True)
    unknown = set(options) - {"capacity"}
    if unknown:
        raise ConfigurationError(f"an mmap storage URI takes only ?capacity=N, not {sorted(unknown)}: {uri}")
    capacity = DEFAULT_CAPACITY
    if "capacity" in options:
        text = options["capacity"][-1]
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_CAPACITY:
            raise ConfigurationError(f"capacity must be a whole number from 1 to {MAX_CAPACITY}: {uri}")
        capacity = int(text)
    return path, capacity


def _first_slots(capacity: int) -> int:
    """A new table's slots: 1,024 (about 1 MiB at the default capacity), fewer for larger rings."""
    return min(1024, max(16, (1 << 20) // (_SLOT.size + _ENTRY.size * capacity)))


# Bumped in a child after each fork: a mapping made before it belongs to the parent. (Cheaper on every
# operation than asking for the process id.)
_forks = [0]
os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))


def _allocate(fd: int, size: int) -> None:
    """Give the file's first ``size`` bytes their disk blocks (a no-op where they have them). A file
    system that cannot (some network ones) keeps the file as it is."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise


def _table_bytes(capacity: int, slots: int) -> int:
    """The size of a file holding a table of ``slots`` slots of ``capacity`` entries each."""
    return _HEADER_SIZE + slots * (_SLOT.size + _ENTRY.size * capacity)


_ZEROS = bytes(1 << 20)  # what a table is cleared with, a MiB at a time


class _Mapping:
    """One thread's descriptor of the file and its mapping, as of the table size it last saw."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.fork = _forks[0]
        self.map: mmap.mmap | None = None
        self.capacity = 0
        self.slots = 0
        self.slot_size = 0


class _Local(threading.local):
    mapping: _Mapping | None = None  # a class-level default: no getattr fallback on every operation


# Digests of the keys seen lately (a handful per connection), kept so that each operation does not hash
# its key again; cleared whole when it grows past this many.
_DIGESTS_KEPT = 4096


class MmapStorage(Storage, MovingWindowSupport):
    """Rate-limit storage in a memory-mapped file: fixed-window counters and moving windows."""

    STORAGE_SCHEME = ["mmap"]

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: float | str | bool) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self.path, self.capacity = parse_uri(uri)
        self._local = _Local()
        self._digests: dict[tuple[bytes, str], bytes] = {}
        # Descriptors inherited through fork stay open and unused in the child (see the docstring).
        self._inherited: list[_Mapping] = []

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return OSError

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_local"] = None
        state["_inherited"] = []
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._local = _Local()

    # --- the file ------------------------------------------------------------------------------

    def _mapping(self) -> _Mapping:
        mapping = self._local.mapping
        if mapping is not None and mapping.fork == _forks[0]:
            return mapping
        if mapping is not None:
            self._inherited.append(mapping)
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        mapping = _Mapping(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
        self._local.mapping = mapping
        return mapping

    def _lock(self) -> _Mapping:
        """Take the file's lock: answers the calling thread's mapping, current with the file's table.
        Every caller releases it with ``_unlock`` in a ``finally`` (no context manager: this is on every
        data request, and a generator-based one costs a quarter of an operation)."""
        mapping = self._mapping()
        fcntl.flock(mapping.fd, fcntl.LOCK_EX)
        try:
            self._refresh(mapping)
        except BaseException:
            fcntl.flock(mapping.fd, fcntl.LOCK_UN)
            raise
        return mapping

    @staticmethod
    def _unlock(mapping: _Mapping) -> None:
        fcntl.flock(mapping.fd, fcntl.LOCK_UN)

    def _refresh(self, mapping: _Mapping) -> None:
        """Map the file again if its table changed size since this thread last looked; make the file
        (again) if it is new or of a smaller capacity than this storage asks for. A file that holds
        something else is never made a table (``_refuse_foreign``)."""
        if mapping.map is not None:
            # Safe to read: under the lock the file is never shorter than its header.
            magic, capacity, slots, _ = _HEADER.unpack_from(mapping.map, 0)
            if magic == MAGIC and (capacity, slots) == (mapping.capacity, mapping.slots):
                return
        size = os.fstat(mapping.fd).st_size
        head = os.pread(mapping.fd, _HEADER_SIZE, 0)
        self._refuse_foreign(head)
        if size < _HEADER_SIZE:
            self._make(mapping, self.capacity, _first_slots(self.capacity))
            return
        magic, capacity, slots, _ = _HEADER.unpack_from(head)
        whole = _table_bytes(capacity, slots)
        if magic != MAGIC or capacity < self.capacity or not slots or size < whole:
            capacity = max(self.capacity, capacity if magic == MAGIC else 0)
            self._make(mapping, capacity, _first_slots(capacity))
        else:
            self._map(mapping, capacity, slots)

    def _refuse_foreign(self, head: bytes) -> None:
        """Refuse a file that is not a table: one that starts with neither the table's mark nor zeros
        (a new file is empty; one whose making was cut short has its header still zero, as ``_make``
        writes the header last). A URI that names the wrong file (the database, say, for a
        ``COMMUNITY_API_THROTTLE_STORAGE`` that meant the database's folder) would otherwise have its
        file cleared. ``head``: the file's first ``_HEADER_SIZE`` bytes (fewer in a shorter file)."""
        if not head.startswith(MAGIC) and head.strip(b"\0"):
            raise ConfigurationError(
                f"{self.path} is not a throttle file: it holds something else, left as it is; name a file of"
                " the throttle's own (a new one is made)"
            )

    def _make(self, mapping: _Mapping, capacity: int, slots: int) -> None:
        """An empty table of ``slots`` slots, every slot zeros (empty). The file grows by ``_map``'s
        allocation, before anything is cleared: on a full disk this raises ``OSError`` and leaves the file,
        and the table in it, as they were."""
        whole = _table_bytes(capacity, slots)
        if os.fstat(mapping.fd).st_size > whole:
            os.ftruncate(mapping.fd, whole)
        self._map(mapping, capacity, slots)
        table = mapping.map
        assert table is not None
        for start in range(0, whole, len(_ZEROS)):
            end = min(whole, start + len(_ZEROS))
            table[start:end] = _ZEROS[: end - start]
        _HEADER.pack_into(table, 0, MAGIC, capacity, slots, 0)

    @staticmethod
    def _map(mapping: _Mapping, capacity: int, slots: int) -> None:
        size = max(os.fstat(mapping.fd).st_size, _table_bytes(capacity, slots))
        # Every block of the file is allocated before it is mapped. The file is made by extending it
        # (sparse), and the first write to a page without a block, on a full disk, is not an error
        # but SIGBUS: the worker died mid-request, and so did the next one that touched a new slot.
        # Allocated now, a full disk is an OSError here, once, and the mapping is never used.
        _allocate(mapping.fd, size)
        if mapping.map is not None:
            mapping.map.close()
            mapping.map = None
        mapping.map = mmap.mmap(mapping.fd, size)
        mapping.capacity, mapping.slots = capacity, slots
        mapping.slot_size = _SLOT.size + _ENTRY.size * capacity

    # --- slots ---------------------------------------------------------------------------------

    def _digest(self, kind: bytes, key: str) -> bytes:
        digest = self._digests.get((kind, key))
        if digest is None:
            if len(self._digests) >= _DIGESTS_KEPT:
                self._digests.clear()
            digest = hashlib.blake2b(kind + key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
            self._digests[(kind, key)] = digest
        return digest

    def _find(self, mapping: _Mapping, digest: bytes, now: float) -> tuple[int, int]:
        """(offset of the key's live slot or -1, offset where it would be written). An expired slot of
        the key, or the first cleared or expired slot passed on the way, is reused."""
        table = mapping.map
        assert table is not None
        slots, size = mapping.slots, mapping.slot_size
        start = int.from_bytes(digest[:8], "little") % slots
        reusable = -1
        for step in range(slots):
            offset = _HEADER_SIZE + ((start + step) % slots) * size
            found, state, expires_at, _, _, _ = _SLOT.unpack_from(table, offset)
            if state == _EMPTY:
                return -1, reusable if reusable >= 0 else offset
            if found == digest and state == _LIVE:
                return (offset, offset) if expires_at > now else (-1, offset)
            if reusable < 0 and (state == _CLEARED or expires_at <= now):
                reusable = offset
        return -1, reusable

    def _place(self, mapping: _Mapping, digest: bytes, now: float) -> int:
        """Where a new slot for ``digest`` goes; rebuilds the table first when it is too full."""
        _, place = self._find(mapping, digest, now)
        table = mapping.map
        assert table is not None
        if place >= 0 and table[place + 16] != _EMPTY:
            return place  # reusing a cleared or expired slot: the table fills no further
        magic, capacity, slots, used = _HEADER.unpack_from(table, 0)
        if place < 0 or used + 1 > _FULL * slots:
            self._rebuild(mapping, now)
            _, place = self._find(mapping, digest, now)
            magic, capacity, slots, used = _HEADER.unpack_from(mapping.map, 0)  # type: ignore[arg-type]
        _HEADER.pack_into(mapping.map, 0, magic, capacity, slots, used + 1)  # type: ignore[arg-type]
        return place

    def _rebuild(self, mapping: _Mapping, now: float) -> None:
        """Keep the live slots, drop the cleared and expired ones; double the table if more than half of
        it is live."""
        table = mapping.map
        assert table is not None
        size = mapping.slot_size
        kept = []
        for index in range(mapping.slots):
            offset = _HEADER_SIZE + index * size
            _, state, expires_at, _, _, _ = _SLOT.unpack_from(table, offset)
            if state == _LIVE and expires_at > now:
                kept.append(table[offset : offset + size])
        slots = mapping.slots * 2 if len(kept) > mapping.slots // 2 else mapping.slots
        self._make(mapping, mapping.capacity, slots)
        for record in kept:
            _, place = self._find(mapping, record[:16], now)
            mapping.map[place : place + size] = record  # type: ignore[index]
        _HEADER.pack_into(mapping.map, 0, MAGIC, mapping.capacity, slots, len(kept))  # type: ignore[arg-type]

    # --- Storage -------------------------------------------------------------------------------

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Add ``amount`` to the counter; a counter that did not exist (or had expired) starts at 0 and
        expires ``expiry`` seconds from now, as the Redis and memory storages do."""
        digest = self._digest(_COUNTER, key)
        mapping = self._lock()
        try:
            now = time.time()
            offset, _ = self._find(mapping, digest, now)
            if offset >= 0:
                _, _, expires_at, value, _, _ = _SLOT.unpack_from(mapping.map, offset)  # type: ignore[arg-type]
                value += amount
            else:
                offset, value, expires_at = self._place(mapping, digest, now), amount, now + expiry
            _SLOT.pack_into(mapping.map, offset, digest, _LIVE, expires_at, value, 0, 0)  # type: ignore[arg-type]
            return int(value)
        finally:
            self._unlock(mapping)

    def get(self, key: str) -> int:
        digest = self._digest(_COUNTER, key)
        mapping = self._lock()
        try:
            offset, _ = self._find(mapping, digest, time.time())
            return int(_SLOT.unpack_from(mapping.map, offset)[3]) if offset >= 0 else 0  # type: ignore[arg-type]
        finally:
            self._unlock(mapping)

    def get_expiry(self, key: str) -> float:
        digest = self._digest(_COUNTER, key)
        mapping = self._lock()
        try:
            now = time.time()
            offset, _ = self._find(mapping, digest, now)
            return float(_SLOT.unpack_from(mapping.map, offset)[2]) if offset >= 0 else now  # type: ignore[arg-type]
        finally:
            self._unlock(mapping)

    def check(self) -> bool:
        try:
            mapping = self._lock()
            try:
                return True
            finally:
                self._unlock(mapping)
        except OSError:
            return False

    def reset(self) -> int | None:
        """Forget every key; answers how many live keys there were."""
        mapping = self._lock()
        try:
            now = time.time()
            live = 0
            for index in range(mapping.slots):
                _, state, expires_at, _, _, _ = _SLOT.unpack_from(mapping.map, _HEADER_SIZE + index * mapping.slot_size)  # type: ignore[arg-type]
                live += state == _LIVE and expires_at > now
            self._make(mapping, mapping.capacity, _first_slots(mapping.capacity))
            return live
        finally:
            self._unlock(mapping)

    def clear(self, key: str) -> None:
        mapping = self._lock()
        try:
            now = time.time()
            for kind in (_COUNTER, _WINDOW):
                offset, _ = self._find(mapping, self._digest(kind, key), now)
                if offset >= 0:
                    mapping.map[offset + 16] = _CLEARED  # type: ignore[index]
        finally:
            self._unlock(mapping)

    # --- MovingWindowSupport -------------------------------------------------------------------

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Add ``amount`` entries stamped now, unless that would put more than ``limit`` entries within
        the last ``expiry`` seconds (Redis's check: the entry that would become the ``limit``-th newest
        is at most ``expiry`` old)."""
        if amount > limit:
            return False
        digest = self._digest(_WINDOW, key)
        mapping = self._lock()
        try:
            return self._acquire(mapping, digest, limit, expiry, amount, time.time())
        finally:
            self._unlock(mapping)

    def acquire_entry_unless_held(
        self, counter: str, key: str, limit: int, expiry: int, amount: int = 1
    ) -> tuple[float, bool]:
        """``acquire_entry(key, …)`` unless the counter ``counter`` is above 0: in one step under the lock,
        what ``get(counter)``, ``get_expiry(counter)`` then ``acquire_entry`` would do in three. Answers
        (when the counter expires, False) when it is above 0, else (0.0, whether the entries were added).
        The platform read pace's check on every data read (``limits_platform_pace.py``)."""
        counter_digest = self._digest(_COUNTER, counter)
        digest = self._digest(_WINDOW, key)
        mapping = self._lock()
        try:
            now = time.time()
            offset, _ = self._find(mapping, counter_digest, now)
            if offset >= 0:
                _, _, expires_at, value, _, _ = _SLOT.unpack_from(mapping.map, offset)  # type: ignore[arg-type]
                if value > 0:
                    return float(expires_at), False
            if amount > limit:
                return 0.0, False
            return 0.0, self._acquire(mapping, digest, limit, expiry, amount, now)
        finally:
            self._unlock(mapping)

    def _acquire(self, mapping: _Mapping, digest: bytes, limit: int, expiry: int, amount: int, now: float) -> bool:
        if limit > mapping.capacity:
            raise ConfigurationError(
                f"a moving window of {limit} entries needs an mmap storage of that capacity "
                f"(this file holds {mapping.capacity}; add ?capacity={limit} to its URI)"
            )
        table = mapping.map
        assert table is not None
        offset, _ = self._find(mapping, digest, now)
        capacity = mapping.capacity
        head, count, stamp = capacity - 1, 0, now
        if offset >= 0:
            _, _, _, _, head, count = _SLOT.unpack_from(table, offset)
            ring = offset + _SLOT.size
            if limit - amount < count:
                (entry,) = _ENTRY.unpack_from(table, ring + _ENTRY.size * ((head - (limit - amount)) % capacity))
                if entry >= now - expiry:
                    return False
            if count:
                stamp = max(now, _ENTRY.unpack_from(table, ring + _ENTRY.size * head)[0])
        else:
            offset = self._place(mapping, digest, now)
            table, ring = mapping.map, offset + _SLOT.size  # a rebuild maps the file anew
            assert table is not None
        for _ in range(amount):
            head = (head + 1) % capacity
            _ENTRY.pack_into(table, ring + _ENTRY.size * head, stamp)
        _SLOT.pack_into(table, offset, digest, _LIVE, now + expiry, 0, head, min(count + amount, limit))
        return True

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """Among the newest ``limit`` entries, those at most ``expiry`` seconds old: (the oldest of them,
        how many). With none: (now, 0)."""
        digest = self._digest(_WINDOW, key)
        mapping = self._lock()
        try:
            table = mapping.map
            assert table is not None
            now = time.time()
            offset, _ = self._find(mapping, digest, now)
            if offset < 0:
                return now, 0
            _, _, _, _, head, count = _SLOT.unpack_from(table, offset)
            ring, capacity, target = offset + _SLOT.size, mapping.capacity, now - expiry

            def entry(index: int) -> float:
                return float(_ENTRY.unpack_from(table, ring + _ENTRY.size * ((head - index) % capacity))[0])

            # Entries are newest first and never increase along the list: find how many are young enough.
            low, high = 0, min(max(limit, 0), count)
            while low < high:
                middle = (low + high) // 2
                if entry(middle) >= target:
                    low = middle + 1
                else:
                    high = middle
            return (entry(low - 1), low) if low else (now, 0)
        finally:
            self._unlock(mapping)


def require_capacity(storage: object, entries: int, user: str) -> None:
    """Refuse, at start-up, an mmap storage whose windows cannot hold ``entries`` (the largest window
    ``user`` keeps): it would otherwise fail on the first acquisition."""
    if isinstance(storage, MmapStorage) and storage.capacity < entries:
        raise ConfigurationError(
            f"{user} keeps windows of {entries} entries: give its mmap storage ?capacity={entries} or more"
        )
