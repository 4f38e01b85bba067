"""Timer messages (RocketMQ 5, RIP-43): delivery at any time up to ``timerMaxDelaySec`` ahead.

A timing wheel of one-second slots over a time-indexed log of fixed-size entries, both mmap'd:
``TimerWheel`` (``wheel.py``), ``TimerLog`` (``log.py``), driven by ``TimerMessageService``
(``service.py``). Nothing per waiting message lives in Python objects.
"""
