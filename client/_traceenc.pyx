# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twins of message trace's record encoders: ``_encode_pub``, ``_encode_before`` and
``_encode_after`` of ``rocketpy/client/trace.py``.

A traced consume writes two records a message (SubBefore, SubAfter) and a traced send one (Pub);
the background sender encodes them when it takes a trace message's worth. These write the same
texts, ids and keyed entries into the same ``_Encoded`` as the pure twins, record by record in C
(no interpreter step per record). ``rocketpy._accel`` chooses them or their pure twins. The
constants and helpers they use (``DEFAULT_REGION``, ``NULL``, the process's request id prefix, the
store host cache, ``SKIPPED``, ``context_code``, and ``_encode_after_chunks``, the general case of
``_encode_after`` that both twins share) are read from ``rocketpy.client.trace`` the first
time one of them runs (``_bind``), not copied.

The signatures are declared in ``_traceenc.pyi`` (mypy checks it against the pure twins, stubtest
against this module: see ``rocketpy/_accel.py``).
"""

__all__ = ["_encode_after", "_encode_before", "_encode_pub"]

cdef bint _bound = False
cdef str DEFAULT_REGION = ""
cdef str NULL_TEXT = ""
cdef str REQUEST_PREFIX = ""
cdef dict STORE_HOSTS = None
cdef object _store_host = None
cdef object _chunk_hexes = None
cdef object _add_keyed = None
cdef object _is_ok = None
cdef object _context_code = None
cdef object _encode_after_chunks = None
cdef object SKIPPED = None


cdef int _bind() except -1:
    global _bound, DEFAULT_REGION, NULL_TEXT, REQUEST_PREFIX, STORE_HOSTS, _store_host, _chunk_hexes
    global _add_keyed, _is_ok, _context_code, SKIPPED, _encode_after_chunks
    from rocketpy.client import trace

    DEFAULT_REGION = trace.DEFAULT_REGION
    NULL_TEXT = trace.NULL
    REQUEST_PREFIX = trace._REQUEST_PREFIX
    STORE_HOSTS = trace._STORE_HOSTS
    _store_host = trace._store_host
    _chunk_hexes = trace._chunk_hexes
    _add_keyed = trace._add_keyed
    _is_ok = trace._is_ok
    _context_code = trace.context_code
    _encode_after_chunks = trace._encode_after_chunks
    SKIPPED = trace.SKIPPED
    _bound = True
    return 0


def _encode_pub(what, out):
    """Twin of ``rocketpy.client.trace._encode_pub``: one Pub record."""
    if not _bound:
        _bind()
    begin_ms, group, topic, msg_id, tags, keys, omid, body_len, cost_ms, msg_type, ok = what
    cdef list texts = out.texts
    if keys:
        out.keyed.append((len(texts), keys))
    host = STORE_HOSTS.get(omid[:16]) if omid else None
    if host is None:
        host = _store_host(omid)
    texts.append(
        f"Pub\x01{begin_ms}\x01{DEFAULT_REGION}\x01{group}\x01{topic}\x01{msg_id}\x01"
        f"{NULL_TEXT if tags is None else tags}\x01{' '.join(keys) if keys else NULL_TEXT}\x01"
        f"{NULL_TEXT if host is None else host}\x01{body_len}\x01{cost_ms}\x01{msg_type}\x01"
        f"{NULL_TEXT if omid is None else omid}\x01{'true' if ok else 'false'}\x02"
    )
    out.ids.append(msg_id)


def _encode_before(what, out):
    """Twin of ``rocketpy.client.trace._encode_before``: a SubBefore record per traced message of
    one listener runner call."""
    if not _bound:
        _bind()
    now, group, seq, sizes, ids, retries, key_texts = what
    cdef list texts = out.texts
    cdef Py_ssize_t first = len(texts), i, n
    cdef str head = f"SubBefore\x01{now}\x01{DEFAULT_REGION}\x01{group}\x01{REQUEST_PREFIX}{seq:012X}"
    hexes = _chunk_hexes(len(sizes))
    if len(sizes) == len(ids):  # a message per chunk (the default batch size of one)
        chunk_hex = hexes
    else:
        chunk_hex = [hexes[i] for i, size in enumerate(sizes) for _ in range(size)]
    n = min(len(chunk_hex), len(ids), len(retries))  # (hexes may be longer)
    if key_texts is None:
        for i in range(n):
            texts.append(f"{head}{chunk_hex[i]}\x01{ids[i]}\x01{retries[i]}\x01{NULL_TEXT}\x02")
    else:
        n = min(n, len(key_texts))
        for i in range(n):
            k = key_texts[i]
            texts.append(f"{head}{chunk_hex[i]}\x01{ids[i]}\x01{retries[i]}\x01{NULL_TEXT if k is None else k}\x02")
        _add_keyed(out, first, key_texts)
    out.ids.extend(ids)


def _encode_after(what, out):
    """Twin of ``rocketpy.client.trace._encode_after``: a SubAfter record per consumed traced
    message of one listener runner call (none for a chunk that was not handed to the listener)."""
    if not _bound:
        _bind()
    group, seq, sizes, divisors, ids, key_texts, results, times, ok_statuses = what
    cdef list texts = out.texts, out_ids = out.ids
    cdef str base = f"SubAfter\x01{REQUEST_PREFIX}{seq:012X}"
    hexes = _chunk_hexes(len(sizes))
    r0 = results[0] if results else None
    cdef Py_ssize_t i, n, first
    cdef double b, e
    if (
        divisors is None
        and len(ids) == len(sizes)
        and results.count(r0) == len(results)
        and r0 is not SKIPPED
    ):
        # the usual call: a message per chunk, none filtered, one result for all
        ok = _is_ok(r0, ok_statuses)
        mid = f"\x01{'true' if ok else 'false'}\x01"
        code = f"\x01{_context_code(r0, ok)}\x01"
        first = len(texts)
        tail = f"\x01{group}\x02"
        n = min(len(hexes), len(ids), len(times) // 2)
        if key_texts is None:
            null = f"{mid}{NULL_TEXT}{code}"
            for i in range(n):
                b = times[2 * i]
                e = times[2 * i + 1]
                texts.append(
                    f"{base}{hexes[i]}\x01{ids[i]}\x01{<long long>((e - b) * 1000)}{null}"
                    f"{<long long>(e * 1000)}{tail}"
                )
        else:
            n = min(n, len(key_texts))
            for i in range(n):
                b = times[2 * i]
                e = times[2 * i + 1]
                k = key_texts[i]
                texts.append(
                    f"{base}{hexes[i]}\x01{ids[i]}\x01{<long long>((e - b) * 1000)}{mid}"
                    f"{NULL_TEXT if k is None else k}{code}{<long long>(e * 1000)}{tail}"
                )
        out_ids.extend(ids)
        if key_texts is not None:
            _add_keyed(out, first, key_texts)
        return
    _encode_after_chunks(out, base, hexes, what)  # the general case: one definition, in trace.py
