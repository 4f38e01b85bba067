# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of POP's per-message loops: ``take_run`` and ``drop_done`` (``ledger.py``), ``acks_entry``
and ``encode_acks`` (``revive_log.py``), ``read_acks``, ``offsets_of``, ``commit_queues`` and
``apply_batch_acks`` (``acks.py``).

``rocketpy._accel`` chooses them or their pure twins. Each handles the common case in C and calls
its pure twin (``rocketpy._accel.PURE``) for anything else (values out of a C integer's range),
so both raise alike. ``BatchAck`` and ``decode_bitset`` are read from ``rocketpy.broker.pop.acks``
the first time ``read_acks`` runs (``_bind``): ``rocketpy._accel`` loads this module before it exists.

``apply_batch_acks`` does in C what its pure twin does for an ack of a queue that is not orderly
whose offsets are all in flight under the one pop it names (``take_run``): the ledger's counts,
the low-water mark (``PopQueue.low_water``) and the group's counter row. Anything else (an orderly
queue, offsets acked before or under another pop, a low-water mark with offsets acked ahead of it,
a counter row not made yet) takes the same calls as the pure twin (``PopLedger.ack_many``,
``PopService.commit``, ``PopService._count``); the offset table is written through
``ConsumerOffsetManager.commit_offset`` either way.

The signatures are declared in ``_speedups.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_Contains, PyDict_DelItem, PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from rocketpy._cshared cimport PyUnicode_DATA, PyUnicode_IS_ASCII, _as_i64, _put_u32, _put_u64

__all__ = [
    "acks_entry",
    "apply_batch_acks",
    "commit_queues",
    "drop_done",
    "encode_acks",
    "offsets_of",
    "read_acks",
    "take_run",
]

cdef enum:
    MAX_FIELD_CHARS = 4096  # acks.MAX_FIELD_CHARS
    MAX_BATCH_ACKS = 1024  # rocketpy.protocol.headers.pop's
    MAX_BATCH_ACK_BITS = 4096
    MAX_BITSET_BYTES = 512  # MAX_BATCH_ACK_BITS // 8
    ACKS_ENTRY_SIZE = 30  # revive_log.ACKS_ENTRY.size


# -- what is bound on first use ------------------------------------------------------------------
cdef bint _bound = False
cdef object _make_ack = None
cdef object _decode_bitset = None
cdef object _pure = None
cdef object _retry_topic = None
cdef object _acks_head = None  # revive_log.ACKS_HEAD.pack
cdef object _KIND_ACKS = None
cdef Py_ssize_t _MAX_RECORD_OFFSETS = 0


cdef int _bind() except -1:
    global _bound, _make_ack, _decode_bitset, _pure, _retry_topic, _acks_head, _KIND_ACKS
    global _MAX_RECORD_OFFSETS
    from rocketpy._accel import PURE
    from rocketpy.broker.pop import acks, revive_log

    if revive_log.ACKS_ENTRY.size != ACKS_ENTRY_SIZE:
        raise ImportError("rocketpy.broker.pop._speedups was built for another ACKS entry; rebuild it")
    _acks_head = revive_log.ACKS_HEAD.pack
    _KIND_ACKS = revive_log.KIND_ACKS
    _MAX_RECORD_OFFSETS = revive_log.MAX_RECORD_OFFSETS

    _make_ack = acks.BatchAck._make
    _decode_bitset = acks.decode_bitset
    _retry_topic = acks.pop_retry_topic
    _pure = PURE
    _bound = True
    return 0


cdef object _pure_acks_entry(queue_id, seq, committed, offsets):
    if not _bound:
        _bind()
    return _pure["acks_entry"](queue_id, seq, committed, offsets)


