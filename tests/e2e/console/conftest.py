"""The console tests' fixtures: a tenant with a token per role,
the system's Chromium driven by Playwright, a signed-in page, screenshots.

Chromium is Debian's (`make browser` installs it); Playwright's own browser
download is never used. The gateway and the services are the embedded stack
of tests/e2e/conftest.py, in this event loop, so the async API drives them."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, async_playwright

from tests.e2e.console.pages import ADMIN_TOKEN, CHROMIUM_ARGS, EXPECTED_CONSOLE, TOKENS, chromium_path, write_tokens


@pytest.fixture
def tokens_path(tmp_path):
    path = tmp_path / "tokens.json"
    write_tokens(path, {token: role for role, token in TOKENS.items()})
    return path


@pytest.fixture
def stack_settings(settings, tokens_path):
    return settings.override(
        {
            "enrichment_enabled": False,
            "memgrid_tokens_file": tokens_path,
            "tokens_file_check_seconds": 0.1,
            "admin_api_token": ADMIN_TOKEN,
            # A low-confidence Decision waits for review: the queue has something to decide.
            "review_low_confidence_types": ["Decision"],
        }
    )


@pytest.fixture(scope="module")
async def browser():
    path = chromium_path()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


class Watched:
    """A page and what went wrong in it: script errors, dialogs, console errors."""

    def __init__(self, page: Page):
        self.page = page
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on(
            "console",
            lambda message: (
                self.errors.append(f"console: {message.text}")
                if message.type == "error" and not message.text.startswith(EXPECTED_CONSOLE)
                else None
            ),
        )

        async def on_dialog(dialog) -> None:
            self.dialogs.append(f"{dialog.type}: {dialog.message}")
            await dialog.dismiss()

        page.on("dialog", on_dialog)


@pytest.fixture
async def watched(browser):
    """A fresh browser context (its own sessionStorage) at a desktop size; no
    script error, CSP refusal or dialog may happen in it."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    watched = Watched(await context.new_page())
    try:
        yield watched
        assert watched.errors == [], watched.errors
        assert watched.dialogs == [], watched.dialogs
    finally:
        await context.close()
