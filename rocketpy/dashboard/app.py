"""The dashboard's aiohttp application: sessions, CSRF, error pages, templates and ``serve``.

Owns what every request goes through (``_session_mw``: the session cookie and security headers;
``_csrf_mw``: a changing request must carry its session's CSRF token; ``_errors_mw``: a bad form
field, a refused request or an unreachable cluster becomes a page that says what happened and what
to do) and ``render``. The pages themselves are in ``views``, ``views_msg`` and ``views_auth``.
Every handler awaits the SDK's async ``Admin``, so no request blocks the loop.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from aiohttp import web

from rocketpy.dashboard.forms import FormError
from rocketpy.dashboard.sessions import COOKIE, AdminPool, Session, SessionStore, acl_supported
from rocketpy.errors import MQBrokerError, RocketpyError
from rocketpy.protocol.codes import ResponseCode

_HERE = Path(__file__).resolve().parent
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

POOL: web.AppKey[AdminPool] = web.AppKey("pool", AdminPool)
SESSIONS: web.AppKey[SessionStore] = web.AppKey("sessions", SessionStore)
TEMPLATES: web.AppKey[jinja2.Environment] = web.AppKey("templates", jinja2.Environment)
SESSION: web.RequestKey[Session] = web.RequestKey("session", Session)

#: Sent with every response: no inline script or style may run, no framing, no sniffing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self';"
        " form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
#: Methods that change something and so need the CSRF token.
CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def session_of(request: web.Request) -> Session:
    """The request's session (set by ``_session_mw``)."""
    return request[SESSION]


async def admin_of(request: web.Request) -> Any:
    """The started ``Admin`` of the request's account."""
    return await request.app[POOL].get(session_of(request).credentials)


def render(request: web.Request, template: str, status: int = 200, **ctx: Any) -> web.Response:
    """Render ``template`` (autoescaped) with the page frame's context."""
    session = session_of(request)
    page = (
        request.app[TEMPLATES]
        .get_template(template)
        .render(
            session=session,
            csrf=session.csrf,
            flashes=session.take_flashes(),
            acl=acl_supported(),
            namesrv=request.app[POOL].namesrv_addr,
            path=request.path,
            **ctx,
        )
    )
    resp = web.Response(text=page, status=status, content_type="text/html")
    resp.headers["Cache-Control"] = "no-store"
    return resp


def redirect(location: str) -> web.HTTPSeeOther:
    """A 303 to a page of this dashboard (after a POST)."""
    return web.HTTPSeeOther(location)


def path_quote(value: str) -> str:
    """One URL path segment (topic and group names may hold '%' and '|')."""
    return quote(value, safe="")


def is_no_permission(e: BaseException) -> bool:
    return isinstance(e, MQBrokerError) and e.code == ResponseCode.NO_PERMISSION


@web.middleware
async def _session_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    store = request.app[SESSIONS]
    session = store.get(request.cookies.get(COOKIE))
    is_new = session is None
    if session is None:
        session = store.new()
    request[SESSION] = session
    try:
        resp = await handler(request)
    except web.HTTPException as e:
        resp = e
    session = request[SESSION]  # log-in and log-out replace it
    if is_new or session.token != request.cookies.get(COOKIE):
        resp.set_cookie(COOKIE, session.token, httponly=True, samesite="Strict", path="/")
    resp.headers.update(SECURITY_HEADERS)
    if isinstance(resp, web.HTTPException) and resp.status >= 300:
        raise resp
    return resp


@web.middleware
async def _csrf_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method in CHANGING:
        form = await request.post()
        token = form.get("csrf_token")
        if not session_of(request).csrf_ok(token if isinstance(token, str) else None):
            return render(
                request,
                "error.html",
                403,
                title="Form refused",
                message="This form is out of date or did not come from this dashboard (its CSRF token"
                " is missing or wrong): reload the page and submit it again.",
            )
    return await handler(request)


@web.middleware
async def _errors_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except FormError as e:
        return render(request, "error.html", 400, title="Please correct the form", message=str(e))
    except RocketpyError as e:
        if is_no_permission(e):
            return _refused(request, e)
        return render(request, "error.html", 502, title="The cluster answered with an error", message=str(e))
    except TimeoutError:
        return render(
            request,
            "error.html",
            504,
            title="The cluster did not answer",
            message="A request to the NameServer or a broker timed out: check that they are running.",
        )


def _refused(request: web.Request, e: BaseException) -> web.StreamResponse:
    session = session_of(request)
    who = f"account {session.credentials.access_key!r}" if session.credentials else "anonymous access"
    if session.credentials is None and request.method == "GET" and acl_supported():
        session.flash(
            "error", f"The cluster refused this to anonymous access ({e}): log in with an ACL account."
        )
        raise redirect("/login?next=" + quote(request.path_qs, safe=""))
    return render(
        request,
        "error.html",
        403,
        title="No permission",
        message=f"The cluster refused this to {who}: {e}. Log in with an account that has the"
        " permission (admin actions need an account with admin: true).",
    )


def make_app(namesrv_addr: str, *, timeout: float = 5.0) -> web.Application:
    """The dashboard of the cluster behind ``namesrv_addr``."""
    from rocketpy.dashboard import views, views_auth, views_msg

    app = web.Application(middlewares=[_session_mw, _csrf_mw, _errors_mw], client_max_size=64 * 1024)
    app[POOL] = AdminPool(namesrv_addr, timeout)
    app[SESSIONS] = SessionStore()
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,  # every {{ value }} is HTML-escaped: message bodies are hostile input
        undefined=jinja2.StrictUndefined,
        auto_reload=False,  # no stat() of template files on the loop per page
    )
    env.filters["pq"] = path_quote
    env.filters["ms"] = views.fmt_ms
    for template in env.list_templates():  # read and compile them all now, not while serving
        env.get_template(template)
    app[TEMPLATES] = env
    views.add_routes(app)
    views_msg.add_routes(app)
    views_auth.add_routes(app)
    app.router.add_static("/static", _HERE / "static", append_version=True)

    async def close_pool(app: web.Application) -> None:
        await app[POOL].close()

    app.on_cleanup.append(close_pool)
    return app


async def serve(namesrv_addr: str, host: str, port: int) -> None:
    """Serve the dashboard until SIGINT/SIGTERM; prints the URL once listening."""
    runner = web.AppRunner(make_app(namesrv_addr), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as e:
            raise RocketpyError(
                f"cannot listen on {host}:{port}: {e.strerror or e}: check --host, or choose another --port"
            ) from None
        bound = runner.addresses[0]
        print(f"rocketpy dashboard on http://{bound[0]}:{bound[1]}/ (NameServer {namesrv_addr})", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()