# -- ledger.py -------------------------------------------------------------------------------------
def take_run(dict inflight, list offsets, pop_time):
    """Remove ``offsets`` from ``inflight`` and return their one ck when all are in flight under it
    (twin of ``rocketpy.broker.pop.ledger.take_run``)."""
    cdef Py_ssize_t n = PyList_GET_SIZE(offsets), i
    cdef long long o, previous
    cdef PyObject* ck
    if n == 0:
        return None
    key = <object>PyList_GET_ITEM(offsets, 0)
    ck = PyDict_GetItem(inflight, key)
    if ck == NULL:
        return None
    first = <object>ck
    if first.pop_time != pop_time or first.reviving:
        return None
    if not _as_i64(key, &previous):
        if not _bound:
            _bind()
        return _pure["take_run"](inflight, offsets, pop_time)
    previous -= 1
    for i in range(n):
        key = <object>PyList_GET_ITEM(offsets, i)
        if not _as_i64(key, &o):
            if not _bound:
                _bind()
            return _pure["take_run"](inflight, offsets, pop_time)
        if o <= previous or PyDict_GetItem(inflight, key) != <PyObject*>first:
            return None
        previous = o
    for i in range(n):
        PyDict_DelItem(inflight, <object>PyList_GET_ITEM(offsets, i))
    return first


def drop_done(order, dict inflight):
    """Drop the offsets no longer in flight from the front of ``order`` (twin of
    ``rocketpy.broker.pop.ledger.drop_done``)."""
    popleft = None
    while order:
        if PyDict_Contains(inflight, order[0]):
            return
        if popleft is None:
            popleft = order.popleft
        popleft()


# -- revive_log.py ---------------------------------------------------------------------------------
def acks_entry(queue_id, seq, committed, list offsets):
    """One ACKS record entry (twin of ``rocketpy.broker.pop.revive_log.acks_entry``)."""
    cdef Py_ssize_t n = PyList_GET_SIZE(offsets), i
    cdef long long qid, s, c, base, o, delta
    cdef bytes out
    cdef unsigned char* p
    if (n == 0 or n > 0xFFFF or not _as_i64(queue_id, &qid) or not _as_i64(seq, &s)
            or not _as_i64(committed, &c) or qid < -2147483648 or qid > 2147483647):
        return _pure_acks_entry(queue_id, seq, committed, offsets)
    base = 0
    for i in range(n):
        if not _as_i64(<object>PyList_GET_ITEM(offsets, i), &o):
            return _pure_acks_entry(queue_id, seq, committed, offsets)
        if i == 0 or o < base:
            base = o
    if base < 0:
        return _pure_acks_entry(queue_id, seq, committed, offsets)
    out = PyBytes_FromStringAndSize(NULL, ACKS_ENTRY_SIZE + 4 * n)
    p = <unsigned char*>PyBytes_AS_STRING(out)
    _put_u32(p, <unsigned int>qid)
    _put_u64(p + 4, <unsigned long long>s)
    _put_u64(p + 12, <unsigned long long>c)
    _put_u64(p + 20, <unsigned long long>base)
    p[28] = <unsigned char>(n >> 8)
    p[29] = <unsigned char>n
    p += ACKS_ENTRY_SIZE
    for i in range(n):
        _as_i64(<object>PyList_GET_ITEM(offsets, i), &o)
        if o - base > 0xFFFFFFFF:
            return _pure_acks_entry(queue_id, seq, committed, offsets)
        _put_u32(p, <unsigned int>(o - base))
        p += 4
    return out


def encode_acks(group, topic, list entries, reason=0):
    """ACKS record bodies of ``entries`` (twin of ``rocketpy.broker.pop.revive_log.encode_acks``):
    here when they make one record (names and counts within their fields, at most
    ``MAX_RECORD_OFFSETS`` offsets in all); anything else by the pure twin, which splits them."""
    if not _bound:
        _bind()
    cdef Py_ssize_t i, n = PyList_GET_SIZE(entries), total = 0
    if type(group) is not str or type(topic) is not str or type(reason) is not int or n > 0xFFFF:
        return _pure["encode_acks"](group, topic, entries, reason)
    g = (<str>group).encode()
    t = (<str>topic).encode()
    if len(g) > 0xFFFF or len(t) > 0xFFFF or not 0 <= reason <= 0xFF:
        return _pure["encode_acks"](group, topic, entries, reason)
    cdef list parts = [None, g, t]
    for i in range(n):
        entry = <object>PyList_GET_ITEM(entries, i)
        if type(entry) is not tuple or PyTuple_GET_SIZE(entry) != 4:
            return _pure["encode_acks"](group, topic, entries, reason)
        offsets = <object>PyTuple_GET_ITEM(entry, 3)
        if type(offsets) is not list:
            return _pure["encode_acks"](group, topic, entries, reason)
        if not PyList_GET_SIZE(offsets):
            continue  # no part (the pure twin's loop takes none either)
        total += PyList_GET_SIZE(offsets)
        if total > _MAX_RECORD_OFFSETS:
            return _pure["encode_acks"](group, topic, entries, reason)
        parts.append(acks_entry(<object>PyTuple_GET_ITEM(entry, 0), <object>PyTuple_GET_ITEM(entry, 1),
                                <object>PyTuple_GET_ITEM(entry, 2), offsets))
    if len(parts) == 3:
        return []
    parts[0] = _acks_head(_KIND_ACKS, reason, len(g), len(t), len(parts) - 3)
    return [b"".join(parts)]


