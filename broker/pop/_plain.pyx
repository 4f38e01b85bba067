# cython: language_level=3, initializedcheck=False, cdivision=True
"""C twin of a plain pop's read of its topic: ``read_plain`` (``rocketpy/broker/pop/plain.py``).

The queue loop, the checks of a queue's common state, the rest count of the queues left, the
ledger's record of the pop (``PopLedger.pop``'s hot path: the ck, its offsets in flight, the open
table and the timer heap) and the answer's entry run here; the store's one-view read is
``get_now`` (``rocketpy.broker.store.reads``: compiled in ``_storepath``), and a queue in any other
state goes to ``PopReader._read_queue`` as in the pure twin. What is read from the pure modules is
bound on the first call (``_bind``): ``rocketpy._accel`` loads this module before they exist.

The signature is declared in ``_plain.pyi`` (mypy checks it against the pure twin, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject

__all__ = ["read_plain"]

cdef bint _bound = False
cdef object _reads = None  # rocketpy.broker.store.reads (its get_now is the active twin)
cdef object _Ck = None
cdef object _PoppedQueue = None
cdef object _heappush = None
cdef object _NORMAL = None
cdef Py_ssize_t _HEAP_SLACK = 0
cdef int _PERM_READ = 0


cdef int _bind() except -1:
    global _bound, _reads, _Ck, _PoppedQueue, _heappush, _NORMAL, _HEAP_SLACK, _PERM_READ
    import heapq

    from rocketpy.broker.pop import ledger, reader, types
    from rocketpy.broker.store import reads
    from rocketpy.perm import PERM_READ

    _reads = reads
    _Ck = ledger.Ck
    _PoppedQueue = types.PoppedQueue
    _heappush = heapq.heappush
    _NORMAL = reader.NORMAL_TOPIC  # rocketpy.protocol.receipt's, as the reader has it
    _HEAP_SLACK = ledger.HEAP_SLACK
    _PERM_READ = PERM_READ
    _bound = True
    return 0


cdef object _rest(dict queues, dict cqs, str group, str topic, list qids, Py_ssize_t i):
    """``PopReader._rest(group, topic, qids[i:])``."""
    cdef object rest = 0
    cdef Py_ssize_t k, n = PyList_GET_SIZE(qids)
    cdef PyObject* found
    for k in range(i, n):
        qid = <object>PyList_GET_ITEM(qids, k)
        found = PyDict_GetItem(queues, (group, topic, qid))
        if found == NULL:
            continue
        q = <object>found
        found = PyDict_GetItem(cqs, (topic, qid))
        if found == NULL:
            continue
        cq_next = (<object>found).next_offset
        q_next = q.next_offset
        if cq_next > q_next:
            rest += cq_next - q_next
    return rest


cdef object _pop(object ledger, object q, list offsets, object end, object pop_time, object invisible_ms,
                 object floor, object start):
    """``ledger.pop(q, offsets, end, pop_time, invisible_ms, floor, order=False, start_offset=start)``
    of a queue that is not orderly."""
    cdef Py_ssize_t n = PyList_GET_SIZE(offsets)
    seq = ledger.next_seq
    ledger.next_seq = seq + 1
    ck = _Ck.__new__(_Ck)  # Ck(q, seq, pop_time, invisible_ms, start, offsets, floor, False) without
    ck.queue = q           # its __init__ frame: every field its __init__ sets
    ck.seq = seq
    ck.pop_time = pop_time
    ck.invisible_ms = invisible_ms
    ck.deadline = pop_time + invisible_ms
    ck.start_offset = start
    ck.end_offset = end
    ck.offsets = offsets
    ck.open = 0
    ck.floor = floor
    ck.reviving = False
    ck.order = False
    ck.unwritten = False
    q_next = q.next_offset
    q.next_offset = max(q_next, end)
    order = q._order
    if not order or <object>PyList_GET_ITEM(offsets, 0) > order[-1]:  # fresh offsets (the hot path)
        q.inflight.update(dict.fromkeys(offsets, ck))
        order.extend(offsets)
        ck.open += n
        ledger.inflight_total += n
    else:
        ledger._hold_each(q, ck, offsets)
    if ck.open:
        opened = ledger._open
        opened[seq] = ck
        heap = ledger._heap
        _heappush(heap, (ck.deadline, seq, ck))
        if len(heap) > 2 * len(opened) + _HEAP_SLACK:
            ledger._maybe_compact()
    return ck


def read_plain(reader, req, out):
    """``reader._read_topic(req, req.topic, req.queue_id, None, out)`` of a plain pop (twin of
    ``rocketpy.broker.pop.plain.read_plain``)."""
    if not _bound:
        _bind()
    topic = req.topic
    tc = reader.topic_config.get(topic)
    if tc is None or not (tc.perm & _PERM_READ) or tc.read_queue_nums <= 0:
        return None
    n = tc.read_queue_nums
    rotor = reader._rotor
    queue_id = req.queue_id
    cdef list qids
    if queue_id >= 0:
        qids = [queue_id]
    else:
        qids = [(rotor + i) % n for i in range(n)]
    result = out.result
    group = req.group
    max_msgs = req.max_msgs
    ledger = reader.ledger
    limits = reader.limits
    store = reader.store
    cdef dict queues = ledger.queues
    cdef dict cqs = store.dispatcher.cqs
    offset_table = reader.offsets
    cdef dict table = offset_table.table
    offsets_key = offset_table.key(topic, group)
    floor = None
    get_now = _reads.get_now
    cl = store.commitlog
    per_queue = limits.per_queue
    total = limits.total
    max_bytes = limits.max_bytes
    touched = out.touched
    cks = out.cks
    cdef Py_ssize_t i, nq = PyList_GET_SIZE(qids)
    cdef PyObject* found
    for i in range(nq):
        qid = <object>PyList_GET_ITEM(qids, i)
        if result.count >= max_msgs:  # full: only count what the other queues hold
            result.rest_num += _rest(queues, cqs, group, topic, qids, i)
            return None
        found = PyDict_GetItem(queues, (group, topic, qid))
        if found == NULL:
            reader._read_queue(req, topic, qid, None, out)
            continue
        q = <object>found
        if q.orderly or q.acked_ahead:
            reader._read_queue(req, topic, qid, None, out)
            continue
        found = PyDict_GetItem(table, offsets_key)
        stored = -1
        if found != NULL:
            stored = (<object>found).get(qid, -1)
        if (
            (stored >= 0 and stored != q.committed)
            or len(q.inflight) >= per_queue
            or ledger.inflight_total >= total
        ):
            reader._read_queue(req, topic, qid, None, out)
            continue
        start = q.next_offset
        found = PyDict_GetItem(cqs, (topic, qid))
        r = get_now(cl, <object>found if found != NULL else None, start, max_msgs - result.count, max_bytes)
        if r is None:  # anything but one view of messages: the full read (nothing changed yet)
            reader._read_queue(req, topic, qid, None, out)
            continue
        stats = store.stats
        stats.get_total += r.message_count
        left = r.max_offset - r.next_begin_offset
        if left > 0:
            result.rest_num += left
        touched.append(q)
        offsets = r.queue_offsets
        if floor is None:
            floor = reader._revive_floor()
        ck = _pop(ledger, q, list(offsets), r.next_begin_offset, result.pop_time, req.invisible_ms, floor,
                  start)
        cks.append((ck, None))
        popped = _PoppedQueue.__new__(_PoppedQueue)
        popped.kind = _NORMAL
        popped.queue_id = qid
        popped.start_offset = start
        popped.offsets = list(offsets)
        popped.counts = None
        parts = r.buffers
        result.queues.append(popped)
        result.parts.extend(parts)
        result.size += sum(map(len, parts))
        result.count += len(popped.offsets)
    return None
