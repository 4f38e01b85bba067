"""The streaming sink's ledger of decided micro-batches (pure logic; no JVM, no daemons)."""

from __future__ import annotations

from rocketpy.spark.ledger import MAX_RUNS, Decisions, parse_job_key, stream_job_key


def test_job_keys_of_streams_round_trip_and_batch_keys_are_not_streams() -> None:
    key = stream_job_key("9f0c-q", 12, "run-a")
    assert parse_job_key(key) == ("9f0c-q", 12, "run-a")
    assert parse_job_key("0123456789abcdef0123456789abcdef") is None  # a batch write's uuid
    assert parse_job_key("q/x/run") is None
    assert parse_job_key("q//run") is None


def test_a_decided_batch_and_every_earlier_one_are_replays() -> None:
    d = Decisions()
    assert d.last is None and not d.is_replay(0)
    d = d.with_decision(0, "r1").with_decision(1, "r1")
    assert d.is_replay(0) and d.is_replay(1) and not d.is_replay(2)
    assert d.runs == {"r1": (0, 1)}


def test_a_run_commits_only_the_batches_it_decided() -> None:
    # run r1 decided 0..3 and died during 3's commit; r2 replayed 3 (dropped) and decided 4..5
    d = (
        Decisions()
        .with_decision(0, "r1")
        .with_decision(3, "r1")
        .with_decision(4, "r2")
        .with_decision(5, "r2")
    )
    assert d.committed(3, "r1")  # left undecided by r1's death: commit
    assert not d.committed(3, "r2")  # r2's replay of 3 was dropped
    assert not d.committed(6, "r2")  # not decided yet
    assert not d.committed(1, "r0")  # a run that never recorded anything
    assert d.committed(4, "r2") and d.committed(2, "r1")


def test_runs_are_trimmed_to_the_latest() -> None:
    d = Decisions()
    for i in range(MAX_RUNS + 5):
        d = d.with_decision(i, f"r{i}")
    assert len(d.runs) == MAX_RUNS
    assert "r0" not in d.runs and f"r{MAX_RUNS + 4}" in d.runs
    assert d.last == MAX_RUNS + 4


def test_copies_from_two_nameservers_merge_to_the_widest_ranges() -> None:
    a = Decisions({"r1": (0, 4)})
    b = Decisions({"r1": (0, 6), "r2": (7, 7)})
    assert a.merged(b).runs == {"r1": (0, 6), "r2": (7, 7)}
    assert Decisions.from_json(a.merged(b).to_json()) == a.merged(b)


def test_an_unreadable_entry_counts_as_nothing_decided() -> None:
    assert Decisions.from_json("not json") == Decisions()
    assert Decisions.from_json('{"runs": {"r": [1]}}') == Decisions()
