"""The dashboard against a broker with ACL on (``aclEnable=true``, a plain_acl.yml), in a browser:
it asks for credentials, signs with the logged-in account, and shows an admin action refused to a
non-admin account as a clear error. Needs the ACL support (``rocketpy.acl``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("rocketpy.acl", reason="needs rocketpy.acl (ACL support)")

from tests.conftest import DaemonPool
from tests.dashboard_support import DashboardProcess
from tests.integration.dashboard.conftest import Page

#: Where an anonymous visitor refused by the cluster is sent.
LOGIN_PAGE = re.compile(r"/login\?next=")
ADMIN_SECRET = "adminSecret42"
USER_SECRET = "userSecret42"
PLAIN_ACL = f"""\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: dashAdmin
    secretKey: {ADMIN_SECRET}
    admin: true
  - accessKey: dashUser
    secretKey: {USER_SECRET}
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DashboardProcess]:
    tmp = tmp_path_factory.mktemp("dashboard-acl")
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL)
    pool = DaemonPool(tmp)
    try:
        ns = pool.namesrv().addr
        pool.broker(ns, aclEnable=True, aclFile=str(acl_file))
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


def log_in(page: Page, access_key: str, secret_key: str) -> None:
    page.go("/login")
    page.submit("#login", access_key=access_key, secret_key=secret_key)


def create_topic(page: Page, topic: str) -> None:
    page.go("/topics")
    page.submit("#create-topic", topic=topic)


def test_login_is_asked_and_admin_actions_need_an_admin(page: Page, dashboard: DashboardProcess) -> None:
    page.go("/cluster")  # unsigned requests are refused: the dashboard asks who we are
    page.page.wait_for_url(LOGIN_PAGE)
    assert "log in with an ACL account" in page.text(".flash.error")

    log_in(page, "dashUser", "not-the-secret")
    assert "No permission" in page.text("h1") and "dashUser" in page.text("#error")

    log_in(page, "dashUser", USER_SECRET)
    assert "broker-a" in page.text("#brokers") and page.text("#account") == "dashUser"

    create_topic(page, "AclDashT")
    assert page.text("h1") == "No permission"
    error = page.text("#error")
    assert "dashUser" in error and "admin: true" in error and "NO_PERMISSION" in error

    page.page.locator("header form[action='/logout'] button").click()
    page.page.wait_for_url(LOGIN_PAGE)  # anonymous again: asked to log in
    log_in(page, "dashAdmin", ADMIN_SECRET)
    create_topic(page, "AclDashT")
    page.page.wait_for_url("**/topics/AclDashT")
    assert "Topic AclDashT created on" in page.text(".flash.ok")

    cookies = page.page.context.cookies()
    assert [c["name"] for c in cookies] == ["rocketpy_dashboard"]
    for secret in (ADMIN_SECRET, USER_SECRET):
        assert secret not in page.page.content() and secret not in cookies[0]["value"]
        assert secret not in Path(dashboard.stderr_path).read_text()
