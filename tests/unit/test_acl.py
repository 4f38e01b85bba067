"""rocketpy.acl without daemons: signatures against independently computed HmacSHA1, the
plain_acl.yml parser (strings kept, FILE:LINE errors), white lists, the decision matrix, reload."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketpy.acl import AclFileError, RequestSigner, parse_acl_text, sign, signed_content, verdicts
from rocketpy.acl.address import WhiteList
from rocketpy.acl.guard import AclGuard
from rocketpy.acl.permission import DENY, PUB, SUB, allows, parse_perm
from rocketpy.acl.validator import AccessValidator
from rocketpy.errors import AccessDeniedError, NoPermissionError, broker_error
from rocketpy.protocol.codes import RequestCode, ResponseCode
from rocketpy.remoting.codec import FrameDecoder, encode_frame_bytes
from rocketpy.remoting.command import SERIALIZE_JSON, RemotingCommand
from tests.waiting import wait_until_async

ACL_FILE = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def _reference_signature(secret: str, content: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


# -- signing ---------------------------------------------------------------------------------


def test_signature_matches_rfc2202_hmac_sha1_vector() -> None:
    # RFC 2202 test case 2: HMAC-SHA1("Jefe", "what do ya want for nothing?") = effcdf6a...7c79
    expected = base64.b64encode(bytes.fromhex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")).decode()
    assert sign("Jefe", {"only": "what do ya want for nothing?"}) == expected


def test_signed_content_is_sorted_values_then_body() -> None:
    ext = {
        "b": "TopicA",
        "a": "Group",
        "AccessKey": "RocketMQ",
        "Signature": "old",
        "d": 4,
        "k": False,
        "z": None,
    }
    # sorted keys: AccessKey, Signature (skipped), a, b, d, k
    assert signed_content(ext, b"body") == b"RocketMQGroupTopicA4falsebody"
    assert sign("12345678", ext, b"body") == _reference_signature(
        "12345678", b"RocketMQGroupTopicA4falsebody"
    )


def test_msgpack_and_json_forms_of_a_request_sign_alike() -> None:
    native = {"a": "G", "d": 4, "e": -1, "k": True, "m": False, "AccessKey": "RocketMQ"}
    java = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in native.items()}
    assert sign("12345678", native, b"x") == sign("12345678", java, b"x")


def test_request_signer_adds_access_key_and_signature() -> None:
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "TopicA", "a": "G"}, b"hello")
    RequestSigner("RocketMQ", "12345678")(cmd)
    assert cmd.ext is not None and cmd.ext["AccessKey"] == "RocketMQ"
    assert cmd.ext["Signature"] == _reference_signature("12345678", b"RocketMQGTopicAhello")
    empty = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    RequestSigner("RocketMQ", "12345678")(empty)
    assert empty.ext == {"AccessKey": "RocketMQ", "Signature": _reference_signature("12345678", b"RocketMQ")}
    assert "12345678" not in repr(RequestSigner("RocketMQ", "12345678"))


def test_json_frame_signature_survives_the_codec() -> None:
    # a Java client's request arrives as strings in a JSON header; the signature is over those strings
    ext = {"topic": "TopicA", "consumerGroup": "groupB", "queueId": "0", "AccessKey": "RocketMQ"}
    ext["Signature"] = _reference_signature("12345678", b"RocketMQgroupB0TopicA")
    cmd = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, 1, 0, None, ext, b"", SERIALIZE_JSON)
    (decoded,) = FrameDecoder().feed(encode_frame_bytes(cmd))
    rules = parse_acl_text(ACL_FILE)
    assert AccessValidator(rules).check("10.0.0.1", decoded) is not None  # topicA: DENY by name case
    ext2 = dict(ext, topic="topicB")
    ext2["Signature"] = _reference_signature("12345678", b"RocketMQgroupB0topicB")
    cmd2 = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, 2, 0, None, ext2, b"", SERIALIZE_JSON)
    (decoded2,) = FrameDecoder().feed(encode_frame_bytes(cmd2))
    assert AccessValidator(rules).check("10.0.0.1", decoded2) is None


# -- the file --------------------------------------------------------------------------------


def test_parse_rocketmq_sample_keeps_secrets_as_strings() -> None:
    rules = parse_acl_text(ACL_FILE, "plain_acl.yml")
    rocketmq = rules.accounts["RocketMQ"]
    assert rocketmq.secret_key == "12345678" and isinstance(rocketmq.secret_key, str)
    assert rocketmq.topic_perms == {"topicA": DENY, "topicB": PUB | SUB, "topicC": SUB}
    assert rocketmq.group_perms == {"groupA": DENY, "groupB": PUB | SUB, "groupC": SUB}
    assert rocketmq.default_topic_perm == DENY and rocketmq.default_group_perm == SUB
    assert not rocketmq.admin and rocketmq.white_list.empty
    admin = rules.accounts["rocketmq2"]
    assert admin.admin and admin.white_list.matches("192.168.1.77") and not admin.explicit_perms
    assert rules.global_white_list.matches("10.10.103.5") and not rules.global_white_list.matches(
        "10.10.104.5"
    )
    assert "12345678" not in repr(rules)


def test_numbers_and_odd_scalars_stay_as_written() -> None:
    rules = parse_acl_text("accounts:\n  - accessKey: 00123456\n    secretKey: 0x1F2E3D\n    admin: yes\n")
    account = rules.accounts["00123456"]
    assert account.secret_key == "0x1F2E3D" and account.admin


_AK = "accounts:\n  - accessKey: abcdefg\n"
_AK_SK = _AK + "    secretKey: abcdefg\n"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (_AK + "   secretKey: x\n", 3, "not valid YAML"),
        (_AK_SK + "    topicPerm: [a=PUB]\n", 4, "topicPerms"),
        (_AK + "    secretKey: abc\n", 3, "at least 6"),
        (_AK_SK + "    topicPerms: [a=READ]\n", 4, "READ"),
        (_AK_SK + "    topicPerms: [justname]\n", 4, "NAME=PERM"),
        (_AK_SK + "  - {accessKey: abcdefg, secretKey: x1234567}\n", 4, "defined twice"),
        ("globalWhiteRemoteAddresses: [10.10.300.*]\n", 1, "0-255"),
        (_AK_SK + "    admin: maybe\n", 4, "true or false"),
        ("accounts: {accessKey: abcdefg}\n", 1, "must be a list"),
        ("- a\n- b\n", 1, "mapping"),
        ("accounts:\n  - secretKey: abcdefg\n", 2, "needs accessKey"),
    ],
)  # fmt: skip
def test_malformed_file_names_file_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(AclFileError) as ei:
        parse_acl_text(text, "/etc/rocketpy/plain_acl.yml")
    message = str(ei.value)
    assert message.startswith(f"error: /etc/rocketpy/plain_acl.yml:{line}: "), message
    assert words in message


def test_empty_file_has_no_accounts_and_missing_file_is_an_error(tmp_path: Path) -> None:
    assert parse_acl_text("").accounts == {}
    from rocketpy.acl import load_acl_file

    with pytest.raises(AclFileError, match="cannot read the ACL file"):
        load_acl_file(str(tmp_path / "absent.yml"))


# -- white lists and permissions -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("10.10.103.*", ["10.10.103.1", "10.10.103.255"], ["10.10.104.1"]),
        ("192.168.*", ["192.168.9.9"], ["192.169.0.1"]),
        ("192.168.1.{1,2}", ["192.168.1.1", "192.168.1.2"], ["192.168.1.3"]),
        ("192.168.1.1-200", ["192.168.1.1", "192.168.1.200"], ["192.168.1.201", "192.168.1.0"]),
        ("192.168.1.1,10.0.0.5", ["192.168.1.1", "10.0.0.5"], ["10.0.0.6"]),
        ("*", ["1.2.3.4", "::1"], []),
        ("", [], ["127.0.0.1"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
        ("127.0.0.1", ["::ffff:127.0.0.1"], ["127.0.0.2"]),
    ],
)
def test_white_list_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    white = WhiteList([pattern])
    assert all(white.matches(ip) for ip in inside)
    assert not any(white.matches(ip) for ip in outside)


def test_permission_rules_follow_rocketmq() -> None:
    assert parse_perm("pub | sub") == PUB | SUB and parse_perm("SUB|PUB") == PUB | SUB
    with pytest.raises(ValueError):
        parse_perm("ALL")
    assert allows(PUB, PUB | SUB) and not allows(PUB, SUB) and not allows(SUB, DENY | SUB)


# -- the decision ----------------------------------------------------------------------------


def _signed(
    code: int, ext: dict[str, object], access_key: str, secret: str, body: bytes = b""
) -> RemotingCommand:
    cmd = RemotingCommand.request(code, dict(ext), body)
    RequestSigner(access_key, secret)(cmd)
    return cmd


def test_decision_matrix() -> None:
    validator = AccessValidator(parse_acl_text(ACL_FILE))
    send_b = {"a": "P", "b": "topicB", "e": 0}
    ok = _signed(RequestCode.SEND_MESSAGE_V2, send_b, "RocketMQ", "12345678", b"m")
    assert validator.check("1.2.3.4", ok) is None
    cases = {
        "no AccessKey": RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(send_b), b"m"),
        "wrong Signature": _signed(RequestCode.SEND_MESSAGE_V2, send_b, "RocketMQ", "wrong-secret", b"m"),
        "no account 'Nobody1'": _signed(RequestCode.SEND_MESSAGE_V2, send_b, "Nobody1", "12345678", b"m"),
        "no PUB permission on topic 'topicC'": _signed(
            RequestCode.SEND_MESSAGE_V2, dict(send_b, b="topicC"), "RocketMQ", "12345678"
        ),
        "no SUB permission on group 'groupA'": _signed(
            RequestCode.PULL_MESSAGE, {"topic": "topicB", "consumerGroup": "groupA"}, "RocketMQ", "12345678"
        ),
        "needs an admin account": _signed(
            RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}, "RocketMQ", "12345678"
        ),
        "not in the account's white list": _signed(
            RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}, "rocketmq2", "bad-secret"
        ),
    }  # fmt: skip
    for words, cmd in cases.items():
        refusal = validator.check("1.2.3.4", cmd)
        assert refusal is not None and words in refusal.remark, (words, refusal and refusal.remark)
        assert refusal.remark.startswith("access denied: ") and "12345678" not in refusal.remark
    # tampering with a signed request breaks its signature
    ok.body = b"changed"
    assert validator.check("1.2.3.4", ok) is not None
    # the global white list lets anything through; an account's white list skips its checks
    assert validator.check("10.10.103.7", cases["no AccessKey"]) is None
    unsigned_admin = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"AccessKey": "rocketmq2"})
    assert validator.check("192.168.1.9", unsigned_admin) is None
    # a retry topic stands for its group; the default group perm applies to unlisted groups
    retry = _signed(RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%groupZ"}, "RocketMQ", "12345678")
    assert validator.check("1.2.3.4", retry) is None


VERDICT_CODES = (RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE, RequestCode.CONSUMER_SEND_MSG_BACK,
                 RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.HEART_BEAT)  # fmt: skip
VERDICT_NAMES = ("topicA", "topicB", "topicC", "groupA", "groupB", "groupC", "other", "%RETRY%groupA",
                 "%RETRY%groupB", "%RETRY%groupB_topicC", "", 1, True)  # fmt: skip


def _verdict_request(code: int, account: str, topic: object, group: object) -> RemotingCommand:
    if code == RequestCode.SEND_MESSAGE_V2:
        ext: dict[str, object] = {"a": "P", "b": topic, "e": 0}
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        ext = {"group": group, "offset": 0}
    else:
        ext = {"topic": topic, "consumerGroup": group}
    return _signed(code, ext, account, "12345678")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(VERDICT_CODES), st.sampled_from(("RocketMQ", "rocketmq2")),
            st.sampled_from(VERDICT_NAMES), st.sampled_from(VERDICT_NAMES),
        ),
        min_size=1, max_size=12,
    )
)  # fmt: skip
def test_remembered_verdicts_answer_as_a_fresh_decision(
    requests: list[tuple[int, str, object, object]],
) -> None:
    """One validator checks a run of requests (its verdicts remembered by account, code and
    resources); each answer is the one a validator that never saw a request gives."""
    rules = parse_acl_text(ACL_FILE)
    validator = AccessValidator(rules)
    for code, account, topic, group in requests:
        cmd = _verdict_request(code, account, topic, group)
        fresh = AccessValidator(rules).check("1.2.3.4", cmd)
        for _ in range(2):
            got = validator.check("1.2.3.4", cmd)
            assert (got and got.remark) == (fresh and fresh.remark), (code, account, topic, group)


def test_a_remembered_verdict_still_checks_the_signature_and_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    validator = AccessValidator(parse_acl_text(ACL_FILE))
    ext = {"topic": "topicB", "consumerGroup": "groupB"}
    assert validator.check("1.2.3.4", _signed(RequestCode.PULL_MESSAGE, ext, "RocketMQ", "12345678")) is None
    assert len(validator._verdicts) == 1
    forged = _signed(RequestCode.PULL_MESSAGE, ext, "RocketMQ", "not-the-secret")
    refusal = validator.check("1.2.3.4", forged)
    assert refusal is not None and "wrong Signature" in refusal.remark
    # a field that is not text is decided each time (1 and True would be one key)
    assert validator.check("1.2.3.4", _signed(RequestCode.PULL_MESSAGE, {"topic": 1}, "RocketMQ", "12345678"))
    assert len(validator._verdicts) == 1
    monkeypatch.setattr(verdicts, "MAX_VERDICTS", 3)
    for n in range(7):
        group_ext = {"topic": "topicB", "consumerGroup": f"g{n}"}
        validator.check("1.2.3.4", _signed(RequestCode.PULL_MESSAGE, group_ext, "RocketMQ", "12345678"))
        assert len(validator._verdicts) <= 3


def test_refusal_builds_a_non_retriable_access_denied_error() -> None:
    err = broker_error(ResponseCode.NO_PERMISSION, "access denied: no account 'x'", "1.2.3.4:10911")
    assert isinstance(err, AccessDeniedError) and isinstance(err, NoPermissionError) and not err.retriable
    plain = broker_error(ResponseCode.NO_PERMISSION, "the broker[b] sending message is forbidden")
    assert type(plain) is NoPermissionError and plain.retriable


# -- reload ----------------------------------------------------------------------------------


async def test_guard_reloads_a_changed_file_and_keeps_the_last_good_rules(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_FILE)
    guard = AclGuard(str(path), 3600.0, None, "test")
    await guard.start()
    try:
        assert guard.validator is not None and "newuser1" not in guard.validator.rules.accounts
        path.write_text(ACL_FILE + "  - accessKey: newuser1\n    secretKey: newsecret\n")
        os.utime(path, ns=(1, 10**18))  # a distinct mtime even on coarse file systems
        assert await guard.reload_if_changed()
        assert "newuser1" in guard.validator.rules.accounts
        path.write_text(ACL_FILE + "  - accessKey: [broken\n")
        os.utime(path, ns=(1, 2 * 10**18))
        assert not await guard.reload_if_changed()
        assert "newuser1" in guard.validator.rules.accounts  # the last good rules stay
        assert not await guard.reload_if_changed()  # the broken version is reported once
        path.unlink()
        assert not await guard.reload_if_changed()
        assert "newuser1" in guard.validator.rules.accounts
    finally:
        await guard.stop()


async def test_guard_watch_routine_polls_the_file(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text("accounts: []\n")
    guard = AclGuard(str(path), 0.02, None, "test")
    await guard.start()
    try:
        path.write_text("accounts:\n  - {accessKey: abcdefg, secretKey: abcdefg}\n")
        os.utime(path, ns=(1, 10**18))
        await wait_until_async(
            lambda: guard.validator is not None and "abcdefg" in guard.validator.rules.accounts,
            5.0,
            message="the watch routine did not load the changed file",
        )
    finally:
        await guard.stop()


# -- config keys -----------------------------------------------------------------------------


def test_acl_config_keys(tmp_path: Path) -> None:
    from rocketpy.config import ConfigError, config_lines, load_broker_config, load_namesrv_config

    props = tmp_path / "conf" / "broker.properties"
    props.parent.mkdir()
    props.write_text("aclEnable=true\naclAccessKey=brokerAdmin\naclSecretKey=topSecret99\n")
    broker, store = load_broker_config(str(props), {})
    assert broker.acl_enable and broker.acl_file == str(tmp_path / "conf" / "plain_acl.yml")
    lines = config_lines(broker, store)
    assert "aclSecretKey=******" in lines and not any("topSecret99" in line for line in lines)
    props.write_text("aclFile=acl/rules.yml\naclAccessKey=brokerAdmin\n")
    with pytest.raises(ConfigError, match="aclAccessKey and aclSecretKey go together"):
        load_broker_config(str(props), {})
    props.write_text("aclFile=acl/rules.yml\n")
    assert load_broker_config(str(props), {})[0].acl_file == str(tmp_path / "conf" / "acl" / "rules.yml")
    ns = load_namesrv_config(None, {"aclFile": "/etc/acl.yml", "aclFileCheckInterval": "500"})
    assert ns.acl_file == "/etc/acl.yml" and ns.acl_file_check_interval == 500 and not ns.acl_enable
    with pytest.raises(ConfigError, match="aclFileCheckInterval"):
        load_namesrv_config(None, {"aclFileCheckInterval": "0"})


def test_client_settings_credentials() -> None:
    from rocketpy.client.instance import ClientSettings
    from rocketpy.errors import MQClientError

    settings = ClientSettings(access_key="RocketMQ", secret_key="12345678")
    settings.check()
    assert "12345678" not in repr(settings)
    with pytest.raises(MQClientError, match="go together"):
        ClientSettings(access_key="RocketMQ").check()
