"""A small JSON client for the test API server (the admin's client certificate), for the process runner.

Plain urllib keeps every request visible: the runner only lists pods, reads volumes' sources, patches
pod status (JSON merge patch), deletes pods and asks for service-account tokens.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

REQUEST_TIMEOUT_S = 30.0

Object = dict[str, Any]


class ApiError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: {status} {body[:500]}")
        self.status = status


@dataclass(frozen=True)
class KubeApi:
    server: str
    ca_cert: str
    client_cert: str
    client_key: str

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_cert)
        context.load_cert_chain(self.client_cert, self.client_key)
        return context

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S, context=self._context()) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, method, path, error.read().decode(errors="replace")) from None

    def get(self, path: str) -> Object | None:
        try:
            found: Object = self.request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        return found

    def items(self, path: str, **query: str) -> list[Object]:
        suffix = f"?{urllib.parse.urlencode(query)}" if query else ""
        listed: list[Object] = self.request("GET", path + suffix)["items"]
        return listed

    def merge_patch(self, path: str, changes: Object) -> Object:
        patched: Object = self.request("PATCH", path, changes, "application/merge-patch+json")
        return patched

    def delete(self, path: str, options: Object | None = None) -> None:
        try:
            self.request("DELETE", path, options)
        except ApiError as error:
            if error.status not in (404, 409):  # gone already, or replaced (uid precondition)
                raise


def pod_path(namespace: str, name: str, subresource: str = "") -> str:
    suffix = f"/{subresource}" if subresource else ""
    return f"/api/v1/namespaces/{namespace}/pods/{name}{suffix}"
