"""The dashboard against a broker with ACL 2.0 (``authenticationEnabled``/``authorizationEnabled``),
in a browser: it logs in with an ACL 2.0 user (username and password as the access and secret key),
shows what the user's ACL allows, and an action the ACL does not allow as a clear error; the Super
user may do it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from rocketpy import Admin
from tests.conftest import DaemonPool
from tests.dashboard_support import DashboardProcess
from tests.integration.dashboard.conftest import Page
from tests.integration.dashboard.test_acl_browser import LOGIN_PAGE, create_topic, log_in

ROOT = ("dashRoot", "dashRootSecret1")
USER = ("dashViewer", "dashViewerSecret1")


async def create_viewer(ns: str) -> None:
    """A Normal user who may read the cluster and use every topic and group, but create nothing."""
    async with Admin(ns, access_key=ROOT[0], secret_key=ROOT[1]) as admin:
        (_, addr), *_ = await admin.cluster_masters("DefaultCluster")
        await admin.auth.create_user(USER[0], USER[1], "Normal", broker_addr=addr)
        subject = f"User:{USER[0]}"
        await admin.auth.create_acl(subject, "Cluster:DefaultCluster", "Get,List", "Allow", broker_addr=addr)
        await admin.auth.create_acl(subject, "Topic:*", "Pub,Sub", "Allow", broker_addr=addr)
        await admin.auth.create_acl(subject, "Group:*", "Sub", "Allow", broker_addr=addr)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardProcess]:
    tmp = tmp_path_factory.mktemp("dashboard-acl2")
    pool = DaemonPool(tmp)
    try:
        ns = pool.namesrv().addr
        pool.broker(
            ns,
            authenticationEnabled=True,
            authorizationEnabled=True,
            initAuthenticationUser=json.dumps({"username": ROOT[0], "password": ROOT[1]}),
        )
        # in a thread: Playwright's sync API may already run an event loop in this one
        with ThreadPoolExecutor(1) as pool_thread:
            pool_thread.submit(asyncio.run, create_viewer(ns)).result(60)
        dash = DashboardProcess(ns, tmp)
        try:
            yield dash
        finally:
            dash.stop()
    finally:
        pool.stop_all()


@pytest.fixture(scope="module")
def base_url(dashboard: DashboardProcess) -> str:
    return dashboard.url


@pytest.mark.slow  # about 90 s here with the browser's start (a loaded 2-core machine)
def test_login_with_an_acl2_user(page: Page, dashboard: DashboardProcess) -> None:
    page.go("/cluster")  # unsigned requests are refused: the dashboard asks who we are
    page.page.wait_for_url(LOGIN_PAGE)

    log_in(page, USER[0], USER[1])
    assert "broker-a" in page.text("#brokers") and page.text("#account") == USER[0]

    create_topic(page, "Acl2DashT")  # its ACL has no Create on topics
    assert page.text("h1") == "No permission"
    assert "may not Create Topic:Acl2DashT" in page.text("#error")

    page.page.locator("header form[action='/logout'] button").click()
    page.page.wait_for_url(LOGIN_PAGE)
    log_in(page, ROOT[0], ROOT[1])  # the Super user
    create_topic(page, "Acl2DashT")
    page.page.wait_for_url("**/topics/Acl2DashT")
    assert "Topic Acl2DashT created on" in page.text(".flash.ok")
