# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of the index's bulk entry writer: ``put_key_entries`` (``rocketpy/broker/store/index.py``).

A message with KEYS (a trace message carries hundreds: the ids of the messages it traces) has one
index entry per key; this writes them all in one call, hashing each key in C, instead of a Python
call per key. ``rocketpy._accel`` chooses it or its pure twin. The index layout constants are read
from ``rocketpy.broker.store.index`` the first time it runs. Every buffer access is bounds-checked
before it happens: no input may crash the process.

The signature is declared in ``_indexkeys.pyi`` (mypy checks it against the pure twin, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.buffer cimport PyBuffer_Release
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from rocketpy._cshared cimport (
    _get_u32, _int, _latin1, _property_value, _put_u32, _put_u64, _struct_error, _writable,
)

__all__ = ["put_key_entries"]

cdef bint _bound = False
cdef Py_ssize_t HEADER_SIZE = 0
cdef Py_ssize_t SLOT_SIZE = 0
cdef Py_ssize_t ENTRY_SIZE = 0


cdef int _bind() except -1:
    global _bound, HEADER_SIZE, SLOT_SIZE, ENTRY_SIZE
    from rocketpy.broker.store import index

    if index.SLOT_SIZE != 4 or index.ENTRY_SIZE != 20 or index.HEADER_SIZE != 40:
        raise ImportError("rocketpy.broker.store._indexkeys was built for another index layout; rebuild it")
    HEADER_SIZE = index.HEADER_SIZE
    SLOT_SIZE = index.SLOT_SIZE
    ENTRY_SIZE = index.ENTRY_SIZE
    _bound = True
    return 0


cdef inline Py_ssize_t _count_words(const unsigned char* p, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """Non-empty words of ``p[start:end]`` split at spaces."""
    cdef Py_ssize_t i, words = 0
    cdef bint in_word = False
    for i in range(start, end):
        if p[i] == 32:
            in_word = False
        elif not in_word:
            in_word = True
            words += 1
    return words


cdef inline void _entry(unsigned char* q, const unsigned char* key, Py_ssize_t k, uint32_t h, uint64_t phys,
                        uint32_t diff, uint32_t count, int64_t slots, Py_ssize_t entries_pos) noexcept:
    """Hash ``key[:k]`` onto ``h`` (the topic part), write entry ``count`` and link it into its slot
    (the caller checked that every slot and entry it writes is inside the file)."""
    cdef Py_ssize_t i, slot_pos, entry_pos
    for i in range(k):
        h = 31 * h + key[i]
    if h & 0x80000000:
        h = 0 - h  # abs() of the signed hash, as uint32 arithmetic
    h &= 0x7FFFFFFF
    slot_pos = HEADER_SIZE + <Py_ssize_t>(h % slots) * SLOT_SIZE
    entry_pos = entries_pos + <Py_ssize_t>count * ENTRY_SIZE
    _put_u32(q + entry_pos, h)
    _put_u64(q + entry_pos + 4, phys)
    _put_u32(q + entry_pos + 12, diff)
    _put_u32(q + entry_pos + 16, _get_u32(q + slot_pos))  # the bucket's previous entry
    _put_u32(q + slot_pos, count)


def put_key_entries(mm, str props, topic_hash, phys, time_diff, count, slots, entries_pos, room):
    """Entries from ``count`` on for every index key of a message, each linked into its slot (twin of
    ``rocketpy.broker.store.index.put_key_entries``); how many, or -1 with nothing written."""
    if not _bound:
        _bind()
    cdef Py_ssize_t n, ks = -1, ke = 0, us = -1, ue = 0, i, start, word_end, keys = 0
    cdef uint32_t th = <uint32_t>_int(topic_hash, 0, 0xFFFFFFFF, "I")
    cdef int64_t ph = _int(phys, -9223372036854775807 - 1, 9223372036854775807, "q")
    cdef int32_t diff = <int32_t>_int(time_diff, -2147483648, 2147483647, "i")
    cdef int64_t first = _int(count, -2147483648, 2147483647, "i")
    cdef int64_t n_slots = _int(slots, -9223372036854775807 - 1, 9223372036854775807, "q")
    cdef Py_ssize_t e_pos = <Py_ssize_t>_int(entries_pos, 0, 9223372036854775807, "q")
    cdef int64_t n_room = _int(room, -9223372036854775807 - 1, 9223372036854775807, "q")
    cdef const unsigned char* p = _latin1(props, &n)
    cdef Py_buffer out
    cdef unsigned char* q
    if p == NULL:
        return -1
    if n_slots <= 0:
        raise ZeroDivisionError("integer modulo by zero") if n_slots == 0 else ValueError("negative slot count")
    ks = _property_value(p, n, b"KEYS\x01", 5, &ke)
    if ks >= 0:
        keys = _count_words(p, ks, ke)
    us = _property_value(p, n, b"UNIQ_KEY\x01", 9, &ue)
    if us >= 0 and ue > us:
        keys += 1
    if keys > n_room or first + keys - 1 > 2147483647:
        return -1
    if keys == 0:
        return 0
    _writable(mm, &out)
    try:
        if (first < 0 or e_pos > out.len or n_slots > out.len
                or e_pos + (first + keys) * ENTRY_SIZE > out.len or HEADER_SIZE + n_slots * SLOT_SIZE > out.len):
            raise _struct_error(
                f"{keys} index entries from {first} or {n_slots} slots are outside a {out.len}-byte file")
        q = <unsigned char*>out.buf
        i = 0
        if ks >= 0:
            start = ks
            while start < ke:
                while start < ke and p[start] == 32:
                    start += 1
                if start >= ke:
                    break
                word_end = start
                while word_end < ke and p[word_end] != 32:
                    word_end += 1
                _entry(q, p + start, word_end - start, th, <uint64_t>ph, <uint32_t>diff, <uint32_t>(first + i),
                       n_slots, e_pos)
                i += 1
                start = word_end
        if us >= 0 and ue > us:
            _entry(q, p + us, ue - us, th, <uint64_t>ph, <uint32_t>diff, <uint32_t>(first + i), n_slots, e_pos)
            i += 1
    finally:
        PyBuffer_Release(&out)
    return i
