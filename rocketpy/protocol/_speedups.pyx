# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of the request header and body checks (``check_ext`` and ``check_doc`` of
``rocketpy/protocol/shape.py``) and of the offset lists of a POP answer's header (``format_start_offsets`` / ``format_msg_offsets`` of
``rocketpy/protocol/receipt.py``).

Every request's ``ext`` passes the check before its handler runs, so it is on every request's
path. The common case (a dict of at most ``MAX_EXT_FIELDS`` string keys to scalars within the
length limit) is decided here in one pass over the dict; anything else goes to the pure twin,
which raises the precise ``HeaderError``. The limits are read from ``rocketpy.protocol.shape`` the
first time it runs (``_bind_shape``), not copied: ``rocketpy._accel`` loads this module before
that one exists.

Every structured request body (heartbeats, batch acks, lock requests...) passes ``check_doc`` once
decoded: a body of plain maps and lists within ``MAX_BODY_DEPTH`` with str or int map keys is
walked here (recursion bounded by that depth); anything else goes to the pure twin, which raises.

Every POP answer carries each message's queue offset in decimal (``msgOffsetInfo``): formatted
here into one buffer, where ``str`` of each int and the joins cost ~4 µs a 32-message answer.
Entries of any other shape (a kind that is not an ASCII ``str``, an id or offset that is not an
``int`` within 64 bits) go to the pure twin, which formats whatever Python's f-string would.

The signature is declared in ``_speedups.pyi`` (mypy checks it against the pure twin, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.dict cimport PyDict_Next
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_GET_LENGTH
from libc.string cimport memcpy

from rocketpy._cshared cimport PyUnicode_DATA, PyUnicode_IS_ASCII, _as_i64, _put_int

__all__ = ["check_doc", "check_ext", "format_msg_offsets", "format_start_offsets"]



cdef bint _shape_bound = False
cdef Py_ssize_t _MAX_FIELDS = 0
cdef Py_ssize_t _MAX_VALUE_CHARS = 0
cdef object _pure_check_ext = None
cdef object _pure_check_doc = None
cdef Py_ssize_t _MAX_DEPTH = 0


cdef int _bind_shape() except -1:
    global _shape_bound, _MAX_FIELDS, _MAX_VALUE_CHARS, _pure_check_ext, _pure_check_doc, _MAX_DEPTH
    from rocketpy import _accel
    from rocketpy.protocol import shape

    _MAX_FIELDS = shape.MAX_EXT_FIELDS
    _MAX_VALUE_CHARS = shape.MAX_EXT_VALUE_CHARS
    _pure_check_ext = _accel.PURE["check_ext"]
    _pure_check_doc = _accel.PURE["check_doc"]
    _MAX_DEPTH = shape.MAX_BODY_DEPTH
    _shape_bound = True
    return 0


def check_ext(ext):
    """Raise ``HeaderError`` unless ``ext`` is a flat map of bounded scalars (twin of
    ``rocketpy.protocol.shape.check_ext``)."""
    if not ext:
        return None
    if not _shape_bound:
        _bind_shape()
    if type(ext) is not dict or len(<dict>ext) > _MAX_FIELDS:
        return _pure_check_ext(ext)
    cdef Py_ssize_t pos = 0
    cdef PyObject* key
    cdef PyObject* value
    while PyDict_Next(<dict>ext, &pos, &key, &value):
        if type(<object>key) is not str:
            return _pure_check_ext(ext)
        kind = type(<object>value)
        if kind is str:
            if len(<str>value) > _MAX_VALUE_CHARS:
                return _pure_check_ext(ext)
        elif kind is bytes:
            if len(<bytes>value) > _MAX_VALUE_CHARS:
                return _pure_check_ext(ext)
        elif not (kind is int or kind is bool or kind is float or <object>value is None):
            return _pure_check_ext(ext)
    return None

cdef bint _plain_item(object value, Py_ssize_t depth) except -1:
    """A map value or list item is fine: a scalar, or a plain map or list that is (``_plain_doc``)."""
    kind = type(value)
    if kind is dict or kind is list:
        return _plain_doc(value, depth)
    return not isinstance(value, (dict, list))  # a subclass: the pure twin decides


cdef bint _plain_doc(object node, Py_ssize_t depth) except -1:
    """``node`` (a dict or list at ``depth``) and all below it pass ``check_doc``: False when the
    pure twin must decide (too deep, a key that is neither str nor int, a subclass)."""
    cdef Py_ssize_t pos = 0, i
    cdef PyObject* key
    cdef PyObject* value
    if depth > _MAX_DEPTH:
        return False
    if type(node) is dict:
        while PyDict_Next(<dict>node, &pos, &key, &value):
            kind = type(<object>key)
            if kind is not str and kind is not int:
                return False
            if not _plain_item(<object>value, depth + 1):
                return False
        return True
    for i in range(PyList_GET_SIZE(<list>node)):
        if not _plain_item(<object>PyList_GET_ITEM(<list>node, i), depth + 1):
            return False
    return True


def check_doc(doc, what):
    """Raise ``HeaderError`` unless ``doc`` nests at most ``MAX_BODY_DEPTH`` levels with str or int
    map keys (twin of ``rocketpy.protocol.shape.check_doc``)."""
    if not _shape_bound:
        _bind_shape()
    if not _plain_item(doc, 1):
        _pure_check_doc(doc, what)
    return None



# -- POP answer header: offsets in decimal ------------------------------------------------------------
#: Longest decimal of a 64-bit int, with its sign.
DEF MAX_DIGITS = 20

cdef object _pure_start = None
cdef object _pure_msgs = None


cdef int _bind_receipt() except -1:
    global _pure_start, _pure_msgs
    from rocketpy import _accel

    _pure_start = _accel.PURE["format_start_offsets"]
    _pure_msgs = _accel.PURE["format_msg_offsets"]
    return 0


cdef inline int _ascii(object o):
    return type(o) is str and PyUnicode_IS_ASCII(o)


cdef class _Text:
    """An ASCII buffer of the size its caller measured first, never grown (freed with the object)."""

    cdef char* buf
    cdef Py_ssize_t size, used

    def __cinit__(self, Py_ssize_t size):
        self.buf = <char*>PyMem_Malloc(size)
        if self.buf == NULL:
            raise MemoryError()
        self.size = size
        self.used = 0

    def __dealloc__(self):
        PyMem_Free(self.buf)

    cdef inline void put_char(self, char c):
        self.buf[self.used] = c
        self.used += 1

    cdef inline void put_str(self, object s):
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s)
        memcpy(self.buf + self.used, PyUnicode_DATA(s), n)
        self.used += n

    cdef inline void put_int(self, long long v):
        self.used += _put_int(self.buf + self.used, v)

    cdef object text(self):
        return PyUnicode_DecodeASCII(self.buf, self.used, NULL)


