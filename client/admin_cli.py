"""Hook for ``rocketpy admin`` / ``mqadmin`` in ``rocketpy.cli``: the mqadmin sub-commands.

``rocketpy.cli`` loads ``commands`` from this module; the commands themselves live in
``rocketpy.admin_cli`` (topics, cluster, brokers, groups) and ``rocketpy.admin_cli_msg`` (messages).
"""

from __future__ import annotations

from rocketpy.admin_cli import commands, mqadmin

__all__ = ["commands", "mqadmin"]
