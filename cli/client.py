"""The CLI's HTTP client: one kept-alive connection to the gateway, and the
gateway's error envelope turned into a CliError with the exit code it means."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import httpx

#: Exit codes (docs/cli.md). Usage is 1, not click's 2: 2 is "not found".
OK, USAGE, NOT_FOUND, AUTH, CONFLICT, UNAVAILABLE, LIMIT = 0, 1, 2, 3, 4, 5, 6

_BY_STATUS = {400: USAGE, 401: AUTH, 403: AUTH, 404: NOT_FOUND, 409: CONFLICT, 413: USAGE, 422: USAGE, 429: LIMIT}


class CliError(Exception):
    """A failure the CLI reports in one line and exits with `code`."""

    def __init__(self, message: str, code: int, *, status: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.reason = reason


def exit_code_for(status: int) -> int:
    """The exit code of an HTTP error status: 5 for any 5xx (and anything unmapped)."""
    return _BY_STATUS.get(status, USAGE if 400 <= status < 500 else UNAVAILABLE)


@dataclass(frozen=True, slots=True)
class Target:
    """Where the gateway is, and who the caller is."""

    url: str
    token: str | None
    admin_token: str | None = None
    timeout: float = 60.0


class Client:
    """Calls on the gateway. Every method answers the decoded JSON body of a
    2xx reply, or raises CliError (a refused call, or a gateway out of reach)."""

    def __init__(self, target: Target, *, transport: httpx.BaseTransport | None = None):
        headers = {"User-Agent": "memgrid-cli"}
        if target.token:
            headers["Authorization"] = f"Bearer {target.token}"
        if target.admin_token:
            headers["X-Admin-Token"] = target.admin_token
        self.target = target
        self._http = httpx.Client(
            base_url=target.url.rstrip("/"), headers=headers, timeout=target.timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict | None = None,
        headers: dict | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> Any:
        """One call; the body of a 2xx answer (None when empty)."""
        reply = self.send(method, path, json=json, params=params, headers=headers, timeout=timeout, **extra)
        if not reply.content:
            return None
        try:
            return reply.json()
        except ValueError:
            return reply.content

    def send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict | None = None,
        headers: dict | None = None,
        timeout: float | None = None,
        accept: tuple[int, ...] = (),
        **extra: Any,
    ) -> httpx.Response:
        """One call; the 2xx reply itself (its headers too), or one of the `accept` statuses."""
        try:
            reply = self._http.request(
                method,
                path,
                json=json,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers=headers,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
                **extra,
            )
        except httpx.TimeoutException:
            raise CliError(f"{self.target.url}: no answer in time ({method} {path})", UNAVAILABLE) from None
        except httpx.TransportError as exc:
            raise CliError(f"cannot reach memgrid at {self.target.url}: {exc}", UNAVAILABLE) from None
        if reply.status_code >= 400 and reply.status_code not in accept:
            raise _refused(reply)
        return reply

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Any:
        return self.request("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> Any:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.request("DELETE", path, **kw)

    def stream(self, method: str, path: str, **kw: Any):
        """A streamed call (a download), as httpx's context manager; errors raise CliError."""
        return _Streamed(self, method, path, kw)


class _Streamed:
    def __init__(self, client: Client, method: str, path: str, kw: dict):
        self._client, self._method, self._path, self._kw = client, method, path, kw
        self._cm: AbstractContextManager[httpx.Response] | None = None

    def __enter__(self) -> httpx.Response:
        try:
            self._cm = cm = self._client._http.stream(self._method, self._path, **self._kw)
            reply = cm.__enter__()
        except httpx.TransportError as exc:
            raise CliError(f"cannot reach memgrid at {self._client.target.url}: {exc}", UNAVAILABLE) from None
        if reply.status_code >= 400:
            reply.read()
            error = _refused(reply)
            cm.__exit__(None, None, None)
            raise error
        return reply

    def __exit__(self, *exc) -> None:
        if self._cm is not None:
            self._cm.__exit__(*exc)


def _refused(reply: httpx.Response) -> CliError:
    """The envelope {"status": "error", "code", "message", "reason"?} as a CliError."""
    message, reason = reply.reason_phrase or "error", None
    try:
        body = reply.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        message = str(body.get("message") or body.get("detail") or message)
        reason = body.get("reason") if isinstance(body.get("reason"), str) else None
    return CliError(
        f"{reply.status_code}: {message}", exit_code_for(reply.status_code), status=reply.status_code, reason=reason
    )