# -- acks.py ---------------------------------------------------------------------------------------
def offsets_of(start, tuple bits):
    """``start + i`` for each ``i`` of ``bits`` (twin of ``rocketpy.broker.pop.acks.offsets_of``)."""
    return [start + i for i in bits]


cdef inline bint _short_str(object v, Py_ssize_t most):
    return type(v) is str and len(<str>v) <= most


def read_acks(dict doc):
    """The acks of a decoded BatchAckMessageRequestBody in its usual form, or None (twin of
    ``rocketpy.broker.pop.acks.read_acks``)."""
    if not _bound:
        _bind()
    broker = doc.get("brokerName")
    if broker is not None and not _short_str(broker, MAX_FIELD_CHARS):
        return None
    acks = doc.get("acks")
    if type(acks) is not list:
        return None
    cdef list items = <list>acks
    cdef Py_ssize_t n = PyList_GET_SIZE(items), i
    if n == 0 or n > MAX_BATCH_ACKS:
        return None
    cdef list out = []
    cdef dict e
    cdef PyObject* fields[9]
    cdef int k
    for i in range(n):
        entry = <object>PyList_GET_ITEM(items, i)
        if type(entry) is not dict:
            return None
        e = <dict>entry
        for k in range(9):
            fields[k] = PyDict_GetItem(e, _KEYS[k])
            if fields[k] == NULL:
                return None
        c = <object>fields[0]
        t = <object>fields[1]
        r = <object>fields[2]
        b = <object>fields[8]
        if not (_short_str(c, MAX_FIELD_CHARS) and _short_str(t, MAX_FIELD_CHARS)
                and _short_str(r, MAX_FIELD_CHARS) and _short_str(b, MAX_BATCH_ACK_BITS)):
            return None
        for k in range(3, 8):
            if type(<object>fields[k]) is not int:
                return None
        bits = _canonical_bits(<str>b)
        if bits is None:  # anything but canonical base64 within the width: the pure function decides
            try:
                bits = _decode_bitset(b)
            except ValueError:
                return None
        out.append(_make_ack((c, t, r == "1", <object>fields[3], <object>fields[4], <object>fields[5],
                              <object>fields[6], <object>fields[7], bits)))
    return out


cdef tuple _KEYS = ("c", "t", "r", "so", "q", "rq", "pt", "it", "b")


cdef inline int _b64_value(unsigned char c) noexcept nogil:
    """The 6-bit value of a base64 character of the standard alphabet, else -1."""
    if 65 <= c <= 90:  # A-Z
        return c - 65
    if 97 <= c <= 122:  # a-z
        return c - 71
    if 48 <= c <= 57:  # 0-9
        return c + 4
    if c == 43:  # +
        return 62
    if c == 47:  # /
        return 63
    return -1


