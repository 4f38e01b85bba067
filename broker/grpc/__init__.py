"""RocketMQ 5's gRPC API (``apache.rocketmq.v2.MessagingService``) served by the broker itself.

The daemon layer: above ``remoting`` (its answers come from the broker's own processors, called
as RocketMQ's proxy calls them in its "local" mode), never importing the SDK. See
docs/design.md §15.
"""
