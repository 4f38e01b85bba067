"""POP consumption (RocketMQ 4.9.3+/5's POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, ...).

``PopService`` (``service.py``) is the broker's POP service behind an async API (pop, ack,
ack_batch, change_invisible, peek, notification, polling_info; documented in its module) that the
remoting processors (``broker/processors/pop.py``, ``ack.py``) wrap and RocketMQ 5's gRPC
endpoints call directly. Its parts: the in-flight bookkeeping (``ledger.py``, pure), the read of
a pop (``reader.py``), the durable records and the restart (``ck_buffer.py``, ``revive_log.py``,
``durable.py``, ``restore.py``), the redelivery of expired messages (``revive.py``), the waiting pops
(``polling.py``), the refusals (``checks.py``) and QUERY_ASSIGNMENT's allocation
(``assignment.py``). docs/design.md "POP consumption" says why it is built this way.
"""
