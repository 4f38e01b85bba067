# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of message trace's record writers: ``write_pub``, ``write_before`` and ``write_after``
of ``rocketpy/client/trace.py``.

A traced send writes one record (Pub), a traced consume two a message (SubBefore, SubAfter). These
write the same bytes into the open trace message's body and the same KEYS as the pure twins, with
no Python object made per record: a record's pieces are copied straight into the body (a
``bytearray`` grown by half again when full, trimmed to what was written before the writer
returns), integers written in C, and a record's traced id looked up in KEYS and added when new. The
dispatcher's fields are read once per call and written back before it returns (and around a seal,
which is ``TraceDispatcher._seal`` itself). ``rocketpy._accel`` chooses them or their pure twins.
The constants and helpers they use (``DEFAULT_REGION``, ``NULL``, the request id prefix, the store
host cache, ``SKIPPED``, ``context_code``, the limits) are read from ``rocketpy.client.trace`` the
first time one of them runs (``_bind``), not copied.

The signatures are declared in ``_traceenc.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.dict cimport PyDict_Contains, PyDict_GetItemWithError, PyDict_SetItem
from cpython.dict cimport PyDict_Size
from cpython.float cimport PyFloat_AsDouble
from cpython.list cimport PyList_GET_SIZE
from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_Tailmatch
from libc.string cimport memcpy

from rocketpy._cshared cimport PyUnicode_AsUTF8AndSize, _get, _put_int, _set, _slot_offset


cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc
        char* ob_bytes
        char* ob_start

__all__ = ["write_after", "write_before", "write_pub", "write_sent"]

cdef bint _bound = False
cdef str DEFAULT_REGION = ""
cdef str NULL_TEXT = ""
cdef str REQUEST_PREFIX = ""
cdef str TRACE_SWITCH = ""
cdef str UNIQ_KEY = ""
cdef object _store_host = None
cdef object _context_code = None
cdef object SKIPPED = None
cdef object SEND_OK = None
cdef Py_ssize_t KEYS_CHARS = 0
cdef type _MessageExt = None
cdef type _Message = None
cdef type _Dispatcher = None
cdef type _Stats = None
cdef type _SendResult = None
# a Message's (a sent one's) slots, a SendResult's, the dispatcher's fields a hook touches and its
# stats' counts, read and written in place (``rocketpy._cshared._get`` / ``_set``)
cdef Py_ssize_t _M_TOPIC = -1, _M_PROPS = -1, _M_KEYS = -1, _M_TAGS = -1, _M_BODY = -1, _M_DELAY = -1
cdef long long NORMAL_MSG = 0
cdef object _msg_type_of = None
cdef Py_ssize_t _R_ID = -1, _R_OMID = -1, _R_STATUS = -1
cdef Py_ssize_t _D_BODY = -1, _D_KEYS = -1, _D_KEYS_CHARS = -1, _D_RECORDS = -1, _D_MOST = -1
cdef Py_ssize_t _D_COUNT = -1, _D_SIZE = -1, _D_OPEN = -1, _D_STATS = -1, _D_TOPIC = -1
cdef Py_ssize_t _S_APPENDED = -1, _S_DROPPED = -1
# a MessageExt's slots read in place (``rocketpy._cshared._get``): its own id, properties, keys,
# retry count
cdef Py_ssize_t _ID_AT = -1, _PROPS_AT = -1, _KEYS_AT = -1, _RETRIES_AT = -1
cdef Py_ssize_t BODY_BYTES = 0
cdef const char* HEX = b"0123456789ABCDEF"


