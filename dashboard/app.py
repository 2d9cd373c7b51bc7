"""What every page of the dashboard shares: its state (`Dashboard`: settings, sessions, history, one
Admin per account) and the middlewares around the pages: sessions, CSRF, admin checks, errors."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp_jinja2
from aiohttp import web

from shoal.acl.plain_acl import AclFileError, AclRules
from shoal.acl.watcher import load_acl_file
from shoal.client import Admin, ClientSettings, Credentials, MQBrokerError, MQClientError, NoRouteError
from shoal.dashboard.accounts import OPEN_USER, User
from shoal.dashboard.history import History
from shoal.dashboard.jobs import JobBoard
from shoal.dashboard.limits import ADMIN_TIMEOUT_S, CSRF_FIELD, SESSION_COOKIE, SESSION_IDLE_S, TOKEN_BYTES
from shoal.dashboard.sessions import Session, SessionStore, csrf_matches
from shoal.dashboard.settings import DashboardSettings
from shoal.protocol import ResponseCode

log = logging.getLogger(__name__)

LOGIN_COOKIE = "shoal_dashboard_login"  # the CSRF token of the login form (double submit)
PUBLIC_PATHS = frozenset({"/login", "/healthz"})
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class Dashboard:
    """What every request of the app shares."""

    settings: DashboardSettings
    sessions: SessionStore = field(default_factory=SessionStore)
    history: History = field(default_factory=History)
    jobs: JobBoard = field(default_factory=JobBoard)
    admins: dict[str, Admin] = field(default_factory=dict)
    """One started Admin per access key ("" for the dashboard's own keys)."""

    def rules(self) -> AclRules | None:
        """The accounts of the ACL file as it is now (re-read, so an edit applies at the next login)."""
        if self.settings.acl_file is None:
            return None
        return load_acl_file(self.settings.acl_file)

    async def admin_for(self, user: User) -> Admin:
        admin = self.admins.get(user.access_key)
        if admin is None:
            access_key, secret_key = user.access_key, user.secret_key
            if user is OPEN_USER or not access_key:
                access_key, secret_key = self.settings.access_key, self.settings.secret_key
            credentials = Credentials(access_key, secret_key) if access_key else None
            client_settings = ClientSettings(
                request_timeout_s=ADMIN_TIMEOUT_S,
                instance_name=f"dashboard-{access_key or 'open'}",
                credentials=credentials,
            )
            admin = Admin(self.settings.namesrv, client_settings=client_settings)
            await admin.start()
            self.admins[user.access_key] = admin
        return admin

    async def close(self) -> None:
        await self.jobs.close()
        for admin in self.admins.values():
            with contextlib.suppress(MQClientError, OSError):
                await admin.shutdown()
        self.admins.clear()


DASHBOARD = web.AppKey("dashboard", Dashboard)
SESSION = "shoal.session"  # request[SESSION]: the Session of a logged-in request


def session_of(request: web.Request) -> Session:
    session: Session = request[SESSION]
    return session


def login_token(request: web.Request) -> str:
    return request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(TOKEN_BYTES)


def set_session_cookie(response: web.StreamResponse, session: Session) -> None:
    response.set_cookie(
        SESSION_COOKIE, session.session_id, httponly=True, samesite="Strict", max_age=int(SESSION_IDLE_S), path="/"
    )


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    response = await handler(request)
    response.headers.update(SECURITY_HEADERS)
    return response


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every page but the login needs a session (opened at once when there are no accounts); every
    POST needs the session's CSRF token; admin pages need an admin."""
    if request.path in PUBLIC_PATHS or request.path.startswith("/static/"):
        return await handler(request)
    dashboard = request.app[DASHBOARD]
    session = dashboard.sessions.find(request.cookies.get(SESSION_COOKIE))
    opened = False
    if session is None:
        if dashboard.settings.acl_file is not None:
            if request.method != "GET":
                raise web.HTTPForbidden(text="log in first")
            raise web.HTTPSeeOther(f"/login?next={request.path_qs}")
        session, opened = dashboard.sessions.open(OPEN_USER), True
    request[SESSION] = session
    if request.method == "POST":
        form = await request.post()
        posted = form.get(CSRF_FIELD)
        if not csrf_matches(session, posted if isinstance(posted, str) else None):
            log.warning("refused a POST to %s from %s: missing or wrong CSRF token", request.path, request.remote)
            raise web.HTTPForbidden(text="the form's CSRF token is missing or stale: reload the page and try again")
        if getattr(handler, "admin_only", False) and not session.user.admin:
            raise web.HTTPForbidden(text=f"{request.path} needs an admin account")
    response = await handler(request)
    if opened:
        set_session_cookie(response, session)
    return response


def admin_only(handler: Handler) -> Handler:
    """Marks a POST handler that changes the cluster: only admin accounts may call it."""
    handler.admin_only = True  # type: ignore[attr-defined]
    return handler


@web.middleware
async def cluster_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """An answer the cluster refused, or a value a person typed wrong, is shown as a page, not a 500."""
    try:
        return await handler(request)
    except NoRouteError as error:
        return _error_page(request, web.HTTPNotFound.status_code, "No such topic", error)
    except MQBrokerError as error:
        if error.code == ResponseCode.TOPIC_NOT_EXIST:
            return _error_page(request, web.HTTPNotFound.status_code, "No such topic", error)
        return _error_page(request, web.HTTPBadGateway.status_code, "The cluster refused or did not answer", error)
    except MQClientError as error:
        return _error_page(request, web.HTTPBadGateway.status_code, "The cluster refused or did not answer", error)
    except (ValueError, AclFileError) as error:
        return _error_page(request, web.HTTPBadRequest.status_code, "That cannot be done", error)


def _error_page(request: web.Request, status: int, title: str, error: Exception) -> web.StreamResponse:
    log.info("%s %s: %s: %s", request.method, request.path, title, error)
    context: dict[str, object] = {
        "title": title,
        "error": str(error),
        "session": request.get(SESSION),
        "csrf_field": CSRF_FIELD,
        "flash": [],
    }
    return aiohttp_jinja2.render_template("error.html", request, context, status=status)
