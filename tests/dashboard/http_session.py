"""A minimal HTTP session for the dashboard's tests: a cookie jar, no automatic redirects, form
posts, the CSRF token of a page, a login."""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Browser:
    """A cookie jar and no automatic redirects: each answer is seen as it is."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirect()
        )

    def request(self, path: str, form: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            with self.opener.open(self.base + path, data=data, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()

    def token(self, path: str) -> str:
        status, _headers, page = self.request(path)
        assert status == 200, page
        match = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert match is not None, page
        return match.group(1)

    def log_in(self, access_key: str, secret_key: str) -> int:
        token = self.token("/login")
        status, headers, _page = self.request(
            "/login", {"csrf_token": token, "access_key": access_key, "secret_key": secret_key, "next": "/topics"}
        )
        if status == 303:
            assert headers["Location"] == "/topics"
        return status
