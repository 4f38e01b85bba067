"""The dashboard in a real browser (fixtures in this folder's conftest: Debian's chromium driven by
Playwright), against real daemons and ``rocketpy dashboard`` running as a subprocess. Skips, saying
why, without chromium or playwright; each test leaves a screenshot under test-artifacts/dashboard/."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator

import pytest

from rocketpy import Admin, Message
from rocketpy.topic import retry_topic
from tests.conftest import DaemonPool
from tests.dashboard_support import (
    HOSTILE,
    DashboardProcess,
    make_dead_letters,
    run_async,
    send,
    total_max_offset,
    traced_message,
)
from tests.integration.dashboard.conftest import ARTIFACTS, Page


@pytest.fixture(scope="module")
def ns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pool = DaemonPool(tmp_path_factory.mktemp("dashboard-daemons"))
    try:
        addr = pool.namesrv().addr
        pool.broker(addr)
        yield str(addr)
    finally:
        pool.stop_all()


@pytest.fixture(scope="module")
def base_url(ns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    dash = DashboardProcess(ns, tmp_path_factory.mktemp("dashboard"))
    try:
        yield dash.url
    finally:
        code = dash.stop()
        stderr = dash.stderr_path.read_text()
        assert code == 0 and "Traceback" not in stderr, stderr


def test_cluster_page_shows_the_broker_and_a_live_chart(page: Page) -> None:
    page.go("/")
    assert page.page.url.endswith("/cluster")
    row = page.text("#brokers tbody tr")
    assert "DefaultCluster" in row and "broker-a" in row and "MASTER" in row
    page.page.wait_for_function("() => Number(document.querySelector('#tps-chart').dataset.points) >= 2")
    assert page.page.locator("#tps-chart svg polyline").count() == 2  # put and get of one broker
    assert "broker-a/0 put" in page.text("#tps-chart .legend")


def test_topic_create_search_previews_and_hostile_body_inert(page: Page, ns: str) -> None:
    page.go("/topics")
    form = page.page.locator("#create-topic")
    form.locator("input[name=topic]").fill("BrowserT")
    form.locator("input[name=read_queues]").fill("2")
    form.locator("input[name=write_queues]").fill("2")
    form.locator("button[type=submit]").click()
    page.page.wait_for_url("**/topics/BrowserT")
    assert "Topic BrowserT created on" in page.text(".flash.ok")
    assert page.page.locator("#queues tbody tr").count() == 2

    run_async(
        send(
            ns,
            "BrowserT",
            Message("BrowserT", b"plain text body", keys="k-text"),
            Message("BrowserT", b'{"order": 7, "items": ["a"]}', keys="k-json"),
            Message("BrowserT", HOSTILE.encode(), keys="k-evil", properties={"x": "<b>bold</b>"}),
        )
    )

    def search(key: str) -> None:
        page.go("/messages")
        f = page.page.locator("#search-key")
        f.locator("input[name=topic]").fill("BrowserT")
        f.locator("input[name=key]").fill(key)
        f.locator("button[type=submit]").click()
        page.page.wait_for_selector("#result-count")

    search("k-text")
    assert page.text("#result-count") == "1 message(s) found"
    assert page.text(".body-text pre") == "plain text body" and page.text(".msg-keys") == "k-text"
    assert page.page.locator(".body-json").count() == 0
    assert page.text(".body-hex pre").startswith("00000000  70 6c 61 69 6e")  # "plain"

    search("k-json")
    assert page.text(".body-json pre") == '{\n  "items": [\n    "a"\n  ],\n  "order": 7\n}'

    search("k-evil")
    assert page.text(".body-text pre") == HOSTILE  # shown as text...
    assert page.page.locator("main script, main img, main b").count() == 0  # ...never as elements
    page.page.locator("details.properties summary").click()
    assert "<b>bold</b>" in page.text("details.properties")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.page.content()
    assert page.dialogs == []  # no alert() ran


def test_delete_topic_needs_confirmation(page: Page, ns: str) -> None:
    async def create() -> None:
        async with Admin(ns) as admin:
            await admin.create_topic("DoomedT", "DefaultCluster", read_queue_nums=1, write_queue_nums=1)

    run_async(create())
    page.go("/topics/DoomedT")
    page.page.locator("#delete-topic").click()
    page.page.wait_for_url("**/topics/DoomedT/delete")
    page.page.locator("#confirm-delete input[name=confirm]").fill("doomedt")
    page.page.locator("#confirm-delete button[type=submit]").click()
    assert "type its name 'DoomedT' exactly" in page.text("#error")

    page.go("/topics/DoomedT/delete")
    page.page.locator("#confirm-delete input[name=confirm]").fill("DoomedT")
    page.page.locator("#confirm-delete button[type=submit]").click()
    page.page.wait_for_url("**/topics")
    assert "Topic DoomedT deleted." in page.text(".flash.ok")

    async def topics() -> list[str]:
        async with Admin(ns) as admin:
            return list(await admin.topic_list())

    assert "DoomedT" not in run_async(topics())


def test_group_lag_chart_and_reset_offset_by_time(page: Page, ns: str) -> None:
    async def setup() -> None:
        async with Admin(ns) as admin:
            await admin.create_topic("LagB", "DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        await send(ns, "LagB", *(Message("LagB", f"m{i}".encode()) for i in range(4)))
        async with Admin(ns) as admin:
            await admin.update_subscription_group("g_browser", "DefaultCluster")
            await admin.reset_offset_by_time("g_browser", "LagB", 0)

    run_async(setup())
    page.go("/groups")
    page.page.locator("#groups a", has_text="g_browser").click()
    page.page.wait_for_url("**/groups/g_browser")
    assert page.text("#total-lag") == "4"
    assert sorted(page.page.locator("#progress td.lag").all_inner_texts()) == ["2", "2"]
    page.page.wait_for_function("() => Number(document.querySelector('#lag-chart').dataset.points) >= 1")
    assert "total: 4" in page.text("#lag-chart .legend")

    later = (_dt.datetime.now() + _dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
    form = page.page.locator("#reset-offset")
    form.locator("input[name=topic]").fill("LagB")
    form.locator("input[name=time]").fill(later)
    form.locator("button[type=submit]").click()
    page.page.wait_for_selector(".flash.ok")
    assert "Offsets of g_browser on LagB reset to" in page.text(".flash.ok")
    assert page.text("#total-lag") == "0"


def test_dead_letters_browse_and_resend(page: Page, ns: str) -> None:
    async def setup() -> int:
        async with Admin(ns) as admin:
            await admin.create_topic("DeadB", "DefaultCluster", read_queue_nums=1, write_queue_nums=1)
        await make_dead_letters(ns, "DeadB", "g_dead_browser", [b"first dead", HOSTILE.encode()])
        async with Admin(ns) as admin:
            return await total_max_offset(admin, retry_topic("g_dead_browser"))

    retry_before = run_async(setup())
    page.go("/dlq")
    page.page.locator("#dlq-group select").select_option("g_dead_browser")
    page.page.locator("#dlq-group button").click()
    page.page.wait_for_selector("#dlq-total")
    assert page.text("#dlq-total") == "2"
    assert sorted(page.page.locator(".dead-letter .body-text pre").all_inner_texts()) == sorted(
        ["first dead", HOSTILE]
    )
    assert page.page.locator("main script, main img").count() == 0 and page.dialogs == []

    letter = page.page.locator(".dead-letter", has_text="first dead")
    letter.locator(".resend-one button").click()
    page.page.wait_for_selector(".flash.ok")
    assert "Resent message" in page.text(".flash.ok") and "(1 sent)" in page.text(".flash.ok")

    async def retry_now() -> int:
        async with Admin(ns) as admin:
            return await total_max_offset(admin, retry_topic("g_dead_browser"))

    assert run_async(retry_now()) == retry_before + 1


def test_message_trace_timeline_from_the_search_page(page: Page, ns: str) -> None:
    msg = Message("TraceB", b"traced in a browser")
    msg_id = run_async(traced_message(ns, "TraceB", "g_trace_browser", "pg_trace_browser", msg))
    page.go("/messages")
    page.page.locator("#search-trace input[name=msg_id]").fill(msg_id)
    page.page.locator("#search-trace button").click()
    page.page.wait_for_selector("#timeline")
    kinds = page.page.locator("#timeline .event-kind").all_inner_texts()
    assert kinds[0] == "sent" and "consumed" in kinds
    assert "g_trace_browser" in page.text("#timeline") and "pg_trace_browser" in page.text("#timeline")
    page.page.screenshot(path=str(ARTIFACTS / "test_browser-trace-timeline.png"), full_page=True)
    # the same page with a window that ends before the send: nothing, and what to check
    page.page.locator("#trace-form input[name=end]").fill("2001-01-01T00:00:00")
    page.page.locator("#trace-form button").click()
    page.page.wait_for_selector("#no-trace")
    assert "enable_trace=True" in page.text("#no-trace") and page.dialogs == []


def test_a_post_without_the_csrf_token_is_refused(page: Page, ns: str) -> None:
    page.go("/topics")
    token = page.page.locator("#create-topic input[name=csrf_token]")
    assert len(token.get_attribute("value") or "") >= 32
    page.page.evaluate("document.querySelector('#create-topic input[name=csrf_token]').remove()")
    page.page.locator("#create-topic input[name=topic]").fill("ForgedT")
    page.page.locator("#create-topic button[type=submit]").click()
    page.page.wait_for_selector("#error")
    assert "CSRF token" in page.text("#error")

    resp = page.page.request.post(page.base_url + "/topics", form={"topic": "ForgedT2", "csrf_token": "x"})
    assert resp.status == 403

    async def topics() -> list[str]:
        async with Admin(ns) as admin:
            return list(await admin.topic_list())

    assert not {"ForgedT", "ForgedT2"} & set(run_async(topics()))