cdef int _bind() except -1:
    global _bound, DEFAULT_REGION, NULL_TEXT, REQUEST_PREFIX, TRACE_SWITCH, UNIQ_KEY
    global _store_host, _context_code, SKIPPED, SEND_OK, KEYS_CHARS, BODY_BYTES
    global _MessageExt, _ID_AT, _PROPS_AT, _KEYS_AT, _RETRIES_AT, _Message, _Dispatcher, _Stats, _SendResult
    global _M_TOPIC, _M_PROPS, _M_KEYS, _M_TAGS, _M_BODY, _M_DELAY, _R_ID, _R_OMID, _R_STATUS
    global NORMAL_MSG, _msg_type_of
    global _D_BODY, _D_KEYS, _D_KEYS_CHARS, _D_RECORDS, _D_MOST, _D_COUNT, _D_SIZE, _D_OPEN, _D_STATS, _D_TOPIC
    global _S_APPENDED, _S_DROPPED
    from rocketpy.client import trace
    from rocketpy.client.results import SendResult
    from rocketpy.message import Message, MessageConst, MessageExt

    DEFAULT_REGION = trace.DEFAULT_REGION
    NULL_TEXT = trace.NULL
    REQUEST_PREFIX = trace._REQUEST_PREFIX
    TRACE_SWITCH = MessageConst.TRACE_SWITCH
    UNIQ_KEY = MessageConst.UNIQ_KEY
    _store_host = trace._store_host
    _context_code = trace.context_code
    SKIPPED = trace.SKIPPED
    SEND_OK = trace._SEND_OK
    KEYS_CHARS = trace.BATCH_KEYS_CHARS
    BODY_BYTES = trace.BATCH_BODY_BYTES
    _MessageExt = MessageExt
    _ID_AT = _slot_offset(MessageExt, "_msg_id")
    _PROPS_AT = _slot_offset(MessageExt, "properties")
    _KEYS_AT = _slot_offset(MessageExt, "keys")
    _RETRIES_AT = _slot_offset(MessageExt, "reconsume_times")
    _Message, _SendResult, _Dispatcher, _Stats = Message, SendResult, trace.TraceDispatcher, trace.TraceStats
    _M_TOPIC, _M_PROPS = _slot_offset(Message, "topic"), _slot_offset(Message, "properties")
    _M_KEYS, _M_TAGS, _M_BODY = _slot_offset(Message, "keys"), _slot_offset(Message, "tags"), _slot_offset(Message, "body")
    _M_DELAY = _slot_offset(Message, "delay_level")
    NORMAL_MSG, _msg_type_of = trace.NORMAL_MSG, trace.msg_type_of
    _R_ID, _R_OMID = _slot_offset(SendResult, "msg_id"), _slot_offset(SendResult, "offset_msg_id")
    _R_STATUS = _slot_offset(SendResult, "status")
    D = trace.TraceDispatcher
    _D_BODY, _D_KEYS, _D_KEYS_CHARS = _slot_offset(D, "_body"), _slot_offset(D, "_keys"), _slot_offset(D, "_keys_chars")
    _D_RECORDS, _D_MOST, _D_COUNT = _slot_offset(D, "_records"), _slot_offset(D, "batch_records"), _slot_offset(D, "_count")
    _D_SIZE, _D_OPEN, _D_STATS = _slot_offset(D, "buffer_size"), _slot_offset(D, "_open"), _slot_offset(D, "stats")
    _D_TOPIC = _slot_offset(D, "trace_topic")
    _S_APPENDED, _S_DROPPED = _slot_offset(trace.TraceStats, "appended"), _slot_offset(trace.TraceStats, "dropped")
    _bound = True
    return 0


cdef inline str _text(object value):
    """``value`` as an f-string writes it."""
    return value if type(value) is str else format(value)


