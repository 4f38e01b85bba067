"""Log-in and log-out: the ACL account a session's requests are signed with.

The access key and secret key are kept in the server-side session only; the browser holds just the
random session cookie. Both log-in and log-out give the browser a new session token and CSRF token.
"""

from __future__ import annotations

from aiohttp import web

from rocketpy.dashboard import forms
from rocketpy.dashboard.app import SESSION, SESSIONS, redirect, render, session_of
from rocketpy.dashboard.sessions import Credentials, acl_supported


def _safe_next(value: str | None) -> str:
    """A local path to go to after log-in (never another site)."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/cluster"


async def login_page(request: web.Request) -> web.StreamResponse:
    return render(request, "login.html", next=_safe_next(request.query.get("next")))


async def login(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    f = {k: v for k, v in form.items() if isinstance(v, str)}
    access_key = forms.text(f, "access_key", "Access key")
    secret_key = f.get("secret_key") or ""
    if not secret_key:
        raise forms.FormError("Secret key is required: enter the account's secretKey")
    if len(secret_key) > forms.MAX_KEY_CHARS:
        raise forms.FormError(f"Secret key is longer than {forms.MAX_KEY_CHARS} characters")
    if not acl_supported():
        raise forms.FormError("this rocketpy has no ACL support (rocketpy.acl): no log-in is needed")
    session = request.app[SESSIONS].renew(session_of(request))
    session.credentials = Credentials(access_key, secret_key)
    session.flash("ok", f"Logged in as {access_key}.")
    request[SESSION] = session
    raise redirect(_safe_next(f.get("next")))


async def logout(request: web.Request) -> web.StreamResponse:
    session = request.app[SESSIONS].renew(session_of(request))
    session.flash("ok", "Logged out.")
    request[SESSION] = session
    raise redirect("/cluster")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/login", login_page)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
