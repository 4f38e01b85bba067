"""RouteInfoManager with a fake clock: registration, master/slave, eviction, admin changes."""

from __future__ import annotations

from rocketpy.nameserver.route_info import RouteInfoManager
from rocketpy.perm import PERM_READ, PERM_RW
from rocketpy.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 1_000_000

    def __call__(self) -> int:
        return self.now_ms


def topics(*names: str, version: int = 1, queues: int = 4) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={
            n: TopicConfig(topic_name=n, read_queue_nums=queues, write_queue_nums=queues) for n in names
        },
        data_version=DataVersion(timestamp=1, counter=version),
    )


def manager() -> tuple[RouteInfoManager, FakeClock]:
    clock = FakeClock()
    return RouteInfoManager(clock), clock


CH_A, CH_A1, CH_B = object(), object(), object()


def register_two(rim: RouteInfoManager) -> None:
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", topics("T1", "T2"), CH_A)
    rim.register_broker("C1", "10.0.0.2:10911", "broker-b", 0, "10.0.0.2:10912", topics("T1"), CH_B)


def test_route_has_queue_data_of_each_broker_and_their_addresses() -> None:
    rim, _ = manager()
    register_two(rim)
    route = rim.topic_route("T1")
    assert route is not None
    assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas] == [
        ("broker-a", 4, PERM_RW),
        ("broker-b", 4, PERM_RW),
    ]
    assert [(b.broker_name, b.cluster, b.broker_addrs) for b in route.broker_datas] == [
        ("broker-a", "C1", {0: "10.0.0.1:10911"}),
        ("broker-b", "C1", {0: "10.0.0.2:10911"}),
    ]
    route2 = rim.topic_route("T2")
    assert route2 is not None and [b.broker_name for b in route2.broker_datas] == ["broker-a"]
    assert rim.topic_route("nope") is None


def test_route_is_a_copy() -> None:
    rim, _ = manager()
    register_two(rim)
    route = rim.topic_route("T1")
    assert route is not None
    route.queue_datas[0].perm = 0
    route.broker_datas[0].broker_addrs.clear()
    again = rim.topic_route("T1")
    assert again is not None and again.queue_datas[0].perm == PERM_RW and again.broker_datas[0].broker_addrs


def test_cluster_info_and_topic_list() -> None:
    rim, _ = manager()
    register_two(rim)
    rim.register_broker("C2", "10.0.0.3:10911", "broker-c", 0, "", topics("T3"), object())
    info = rim.cluster_info().to_wire()
    assert info["clusterAddrTable"] == {"C1": ["broker-a", "broker-b"], "C2": ["broker-c"]}
    assert info["brokerAddrTable"]["broker-c"] == {
        "cluster": "C2",
        "brokerName": "broker-c",
        "brokerAddrs": {"0": "10.0.0.3:10911"},
    }
    assert rim.topic_list() == ["T1", "T2", "T3"]


def test_slave_learns_master_and_ha_address() -> None:
    rim, _ = manager()
    result = rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912", topics("T1"), CH_A)
    assert result.master_addr is None and result.ha_server_addr is None
    result = rim.register_broker("C1", "10.0.0.9:10911", "broker-a", 1, "10.0.0.9:10912", topics("T1"), CH_A1)
    assert (result.master_addr, result.ha_server_addr) == ("10.0.0.1:10911", "10.0.0.1:10912")
    route = rim.topic_route("T1")
    assert route is not None and route.broker_datas[0].broker_addrs == {
        0: "10.0.0.1:10911",
        1: "10.0.0.9:10911",
    }


def test_slave_without_master_gets_no_master_address() -> None:
    rim, _ = manager()
    result = rim.register_broker("C1", "10.0.0.9:10911", "broker-a", 1, "", topics("T1"), CH_A1)
    assert result.master_addr is None
    assert rim.topic_route("T1") is None  # topics come from masters only