cdef class _Open:
    """The open trace message of one dispatcher while a writer runs: its body (with ``used`` of its
    ``room`` bytes written), KEYS and counts, read from the dispatcher and written back (``done``).

    The body grows by half again when full; trimmed to what was written when the writer returns,
    it keeps its allocation (a ``bytearray`` only gives memory back when cut below half of it),
    which the next writer writes into."""

    cdef object d
    cdef bytearray body
    cdef dict keys
    cdef Py_ssize_t used, room, keys_chars, records, most

    cdef int load(self, object d) except -1:
        self.d = d
        self.body = _read(d, _Dispatcher, _D_BODY, "_body")
        self.keys = _read(d, _Dispatcher, _D_KEYS, "_keys")
        self.keys_chars = _read(d, _Dispatcher, _D_KEYS_CHARS, "_keys_chars")
        self.records = _read(d, _Dispatcher, _D_RECORDS, "_records")
        self.most = _read(d, _Dispatcher, _D_MOST, "batch_records")
        self.used = self.room = PyByteArray_GET_SIZE(self.body)
        # write into what the body has allocated beyond its end (sizing it up to that costs no copy)
        cdef PyByteArrayObject* b = <PyByteArrayObject*>self.body
        cdef Py_ssize_t spare = b.ob_alloc - 1 - (b.ob_start - b.ob_bytes)
        if spare > self.used:
            PyByteArray_Resize(self.body, spare)
            self.room = spare
        return 0

    cdef int done(self) except -1:
        """Write the counts back; the body keeps only what was written."""
        if self.room != self.used:
            PyByteArray_Resize(self.body, self.used)
            self.room = self.used
        d = self.d
        _write(d, _Dispatcher, _D_KEYS_CHARS, "_keys_chars", self.keys_chars)
        _write(d, _Dispatcher, _D_RECORDS, "_records", self.records)
        return 0

    cdef int release(self) except -1:
        """Drop the references to the dispatcher and its message (a kept ``_Open`` between calls)."""
        self.d = self.body = self.keys = None
        return 0

    cdef int seal(self) except -1:
        self.done()
        self.d._seal()
        self.load(self.d)
        return 0

    cdef char* grow(self, Py_ssize_t n) except NULL:
        """Room for ``n`` more bytes at the end of what is written; returns where they go."""
        cdef Py_ssize_t need = self.used + n, room
        if need > self.room:
            room = self.room + self.room // 2 + 256
            if room < need:
                room = need
            PyByteArray_Resize(self.body, room)
            self.room = room
        cdef char* at = PyByteArray_AS_STRING(self.body) + self.used
        self.used = need
        return at

    cdef int keys_for(self, str msg_id, object key_text) except -1:
        """Make room in KEYS for a record naming ``msg_id`` and its message's ``key_text`` (sealing
        first when the keys new to it would pass the limit), and add them."""
        cdef Py_ssize_t n
        if key_text is None:  # the usual record: its id alone
            n = 0 if not msg_id or PyDict_Contains(self.keys, msg_id) else len(msg_id) + 1
            if self.records and self.keys_chars + n > KEYS_CHARS:
                self.seal()
                n = len(msg_id) + 1 if msg_id else 0
            if n:
                PyDict_SetItem(self.keys, msg_id, None)
                self.keys_chars += n
            return 0
        fresh = [k for k in dict.fromkeys([msg_id] + (<str>key_text).split(" ")) if k]
        new = [k for k in fresh if not PyDict_Contains(self.keys, k)]
        n = sum(map(len, new)) + len(new)
        if self.records and self.keys_chars + n > KEYS_CHARS:
            self.seal()
            new = fresh
            n = sum(map(len, new)) + len(new)
        for k in new:
            PyDict_SetItem(self.keys, k, None)
        self.keys_chars += n
        return 0

    cdef int keys_known(self) except -1:
        """``keys_for`` of a record whose keys the message holds already (none to add)."""
        if self.records and self.keys_chars > KEYS_CHARS:
            self.seal()
        return 0

    cdef int counted(self) except -1:
        """One more record written; seal the message when it is full."""
        self.records += 1
        if self.records >= self.most or self.used >= BODY_BYTES:
            self.seal()
        return 0


cdef inline char* _put(char* at, const char* src, Py_ssize_t n) noexcept:
    memcpy(at, src, n)
    return at + n


cdef inline char* _then(char* at, const char* src, Py_ssize_t n) noexcept:
    """The field separator, then ``src[:n]``; returns where the next byte goes."""
    at[0] = 1
    memcpy(at + 1, src, n)
    return at + 1 + n


