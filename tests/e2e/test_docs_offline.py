"""/docs (Swagger UI) and /redoc (ReDoc) work without internet: every
script and style they load comes from the gateway itself, never a CDN,
and both stay open without a token, as /openapi.json is."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

pytestmark = pytest.mark.e2e

CDNS = ("cdn.jsdelivr", "unpkg", "cdnjs", "googleapis", "fastapi.tiangolo.com")


class Assets(HTMLParser):
    """The URLs a page loads: scripts, stylesheets, its icon, and ReDoc's spec-url."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.icons: list[str] = []
        self.specs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        rel = found.get("rel", "").split()
        if tag == "script" and "src" in found:
            self.scripts.append(found["src"])
        elif tag == "link" and "stylesheet" in rel:
            self.styles.append(found["href"])
        elif tag == "link" and "icon" in rel:
            self.icons.append(found["href"])
        elif tag == "redoc":
            self.specs.append(found["spec-url"])


async def loaded(anonymous, path: str) -> tuple[str, Assets]:
    page = await anonymous.get(path)
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    assets = Assets()
    assets.feed(page.text)
    return page.text, assets


async def assert_served(anonymous, url: str, kind: str, at_least: int) -> None:
    assert url.startswith("/") and not url.startswith("//"), url  # the gateway's own origin
    answer = await anonymous.get(url)
    assert answer.status_code == 200, (url, answer.status_code)
    assert kind in answer.headers["content-type"], (url, answer.headers["content-type"])
    assert len(answer.content) >= at_least, (url, len(answer.content))


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_the_docs_pages_load_nothing_from_another_origin(anonymous, path):
    text, assets = await loaded(anonymous, path)
    assert "http://" not in text and "https://" not in text
    assert not [cdn for cdn in CDNS if cdn in text]
    assert assets.scripts, "the page loads its viewer's script"
    for script in assets.scripts:
        await assert_served(anonymous, script, "javascript", 100_000)  # the bundle, not an error page
    for style in assets.styles:
        await assert_served(anonymous, style, "text/css", 10_000)
    for icon in assets.icons:
        await assert_served(anonymous, icon, "image/", 100)
    for spec in assets.specs:
        await assert_served(anonymous, spec, "application/json", 10_000)


async def test_swagger_ui_has_its_style_and_reads_the_description(anonymous):
    text, assets = await loaded(anonymous, "/docs")
    assert [s.rsplit("/", 1)[-1] for s in assets.styles] == ["swagger-ui.css"]
    assert "url: '/openapi.json'" in text
    redirect = await anonymous.get("/docs/oauth2-redirect")
    assert redirect.status_code == 200
    assert "http://" not in redirect.text and "https://" not in redirect.text


async def test_the_docs_pages_stay_out_of_the_description(anonymous):
    paths = (await anonymous.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith(("/docs", "/redoc"))]


async def test_an_unknown_asset_is_a_404_in_the_envelope(anonymous):
    answer = await anonymous.get("/docs/assets/missing.js")
    assert answer.status_code == 404
    assert answer.json()["status"] == "error"
