"""Config loading: every error a user can cause is one exact line; overrides, old spellings, -p output."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketpy.addresses import parse_namesrv_addrs
from rocketpy.config import (
    BrokerRole,
    FlushDiskType,
    advertised_host,
    config_lines,
    load_broker_config,
    load_namesrv_config,
)
from rocketpy.errors import ConfigError


def write(tmp_path: Path, text: str, name: str = "c.properties") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def namesrv_error(tmp_path: Path, text: str, overrides: dict[str, str] | None = None) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_namesrv_config(path, overrides or {})
    return str(ei.value).replace(path, "FILE")


def broker_error(tmp_path: Path, text: str, overrides: dict[str, str] | None = None) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as ei:
        load_broker_config(path, overrides or {})
    return str(ei.value).replace(path, "FILE")


# ---------------------------------------------------------------- error messages (exact text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "# c\nlistenPort=1\nlisenPort=3\n",
            "error: FILE:3: unknown key 'lisenPort' (did you mean 'listenPort'?)",
        ),
        ("listenport=1", "error: FILE:1: unknown key 'listenport' (did you mean 'listenPort'?)"),
        ("zzz=1", "error: FILE:1: unknown key 'zzz' (print the known keys with -p)"),
        (
            "listenPort=70000",
            "error: FILE:1: listenPort='70000' is out of range: use an integer from 0 to 65535",
        ),
        ("listenPort=-1", "error: FILE:1: listenPort='-1' is out of range: use an integer from 0 to 65535"),
        (
            "listenPort=abc",
            "error: FILE:1: listenPort='abc' is not an integer: use an integer from 0 to 65535",
        ),
        (
            "listenPort=1.5",
            "error: FILE:1: listenPort='1.5' is not an integer: use an integer from 0 to 65535",
        ),
        (
            "scanNotActiveBrokerInterval=0",
            "error: FILE:1: scanNotActiveBrokerInterval='0' is out of range: use an integer >= 1",
        ),
        (
            "maxFrameBytes=10",
            "error: FILE:1: maxFrameBytes='10' is out of range: use an integer >= 1025",
        ),
        (
            "orderMessageEnable=yes",
            "error: FILE:1: orderMessageEnable='yes' is not a boolean: use true or false",
        ),
        ("orderMessageEnable=", "error: FILE:1: orderMessageEnable='' is not a boolean: use true or false"),
    ],
)
def test_namesrv_error_messages(tmp_path: Path, text: str, message: str) -> None:
    assert namesrv_error(tmp_path, text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "flushDiskType=SOMETIMES",
            "error: FILE:1: flushDiskType='SOMETIMES' is not one of ASYNC_FLUSH, SYNC_FLUSH",
        ),
        (
            "brokerRole=BOSS",
            "error: FILE:1: brokerRole='BOSS' is not one of ASYNC_MASTER, SYNC_MASTER, SLAVE",
        ),
        ("brokerNmae=a", "error: FILE:1: unknown key 'brokerNmae' (did you mean 'brokerName'?)"),
        (
            "mapedFileSizeCommitLog=100",
            "error: FILE:1: mapedFileSizeCommitLog='100' is out of range: use an integer >= 4096",
        ),
        (
            "namesrvAddr=localhost",
            "error: FILE:1: namesrvAddr='localhost': 'localhost' is not HOST:PORT: use a host name or IP "
            "and a port from 1 to 65535 (several separated by ';')",
        ),
        (
            "namesrvAddr=a:1;b:99999",
            "error: FILE:1: namesrvAddr='a:1;b:99999': 'b:99999' is not HOST:PORT: use a host name or "
            "IP and a port from 1 to 65535 (several separated by ';')",
        ),
        (
            "deleteWhen=4pm",
            "error: FILE:1: deleteWhen='4pm' is invalid: Value error, deleteWhen is hours of the day "
            "separated by ';' (e.g. 04 or 04;16), got '4pm'",
        ),
        (
            "brokerRole=SLAVE\n",
            "error: FILE:1: brokerId='0' with brokerRole=SLAVE: "
            "a slave needs brokerId >= 1 (0 is the master)",
        ),
        (
            "brokerId=2\nbrokerRole=SYNC_MASTER\n",
            "error: FILE:1: brokerId='2' with brokerRole=SYNC_MASTER: a master has brokerId 0; "
            "set brokerRole=SLAVE for a slave",
        ),
    ],
)
def test_broker_error_messages(tmp_path: Path, text: str, message: str) -> None:
    assert broker_error(tmp_path, text) == message


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.properties"
    with pytest.raises(ConfigError) as ei:
        load_namesrv_config(str(path), {})
    assert str(ei.value) == f"error: {path}: cannot read config file: No such file or directory"


def test_error_in_override_names_the_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, "listenPort=1\n")
    with pytest.raises(ConfigError) as ei:
        load_broker_config(path, {"namesrvAddr": "nohost"})
    message = (
        "error: command line: namesrvAddr='nohost': 'nohost' is not HOST:PORT: use a host name or IP "
        "and a port from 1 to 65535 (several separated by ';')"
    )
    assert str(ei.value) == message


def test_every_error_is_one_line(tmp_path: Path) -> None:
    for text in ("lisenPort=1", "listenPort=x", "orderMessageEnable=maybe", "a=\\uZZZZ"):
        message = namesrv_error(tmp_path, text)
        assert "\n" not in message and message.startswith("error: FILE:1: ")


# ---------------------------------------------------------------- successful loads


def test_defaults_without_file() -> None:
    config = load_namesrv_config(None, {})
    assert config.listen_port == 9876
    assert config.scan_not_active_broker_interval == 10_000
    assert config.broker_channel_expired_time == 120_000


def test_file_values_and_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, "listenPort = 1234\nbindAddress=127.0.0.1   \norderMessageEnable=TRUE\n")
    config = load_namesrv_config(path, {"listenPort": "0"})
    assert config.listen_port == 0  # the command line wins
    assert config.bind_address == "127.0.0.1"  # surrounding whitespace dropped
    assert config.order_message_enable is True


def test_last_repeated_key_wins(tmp_path: Path) -> None:
    assert load_namesrv_config(write(tmp_path, "listenPort=1\nlistenPort=2\n"), {}).listen_port == 2


def test_broker_file_holds_broker_and_store_keys(tmp_path: Path) -> None:
    text = (
        "brokerClusterName=C1\nbrokerName=broker-a\nbrokerId=1\nbrokerRole=SLAVE\n"
        "flushDiskType=sync_flush\nmapedFileSizeCommitLog=8192\nmapedFileSizeConsumeQueue=600\n"
        "namesrvAddr=127.0.0.1:9876; 127.0.0.1:9877\n"
    )
    broker, store = load_broker_config(write(tmp_path, text), {})
    assert (broker.broker_cluster_name, broker.broker_name, broker.broker_id) == ("C1", "broker-a", 1)
    assert store.broker_role is BrokerRole.SLAVE
    assert store.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert store.mapped_file_size_commit_log == 8192  # old spelling accepted
    assert store.mapped_file_size_consume_queue == 600
    assert parse_namesrv_addrs(broker.namesrv_addr) == ["127.0.0.1:9876", "127.0.0.1:9877"]


def test_namesrv_addr_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876")
    broker, _ = load_broker_config(None, {})
    assert broker.namesrv_addr == "10.0.0.1:9876"
    broker, _ = load_broker_config(None, {"namesrvAddr": "10.0.0.2:9876"})
    assert broker.namesrv_addr == "10.0.0.2:9876"


def test_empty_optional_string_is_none(tmp_path: Path) -> None:
    broker, _ = load_broker_config(write(tmp_path, "brokerIP1=\n"), {})
    assert broker.broker_ip1 is None


def test_config_lines_read_back_as_the_same_config(tmp_path: Path) -> None:
    text = "brokerName=b\\\\x\nstorePathRootDir=/tmp/a b\nmessageDelayLevel=1s 5s\nflushDiskType=SYNC_FLUSH\n"
    broker, store = load_broker_config(write(tmp_path, text), {})
    lines = config_lines(broker, store)
    assert "flushDiskType=SYNC_FLUSH" in lines and "autoCreateTopicEnable=true" in lines
    assert "namesrvAddr=" in lines
    again = load_broker_config(write(tmp_path, "\n".join(lines), "p.properties"), {})
    assert again == (broker, store)


def test_namesrv_config_lines_use_rocketmq_keys() -> None:
    lines = config_lines(load_namesrv_config(None, {}))
    assert [line.split("=", 1)[0] for line in lines] == [
        "maxConnections",  # ConnectionLimits, shared with the broker
        "maxConnectionsPerAddress",
        "serverChannelMaxIdleTimeSeconds",
        "partialFrameTimeoutSeconds",
        "maxHeaderBytes",
        "listenPort",
        "bindAddress",
        "scanNotActiveBrokerInterval",
        "brokerChannelExpiredTime",
        "kvConfigPath",
        "orderMessageEnable",
        "maxFrameBytes",
        "metricsPort",
        "aclEnable",
        "aclFile",
        "aclFileCheckInterval",
    ]


def test_max_header_bytes_is_a_key_of_both_daemons(tmp_path: Path) -> None:
    broker, _ = load_broker_config(write(tmp_path, "maxHeaderBytes=131072\n"), {})
    assert broker.max_header_bytes == 131072 and broker.server_limits()["max_header_bytes"] == 131072
    namesrv = load_namesrv_config(write(tmp_path, "maxHeaderBytes=2048\n", "n.properties"), {})
    assert namesrv.max_header_bytes == 2048
    assert load_namesrv_config(None, {}).max_header_bytes == 64 * 1024
    message = broker_error(tmp_path, "maxHeaderBytes=16777216")  # past the 24-bit header length field
    assert "maxHeaderBytes" in message


def test_empty_namesrv_list_names_the_key(tmp_path: Path) -> None:
    message = broker_error(tmp_path, "namesrvAddr= ; ")
    assert message == (
        "error: FILE:1: namesrvAddr=';': no NameServer address given: use HOST:PORT, several separated "
        "by ';' (or set NAMESRV_ADDR)"
    )


def test_advertised_host_is_never_the_wildcard() -> None:
    assert advertised_host("127.0.0.1") == "127.0.0.1"
    assert advertised_host("0.0.0.0") not in ("0.0.0.0", "")


def test_home_in_path_values_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = write(tmp_path, "storePathRootDir=~/store\nstorePathCommitLog=~/cl\nbrokerName=a\n")
    _, store = load_broker_config(path, {})
    assert store.store_path_root_dir == str(tmp_path / "home" / "store")
    assert store.commit_log_dir() == str(tmp_path / "home" / "cl")
    namesrv = load_namesrv_config(None, {"kvConfigPath": "~/ns/kv.json"})
    assert namesrv.kv_config_path == str(tmp_path / "home" / "ns" / "kv.json")
    assert load_namesrv_config(None, {"kvConfigPath": "a~/kv.json"}).kv_config_path == "a~/kv.json"


def test_shipped_broker_conf_loads_with_home_expanded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    conf = Path(__file__).resolve().parents[2] / "conf" / "broker.properties"
    _, store = load_broker_config(str(conf), {})
    assert store.store_path_root_dir == str(tmp_path / "store")
    assert "~" not in store.commit_log_dir()


def test_metrics_port_off_by_default_and_validated() -> None:
    assert load_namesrv_config(None, {}).metrics_port == 0
    assert load_broker_config(None, {})[0].metrics_port == 0
    assert load_broker_config(None, {"metricsPort": "9100"})[0].metrics_port == 9100
    with pytest.raises(
        ConfigError, match="metricsPort='70000' is out of range: use an integer from 0 to 65535"
    ):
        load_namesrv_config(None, {"metricsPort": "70000"})
    with pytest.raises(ConfigError, match="metricsPort='x' is not an integer"):
        load_broker_config(None, {"metricsPort": "x"})