cdef inline object _read(object obj, type cls, Py_ssize_t at, str name):
    """``getattr(obj, name)``, read in place when ``obj`` is a ``cls`` (not a subclass's)."""
    return _get(obj, at if type(obj) is cls else -1, name)


cdef inline int _write(object obj, type cls, Py_ssize_t at, str name, object value) except -1:
    """``setattr(obj, name, value)``, written in place when ``obj`` is a ``cls``."""
    return _set(obj, at if type(obj) is cls else -1, name, value)


cdef inline object _field(object m, Py_ssize_t at, str name):
    """A consumed message's ``getattr(m, name)``."""
    return _read(m, _MessageExt, at, name)


cdef bint _takes(object d, Py_ssize_t n) except -1:
    """``TraceDispatcher._takes(n)``: whether ``n`` more records fit the buffer (counted as appended),
    else they are dropped (counted)."""
    if type(d) is not _Dispatcher:
        return d._takes(n)
    stats = _get(d, _D_STATS, "stats")
    cdef Py_ssize_t count = _get(d, _D_COUNT, "_count")
    if not _get(d, _D_OPEN, "_open") or count + n > <Py_ssize_t>_get(d, _D_SIZE, "buffer_size"):
        _write(stats, _Stats, _S_DROPPED, "dropped", _read(stats, _Stats, _S_DROPPED, "dropped") + n)
        return False
    _set(d, _D_COUNT, "_count", count + n)
    _write(stats, _Stats, _S_APPENDED, "appended", _read(stats, _Stats, _S_APPENDED, "appended") + n)
    return True


cdef inline bint _truthy(object value) except -1:
    """``bool(value)``, without a call for the usual types (a str, a dict, a list, None)."""
    if value is None:
        return False
    if type(value) is str:
        return PyUnicode_GET_LENGTH(value) != 0
    if type(value) is dict:
        return PyDict_Size(value) != 0
    if type(value) is list:
        return PyList_GET_SIZE(value) != 0
    return bool(value)


cdef inline object _property(object props, str name):
    """``props.get(name)`` of a message's properties (None when it has none)."""
    if type(props) is dict:
        found = PyDict_GetItemWithError(props, name)
        return None if found is NULL else <object>found
    return props.get(name) if _truthy(props) else None


cdef inline str _msg_id(object m, object props):
    """``MessageExt.msg_id`` (its own id, else ``UNIQ_KEY``, else the property's offset id)."""
    mid = _field(m, _ID_AT, "_msg_id")
    if not _truthy(mid):
        mid = _property(props, UNIQ_KEY)
        if not _truthy(mid):
            mid = m.msg_id
    return _text(mid)


cdef inline bint _switched_off(object props) except -1:
    """``trace._skip`` of a message with these properties: ``TRACE_ON=false``."""
    return _truthy(props) and _property(props, TRACE_SWITCH) == "false"


cdef inline bint _skip(object m) except -1:
    return _switched_off(_field(m, _PROPS_AT, "properties"))


cdef _Open _PUB = _Open()  # write_pub's (one record a call; writers never run inside each other)
cdef str _host_key = None  # the host part of the last offset msg id, and its ip:port
cdef str _host_text = None


cdef str _host_of(str omid):
    """The ``ip:port`` an offset msg id names (``trace._store_host``), the last one remembered."""
    global _host_key, _host_text
    if _host_key is not None and PyUnicode_Tailmatch(omid, _host_key, 0, 16, -1) == 1:
        return _host_text
    host = _store_host(omid)
    if host is not None:
        _host_key, _host_text = omid[:16], host
    return host


def write_pub(d, str group, msg, result, long long begin_ms, long long cost_ms, long long msg_type):
    """Twin of ``rocketpy.client.trace.write_pub``: the Pub record of one stored message."""
    if not _bound:
        _bind()
    return _write_pub(d, group, msg, result, begin_ms, cost_ms, msg_type)


