"""The dashboard over plain HTTP (aiohttp's test client) against a real NameServer + broker: pages,
form validation, CSRF, escaping of hostile message bodies, the chart JSON, and the CLI command.
These run without a browser; tests/integration/test_dashboard_browser.py drives the same pages in
chromium."""

from __future__ import annotations

import html
import json
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import markupsafe
import pytest

pytest.importorskip("aiohttp", reason="needs the dashboard extra: pip install 'rocketpy[dashboard]'")
from aiohttp.test_utils import TestClient, TestServer

from rocketpy import Admin, ConsumeStatus, Message, PushConsumer
from rocketpy.dashboard.app import make_app
from rocketpy.dashboard.sessions import acl_supported
from rocketpy.topic import retry_topic
from tests.conftest import DaemonPool
from tests.consumer_settings import FAST_CONSUMER
from tests.dashboard_support import (
    HOSTILE,
    HOSTILE_ESCAPED,
    DashboardProcess,
    csrf_of,
    make_dead_letters,
    send,
    total_max_offset,
    traced_message,
)
from tests.waiting import wait_until_async


@pytest.fixture
def ns(daemons: DaemonPool) -> str:
    addr = daemons.namesrv().addr
    daemons.broker(addr)
    return str(addr)


@pytest.fixture
async def web(ns: str) -> AsyncIterator[TestClient[Any, Any]]:
    client: TestClient[Any, Any] = TestClient(TestServer(make_app(ns)))
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()


async def page(web: TestClient[Any, Any], path: str, status: int = 200) -> str:
    resp = await web.get(path)
    text = await resp.text()
    assert resp.status == status, text
    return text


async def post(web: TestClient[Any, Any], path: str, data: dict[str, str], status: int = 303) -> Any:
    resp = await web.post(path, data=data, allow_redirects=False)
    text = await resp.text()
    assert resp.status == status, text
    return resp, text


async def create_topic(web: TestClient[Any, Any], topic: str, queues: int = 2) -> None:
    token = csrf_of(await page(web, "/topics"))
    form = {"csrf_token": token, "topic": topic, "cluster": "DefaultCluster", "perm": "6"}
    resp, _ = await post(web, "/topics", form | {"read_queues": str(queues), "write_queues": str(queues)})
    assert resp.headers["Location"] == f"/topics/{topic}"


