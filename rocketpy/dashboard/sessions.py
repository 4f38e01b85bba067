"""Browser sessions and the ``Admin`` clients they use.

Owns the session cookie (a random token; everything else stays server-side: credentials, CSRF
token, flash messages), the session table (bounded, idle sessions expire) and ``AdminPool``, the
ONE place the dashboard constructs ``rocketpy.Admin``: every page asks the pool for the Admin of the
session's credentials, so an ACL account's access key and secret key travel with every request it
causes and never reach the browser or a log line.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib.util
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from rocketpy.client.admin import Admin

#: Cookie holding the session token (HttpOnly, SameSite=Strict).
COOKIE = "rocketpy_dashboard"
#: Sessions kept at most; the least recently used one goes first.
MAX_SESSIONS = 10_000
#: A session unused this long (seconds) is forgotten.
SESSION_IDLE_S = 8 * 3600
#: Flash messages kept per session (shown once on the next page).
MAX_FLASHES = 8
#: Admin clients kept at most (one per credential set in use).
MAX_ADMINS = 32


@dataclass(frozen=True)
class Credentials:
    """An ACL account (``repr`` hides the secret)."""

    access_key: str
    secret_key: str = field(repr=False)


@dataclass
class Session:
    """One browser's state: its CSRF token, its account (None = anonymous) and pending flashes."""

    token: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    credentials: Credentials | None = None
    flashes: list[tuple[str, str]] = field(default_factory=list)
    last_used: float = field(default_factory=time.monotonic)

    def flash(self, kind: str, text: str) -> None:
        """Queue a message (kind ``ok`` or ``error``) for the next page this session sees."""
        self.flashes = [*self.flashes, (kind, text)][-MAX_FLASHES:]

    def take_flashes(self) -> list[tuple[str, str]]:
        out, self.flashes = self.flashes, []
        return out

    def csrf_ok(self, sent: str | None) -> bool:
        """True when a form carried this session's CSRF token (constant-time compare)."""
        return bool(sent) and hmac.compare_digest(str(sent).encode(), self.csrf.encode())


class SessionStore:
    """Sessions by cookie token, bounded by ``MAX_SESSIONS`` and ``SESSION_IDLE_S``."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, idle_s: float = SESSION_IDLE_S) -> None:
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def get(self, token: str | None) -> Session | None:
        """The live session of a cookie token, or None (unknown or expired)."""
        if not token:
            return None
        s = self._sessions.get(token)
        now = time.monotonic()
        if s is None or now - s.last_used > self.idle_s:
            self._sessions.pop(token, None)
            return None
        s.last_used = now
        self._sessions.move_to_end(token)
        return s

    def new(self) -> Session:
        """A fresh anonymous session with a random token."""
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        s = Session(secrets.token_urlsafe(32))
        self._sessions[s.token] = s
        return s

    def renew(self, old: Session) -> Session:
        """Replace ``old`` by a session with a new token and CSRF token (at log-in and log-out, so a
        token seen before the change is worth nothing after it)."""
        self._sessions.pop(old.token, None)
        s = self.new()
        s.flashes = old.flashes
        return s


def acl_supported() -> bool:
    """True when this rocketpy signs requests (the ``rocketpy.acl`` package is installed)."""
    return importlib.util.find_spec("rocketpy.acl") is not None


class AdminPool:
    """Started ``Admin`` clients by credentials (None = anonymous); the only place one is built."""

    def __init__(self, namesrv_addr: str, timeout: float = 5.0, max_admins: int = MAX_ADMINS) -> None:
        self.namesrv_addr = namesrv_addr
        self.timeout = timeout
        self.max_admins = max_admins
        self._admins: OrderedDict[Credentials | None, Admin] = OrderedDict()
        self._lock = asyncio.Lock()  # two first requests of one account start one Admin

    def _build(self, creds: Credentials | None) -> Admin:
        kwargs: dict[str, Any] = {}
        name = "dashboard"
        if creds is not None:
            kwargs = {"access_key": creds.access_key, "secret_key": creds.secret_key}
            # a client instance of its own per account (instances are shared per settings)
            name += "-" + hashlib.sha256(creds.access_key.encode()).hexdigest()[:8]
        return Admin(self.namesrv_addr, timeout=self.timeout, instance_name=name, **kwargs)

    async def get(self, creds: Credentials | None) -> Admin:
        """The started Admin for ``creds`` (started on first use, least recently used closed first)."""
        async with self._lock:
            admin = self._admins.get(creds)
            if admin is not None:
                self._admins.move_to_end(creds)
                return admin
            admin = self._build(creds)
            await admin.start()
            self._admins[creds] = admin
            while len(self._admins) > self.max_admins:
                _, old = self._admins.popitem(last=False)
                await old.shutdown()
            return admin

    async def close(self) -> None:
        """Shut every Admin down."""
        admins, self._admins = list(self._admins.values()), OrderedDict()
        for admin in admins:
            await admin.shutdown()
