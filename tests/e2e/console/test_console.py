"""The web console in a real browser (headless Chromium) against the whole
stack: sign in with a token, search, open a memory, walk its supersession
chain, approve a pending memory, see a live event arrive; screenshots of
each page are kept under build/screenshots/."""

from __future__ import annotations

import re

import pytest
from playwright.async_api import expect

from tests.e2e.console.pages import TENANT, TOKENS, api, screenshot, sign_in, store

pytestmark = pytest.mark.e2e


async def test_a_token_signs_in_and_a_search_shows_scored_results(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        await store(writer, "The release train leaves on Tuesdays", tags=["ops", "release"], importance=0.8)
        await store(writer, "Lunch is at noon", tags=["office"])
    await page.goto(f"{gateway_url}/ui/")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await screenshot(page, "01-sign-in")
    await page.get_by_label("API token").fill(TOKENS["write"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#who")).to_have_text(f"tenant {TENANT} · role write")
    assert await page.evaluate("sessionStorage.getItem('memgrid.token')") == TOKENS["write"]

    await page.get_by_label("Query").fill("release train")
    await page.get_by_role("button", name="Search", exact=True).click()
    results = page.get_by_role("list", name="Results").get_by_role("listitem")
    first = results.first
    await expect(first).to_contain_text("The release train leaves on Tuesdays")
    await expect(first).to_contain_text("match ")
    await expect(first.get_by_role("list", name="Score components")).to_contain_text("keyword")
    await expect(first).to_contain_text("active")
    await expect(first).to_contain_text("valid ")
    await expect(page.locator("#results h2")).to_have_text(re.compile(r"^\d+ results? · current"))
    await screenshot(page, "02-search")


async def supersession_chain(writer) -> list[str]:
    """Three versions of one decision (each superseding the one before) and a related note: their ids."""
    first = await store(writer, "We deploy on Fridays", type="Decision", confidence=0.9, tags=["deploys"])
    ids = [first]
    for content in ("We deploy on Tuesdays", "We deploy on Tuesday mornings"):
        ids.append(
            await store(
                writer,
                content,
                type="Decision",
                confidence=0.9,
                tags=["deploys"],
                supersedes_memory_id=ids[-1],
                supersede_relation="EVOLVED_INTO",
                supersede_reason="the team moved",
            )
        )
    note = await store(writer, "Tuesday deploys need the on-call engineer", tags=["deploys"])
    linked = await writer.post("/associate", json={"memory1_id": ids[-1], "memory2_id": note, "type": "RELATES_TO"})
    assert linked.status_code in (200, 201), linked.text
    return [*ids, note]


async def test_open_a_memory_and_walk_its_supersession_chain_both_ways(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        first, second, head, note = await supersession_chain(writer)
    await sign_in(page, gateway_url, TOKENS["write"])

    await page.get_by_label("Query").fill("deploy")
    await page.get_by_label("State mode").select_option("history")
    await page.get_by_role("button", name="Search", exact=True).click()
    old = page.get_by_role("list", name="Results").get_by_role("listitem").filter(has_text="We deploy on Fridays")
    await expect(old).to_contain_text("superseded")
    await expect(old.locator(".replaced")).to_contain_text("Superseded (evolved into) by “We deploy on Tuesdays”")

    current = page.get_by_role("article", name="We deploy on Tuesday mornings", exact=True)
    await current.get_by_role("link", name="Open memory").click()
    await expect(page).to_have_url(re.compile(f"#/memory/{head}$"))
    chain = page.get_by_role("list", name="Supersession chain, oldest first").get_by_role("listitem")
    await expect(chain).to_have_count(3)
    await expect(chain.nth(0)).to_contain_text("We deploy on Fridays")
    await expect(chain.nth(0)).to_contain_text("evolved into (“the team moved”)")
    await expect(chain.nth(2)).to_contain_text("this memory: “We deploy on Tuesday mornings”")
    history = page.locator("table.history tbody tr")
    await expect(history.first).to_contain_text("created")
    await expect(history.first).to_contain_text("console-write")
    graph = page.locator("svg.graph")
    await expect(graph.locator("a.node")).to_have_count(4)  # the head, its predecessor (and theirs), the note
    await expect(page.get_by_role("list", name="Edge types")).to_contain_text("EVOLVED_INTO")
    await expect(page.get_by_role("list", name="Edge types")).to_contain_text("RELATES_TO")
    await screenshot(page, "03-memory")

    # Back down the chain to the oldest: it says it is superseded and names its head.
    await chain.nth(0).get_by_role("link").click()
    await expect(page).to_have_url(re.compile(f"#/memory/{first}$"))
    await expect(page.locator(".banner")).to_contain_text("This memory is superseded")
    await expect(chain).to_have_count(3)  # the same chain, seen from its other end
    await expect(page.locator("table.history tbody")).to_contain_text("superseded")
    await screenshot(page, "04-memory-superseded")

    # A node of the graph moves to its memory.
    await page.locator(f'svg.graph a.node[href="#/memory/{second}"]').click()
    await expect(page).to_have_url(re.compile(f"#/memory/{second}$"))
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Memory {second[:8]}")
    await expect(page.locator("dl.fields")).to_contain_text("We deploy on Tuesdays")


async def test_edit_archive_supersede_and_delete_with_a_reason(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        memory = await store(writer, "Standups are at 9:30", tags=["team"])
        await sign_in(page, gateway_url, TOKENS["write"])
        await page.goto(f"{gateway_url}/ui/#/memory/{memory}")

        await page.get_by_role("button", name="Edit").click()
        await page.get_by_label("Content", exact=True).fill("Standups are at 9:45")
        await page.get_by_role("button", name="Save changes").click()
        await expect(page.locator("#notice")).to_contain_text("Saved.")
        await expect(page.locator("dl.fields")).to_contain_text("Standups are at 9:45")
        assert (await writer.get(f"/memory/{memory}")).json()["memory"]["content"] == "Standups are at 9:45"

        await page.get_by_role("button", name="Archive", exact=True).click()
        await expect(page.locator("#notice")).to_contain_text("Archived")
        await expect(page.get_by_role("button", name="Restore from archive")).to_be_visible()
        assert (await writer.get(f"/memory/{memory}")).json()["memory"]["archived"] is True
        await page.get_by_role("button", name="Restore from archive").click()
        await expect(page.locator("#notice")).to_contain_text("Restored from the archive")
        await expect(page.get_by_role("button", name="Archive", exact=True)).to_be_visible()

        await page.get_by_role("button", name="Supersede").click()
        await page.get_by_label("Replacement content").fill("Standups are at 10:00")
        await page.get_by_label("Why it is replaced").select_option("EVOLVED_INTO")
        await page.get_by_label("Reason for superseding").fill("later start")
        await page.get_by_role("button", name="Supersede", exact=True).last.click()
        await expect(page.locator("#notice")).to_contain_text("Superseded")
        await expect(page.locator("dl.fields")).to_contain_text("Standups are at 10:00")
        replacement = page.url.rsplit("/", 1)[-1]
        assert replacement != memory
        assert (await writer.get(f"/memory/{memory}")).json()["memory"]["trust_state"] == "superseded"

        await page.get_by_role("button", name="Delete…").click()
        await page.get_by_label("Reason for deleting").select_option("rejected")
        await page.get_by_role("button", name="Delete for good").click()
        await expect(page.locator("#notice")).to_contain_text("tombstone")
        await expect(page.locator("main")).to_contain_text("This memory is deleted. Its audit history stays")
        await expect(page.locator("table.history tbody")).to_contain_text("deleted")
        assert (await writer.get(f"/memory/{replacement}")).status_code == 404
        again = await writer.post("/memory", json={"content": "Standups are at 10:00", "type": "Context"})
        assert again.status_code == 409 and again.json()["reason"] == "CONTENT_TOMBSTONED"


async def test_approve_a_pending_memory_in_the_review_queue(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        waiting = await store(writer, "Maybe we should rewrite it in Rust", type="Decision", confidence=0.3)
        other = await store(writer, "Perhaps drop the cache layer", type="Decision", confidence=0.2)
        await sign_in(page, gateway_url, TOKENS["review"])
        await page.get_by_role("link", name="Review queue").click()
        queue = page.get_by_role("list", name="Pending memories").get_by_role("listitem")
        await expect(queue).to_have_count(2)
        item = queue.filter(has_text="rewrite it in Rust")
        await expect(item).to_contain_text("Why it waits: Its type is reviewed when its confidence is low")
        await expect(item).to_contain_text("confidence 0.30")
        await screenshot(page, "05-review-queue")

        await item.get_by_role("button", name=re.compile("^Approve")).click()
        notice = page.locator("#notice")
        await expect(notice).to_contain_text("Approved “Maybe we should rewrite it in Rust”: now verified")
        await expect(queue).to_have_count(1)
        assert (await writer.get(f"/memory/{waiting}")).json()["memory"]["trust_state"] == "verified"

        await queue.first.get_by_label("Note").fill("not now")
        await queue.first.get_by_role("button", name=re.compile("^Reject")).click()
        await expect(page.locator("main")).to_contain_text("The queue is empty")
        assert (await writer.get(f"/memory/{other}")).json()["memory"]["trust_state"] == "rejected"
        history = (await writer.get(f"/memory/{other}/history")).json()["entries"]
        assert any(e["kind"] == "reviewed" and e["actor"] == "console-review" for e in history)


async def test_the_overview_shows_counts_and_live_events_resuming_after_a_pause(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        await store(writer, "Counted before the page opens", type="Insight")
        await store(writer, "Waits for a reviewer", type="Decision", confidence=0.3)
        await sign_in(page, gateway_url, TOKENS["read"])
        await page.get_by_role("link", name="Overview").click()
        state = page.locator(".stream-state")
        await expect(state).to_have_text("live")
        await expect(page.locator(".counts").filter(has_text="By type")).to_contain_text("Insight")
        await expect(page.locator(".counts").filter(has_text="By trust state")).to_contain_text("pending_review")
        await expect(page.locator("#s-enrichment-backlog + dl")).to_contain_text("waiting for enrichment")

        live = await store(writer, "Arrives while the page watches", type="Context")
        events = page.get_by_role("list", name="Recent events, newest first").get_by_role("listitem")
        await expect(events.filter(has=page.locator(f'a[href="#/memory/{live}"]'))).to_contain_text("created")
        await screenshot(page, "06-overview")

        # Paused, the connection is closed; what happens meanwhile arrives on resume (Last-Event-ID).
        await page.get_by_role("button", name="Pause").click()
        await expect(state).to_have_text("paused: events are caught up on resume")
        missed = await store(writer, "Stored while the stream was paused", type="Context")
        await page.get_by_role("button", name="Resume").click()
        await expect(state).to_have_text(re.compile(r"^live \(resumed after event #\d+\)$"))
        await expect(events.filter(has=page.locator(f'a[href="#/memory/{missed}"]'))).to_contain_text("created")
        # The backups are an admin's: a reader is not offered them; running consolidation is a writer's.
        await expect(page.get_by_role("heading", name="Backups")).to_have_count(0)
        dry_run = page.get_by_role("button", name="Dry run now")
        await expect(dry_run).to_be_disabled()
        await expect(dry_run).to_have_accessible_description(
            "Running consolidation needs the write role; this token's role is read."
        )


async def test_an_admin_runs_consolidation_and_creates_downloads_and_restores_a_backup(gateway_url, watched):
    page = watched.page
    async with api(gateway_url, "write") as writer:
        await store(writer, "Worth keeping a copy of", type="Insight")
    await sign_in(page, gateway_url, TOKENS["admin"])
    await page.get_by_role("link", name="Overview").click()
    consolidation = page.locator("section", has=page.get_by_role("heading", name="Consolidation"))
    await expect(consolidation).to_contain_text("No run yet.")
    await page.get_by_role("button", name="Dry run now").click()
    await expect(page.locator("#notice")).to_contain_text("Nothing was changed.")
    runs = consolidation.locator("table").last.locator("tbody tr")
    await expect(runs.filter(has_text="decay (dry run)")).to_contain_text("success")

    await page.get_by_role("button", name="Create a backup now").click()
    await expect(page.locator("#notice")).to_contain_text("written")
    row = page.locator("section", has=page.get_by_role("heading", name="Backups")).locator("tbody tr").first
    await expect(row).to_contain_text(TENANT)
    async with page.expect_download() as download:
        await row.get_by_role("button", name="Download").click()
    saved = await (await download.value).path()
    assert saved.read_bytes()[:2] == b"\x1f\x8b"  # a gzip archive
    await row.get_by_role("button", name="Restore…").click()
    dialog = page.get_by_role("alertdialog")
    await expect(dialog).to_contain_text(f"into tenant {TENANT}?")
    await screenshot(page, "07-backup-restore-confirm")
    await dialog.get_by_role("button", name=re.compile("^Restore ")).click()
    await expect(page.locator("#notice")).to_contain_text("Restored")
    await expect(dialog).to_be_hidden()
