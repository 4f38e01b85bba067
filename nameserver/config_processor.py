"""GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG: the NameServer's effective settings, and the few
that may change while it runs (``mqadmin getNamesrvConfig`` / ``updateNamesrvConfig``).

An update is all or nothing: every key must be live and every value valid, else nothing changes
and the answer names the offending key. Changes are in memory; the ``.properties`` file stays the
source for the next start.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from rocketpy.config import NamesrvConfig, config_lines, config_update_entries
from rocketpy.protocol.codes import ResponseCode
from rocketpy.remoting.command import RemotingCommand
from rocketpy.remoting.server import Channel

log = logging.getLogger("rocketpy.namesrv")

#: Keys read on every use, so a change takes effect at once: RocketMQ name -> field.
LIVE_NAMESRV_KEYS = {
    "orderMessageEnable": "order_message_enable",
    "brokerChannelExpiredTime": "broker_channel_expired_time",
}
#: An UPDATE_NAMESRV_CONFIG body larger than this is refused.


class NamesrvConfigProcessor:
    """The NameServer's config codes, over its live ``NamesrvConfig``."""

    def __init__(self, config: NamesrvConfig) -> None:
        self.config = config

    def get_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG: the effective configuration as ``key=value`` lines."""
        text = "\n".join(config_lines(self.config)) + "\n"
        return RemotingCommand.response(request, body=text.encode())

    def update_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG: change live keys (all or nothing); others get a clear refusal."""
        entries = config_update_entries(request.body, "UPDATE_NAMESRV_CONFIG")
        fixed = [e.key for e in entries if e.key not in LIVE_NAMESRV_KEYS]
        if fixed:
            return RemotingCommand.response(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"cannot change {', '.join(fixed)} while the NameServer runs (edit its config file and "
                f"restart); keys that can change live: {', '.join(sorted(LIVE_NAMESRV_KEYS))}",
            )
        updates = {e.key: e.value for e in entries}
        try:
            checked = NamesrvConfig.model_validate({**self.config.model_dump(by_alias=True), **updates})
        except ValidationError as e:
            first = e.errors()[0]
            where = first["loc"][0] if first["loc"] else "?"
            return RemotingCommand.response(
                request, ResponseCode.INVALID_PARAMETER, f"bad value for {where}: {first['msg']}"
            )
        for key in updates:
            field = LIVE_NAMESRV_KEYS[key]
            setattr(self.config, field, getattr(checked, field))
        log.info("NameServer config updated live: %s", updates)
        return RemotingCommand.response(request)