def test_slave_stays_when_master_leaves_and_topic_stays_readable() -> None:
    rim, _ = manager()
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("T1"), CH_A)
    rim.register_broker("C1", "10.0.0.9:10911", "broker-a", 1, "", topics("T1"), CH_A1)
    assert rim.on_channel_closed(CH_A) == ["10.0.0.1:10911"]
    route = rim.topic_route("T1")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: "10.0.0.9:10911"}


def test_same_address_switching_from_slave_to_master_keeps_one_record() -> None:
    rim, _ = manager()
    rim.register_broker("C1", "10.0.0.9:10911", "broker-a", 1, "", topics("T1"), CH_A1)
    rim.register_broker("C1", "10.0.0.9:10911", "broker-a", 0, "", topics("T1"), CH_A1)
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.9:10911"}


def test_unregister_removes_broker_cluster_and_orphan_topics() -> None:
    rim, _ = manager()
    register_two(rim)
    assert rim.unregister_broker("C1", "10.0.0.1:10911", "broker-a", 0)
    assert rim.topic_list() == ["T1"]  # T2 lived only on broker-a
    assert rim.cluster_info().cluster_addr_table == {"C1": ["broker-b"]}
    assert rim.unregister_broker("C1", "10.0.0.2:10911", "broker-b", 0)
    assert rim.topic_list() == [] and rim.cluster_addr_table == {} and rim.broker_live_table == {}
    assert not rim.unregister_broker("C1", "10.0.0.2:10911", "broker-b", 0)


def test_scan_evicts_only_silent_brokers() -> None:
    rim, clock = manager()
    register_two(rim)
    clock.now_ms += 100_000
    rim.register_broker("C1", "10.0.0.2:10911", "broker-b", 0, "", topics("T1"), CH_B)  # refresh b
    clock.now_ms += 20_001
    evicted = rim.scan_not_active_brokers(120_000)
    assert [i.broker_addr for i in evicted] == ["10.0.0.1:10911"] and evicted[0].channel is CH_A
    assert rim.topic_list() == ["T1"]
    assert rim.scan_not_active_brokers(120_000) == []


def test_query_data_version_refreshes_liveness_when_unchanged() -> None:
    rim, clock = manager()
    register_two(rim)
    clock.now_ms += 100_000
    changed, known = rim.query_data_version("10.0.0.1:10911", DataVersion(timestamp=1, counter=1))
    assert not changed and known == DataVersion(timestamp=1, counter=1)
    changed, _ = rim.query_data_version("10.0.0.2:10911", DataVersion(timestamp=1, counter=2))
    assert changed
    clock.now_ms += 20_001
    assert [i.broker_addr for i in rim.scan_not_active_brokers(120_000)] == ["10.0.0.2:10911"]
    assert rim.query_data_version("10.9.9.9:1", DataVersion()) == (True, None)


def test_channel_close_evicts_only_brokers_of_that_channel() -> None:
    rim, _ = manager()
    register_two(rim)
    assert rim.on_channel_closed(object()) == []
    assert rim.on_channel_closed(CH_B) == ["10.0.0.2:10911"]
    assert sorted(rim.broker_addr_table) == ["broker-a"]


def test_reregistration_on_a_new_connection_survives_close_of_the_old_one() -> None:
    rim, _ = manager()
    old, new = object(), object()
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("T1"), old)
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("T1"), new)
    assert rim.on_channel_closed(old) == []
    assert rim.topic_route("T1") is not None


def test_changed_version_replaces_topics_unchanged_version_keeps_namesrv_changes() -> None:
    rim, _ = manager()
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("T1", "T2", version=1), CH_A)
    assert rim.wipe_write_perm("broker-a") == 2
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("T1", "T2", version=1), CH_A)
    route = rim.topic_route("T1")
    assert route is not None and route.queue_datas[0].perm == PERM_READ  # same version: wipe kept
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("T1", version=2, queues=8), CH_A)
    route = rim.topic_route("T1")
    assert route is not None and (route.queue_datas[0].perm, route.queue_datas[0].write_queue_nums) == (
        PERM_RW,
        8,
    )
    assert rim.topic_list() == ["T1"]  # T2 deleted on the broker