cdef inline bint _entry_ok(object e):
    """``e`` is a ``(kind, queue_id, value)`` tuple with an ASCII ``str`` kind and a 64-bit ``int`` id."""
    cdef long long qid
    return (type(e) is tuple and PyTuple_GET_SIZE(e) == 3 and _ascii(<object>PyTuple_GET_ITEM(e, 0))
            and _as_i64(<object>PyTuple_GET_ITEM(e, 1), &qid))


cdef inline void _put_head(_Text t, object e, Py_ssize_t i):
    """``[;]kind qid `` of the checked entry ``e``, the ``i``-th."""
    cdef long long qid
    if i:
        t.put_char(59)  # ';'
    t.put_str(<object>PyTuple_GET_ITEM(e, 0))
    t.put_char(32)
    _as_i64(<object>PyTuple_GET_ITEM(e, 1), &qid)
    t.put_int(qid)
    t.put_char(32)


def format_start_offsets(entries):
    """``startOffsetInfo`` from ``(kind, queue_id, start_offset)`` entries (twin of
    ``rocketpy.protocol.receipt.format_start_offsets``)."""
    if _pure_start is None:
        _bind_receipt()
    if type(entries) is not list:
        return _pure_start(entries)
    cdef Py_ssize_t i, n = PyList_GET_SIZE(entries), size = 0
    cdef long long start
    for i in range(n):
        e = <object>PyList_GET_ITEM(entries, i)
        if not _entry_ok(e) or not _as_i64(<object>PyTuple_GET_ITEM(e, 2), &start):
            return _pure_start(entries)
        size += PyUnicode_GET_LENGTH(<object>PyTuple_GET_ITEM(e, 0)) + 2 * (MAX_DIGITS + 1) + 2
    cdef _Text t = _Text(size + 1)
    for i in range(n):
        e = <object>PyList_GET_ITEM(entries, i)
        _put_head(t, e, i)
        _as_i64(<object>PyTuple_GET_ITEM(e, 2), &start)
        t.put_int(start)
    return t.text()


def format_msg_offsets(entries):
    """``msgOffsetInfo`` from ``(kind, queue_id, offsets)`` entries (twin of
    ``rocketpy.protocol.receipt.format_msg_offsets``)."""
    if _pure_msgs is None:
        _bind_receipt()
    if type(entries) is not list:
        return _pure_msgs(entries)
    cdef Py_ssize_t i, k, n = PyList_GET_SIZE(entries), size = 0
    cdef long long v
    for i in range(n):
        e = <object>PyList_GET_ITEM(entries, i)
        if not _entry_ok(e) or type(<object>PyTuple_GET_ITEM(e, 2)) is not list:
            return _pure_msgs(entries)
        offsets = <object>PyTuple_GET_ITEM(e, 2)
        for k in range(PyList_GET_SIZE(offsets)):
            if not _as_i64(<object>PyList_GET_ITEM(offsets, k), &v):
                return _pure_msgs(entries)
        size += (PyUnicode_GET_LENGTH(<object>PyTuple_GET_ITEM(e, 0))
                 + (MAX_DIGITS + 2) * (PyList_GET_SIZE(offsets) + 1) + 2)
    cdef _Text t = _Text(size + 1)
    for i in range(n):
        e = <object>PyList_GET_ITEM(entries, i)
        _put_head(t, e, i)
        offsets = <object>PyTuple_GET_ITEM(e, 2)
        for k in range(PyList_GET_SIZE(offsets)):
            if k:
                t.put_char(44)  # ','
            _as_i64(<object>PyList_GET_ITEM(offsets, k), &v)
            t.put_int(v)
    return t.text()
