"""Steps the console's browser tests share: signing in, screenshots, seeding through the API."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page

TENANT = "alpha"
ADMIN_TOKEN = "console-admin-secret"  # noqa: S105  the test stack's ADMIN_API_TOKEN
TOKENS = {role: f"console-{role}-token" for role in ("read", "write", "review", "admin")}
SCREENSHOTS = Path(__file__).resolve().parents[3] / "build" / "screenshots"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: What Chromium logs for an answer that is not a 2xx (a 403 the console shows): not a fault of the page.
EXPECTED_CONSOLE = ("Failed to load resource",)


def chromium_path() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: `make browser` installs Debian's")
        pytest.skip("chromium is not installed: `make browser` installs Debian's")
    return found


def write_tokens(path: Path, roles: dict[str, str]) -> None:
    """The tokens file, written whole and renamed into place; `roles` maps token to role."""
    entries = [
        {"token_sha256": hashlib.sha256(t.encode()).hexdigest(), "tenant": TENANT, "role": r, "id": f"console-{r}"}
        for t, r in roles.items()
    ]
    staged = path.with_suffix(".tmp")
    staged.write_text(json.dumps(entries))
    staged.replace(path)


async def sign_in(page: Page, gateway_url: str, token: str) -> None:
    await page.goto(f"{gateway_url}/ui/")
    await page.get_by_label("API token").fill(token)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("navigation", name="Pages").wait_for()


async def screenshot(page: Page, name: str) -> Path:
    """A full-page screenshot kept as a test artefact under build/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5_000, path  # a picture, not a blank
    return path


def api(gateway_url: str, role: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {TOKENS[role]}"})


async def store(client: httpx.AsyncClient, content: str, **fields) -> str:
    reply = await client.post("/memory", json={"content": content, "type": "Context", **fields})
    assert reply.status_code == 201, reply.text
    return reply.json()["memory_id"]
