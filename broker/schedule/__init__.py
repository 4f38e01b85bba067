"""Delivery at a later time: delay levels (``SCHEDULE_TOPIC_XXXX``) and, in ``broker/timer``, any time.

``DeliveryTimeService`` is what the broker uses: the send path hands it messages that carry ``DELAY``
or a timer property, and it owns the services that put them into their real topic when due.
"""