def write_sent(d, str group, msg, result, double begin, double end):
    """Twin of ``rocketpy.client.trace.write_sent``: ``write_pub`` of a message ``Producer.send``
    stored, its type ``msg_type_of(msg, 0)`` (the usual message's without a call)."""
    if not _bound:
        _bind()
    cdef long long msg_type = NORMAL_MSG
    if _truthy(_read(msg, _Message, _M_PROPS, "properties")) or _truthy(_read(msg, _Message, _M_DELAY, "delay_level")):
        msg_type = _msg_type_of(msg, 0)
    return _write_pub(d, group, msg, result, <long long>(begin * 1000), <long long>((end - begin) * 1000), msg_type)


cdef object _write_pub(d, str group, msg, result, long long begin_ms, long long cost_ms, long long msg_type):
    topic = _read(msg, _Message, _M_TOPIC, "topic")
    if topic == _read(d, _Dispatcher, _D_TOPIC, "trace_topic") or _switched_off(
        _read(msg, _Message, _M_PROPS, "properties")
    ):
        return False
    if not _takes(d, 1):
        return True
    keys = _read(msg, _Message, _M_KEYS, "keys")
    tags = _read(msg, _Message, _M_TAGS, "tags")
    msg_id = _read(result, _SendResult, _R_ID, "msg_id")
    omid = _read(result, _SendResult, _R_OMID, "offset_msg_id")
    host = _host_of(omid) if type(omid) is str and _truthy(omid) else None
    cdef str key_text = " ".join(keys) if _truthy(keys) else None
    cdef str s_topic = _text(topic), s_id = _text(msg_id)
    cdef str s_tags = NULL_TEXT if tags is None else _text(tags)
    cdef str s_keys = NULL_TEXT if key_text is None else key_text
    cdef str s_host = NULL_TEXT if host is None else _text(host)
    cdef str s_omid = NULL_TEXT if omid is None else _text(omid)
    cdef Py_ssize_t n_region, n_group, n_topic, n_id, n_tags, n_keys, n_host, n_omid
    cdef const char* p_region = PyUnicode_AsUTF8AndSize(DEFAULT_REGION, &n_region)
    cdef const char* p_group = PyUnicode_AsUTF8AndSize(group, &n_group)
    cdef const char* p_topic = PyUnicode_AsUTF8AndSize(s_topic, &n_topic)
    cdef const char* p_id = PyUnicode_AsUTF8AndSize(s_id, &n_id)
    cdef const char* p_tags = PyUnicode_AsUTF8AndSize(s_tags, &n_tags)
    cdef const char* p_keys = PyUnicode_AsUTF8AndSize(s_keys, &n_keys)
    cdef const char* p_host = PyUnicode_AsUTF8AndSize(s_host, &n_host)
    cdef const char* p_omid = PyUnicode_AsUTF8AndSize(s_omid, &n_omid)
    cdef bint ok = _read(result, _SendResult, _R_STATUS, "status") is SEND_OK
    cdef char nums[96]
    cdef Py_ssize_t n_begin = _put_int(nums, begin_ms)
    cdef Py_ssize_t n_len = _put_int(nums + 24, len(_read(msg, _Message, _M_BODY, "body")))
    cdef Py_ssize_t n_cost = _put_int(nums + 48, cost_ms)
    cdef Py_ssize_t n_type = _put_int(nums + 72, msg_type)
    cdef _Open o = _PUB
    cdef char* at
    o.load(d)
    try:
        o.keys_for(s_id, key_text)
        at = o.grow(
            4 + n_begin + 1 + n_region + 1 + n_group + 1 + n_topic + 1 + n_id + 1 + n_tags + 1 + n_keys + 1
            + n_host + 1 + n_len + 1 + n_cost + 1 + n_type + 1 + n_omid + 1 + (4 if ok else 5) + 1
        )
        at = _put(at, b"Pub\x01", 4)
        at = _put(at, nums, n_begin)
        at = _then(at, p_region, n_region)
        at = _then(at, p_group, n_group)
        at = _then(at, p_topic, n_topic)
        at = _then(at, p_id, n_id)
        at = _then(at, p_tags, n_tags)
        at = _then(at, p_keys, n_keys)
        at = _then(at, p_host, n_host)
        at = _then(at, nums + 24, n_len)
        at = _then(at, nums + 48, n_cost)
        at = _then(at, nums + 72, n_type)
        at = _then(at, p_omid, n_omid)
        at[0] = 1
        if ok:
            _put(at + 1, b"true\x02", 5)
        else:
            _put(at + 1, b"false\x02", 6)
        o.counted()
        o.done()
    finally:
        o.release()
    return True


