"""The dashboard's pieces without a server: body previews, form checks, sessions and CSRF tokens."""

from __future__ import annotations

import datetime as _dt

import pytest

pytest.importorskip("aiohttp", reason="needs the dashboard extra: pip install 'rocketpy[dashboard]'")

from rocketpy.dashboard import forms, sessions
from rocketpy.dashboard.preview import HEX_LIMIT, TEXT_LIMIT, hex_dump, preview
from rocketpy.dashboard.sessions import AdminPool, Credentials, SessionStore, acl_supported


def test_preview_text_json_and_hex() -> None:
    p = preview(b'{"z": 1, "a": [true]}')
    assert p.text == '{"z": 1, "a": [true]}' and p.size == 21
    assert p.json == '{\n  "a": [\n    true\n  ],\n  "z": 1\n}'
    assert preview(b"plain").json is None and preview(b"[1, 2").json is None and preview(b"7").json is None
    assert hex_dump(b"AB\x00\xff") == "00000000  41 42 00 ff" + " " * 36 + "  |AB..|"
    assert preview(b"\xff\xfe").text == "\ufffd\ufffd"  # not UTF-8: replaced, never raised


def test_preview_is_bounded() -> None:
    big = b"x" * (TEXT_LIMIT + 10)
    p = preview(big)
    assert len(p.text) == TEXT_LIMIT and p.text_truncated and p.json is None
    assert p.hex_truncated and len(p.hex.splitlines()) == HEX_LIMIT // 16


def test_form_checks_say_what_to_enter() -> None:
    assert forms.name({"t": " Ok_1%|-"}, "t", "Topic") == "Ok_1%|-"
    with pytest.raises(forms.FormError, match="Topic is required"):
        forms.name({}, "t", "Topic")
    with pytest.raises(forms.FormError, match="longer than 127 bytes"):
        forms.name({"t": "x" * 128}, "t", "Topic")
    with pytest.raises(forms.FormError, match="between 1 and 1024, got 2000"):
        forms.integer({"n": "2000"}, "n", "Queues", 1, 1024)
    assert forms.perm({"perm": "4"}) == 4
    with pytest.raises(forms.FormError, match="got '7'"):
        forms.perm({"perm": "7"})
    local = _dt.datetime(2024, 5, 1, 12, 30)
    assert forms.timestamp_ms({"t": "2024-05-01T12:30"}, "t", "Time") == int(local.timestamp() * 1000)
    assert forms.timestamp_ms({"t": "1700000000000"}, "t", "Time") == 1700000000000
    with pytest.raises(forms.FormError, match="like 2024-05-01T12:30"):
        forms.timestamp_ms({"t": "tomorrow"}, "t", "Time")
    forms.confirm({"c": "T1"}, "c", "T1", "delete")
    with pytest.raises(forms.FormError, match="type its name 'T1'"):
        forms.confirm({"c": "t1"}, "c", "T1", "delete")


def test_sessions_are_bounded_expire_and_renew(monkeypatch: pytest.MonkeyPatch) -> None:
    store = SessionStore(max_sessions=2, idle_s=60)
    a, b = store.new(), store.new()
    assert a.token != b.token and a.csrf != b.csrf and len(a.token) >= 40
    assert store.get(a.token) is a  # a is now the most recently used
    c = store.new()  # evicts b, the least recently used
    assert store.get(b.token) is None and store.get(c.token) is c
    a.flash("ok", "kept")
    renewed = store.renew(a)
    assert store.get(a.token) is None and renewed.csrf != a.csrf
    assert renewed.take_flashes() == [("ok", "kept")]
    assert renewed.take_flashes() == []
    now = sessions.time.monotonic()
    monkeypatch.setattr(sessions.time, "monotonic", lambda: now + 61)
    assert store.get(renewed.token) is None  # idle too long


def test_csrf_check_and_secret_hidden() -> None:
    s = SessionStore().new()
    assert s.csrf_ok(s.csrf) and not s.csrf_ok(None) and not s.csrf_ok("") and not s.csrf_ok(s.csrf + "x")
    creds = Credentials("ak", "very-secret")
    assert "very-secret" not in repr(creds)
    for i in range(20):
        s.flash("ok", str(i))
    assert len(s.take_flashes()) == 8


async def test_admin_pool_builds_one_admin_per_account() -> None:
    pool = AdminPool("127.0.0.1:1", timeout=1.0)
    anonymous = pool._build(None)
    assert anonymous.namesrv_addr == "127.0.0.1:1" and anonymous.settings.instance_name == "dashboard"
    if acl_supported():  # the account's keys reach Admin (the ACL support signs with them)
        signed = pool._build(Credentials("ak1", "secret1"))
        assert signed.settings.instance_name.startswith("dashboard-")
    assert await pool.get(None) is await pool.get(None)
    await pool.close()


def test_login_goes_back_only_to_local_pages() -> None:
    from rocketpy.dashboard.views_auth import _safe_next

    assert _safe_next("/groups/g1?x=1") == "/groups/g1?x=1"
    for outside in ("//evil.example/", "https://evil.example/", "/\\evil.example", "", None):
        assert _safe_next(outside) == "/cluster"