def test_wipe_and_add_write_perm() -> None:
    rim, _ = manager()
    register_two(rim)
    assert rim.wipe_write_perm("broker-a") == 2
    route = rim.topic_route("T1")
    assert route is not None
    assert {q.broker_name: q.perm for q in route.queue_datas} == {"broker-a": PERM_READ, "broker-b": PERM_RW}
    assert rim.add_write_perm("broker-a") == 2
    route = rim.topic_route("T1")
    assert route is not None and all(q.perm == PERM_RW for q in route.queue_datas)
    assert rim.wipe_write_perm("nobody") == 0


def test_delete_topic_everywhere_or_in_one_cluster() -> None:
    rim, _ = manager()
    register_two(rim)
    rim.register_broker("C2", "10.0.0.3:10911", "broker-c", 0, "", topics("T1"), object())
    assert rim.delete_topic("T1", "C2")
    route = rim.topic_route("T1")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-a", "broker-b"]
    assert rim.delete_topic("T1")
    assert rim.topic_route("T1") is None
    assert not rim.delete_topic("T1")


def test_broker_address_moving_to_another_name_drops_the_old_one() -> None:
    rim, _ = manager()
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("T1"), CH_A)
    rim.register_broker("C1", "10.0.0.1:10911", "broker-z", 0, "", topics("T9"), CH_A)
    assert sorted(rim.broker_addr_table) == ["broker-z"]
    assert rim.topic_list() == ["T9"]


def _part(rim: RouteInfoManager, names: tuple[str, ...], index: int, total: int, version: int) -> None:
    rim.register_broker(
        "C1", "10.0.0.1:10911", "broker-a", 0, "", topics(*names, version=version), CH_A, split=(index, total)
    )


def test_split_registration_merges_parts_and_drops_old_topics_after_the_last() -> None:
    rim, _ = manager()
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("Old", "T1"), CH_A)
    _part(rim, ("T1", "T2"), 0, 3, version=2)
    assert rim.topic_list() == ["Old", "T1", "T2"]  # routes appear part by part, nothing dropped yet
    assert not rim.broker_live_table["10.0.0.1:10911"].data_version.same_as(
        DataVersion(timestamp=1, counter=2)
    )
    _part(rim, ("T3",), 1, 3, version=2)
    _part(rim, ("T4",), 2, 3, version=2)
    assert rim.topic_list() == ["T1", "T2", "T3", "T4"]
    assert rim.query_data_version("10.0.0.1:10911", DataVersion(timestamp=1, counter=2)) == (
        False, DataVersion(timestamp=1, counter=2),
    )  # fmt: skip
    # the same version again (periodic re-registration) changes nothing
    _part(rim, ("T1",), 0, 2, version=2)
    _part(rim, ("T9",), 1, 2, version=2)
    assert rim.topic_list() == ["T1", "T2", "T3", "T4"]


def test_split_registration_cut_short_is_not_taken_as_complete() -> None:
    rim, _ = manager()
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("Old"), CH_A)
    _part(rim, ("T1",), 0, 2, version=2)  # the broker dies before part 1
    changed, _ = rim.query_data_version("10.0.0.1:10911", DataVersion(timestamp=1, counter=2))
    assert changed and "Old" in rim.topic_list()  # the next registration sends everything again
    _part(rim, ("T1",), 0, 2, version=2)
    _part(rim, ("T2",), 1, 2, version=2)
    assert rim.topic_list() == ["T1", "T2"]


def test_registration_without_a_body_keeps_the_known_version() -> None:
    rim, _ = manager()
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", topics("T1", version=7), CH_A)
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "", None, CH_A)
    assert rim.query_data_version("10.0.0.1:10911", DataVersion(timestamp=1, counter=7))[0] is False
    assert rim.topic_list() == ["T1"]