async def test_cluster_topics_and_hostile_bodies_escaped(web: TestClient[Any, Any], ns: str) -> None:
    cluster = await page(web, "/cluster")
    assert "DefaultCluster" in cluster and "MASTER" in cluster and "broker-a" in cluster
    resp = await web.get("/cluster")
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]

    await create_topic(web, "DashT", queues=2)
    topic_page = await page(web, "/topics/DashT")
    assert "Flash" not in topic_page and "created on" in topic_page  # the flash after the redirect
    assert topic_page.count("<td>broker-a</td>") >= 2  # two queues listed

    hostile_prop = '"><img src=y onerror=alert(3)>'
    [r_hostile, r_json, _] = await send(
        ns,
        "DashT",
        Message("DashT", HOSTILE.encode(), keys="evil", properties={"note": hostile_prop}),
        Message("DashT", b'{"b": [1, 2], "a": "x"}', keys="doc"),
        Message("DashT", bytes(range(256)), keys="bin"),
    )

    async def found_by_key() -> str | None:
        text = await page(web, "/messages?mode=key&topic=DashT&key=evil")
        return text if "1 message(s) found" in text else None

    # a new broker indexes its first records once the index file exists (created in a thread)
    found = await wait_until_async(found_by_key, 10.0, 0.05, "the key search never found the message")
    assert HOSTILE not in found and "<img src=x" not in found and "<img src=y" not in found
    assert HOSTILE_ESCAPED in found
    assert str(markupsafe.escape(hostile_prop)) in found
    assert "3c 73 63 72 69 70 74 3e" in found  # "<script>" in the hex dump

    as_json = html.unescape(await page(web, "/messages?mode=key&topic=DashT&key=doc"))
    assert '{\n  "a": "x",\n  "b": [\n    1,\n    2\n  ]\n}' in as_json  # pretty, keys sorted
    binary = await page(web, "/messages?mode=key&topic=DashT&key=bin")
    assert "000000f0  f0 f1 f2 f3" in binary and 'class="body-json"' not in binary

    by_offset_id = await page(web, f"/messages?mode=id&msg_id={r_json.offset_msg_id}")
    assert r_json.msg_id in by_offset_id and '"a": "x"' in html.unescape(by_offset_id)
    by_producer_id = await page(web, f"/messages?mode=id&msg_id={r_hostile.msg_id}&topic=DashT")
    assert HOSTILE_ESCAPED in by_producer_id
    q = r_hostile.message_queue
    by_offset = await page(
        web, f"/messages?mode=offset&topic=DashT&queue={q.queue_id}&offset={r_hostile.queue_offset}"
    )
    assert HOSTILE_ESCAPED in by_offset and HOSTILE not in by_offset

    token = csrf_of(topic_page)
    update = {"csrf_token": token, "read_queues": "3", "write_queues": "3", "perm": "4"}
    resp, _ = await post(web, "/topics/DashT/update", update)
    assert resp.headers["Location"] == "/topics/DashT"
    updated = await page(web, "/topics/DashT")
    assert "3 read / 3 write queues, perm 4" in updated
    async with Admin(ns) as admin:

        async def route_updated() -> bool:
            [qd] = (await admin.topic_route("DashT")).queue_datas
            return (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (3, 3, 4)

        await wait_until_async(route_updated, 10, interval=0.1, message="the NameServer's route updated")
    _, text = await post(web, "/topics/DashT/update", update | {"read_queues": "1025"}, status=400)
    assert "Read queues must be between 1 and 1024, got 1025" in text

    api = json.loads(await page(web, "/api/cluster"))
    assert set(api["series"]) == {"broker-a/0 put", "broker-a/0 get"} and api["time"] > 0


async def test_forms_validated_and_csrf_checked(web: TestClient[Any, Any], ns: str) -> None:
    token = csrf_of(await page(web, "/topics"))
    base = {"topic": "Ok", "cluster": "DefaultCluster", "read_queues": "4", "write_queues": "4", "perm": "6"}
    _, text = await post(web, "/topics", base, status=403)
    assert "CSRF token" in text
    _, text = await post(web, "/topics", base | {"csrf_token": "forged"}, status=403)
    assert "CSRF token" in text
    fresh = TestClient(TestServer(make_app(ns)))  # another browser: its token is not ours
    await fresh.start_server()
    try:
        other = csrf_of(await page(fresh, "/topics"))
    finally:
        await fresh.close()
    _, text = await post(web, "/topics", base | {"csrf_token": other}, status=403)
    assert "CSRF token" in text

    cases = [
        ({"topic": "bad name<b>"}, "may contain only letters, digits"),
        ({"topic": ""}, "Topic name is required"),
        ({"read_queues": "many"}, "Read queues must be a whole number, got &#39;many&#39;"),
        ({"write_queues": "0"}, "Write queues must be between 1 and 1024, got 0"),
        ({"perm": "5"}, "Permission must be 2 (write), 4 (read) or 6 (read + write)"),
    ]
    for change, message in cases:
        _, text = await post(web, "/topics", base | {"csrf_token": token} | change, status=400)
        assert message in text, text
        assert "<b>" not in text  # the echoed bad value is escaped too
    async with Admin(ns) as admin:
        assert "Ok" not in await admin.topic_list()  # no refused form created anything

    bad_gets = [
        ("/messages?mode=offset&topic=T&queue=x&offset=1", "Queue id must be a whole number"),
        ("/messages?mode=offset&topic=T&queue=1&offset=-4", "Offset must be between 0 and"),
        ("/messages?mode=id&msg_id=nothex", "is not an offset message id"),
        ("/messages?mode=key&topic=T", "Message key is required"),
        ("/messages?mode=sql&topic=T", "search mode must be one of key, id, offset"),
        ("/topics?kind=weird", "kind must be one of"),
        ("/groups/bad%20group", "Group name &#39;bad group&#39; may contain only"),
    ]
    for path, message in bad_gets:
        assert message in await page(web, path, status=400)
    missing = await page(web, "/topics/NoSuchTopic", status=502)
    assert "does not exist" in missing

    await create_topic(web, "KeepMe")
    token = csrf_of(await page(web, "/topics/KeepMe/delete"))
    _, text = await post(web, "/topics/KeepMe/delete", {"csrf_token": token, "confirm": "keepme"}, 400)
    assert "type its name &#39;KeepMe&#39; exactly" in text
    async with Admin(ns) as admin:
        assert "KeepMe" in await admin.topic_list()

    if not acl_supported():
        token = csrf_of(await page(web, "/login"))
        form = {"csrf_token": token, "access_key": "a", "secret_key": "b"}
        _, text = await post(web, "/login", form, status=400)
        assert "no ACL support" in text


async def test_groups_lag_reset_members_and_dlq(web: TestClient[Any, Any], ns: str) -> None:
    await create_topic(web, "LagT", queues=2)
    await send(ns, "LagT", *(Message("LagT", f"m{i}".encode()) for i in range(5)))
    async with Admin(ns) as admin:
        await admin.update_subscription_group("g_lag", "DefaultCluster")
        await admin.reset_offset_by_time("g_lag", "LagT", 0)  # offsets at 0: all 5 are lag
    groups = await page(web, "/groups")
    assert "/groups/g_lag" in groups
    group = await page(web, "/groups/g_lag")
    assert '<span id="total-lag">5</span>' in group and "No consumer of this group is online" in group
    lag = json.loads(await page(web, "/api/groups/g_lag/lag"))
    assert lag["series"] == {"total": 5.0, "LagT": 5.0}
    ages = json.loads(await page(web, "/api/groups/g_lag/lag?unit=seconds"))  # the oldest's age
    assert set(ages["series"]) == {"oldest", "LagT"} and ages["series"]["oldest"] >= 0
    assert 'id="max-lag-seconds"' in group and '<td class="num lag-seconds">' in group

    token = csrf_of(group)
    bad = {"csrf_token": token, "topic": "LagT", "time": "yesterday"}
    _, text = await post(web, "/groups/g_lag/reset", bad, status=400)
    assert "Time must be a date and time like" in text
    later = str(int(time.time() * 1000) + 60_000)
    await post(web, "/groups/g_lag/reset", {"csrf_token": token, "topic": "LagT", "time": later})
    after = await page(web, "/groups/g_lag")
    assert '<span id="total-lag">0</span>' in after and "Offsets of g_lag on LagT reset to" in after
    assert "Consumers: no consumer online" in after
    ages = json.loads(await page(web, "/api/groups/g_lag/lag?unit=seconds"))
    assert ages["series"]["oldest"] == 0.0  # caught up: nothing waits

    consumer = PushConsumer("g_member", ns, **FAST_CONSUMER)
    consumer.subscribe("LagT", "*")
    consumer.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
    await consumer.start()
    try:

        async def member_listed() -> bool:
            return consumer.client_id in await page(web, "/groups/g_member")

        await wait_until_async(member_listed, 20, interval=0.3, message="the consumer on the group page")
    finally:
        await consumer.shutdown()

    await create_topic(web, "DeadT")
    await make_dead_letters(ns, "DeadT", "g_dead", [HOSTILE.encode(), b"second"])
    dlq = await page(web, "/dlq?group=g_dead")
    assert '<span id="dlq-total">2</span>' in dlq
    assert HOSTILE_ESCAPED in dlq and HOSTILE not in dlq
    async with Admin(ns) as admin:
        before = await total_max_offset(admin, retry_topic("g_dead"))
        token = csrf_of(dlq)
        await post(web, "/dlq/resend", {"csrf_token": token, "group": "g_dead"})
        assert await total_max_offset(admin, retry_topic("g_dead")) == before + 2
        await post(web, "/dlq/resend", {"csrf_token": token, "group": "g_dead"})
        again = await page(web, "/dlq?group=g_dead")
        assert "0 dead letter(s) not resent before" in again
    assert "has no dead letters" in await page(web, "/dlq?group=g_none", status=400)

    normal = await page(web, "/topics")
    assert ">DeadT</a>" in normal and "TBW102" not in normal and "%DLQ%g_dead" not in normal
    assert ">%DLQ%g_dead</a>" in await page(web, "/topics?kind=dlq")
    assert ">%RETRY%g_dead</a>" in await page(web, "/topics?kind=retry&q=dead")
    system = await page(web, "/topics?kind=system")
    assert ">TBW102</a>" in system and ">DeadT</a>" not in system


async def test_message_trace_page_shows_the_timeline(daemons: DaemonPool) -> None:
    ns = daemons.namesrv().addr
    daemons.broker(ns, traceTopicEnable=True)
    msg = Message("TraceWebT", b"traced", tags="TagW", keys="order-9")
    msg_id = await traced_message(ns, "TraceWebT", "g_trace_web", "pg_trace_web", msg)
    client: TestClient[Any, Any] = TestClient(TestServer(make_app(ns)))
    await client.start_server()
    try:
        doc = json.loads(await page(client, f"/api/messages/trace?msg_id={msg_id}"))
        kinds = {(e["event"], e.get("group"), e.get("status")) for e in doc["events"]}
        assert {("sent", "pg_trace_web", "SEND_OK"), ("consumed", "g_trace_web", "SUCCESS")} <= kinds
        assert doc["groups"]["g_trace_web"] == "CONSUMED"
        assert doc["msgId"] == msg_id and doc["topic"] == "TraceWebT"
        html_page = await page(client, f"/messages/trace?msg_id={msg_id}")
        assert 'id="timeline"' in html_page and f"{msg_id}</code> in TraceWebT" in html_page
        for kind in ("sent", "stored", "delivered", "consumed"):
            assert f'<tr class="event {kind}">' in html_page, kind
        assert (
            '<td class="group">g_trace_web</td>' in html_page
            and '<td class="status">SUCCESS</td>' in html_page
        )
        assert '<td class="progress">CONSUMED</td>' in html_page
        # any window: one that ends before the send finds nothing, and says what to check
        early = await page(client, f"/messages/trace?msg_id={msg_id}&begin=0&end=1000")
        assert 'id="no-trace"' in early and "enable_trace=True" in early
        wrong = await page(client, f"/messages/trace?msg_id={msg_id}&begin=2000&end=1000", status=400)
        assert "Until must not be before From" in wrong
        # the message search links each message to its trace
        found = await page(client, "/messages?mode=key&topic=TraceWebT&key=order-9")
        assert f'href="/messages/trace?msg_id={msg_id}"' in found
    finally:
        await client.close()


async def test_an_unreachable_cluster_is_an_error_page_not_a_crash() -> None:
    client: TestClient[Any, Any] = TestClient(TestServer(make_app("127.0.0.1:1", timeout=1.0)))
    await client.start_server()
    try:
        resp = await client.get("/cluster")
        text = await resp.text()
        assert resp.status in (502, 504), text
        assert "The cluster" in text and "Traceback" not in text
    finally:
        await client.close()


async def test_a_refused_request_says_no_permission(web: TestClient[Any, Any], ns: str) -> None:
    await create_topic(web, "WriteOnlyT", queues=1)
    token = csrf_of(await page(web, "/topics/WriteOnlyT"))
    update = {"csrf_token": token, "read_queues": "1", "write_queues": "1", "perm": "2"}
    await post(web, "/topics/WriteOnlyT/update", update)
    await send(ns, "WriteOnlyT", Message("WriteOnlyT", b"unreadable"))
    resp = await web.get("/messages?mode=offset&topic=WriteOnlyT&queue=0&offset=0", allow_redirects=False)
    text = await resp.text()
    if acl_supported():  # anonymous and refused: maybe an account may; the log-in page says why
        assert resp.status == 303 and resp.headers["Location"].startswith("/login?next=/messages")
        text = await page(web, resp.headers["Location"])
        assert "is not readable (perm=2)" in text
    else:
        assert resp.status == 403, text
        assert "No permission" in text and "anonymous access" in text
        assert "NO_PERMISSION" in text and "is not readable (perm=2)" in text


def test_cli_serves_and_stops(ns: str, tmp_path: Path) -> None:
    dash = DashboardProcess(ns, tmp_path)
    try:
        with urllib.request.urlopen(dash.url + "/cluster", timeout=10) as resp:
            body = resp.read().decode()
            assert resp.status == 200 and "broker-a" in body
            assert "rocketpy_dashboard=" in resp.headers["Set-Cookie"]
            assert (
                "HttpOnly" in resp.headers["Set-Cookie"] and "SameSite=Strict" in resp.headers["Set-Cookie"]
            )
    finally:
        assert dash.stop() == 0
    assert "Traceback" not in dash.stderr_path.read_text()


def test_cli_refuses_a_bad_namesrv_address(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "rocketpy.cli", "dashboard", "-n", "no-port-here", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: -n 'no-port-here'")
