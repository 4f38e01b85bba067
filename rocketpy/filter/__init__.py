"""Message filtering shared by clients and the broker: tag hash codes (``tags``); SQL92 lives beside it."""

from rocketpy.filter.tags import java_string_hash, tags_code, topic_key_hash

__all__ = ["java_string_hash", "tags_code", "topic_key_hash"]
