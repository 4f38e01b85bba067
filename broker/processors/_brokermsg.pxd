# cython: language_level=3
"""The send fast paths' one way to make a ``BrokerMessage`` (cimported by ``_sendrun.pyx`` and
``_speedups.pyx``, compiled into each; no module of this name at run time)."""


cdef inline object new_broker_message(object cls, object topic, object queue_id, object body, object props,
                                      object flag, object sys_flag, object born_ts, object host8,
                                      object reconsume):
    """A ``cls`` (``BrokerMessage``) with the fields its ``__init__`` sets, without the call."""
    m = cls.__new__(cls)
    m.topic = topic
    m.queue_id = queue_id
    m.body = body
    m.properties = props
    m.flag = flag
    m.sys_flag = sys_flag
    m.born_timestamp = born_ts
    m.born_host8 = host8
    m.reconsume_times = reconsume
    m.prepared_transaction_offset = 0
    m.tags_code = None
    return m
