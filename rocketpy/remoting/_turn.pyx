# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of ``rocketpy/remoting/turn.py``: ``serve_turn``, one read turn of a ``Channel``; and of
``start_call`` (``rocketpy/remoting/calls.py``): a call numbered and written (``Channel.send`` in
the same frame, as answers are written: ``_send``) and tracked (``PendingRequests.add``).

The same steps as the pure twin, with no Python frame of the remoting layer per request: the turn's
commands are walked in C; a request's handler is read from the processor table and called here
(``ProcessorTable.handle``'s header check, slice flag and error answers, inlined); an answer that is
ready is counted in the request stats (``RequestStats.observe``, inlined: one dict increment and a
bucket found by bisection, the first response of a key through ``RequestStats._first``), given its
request's opaque, response flag and serialize type, encoded (``encode_frame``) and added to the
channel's write buffer, which leaves in one ``writelines`` at the end of the turn; a response
completes its pending call. The rare paths call the channel and the table as the pure twin does:
a guard (``ProcessorTable.dispatch``), an unsupported code, a closed channel or write pressure
(``Channel.send``), an awaitable (``Channel._start_task``), a late response (``Channel._complete``).
Times are read from CLOCK_MONOTONIC, the clock of ``time.perf_counter``.

Names are read from ``rocketpy.remoting`` the first time ``serve_turn`` runs (``_bind_turn``).
"""

from functools import partial

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

__all__ = ["flush_later", "receive", "serve_turn", "start_call"]

cdef bint _bound = False
cdef object FrameError = None
cdef object RemotingCommand = None
cdef object DecodeInSlices = None
cdef object SLICES = None
cdef object check_ext = None
cdef object encode_frame = None
cdef object split_frames = None
cdef Py_ssize_t PREFIX_BYTES = 8
cdef long FLAG_RESPONSE = 1
cdef long FLAG_ONEWAY = 2
cdef long MAX_OPAQUE = 0
cdef object _connection = None  # rocketpy.remoting.connection: its TURN_BUDGET_SECONDS, read per turn
cdef double _bounds[64]
cdef Py_ssize_t _nbounds = 0


cdef int _bind_turn() except -1:
    global _bound, FrameError, RemotingCommand, DecodeInSlices, SLICES, check_ext, encode_frame
    global split_frames, PREFIX_BYTES
    global FLAG_RESPONSE, FLAG_ONEWAY, _connection, _nbounds, MAX_OPAQUE
    from rocketpy import limits
    from rocketpy.remoting import body, codec, command, connection, processor, request_stats

    FrameError = codec.FrameError
    RemotingCommand = command.RemotingCommand
    DecodeInSlices = body.DecodeInSlices
    SLICES = body.SLICES
    check_ext = processor.check_ext
    encode_frame = codec.encode_frame
    split_frames = codec.split_frames
    PREFIX_BYTES = codec.PREFIX_BYTES
    FLAG_RESPONSE = command.FLAG_RESPONSE
    FLAG_ONEWAY = command.FLAG_ONEWAY
    MAX_OPAQUE = limits.MAX_OPAQUE
    _connection = connection
    bounds = request_stats.LATENCY_BOUNDS_S
    if len(bounds) > 64:
        raise ImportError("rocketpy.remoting._turn holds at most 64 latency bounds; rebuild it")
    for i, bound in enumerate(bounds):
        _bounds[i] = bound
    _nbounds = len(bounds)
    if request_stats.bucket_of.__name__ != "bisect_left":
        raise ImportError("rocketpy.remoting._turn bisects latency buckets as bisect_left does")
    _bound = True
    return 0


cdef inline double _now() noexcept:
    """``time.perf_counter()``: CLOCK_MONOTONIC in nanoseconds, as a double of seconds."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>(<long long>ts.tv_sec * 1000000000LL + ts.tv_nsec) / 1e9


cdef inline Py_ssize_t _bucket(double elapsed) noexcept:
    """``bisect_left(LATENCY_BOUNDS_S, elapsed)``."""
    cdef Py_ssize_t lo = 0, hi = _nbounds, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if _bounds[mid] < elapsed:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef int _observe(object stats, object code, object response_code, double started) except -1:
    """``RequestStats.observe``."""
    cdef double elapsed = _now() - started
    cdef PyObject* count
    cdef PyObject* histogram
    responses = stats.responses
    key = (code, response_code)
    count = PyDict_GetItem(responses, key)
    if count is NULL:
        stats._first(code, response_code, elapsed)
        return 0
    PyDict_SetItem(responses, key, <object>count + 1)
    histogram = PyDict_GetItem(stats.latency, code)
    if histogram is NULL:
        stats._first(code, response_code, elapsed)
        return 0
    h = <object>histogram
    buckets = h.buckets
    i = _bucket(elapsed)
    buckets[i] += 1
    h.sum_s += elapsed
    return 0


cdef int _respond(object channel, object stats, object request, object response, double started) except -1:
    """``Channel._respond`` and ``Channel.send`` (its write into this turn's buffer)."""
    _observe(stats, request.code, response.code, started)
    if request.flag & FLAG_ONEWAY:
        return 0
    response.opaque = request.opaque
    response.flag |= FLAG_RESPONSE
    response.serialize_type = request.serialize_type
    _send(channel, response)
    return 0


cdef int _send(object channel, object cmd) except -1:
    """``Channel.send``: ``cmd`` encoded into the held writes (a turn, or a flush scheduled), else
    written now with a flush scheduled for the writes that join it; a closed channel or write
    pressure through ``Channel.send`` itself (its log line, its bound on what the peer has not read)."""
    if channel.closed or channel._write_paused:
        channel.send(cmd)
        return 0
    parts = encode_frame(cmd)
    if channel._batching or channel._flush_scheduled:
        channel._out.extend(parts)
    else:
        channel._transport.writelines(parts)
        channel._flush_scheduled = True
        channel._loop.call_soon(flush_later, channel)
    return 0


cdef object _handle(object processors, object channel, object request):
    """``ProcessorTable.handle`` (no guard)."""
    cdef PyObject* found = PyDict_GetItem(processors._handlers, request.code)
    if found is NULL:
        return processors._handle(channel, request, request.ext)  # REQUEST_CODE_NOT_SUPPORTED
    handler = <object>found
    slices = SLICES
    try:
        ext = request.ext
        if ext:
            check_ext(ext)
        slices.allowed = True
        try:
            return handler(channel, request)
        finally:
            slices.allowed = False
    except DecodeInSlices as pending:
        return processors._in_slices(channel, pending, partial(handler, channel, request))
    except Exception as exc:
        return processors.error_response(channel, request, exc)


cdef int _answer(object channel, object stats, object request, object result, double started) except -1:
    """``Channel._answer``."""
    if type(result) is RemotingCommand:
        _respond(channel, stats, request, result, started)
    elif result is not None:
        channel._start_task(request, result, started)
    return 0


cdef int _complete(object channel, object response) except -1:
    """``Channel._complete`` (``PendingRequests.complete``); a late or unknown one is logged there."""
    entry = channel._pending._entries.pop(response.opaque, None)
    if entry is None:
        channel._complete(response)
        return 0
    future = entry[0]
    if not future.done():
        future.set_result(response)
    return 0


cdef list _run_results(object processors, object channel, list run):
    """``ProcessorTable.handle_run`` (no guard: a refusal is a bad header shape)."""
    if processors._guard is not None:
        return processors.handle_run(channel, run)
    refusals = []
    admitted = []
    for request in run:
        refusal = None
        try:
            ext = request.ext
            if ext:
                check_ext(ext)
        except DecodeInSlices:
            raise
        except Exception as exc:
            refusal = processors.error_response(channel, request, exc)
        refusals.append(refusal)
        if refusal is None:
            admitted.append(request)
    if not admitted:
        return refusals
    try:  # ProcessorTable._run, without its frame
        answers = processors._run_handler(channel, admitted)
    except Exception as exc:
        answers = [processors.error_response(channel, r, exc) for r in admitted]
    if len(admitted) == len(refusals):
        return answers
    results = iter(answers)
    return [no if no is not None else next(results) for no in refusals]


cdef object _dispatch_runs(object channel, object stats, list commands):
    """``turn._dispatch_runs``."""
    codes = channel._run_codes
    run = [c for c in commands if c.code in codes and not c.flag & FLAG_RESPONSE]
    if not run or len(channel._tasks) + len(run) > channel._max_inflight:
        return commands
    channel._batching = True
    cdef double started = _now()
    try:
        for request, result in zip(run, _run_results(channel._processors, channel, run), strict=True):
            _answer(channel, stats, request, result, started)
    finally:
        channel._batching = False
    return [c for c in commands if c.code not in codes or c.flag & FLAG_RESPONSE]


cdef int _process(object channel, list commands) except -1:
    """``turn._process``."""
    cdef Py_ssize_t i, n
    cdef Py_ssize_t responses = 0
    cdef bint guarded
    cdef double started
    processors = channel._processors
    stats = processors.stats
    backlog = channel._backlog
    if channel._run_codes and not backlog:
        commands = _dispatch_runs(channel, stats, commands)
    guarded = processors._guard is not None
    tasks = channel._tasks
    max_inflight = channel._max_inflight
    channel._batching = True
    try:
        n = PyList_GET_SIZE(commands)
        for i in range(n):
            cmd = <object>PyList_GET_ITEM(commands, i)
            if channel.closed:
                break
            if cmd.flag & FLAG_RESPONSE:
                _complete(channel, cmd)
                responses += 1
            elif backlog or len(tasks) >= max_inflight or channel.decoding:
                backlog.append(cmd)
            else:
                started = _now()
                if guarded:
                    result = channel._handle(channel, cmd)
                else:
                    result = _handle(processors, channel, cmd)
                _answer(channel, stats, cmd, result, started)
    finally:
        channel._batching = False
        out = channel._out
        if out and not channel.closed:
            channel._out = []
            channel._transport.writelines(out)
    if responses > 1 and not channel._flush_scheduled:
        channel._flush_scheduled = True
        channel._loop.call_soon(flush_later, channel)
    if backlog:
        channel._update_reading()
    return 0


cdef object _feed(object decoder, object data, Py_ssize_t limit):
    """``FrameDecoder.feed(data, limit)``; its common case (nothing buffered) without its frame."""
    if decoder._failed or decoder._body_len or decoder._buf:
        return decoder.feed(data, limit)
    try:
        out, used = split_frames(decoder, data, limit)
    except FrameError:
        decoder._failed = True
        raise
    if used < len(data):
        buf = decoder._buf
        buf += memoryview(data)[used:]
        if decoder._head is not None and len(buf) >= PREFIX_BYTES:
            decoder._maybe_assemble(buf)
    return out


cdef int _turn(object channel, object data) except -1:
    """``turn.serve_turn``."""
    cdef Py_ssize_t limit = channel._turn_frames, frames, max_frames
    cdef double started, elapsed, budget
    decoder = channel._decoder
    try:
        commands = _feed(decoder, data, limit) if limit > 0 else decoder.feed(data, limit)
    except FrameError as exc:
        channel._protocol_error(exc.reason)
        return 0
    except Exception as exc:
        channel._protocol_error(f"undecodable frame: {type(exc).__name__}: {exc}")
        return 0
    cdef Py_ssize_t count = len(commands)
    cdef bint more = count >= limit
    # Channel._track_partial
    if more or not (len(decoder._buf) + decoder._body_pos):
        channel.partial_since = None
    elif count or channel.partial_since is None:
        channel.partial_since = channel.last_read_time
    if count:
        started = _now()
        _process(channel, commands if type(commands) is list else list(commands))
        elapsed = _now() - started
        # Channel._adapt_turn
        frames = channel._turn_frames
        max_frames = channel._max_frames_per_turn
        budget = _connection.TURN_BUDGET_SECONDS
        if elapsed > budget:
            if frames > 1:
                channel._turn_frames = frames // 2
        elif frames < max_frames and elapsed * 2 < budget:
            channel._turn_frames = min(frames * 2, max_frames)
    if more or channel._more_frames:
        channel._more_frames = more
        channel._update_reading()
    return 0


def serve_turn(channel, data):
    """One read turn of ``channel`` (twin of ``rocketpy.remoting.turn.serve_turn``)."""
    if not _bound:
        _bind_turn()
    _turn(channel, data)


def receive(channel, data):
    """``Channel.data_received`` (twin of ``rocketpy.remoting.turn.receive``)."""
    if not _bound:
        _bind_turn()
    channel.last_read_time = channel._loop.time()
    _turn(channel, data)


def start_call(channel, cmd, timeout):
    """Number ``cmd``, write it and track its response future (twin of
    ``rocketpy.remoting.calls.start_call``)."""
    if not _bound:
        _bind_turn()
    cdef long opaque = <long>channel._next_opaque + 1
    if opaque > MAX_OPAQUE:
        opaque = 1
    channel._next_opaque = opaque
    cmd.opaque = opaque
    cmd.flag = <long>cmd.flag & ~(FLAG_RESPONSE | FLAG_ONEWAY)
    cmd.serialize_type = channel.serialize_type
    signer = channel.signer
    if signer is not None:
        signer(cmd)
    future = channel._loop.create_future()
    _send(channel, cmd)
    if channel.closed:  # the write itself can close the connection (peer not reading)
        channel._check_open(cmd)
    channel._pending.add(opaque, future, cmd.code, timeout)
    return future


def flush_later(channel):
    """The flush a held write scheduled (twin of ``rocketpy.remoting.turn.flush_later``)."""
    channel._flush_scheduled = False
    out = channel._out
    if out and not channel.closed:  # Channel._flush
        channel._out = []
        channel._transport.writelines(out)
