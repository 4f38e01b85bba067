"""Request headers of the hot codes (send, pull, consumer offsets), one definition for both sides.

Each header is a ``__slots__`` class (no per-message pydantic): the client builds the ``ext`` map
with ``to_ext()`` or the module's plain builder function (the same layout, without an object), and
the broker reads it with ``from_ext()``, which converts RocketMQ's JSON strings and raises
``HeaderError`` naming a missing or malformed field. The field names on the wire are RocketMQ's
(docs/wire.md); the maps keep their key order, so the bytes on the wire are the same for every sender.
"""
