# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of the request header check: ``check_ext`` of ``rocketpy/protocol/shape.py``.

Every request's ``ext`` passes this check before its handler runs, so it is on every request's
path. The common case (a dict of at most ``MAX_EXT_FIELDS`` string keys to scalars within the
length limit) is decided here in one pass over the dict; anything else goes to the pure twin,
which raises the precise ``HeaderError``. The limits are read from ``rocketpy.protocol.shape`` the
first time it runs (``_bind_shape``), not copied: ``rocketpy._accel`` loads this module before
that one exists.

The signature is declared in ``_speedups.pyi`` (mypy checks it against the pure twin, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject

__all__ = ["check_ext"]


cdef bint _shape_bound = False
cdef Py_ssize_t _MAX_FIELDS = 0
cdef Py_ssize_t _MAX_VALUE_CHARS = 0
cdef object _pure_check_ext = None


cdef int _bind_shape() except -1:
    global _shape_bound, _MAX_FIELDS, _MAX_VALUE_CHARS, _pure_check_ext
    from rocketpy import _accel
    from rocketpy.protocol import shape

    _MAX_FIELDS = shape.MAX_EXT_FIELDS
    _MAX_VALUE_CHARS = shape.MAX_EXT_VALUE_CHARS
    _pure_check_ext = _accel.PURE["check_ext"]
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
