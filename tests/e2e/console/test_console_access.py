"""Who may do what in the console, and for whom it works: a read-only token
sees why it cannot act and the API refuses it; a role revoked while signed
in is refused with the API's message; memory content never runs as HTML;
axe-core finds no serious violation; search, results and the queue work
from the keyboard; a narrow window lays out without sideways scrolling."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Page, expect

from tests.e2e.console.pages import TOKENS, api, screenshot, sign_in, store, write_tokens

pytestmark = pytest.mark.e2e

XSS = '<img src=x onerror="window.__xss=1;alert(1)"><script>window.__xss=2</script>'
SERIOUS = ("serious", "critical")


async def test_a_read_only_token_cannot_approve_edit_or_delete(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer, api(gateway_url, "read") as reader:
        memory = await store(writer, "Only writers may change this", tags=["roles"])
        pending = await store(writer, "Needs a reviewer's eye", type="Decision", confidence=0.2)
        await sign_in(page, gateway_url, TOKENS["read"])
        await page.goto(f"{gateway_url}/ui/#/memory/{memory}")
        for name, what in (
            ("Edit", "Editing"),
            ("Supersede", "Superseding"),
            ("Archive", "Archiving"),
            ("Delete…", "Deleting"),
        ):
            button = page.get_by_role("button", name=name, exact=True)
            await expect(button).to_be_disabled()
            reason = f"{what} needs the write role; this token's role is read."
            await expect(button).to_have_accessible_description(reason)
            await expect(page.get_by_text(reason)).to_be_visible()
        await screenshot(page, "08-read-only-memory")

        await page.get_by_role("link", name="Review queue").click()
        refusal = page.get_by_role("alert")
        await expect(refusal).to_contain_text("The API refused to show the queue (403)")
        await expect(refusal).to_contain_text("this token's role 'read' may not do this: it needs the 'review' role")
        await expect(page.get_by_role("button", name=re.compile("^Approve"))).to_have_count(0)
        await screenshot(page, "09-read-only-review")

        # The buttons are a courtesy: the API itself refuses the token.
        assert (await reader.post(f"/review/{pending}/approve")).status_code == 403
        assert (await reader.patch(f"/memory/{memory}", json={"content": "changed"})).status_code == 403
        assert (await reader.delete(f"/memory/{memory}")).status_code == 403
        assert (await writer.get(f"/memory/{memory}")).json()["memory"]["content"] == "Only writers may change this"
        assert (await writer.get(f"/memory/{pending}")).json()["memory"]["trust_state"] == "pending_review"


async def test_a_role_revoked_while_signed_in_is_refused_with_the_apis_message(gateway_url, watched, tokens_path):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        memory = await store(writer, "Archived by someone who no longer may", tags=["roles"])
    await sign_in(page, gateway_url, TOKENS["write"])
    await page.goto(f"{gateway_url}/ui/#/memory/{memory}")
    archive = page.get_by_role("button", name="Archive", exact=True)
    await expect(archive).to_be_enabled()
    # The tokens file now makes the write token a reader (the gateway re-reads it every 0.1 s).
    write_tokens(tokens_path, {token: ("read" if role == "write" else role) for role, token in TOKENS.items()})
    async with api(gateway_url, "write") as demoted:
        for _ in range(50):
            if (await demoted.get("/whoami")).json()["role"] == "read":
                break
            await page.wait_for_timeout(100)
    await archive.click()
    notice = page.locator("#notice")
    await expect(notice).to_contain_text("Not allowed (403): this token's role 'read' may not do this")
    await expect(archive).to_be_enabled()  # the page stays usable; nothing changed
    async with api(gateway_url, "admin") as admin:
        assert (await admin.get(f"/memory/{memory}")).json()["memory"]["archived"] is False


async def test_markup_in_memory_content_shows_as_text_and_never_runs(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        memory = await store(writer, f"xss probe {XSS}", tags=["probe"])
        other = await store(writer, "a neighbour of the probe", tags=["probe"])
        await writer.post("/associate", json={"memory1_id": memory, "memory2_id": other, "type": "RELATES_TO"})
        pending = await store(writer, f"pending probe {XSS}", type="Decision", confidence=0.1)
    await sign_in(page, gateway_url, TOKENS["review"])

    await page.get_by_label("Query").fill("xss probe")
    await page.get_by_role("button", name="Search", exact=True).click()
    shown = page.locator("ol.results .content").filter(has_text="xss probe")
    await expect(shown).to_have_text(f"xss probe {XSS}")
    await page.goto(f"{gateway_url}/ui/#/memory/{memory}")
    await expect(page.locator("dl.fields .content")).to_have_text(f"xss probe {XSS}")
    await expect(page.locator("svg.graph a.node")).to_have_count(2)
    await page.goto(f"{gateway_url}/ui/#/review")
    await expect(page.get_by_role("list", name="Pending memories")).to_contain_text(f"pending probe {XSS}")
    await screenshot(page, "10-xss-as-text")

    await page.wait_for_timeout(300)  # time for an image error handler to have fired, were there an image
    assert await page.evaluate("window.__xss") is None
    assert await page.locator("main img, main script").count() == 0
    assert watched.dialogs == []
    assert pending


async def check(page: Page, where: str) -> None:
    results = await Axe().run(page)
    bad = [
        (v["id"], v["impact"], v["help"], [n["target"] for n in v["nodes"]][:3])
        for v in results.response["violations"]
        if v["impact"] in SERIOUS
    ]
    assert bad == [], (where, bad)


async def test_axe_finds_no_serious_violation_on_any_page(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        first = await store(writer, "Accessible pages are the default", type="Decision", confidence=0.9)
        head = await store(
            writer, "Accessible pages are checked by axe", type="Decision", confidence=0.9, supersedes_memory_id=first
        )
        await store(writer, "Is this accessible enough?", type="Decision", confidence=0.2)
    await page.goto(f"{gateway_url}/ui/")
    await page.get_by_label("API token").wait_for()
    await check(page, "sign-in")
    await sign_in(page, gateway_url, TOKENS["admin"])
    await page.get_by_label("Query").fill("accessible")
    await page.get_by_role("button", name="Search", exact=True).click()
    await expect(page.locator("ol.results > li").first).to_be_visible()
    await check(page, "search")
    await page.goto(f"{gateway_url}/ui/#/memory/{head}")
    await expect(page.locator("svg.graph")).to_be_visible()
    await check(page, "memory")
    await page.get_by_role("button", name="Edit").click()
    await check(page, "memory, editing")
    await page.goto(f"{gateway_url}/ui/#/review")
    await expect(page.get_by_role("list", name="Pending memories")).to_be_visible()
    await check(page, "review")
    await page.goto(f"{gateway_url}/ui/#/overview")
    await expect(page.locator(".stream-state")).to_have_text("live")
    await expect(page.get_by_role("heading", name="Backups")).to_be_visible()
    await check(page, "overview")


async def focus_by_tab(page: Page, selector: str, presses: int = 40) -> None:
    """Tab forward until the focused element matches `selector`."""
    for _ in range(presses):
        await page.keyboard.press("Tab")
        if await page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"Tab never reached {selector}")


async def test_search_results_and_the_queue_work_from_the_keyboard(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        await store(writer, "Keyboard users search too", importance=0.9)
        second = await store(writer, "Keyboard users open results too", importance=0.8)
        waiting = await store(writer, "Keyboard users approve too", type="Decision", confidence=0.2)
        await page.goto(f"{gateway_url}/ui/")
        await page.keyboard.type(TOKENS["review"])  # the token box has the focus
        await page.keyboard.press("Enter")
        await page.get_by_role("navigation", name="Pages").wait_for()
        await expect(page.get_by_label("Query")).to_be_focused()
        await page.keyboard.type("keyboard users")
        await page.keyboard.press("Enter")
        await expect(page.locator("ol.results > li")).to_have_count(2)
        await focus_by_tab(page, "a.open")
        outline = await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline != "none"  # the focus can be seen
        await page.keyboard.press("ArrowDown")
        await expect(page.locator("ol.results > li").nth(1).locator("a.open")).to_be_focused()
        await page.keyboard.press("Enter")
        await expect(page).to_have_url(re.compile(f"#/memory/{second}$"))
        await expect(page.get_by_role("heading", level=1)).to_be_focused()

        await page.goto(f"{gateway_url}/ui/#/review")
        await expect(page.get_by_role("list", name="Pending memories")).to_be_visible()
        await focus_by_tab(page, "button.primary")
        await page.keyboard.press("Enter")
        await expect(page.locator("main")).to_contain_text("The queue is empty")
        assert (await writer.get(f"/memory/{waiting}")).json()["memory"]["trust_state"] == "verified"


async def test_a_narrow_window_stacks_the_pages_without_sideways_scrolling(gateway_url, browser):
    context = await browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1)
    page = await context.new_page()
    try:
        async with api(gateway_url, "write") as writer:
            first = await store(writer, "Phones show the console too", tags=["mobile"], type="Decision", confidence=0.9)
            head = await store(
                writer, "Phones show the console stacked", tags=["mobile"], supersedes_memory_id=first, type="Decision"
            )
        await sign_in(page, gateway_url, TOKENS["admin"])
        await page.get_by_label("Query").fill("phones")
        await page.get_by_role("button", name="Search", exact=True).click()
        await expect(page.locator("ol.results > li").first).to_be_visible()
        await screenshot(page, "11-narrow-search")
        assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        await page.goto(f"{gateway_url}/ui/#/memory/{head}")
        await expect(page.locator("svg.graph")).to_be_visible()
        await screenshot(page, "12-narrow-memory")
        assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        await page.goto(f"{gateway_url}/ui/#/overview")
        await expect(page.locator(".stream-state")).to_have_text("live")
        await screenshot(page, "13-narrow-overview")
        assert await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        await context.close()
