"""Browser fixtures of the dashboard tests: Debian's chromium driven by Playwright.

``browser`` (one per module) skips the test, saying why, when /usr/bin/chromium or the playwright
package is missing; Playwright never downloads a browser here. ``page`` is a fresh browser context
(its own cookies, so its own dashboard session) on the module's ``base_url`` fixture; it records
every JavaScript dialog and leaves a screenshot of its last page under test-artifacts/dashboard/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
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
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "dashboard"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(
            "needs Debian's chromium at /usr/bin/chromium (apt-get install chromium; .ci/run installs it)"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="needs the playwright package (pip install -e '.[dev]')"
    )
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


class Page:
    """A fresh browser context's page, the dialogs it saw, and its base URL."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.dialogs: list[str] = []
        page.on("dialog", self._on_dialog)
        page.set_default_timeout(20_000)

    def _on_dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def go(self, path: str) -> Any:
        resp = self.page.goto(self.base_url + path)
        assert resp is not None
        return resp

    def text(self, selector: str) -> str:
        return str(self.page.locator(selector).first.inner_text())

    def submit(self, form: str, **fields: str) -> None:
        """Fill ``fields`` of the form matching ``form`` and press its submit button."""
        f = self.page.locator(form)
        for name, value in fields.items():
            f.locator(f"[name={name}]").fill(value)
        f.locator("button[type=submit]").click()
        self.page.wait_for_load_state()


@pytest.fixture
def page(browser: Any, base_url: str, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context()
    p = Page(context.new_page(), base_url)
    try:
        yield p
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"{request.node.module.__name__.rsplit('.', 1)[-1]}-{request.node.name}.png"
        try:
            p.page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot: {shot}")
        finally:
            context.close()