def write_before(d, str group, long long now_ms, long long seq, list chunks):
    """Twin of ``rocketpy.client.trace.write_before``: a SubBefore record per traced message of one
    listener runner call."""
    if not _bound:
        _bind()
    cdef list traced = chunks, chunk, ids = [], key_texts = None
    cdef Py_ssize_t i, j, n = 0
    for chunk in chunks:
        for m in chunk:
            if _skip(m):
                traced = [[m for m in c if not _skip(m)] for c in chunks]
                break
        else:
            n += len(chunk)
            continue
        break
    if traced is not chunks:
        n = 0
        for chunk in traced:
            n += len(chunk)
    cdef bint write = n and _takes(d, n)
    # the record's head: "SubBefore\x01{now}\x01{region}\x01{group}\x01{prefix}{seq:012X}"
    cdef bytes head = f"SubBefore\x01{now_ms}\x01{DEFAULT_REGION}\x01{group}\x01{REQUEST_PREFIX}{seq:012X}".encode()
    cdef const char* p_head = head
    cdef Py_ssize_t n_head = len(head), n_id, n_keys, n_null
    cdef const char* p_null = PyUnicode_AsUTF8AndSize(NULL_TEXT, &n_null)
    cdef const char* p_id
    cdef const char* p_keys
    cdef char hexes[16]
    cdef char nums[24]
    cdef int n_hex, n_retry
    cdef str msg_id
    cdef object k, keys, props
    cdef char* at
    cdef _Open o = _Open()
    cdef dict first_keys = None
    if write:
        o.load(d)
        first_keys = o.keys
    j = 0
    for i in range(len(traced)):
        chunk = <list>traced[i]
        n_hex = _chunk_hex(hexes, i)
        for m in chunk:
            props = _field(m, _PROPS_AT, "properties")
            msg_id = _msg_id(m, props)
            ids.append(msg_id)
            keys = _field(m, _KEYS_AT, "keys")
            k = None
            if _truthy(keys):
                k = " ".join(keys)
                if key_texts is None:
                    key_texts = [None] * j
            if key_texts is not None:
                key_texts.append(k)
            j += 1
            if not write:
                continue
            n_retry = _put_int(nums, _field(m, _RETRIES_AT, "reconsume_times"))
            p_id = PyUnicode_AsUTF8AndSize(msg_id, &n_id)
            if k is None:
                p_keys, n_keys = p_null, n_null
            else:
                p_keys = PyUnicode_AsUTF8AndSize(k, &n_keys)
            o.keys_for(msg_id, k)
            at = o.grow(n_head + n_hex + 1 + n_id + 1 + n_retry + 1 + n_keys + 1)
            at = _put(at, p_head, n_head)
            at = _put(at, hexes, n_hex)
            at = _then(at, p_id, n_id)
            at = _then(at, nums, n_retry)
            at = _then(at, p_keys, n_keys)
            at[0] = 2
            o.counted()
    if write:
        o.done()
    return (seq, traced, ids, key_texts, first_keys if write and o.keys is first_keys else None)


cdef inline int _chunk_hex(char* out, Py_ssize_t i) noexcept:
    """The chunk part of a request id at ``out``: ``i`` in upper hex, at least 4 digits (``{i:04X}``);
    returns how many."""
    cdef int n = 4, k
    while n < 16 and (i >> (4 * n)):
        n += 1
    for k in range(n):
        out[n - 1 - k] = HEX[(i >> (4 * k)) & 15]
    return n


