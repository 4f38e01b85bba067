"""Transactional messages on the broker: half messages, decisions, op records and the check service.

``half`` rewrites messages into and out of ``RMQ_SYS_TRANS_HALF_TOPIC``; ``window`` holds what is
known of undecided half messages; ``op_log`` is the durable log of decisions and checks in
``RMQ_SYS_TRANS_OP_HALF_TOPIC``; ``progress`` persists the resume point; ``service`` owns the writes
(half put, commit, rollback); ``check`` asks producers about half messages left undecided.
"""
