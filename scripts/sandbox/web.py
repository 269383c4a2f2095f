"""Small helpers shared by the sandbox's resources."""

from __future__ import annotations

import html
from typing import Any

import falcon

from scripts.sandbox.model import User
from scripts.sandbox.state import ApiError, Sandbox

SESSION_COOKIE = "auth_token"
CLIENT_COOKIE = "client_id"
FIREWALL_COOKIE = "aws-waf-token"


def cookie(req: falcon.Request, name: str) -> str | None:
    values = req.get_cookie_values(name)
    return values[0] if values else None


def viewer(sb: Sandbox, req: falcon.Request) -> User | None:
    return sb.session_user(cookie(req, SESSION_COOKIE))


def require_user(sb: Sandbox, req: falcon.Request) -> User:
    user = viewer(sb, req)
    if user is None:
        raise ApiError(401, "unauthorized")
    return user


def int_param(req: falcon.Request, name: str, default: int, message: str, lo: int = 0, hi: int | None = None) -> int:
    raw = req.get_param(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, message) from None
    if value < lo or (hi is not None and value > hi):
        raise ApiError(400, message)
    return value


def body(req: falcon.Request) -> dict[str, Any]:
    try:
        data = req.get_media(default_when_empty=None)
    except falcon.MediaMalformedError:
        raise ApiError(400, "invalid body") from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid body")
    return data


def html_text(title: str, body_html: str) -> str:
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"</head><body>{body_html}</body></html>"
    )


def html_page(resp: falcon.Response, status: int, title: str, body_html: str) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_HTML
    resp.text = html_text(title, body_html)


def api_error(req: falcon.Request, resp: falcon.Response, ex: ApiError, params: dict[str, Any]) -> None:
    resp.status = ex.status
    resp.media = {"message": ex.message}


def not_found(req: falcon.Request, resp: falcon.Response, ex: Exception, params: dict[str, Any]) -> None:
    """api2 answers JSON; the web host answers its 404 page."""
    if req.path.startswith("/api2/") or req.path.startswith("/__sandbox/"):
        resp.status = 404
        resp.media = {"message": "not found"}
    else:
        html_page(resp, 404, "404", "<h1>404</h1><p>This page could not be found.</p>")
