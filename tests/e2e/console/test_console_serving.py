"""The console's files as the gateway serves them (no browser): under /ui,
every answer with the strict Content-Security-Policy, nothing loaded from
another origin, no inline script or style, every module it imports served;
and GET /whoami, which the console reads to know what a token may do."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from gateway.console.mount import ASSET_DIR, CSP
from tests.e2e.conftest import API_TOKEN
from tests.e2e.console.pages import ADMIN_TOKEN, TENANT, TOKENS

pytestmark = pytest.mark.e2e

STATIC = Path(ASSET_DIR)
IMPORT = re.compile(r"""^\s*import\s[^'"]*['"]([^'"]+)['"]""", re.MULTILINE)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def test_the_policy_allows_nothing_inline_and_no_other_origin():
    rules = dict(part.strip().split(" ", 1) for part in CSP.split(";"))
    assert rules["default-src"] == rules["script-src"] == rules["style-src"] == rules["connect-src"] == "'self'"
    assert rules["object-src"] == rules["frame-ancestors"] == rules["base-uri"] == "'none'"
    assert "unsafe" not in CSP and "http" not in CSP


async def test_ui_redirects_to_the_page_which_carries_the_policy(anonymous):
    redirect = await anonymous.get("/ui")
    assert redirect.status_code == 308 and redirect.headers["location"] == "/ui/"
    page = await anonymous.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"


async def test_the_page_loads_only_its_own_files_and_nothing_inline(anonymous):
    page = await anonymous.get("/ui/")
    tags = Tags()
    tags.feed(page.text)
    scripts = [a for t, a in tags.found if t == "script"]
    assert scripts and all(a.get("src") and a.get("type") == "module" for a in scripts)
    assert "<style" not in page.text
    assert not [a for _, a in tags.found if "style" in a or any(k.startswith("on") for k in a)]


def test_no_file_names_another_origin_or_writes_html():
    for path in STATIC.rglob("*"):
        if path.suffix in (".html", ".js", ".css"):
            text = path.read_text()
            assert "https://" not in text and "//cdn" not in text, path
            assert ".innerHTML" not in text and "insertAdjacentHTML" not in text and "eval(" not in text, path


async def test_every_module_and_what_it_imports_is_served_as_javascript(anonymous):
    modules = sorted((STATIC / "js").glob("*.js"))
    assert len(modules) >= 8
    for module in modules:
        answer = await anonymous.get(f"/ui/js/{module.name}")
        assert answer.status_code == 200, module
        assert "javascript" in answer.headers["content-type"]
        assert answer.headers["content-security-policy"] == CSP
        for target in IMPORT.findall(answer.text):
            assert target.startswith("./") and (STATIC / "js" / target).exists(), (module.name, target)
    style = await anonymous.get("/ui/console.css")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")


async def test_a_missing_file_is_a_404_in_the_envelope(anonymous):
    answer = await anonymous.get("/ui/js/missing.js")
    assert answer.status_code == 404 and answer.json()["status"] == "error"


@pytest.mark.parametrize("role", sorted(TOKENS))
async def test_whoami_names_the_tokens_tenant_and_role(gateway_url, role):
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {TOKENS[role]}"}) as c:
        answer = await c.get("/whoami")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "status": "success",
        "tenant": TENANT,
        "role": role,
        "token_id": f"console-{role}",
        "operator": False,
    }


async def test_whoami_needs_a_token(anonymous):
    assert (await anonymous.get("/whoami")).status_code == 401
    assert (await anonymous.get("/whoami", headers={"Authorization": "Bearer nope"})).status_code == 401


async def test_whoami_raises_the_single_token_to_operator_with_the_admin_token(gateway_url, stack_settings):
    async with httpx.AsyncClient(base_url=gateway_url, headers={"Authorization": f"Bearer {API_TOKEN}"}) as c:
        plain = (await c.get("/whoami")).json()
        raised = (await c.get("/whoami", headers={"X-Admin-Token": ADMIN_TOKEN})).json()
        wrong = (await c.get("/whoami", headers={"X-Admin-Token": "not-it"})).json()
    tenant = stack_settings.gateway.default_tenant
    assert plain == {"status": "success", "tenant": tenant, "role": "write", "token_id": "legacy", "operator": False}
    assert raised == {**plain, "role": "operator", "operator": True}
    assert wrong == plain
