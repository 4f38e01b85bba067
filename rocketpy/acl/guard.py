"""The daemons' ACL hook: check every request before dispatch, reload the file when it changes.

``AclGuard`` is installed on a ``RemotingServer`` with ``set_guard`` by the broker (every request
code) and the NameServer (its write codes, ``NAMESRV_CHECKED_CODES``). With ``aclEnable=false`` no
guard is installed and requests cost nothing extra. The file's status (mtime, size, inode) is
polled from a worker thread every ``aclFileCheckInterval`` ms; a changed file is parsed in the
thread and swapped in whole; a broken edit keeps the last good rules and is logged once per change.
A refusal is logged once per (client address, account and resource), in a bounded set.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketpy.acl.rules import AclFileError, AclRules, load_acl_file
from rocketpy.acl.validator import AccessValidator, Refusal
from rocketpy.protocol.codes import ResponseCode
from rocketpy.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rocketpy.config import AclKeys
    from rocketpy.remoting.connection import Channel
    from rocketpy.remoting.server import RemotingServer

log = logging.getLogger("rocketpy.acl")

#: Distinct refusals remembered for log-once; the set is cleared when full (then logs again).
MAX_LOGGED_REFUSALS = 10_000

_FileStamp = tuple[int, int, int]


def judge(
    check: Callable[[str, RemotingCommand], Refusal | None],
    channel: Channel,
    request: RemotingCommand,
    owner: str,
    logged: set[tuple[str, str]],
) -> RemotingCommand | None:
    """One guard's verdict on a request from ``channel``: None to go on, or the NO_PERMISSION
    answer; each refusal is logged once per (client address, ``log_key``) while ``logged`` holds
    fewer than ``MAX_LOGGED_REFUSALS`` of them (then it is cleared and logs again)."""
    peer = channel.peer
    ip = peer[0] if peer is not None else channel.remote_addr.rpartition(":")[0]
    refusal = check(ip, request)
    if refusal is None:
        return None
    key = (ip, refusal.log_key)
    if key not in logged:
        if len(logged) >= MAX_LOGGED_REFUSALS:
            logged.clear()
        logged.add(key)
        log.warning("%s: refused a request from %s: %s", owner, channel.remote_addr, refusal.remark)
    return RemotingCommand.response(request, ResponseCode.NO_PERMISSION, refusal.remark)


def _stamp(path: str) -> _FileStamp:
    st = os.stat(path)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _load(path: str) -> tuple[AclRules, _FileStamp]:
    stamp = _stamp(path)
    return load_acl_file(path), stamp


class AclGuard:
    """Plain ACL for one daemon.

    Args:
        path: the ACL file (``aclFile``).
        check_interval_s: how often the file's status is polled for a change.
        checked_codes: only these request codes are checked (None: every code).
        owner: the daemon's name for log lines.
    """

    def __init__(
        self, path: str, check_interval_s: float, checked_codes: frozenset[int] | None, owner: str
    ) -> None:
        self.path = path
        self.check_interval_s = check_interval_s
        self.checked_codes = checked_codes
        self.owner = owner
        self.validator: AccessValidator | None = None
        self._stamp: _FileStamp | None = None
        self._bad_stamp: _FileStamp | None = None
        self._logged: set[tuple[str, str]] = set()
        self._watch: asyncio.Task[None] | None = None

    @classmethod
    async def install(
        cls, config: AclKeys, server: RemotingServer, checked_codes: frozenset[int] | None, owner: str
    ) -> AclGuard | None:
        """With ``aclEnable``: load the rules, start watching and guard ``server``; else None (no cost).

        Raises:
            AclFileError: the file is missing or malformed.
        """
        if not config.acl_enable:
            return None
        assert config.acl_file is not None, "aclFile is resolved when the config is loaded"
        guard = cls(config.acl_file, config.acl_file_check_interval / 1000.0, checked_codes, owner)
        await guard.start()
        server.set_guard(guard)
        return guard

    async def start(self) -> None:
        """Load the file (in a thread) and start watching it.

        Raises:
            AclFileError: the file is missing or malformed (``FILE:LINE: ...``).
        """
        rules, self._stamp = await asyncio.to_thread(_load, self.path)
        self._use(rules)
        self._watch = asyncio.get_running_loop().create_task(self._watch_file())

    async def stop(self) -> None:
        """Stop watching the file."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None

    def _use(self, rules: AclRules) -> None:
        self.validator = AccessValidator(rules)
        self._logged.clear()
        log.info(
            "%s: ACL rules from %s: %d account(s), %d global white list pattern(s)",
            self.owner, rules.path, len(rules.accounts), len(rules.global_white_list.patterns),
        )  # fmt: skip

    async def _watch_file(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_s)
            await self.reload_if_changed()

    async def reload_if_changed(self) -> bool:
        """Reload the rules when the file changed; True when new rules are in use."""
        try:
            stamp = await asyncio.to_thread(_stamp, self.path)
        except OSError as e:
            if self._bad_stamp != (0, 0, 0):
                self._bad_stamp = (0, 0, 0)
                log.warning("%s: ACL file %s unreadable (%s); keeping the last good rules", self.owner,
                            self.path, e.strerror or e)  # fmt: skip
            return False
        if stamp == self._stamp or stamp == self._bad_stamp:
            return False
        try:
            rules, stamp = await asyncio.to_thread(_load, self.path)
        except (AclFileError, OSError) as e:
            self._bad_stamp = stamp
            log.warning("%s: ACL file changed but cannot be used, keeping the last good rules: %s",
                        self.owner, str(e).removeprefix("error: "))  # fmt: skip
            return False
        self._stamp, self._bad_stamp = stamp, None
        self._use(rules)
        return True

    def __call__(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        """The pre-dispatch check: None to go on, or the NO_PERMISSION answer."""
        if self.checked_codes is not None and request.code not in self.checked_codes:
            return None
        validator = self.validator
        assert validator is not None, "AclGuard used before start()"
        return judge(validator.check, channel, request, self.owner, self._logged)