cdef object _canonical_bits(str text):
    """``decode_bitset(text)`` when ``text`` is canonical base64 (groups of 4 characters of the
    standard alphabet, at most two ``=`` at its end) no wider than ``MAX_BATCH_ACK_BITS``: the set
    bits, lowest first, as its pure twin gives them; None for anything else (the pure function
    then decides, and raises where it does)."""
    cdef Py_ssize_t n = len(text), pad = 0, i, k, m = 0
    cdef const unsigned char* p
    cdef unsigned char raw[MAX_BITSET_BYTES + 3]
    cdef unsigned int acc
    cdef int v, j
    if n == 0 or n % 4 or not PyUnicode_IS_ASCII(text) or n // 4 * 3 > MAX_BITSET_BYTES + 2:
        return None
    p = <const unsigned char*>PyUnicode_DATA(text)
    while pad < 2 and p[n - 1 - pad] == 61:  # '='
        pad += 1
    for i in range(0, n, 4):
        acc = 0
        for k in range(4):
            if i + k >= n - pad:
                v = 0
            else:
                v = _b64_value(p[i + k])
                if v < 0:
                    return None
            acc = (acc << 6) | <unsigned int>v
        raw[m] = (acc >> 16) & 0xFF
        raw[m + 1] = (acc >> 8) & 0xFF
        raw[m + 2] = acc & 0xFF
        m += 3
    m -= pad
    if m * 8 > MAX_BATCH_ACK_BITS:
        return None
    cdef list out = []
    for i in range(m):
        if raw[i]:
            for j in range(8):
                if raw[i] >> j & 1:
                    out.append(i * 8 + j)
    return tuple(out)


cdef object _take_plain(object ledger, object q, list offsets, object pop_time):
    """``ledger.ack_many(q, offsets, pop_time)`` of a queue that is not orderly when every offset is
    in flight under one pop (``take_run``): ``{seq: offsets}``; None (nothing changed) otherwise."""
    first = take_run(q.inflight, offsets, pop_time)
    if first is None:
        return None
    cdef Py_ssize_t n = PyList_GET_SIZE(offsets)
    first.open -= n
    seq = first.seq
    if not first.open:
        ledger._open.pop(seq, None)
    ledger.inflight_total -= n
    return {seq: offsets}


cdef int _commit(object service, object q) except -1:
    """``service.commit(q)``, with ``PopQueue.low_water`` in C when nothing is acked ahead."""
    if q.acked_ahead:
        service.commit(q)
        return 0
    order = q._order
    drop_done(order, q.inflight)
    low = order[0] if order else q.next_offset
    if low != q.committed:
        q.committed = low
        key = q.key
        service.offsets.commit_offset(<object>PyTuple_GET_ITEM(key, 0), <object>PyTuple_GET_ITEM(key, 1),
                                      <object>PyTuple_GET_ITEM(key, 2), low)
    return 0


def commit_queues(service, list queues):
    """``service.commit(q)`` of each of ``queues`` (twin of
    ``rocketpy.broker.pop.acks.commit_queues``)."""
    cdef Py_ssize_t i
    for i in range(PyList_GET_SIZE(queues)):
        _commit(service, <object>PyList_GET_ITEM(queues, i))
    return None


def apply_batch_acks(service, list acks):
    """The bookkeeping of a batch ack's entries (twin of
    ``rocketpy.broker.pop.acks.apply_batch_acks``)."""
    if not _bound:
        _bind()
    cdef list done = []
    cdef Py_ssize_t acked = 0, asked = 0, n, i
    cdef dict counts = service.counts
    cdef PyObject* found
    ledger = service.ledger
    cdef dict queues = ledger.queues
    for i in range(PyList_GET_SIZE(acks)):
        a = <object>PyList_GET_ITEM(acks, i)
        group = a.group
        topic = _retry_topic(group, a.topic) if a.retry else a.topic
        found = PyDict_GetItem(queues, (group, topic, a.queue_id))
        offsets = offsets_of(a.start_offset, a.bits)
        asked += PyList_GET_SIZE(offsets)
        if found == NULL:
            continue
        q = <object>found
        by_seq = None if q.orderly else _take_plain(ledger, q, offsets, a.pop_time)
        if by_seq is None:
            by_seq = ledger.ack_many(q, offsets, a.pop_time)
        if not by_seq:
            continue
        n = 0
        for seq, offs in (<dict>by_seq).items():
            done.append((q, seq, offs))
            n += len(offs)
        acked += n
        _commit(service, q)
        found = PyDict_GetItem(counts, (group, topic))
        if found != NULL:
            (<list>found)[1] += n
        else:
            service._count(group, topic, n, 0)
        if q.orderly:
            service._maybe_unblocked(q)
    return done, acked, asked