def write_after(d, str group, list chunks, tuple token, list results, list times, tuple ok_statuses):
    """Twin of ``rocketpy.client.trace.write_after``: a SubAfter record per consumed traced message
    of one listener runner call."""
    if not _bound:
        _bind()
    seq, traced_obj, ids_obj, key_texts_obj, indexed = token
    cdef list traced = traced_obj, ids = ids_obj, chunk
    cdef object key_texts = key_texts_obj
    if len(results) != len(traced):
        raise ValueError(f"{len(results)} results for {len(traced)} chunks")
    cdef Py_ssize_t i, j, jj, size, n = 0, given
    for i in range(len(traced)):
        if results[i] is not SKIPPED:
            n += len(<list>traced[i])
    if not n or not _takes(d, n):
        return
    cdef bytes base = f"SubAfter\x01{REQUEST_PREFIX}{seq:012X}".encode()
    cdef const char* p_base = base
    cdef Py_ssize_t n_base = len(base), n_id, n_keys, n_null, n_group
    cdef const char* p_null = PyUnicode_AsUTF8AndSize(NULL_TEXT, &n_null)
    cdef const char* p_group = PyUnicode_AsUTF8AndSize(group, &n_group)
    cdef const char* p_id
    cdef const char* p_keys
    cdef char hexes[16]
    cdef char nums[72]  # the cost, the context code, the end in ms
    cdef int n_hex, n_cost, n_code = 0, n_end = 0
    cdef double begin, end
    cdef long long end_ms, last_end_ms = -1
    cdef bint ok = False, same = traced is chunks
    cdef object result, last = SKIPPED, k
    cdef char* at
    cdef str msg_id
    cdef _Open o = _Open()
    o.load(d)
    j = 0
    for i in range(len(traced)):
        chunk = <list>traced[i]
        size = len(chunk)
        result = results[i]
        if result is SKIPPED or not size:
            j += size
            continue
        if result is not last:  # the context code of each result once (a call's are mostly alike)
            ok = False
            for s in ok_statuses:
                if result is s:
                    ok = True
                    break
            n_code = _put_int(nums + 24, _context_code(result, ok))
            last = result
        begin = PyFloat_AsDouble(times[i])
        end = PyFloat_AsDouble(times[i + 1])
        given = size if same else len(<list>chunks[i])
        n_cost = _put_int(nums, <long long>((end - begin) * 1000 / (given if given > 1 else 1)))
        end_ms = <long long>(end * 1000)
        if end_ms != last_end_ms:  # (chunks a few µs long mostly end in the same ms)
            n_end = _put_int(nums + 48, end_ms)
            last_end_ms = end_ms
        n_hex = _chunk_hex(hexes, i)
        for jj in range(j, j + size):
            msg_id = <str>ids[jj]
            k = None if key_texts is None else (<list>key_texts)[jj]
            p_id = PyUnicode_AsUTF8AndSize(msg_id, &n_id)
            if k is None:
                p_keys, n_keys = p_null, n_null
            else:
                p_keys = PyUnicode_AsUTF8AndSize(k, &n_keys)
            if o.keys is indexed:  # its SubBefore's KEYS are in this message already
                o.keys_known()
            else:
                o.keys_for(msg_id, k)
            # "{base}{hex}\x01{id}\x01{cost}\x01{true|false}\x01{keys}\x01{code}\x01{end}\x01{group}\x02"
            at = o.grow(
                n_base + n_hex + 1 + n_id + 1 + n_cost + (6 if ok else 7) + n_keys + 1 + n_code + 1 + n_end
                + 1 + n_group + 1
            )
            at = _put(at, p_base, n_base)
            at = _put(at, hexes, n_hex)
            at = _then(at, p_id, n_id)
            at = _then(at, nums, n_cost)
            if ok:
                at = _put(at, b"\x01true\x01", 6)
            else:
                at = _put(at, b"\x01false\x01", 7)
            at = _put(at, p_keys, n_keys)
            at = _then(at, nums + 24, n_code)
            at = _then(at, nums + 48, n_end)
            at = _then(at, p_group, n_group)
            at[0] = 2
            o.counted()
        j += size
    o.done()
