"""Atomic JSON config files and the store-dump tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketpy.broker.store import MessageStore
from rocketpy.broker.store.dump import main as dump_main
from rocketpy.broker.store.json_file import read_json_with_backup, write_json_atomic
from tests.unit.test_store_helpers import bmsg, tiny_config


def test_json_write_keeps_backup_and_recovers(tmp_path: Path) -> None:
    p = str(tmp_path / "config" / "topics.json")
    assert read_json_with_backup(p) is None
    write_json_atomic(p, {"v": 1})
    write_json_atomic(p, {"v": 2})
    assert read_json_with_backup(p) == {"v": 2}
    assert json.loads(Path(p + ".bak").read_text()) == {"v": 1}
    Path(p).write_text("{torn")
    assert read_json_with_backup(p) == {"v": 1}
    Path(p + ".bak").write_text("also bad")
    with pytest.raises(ValueError, match="repair or delete"):
        read_json_with_backup(p)
    with pytest.raises(TypeError):
        write_json_atomic(p, {"x": object()})
    assert not Path(p + ".tmp").exists() or Path(p).read_text() == "{torn"


async def test_store_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = MessageStore(tiny_config(str(tmp_path)))
    await s.start()
    for i in range(3):
        await s.put_message(bmsg("T", 1, b"x" * i, tags="TagA", keys=f"k{i}", uniq=f"U{i}"))
    assert await s.settle()
    await s.shutdown()
    capsys.readouterr()
    assert dump_main(str(tmp_path / "commitlog" / ("0" * 20)), True) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["topic"], r["queueOffset"], r["keys"], r["crcOk"]) for r in rows] == [
        ("T", i, f"k{i}", True) for i in range(3)
    ]
    assert dump_main(str(tmp_path / "consumequeue" / "T" / "1" / ("0" * 20)), False) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["queueOffset", "commitlogOffset", "size", "tagsCode"] and len(out) == 4
    index_file = next((tmp_path / "index").iterdir())
    assert dump_main(str(index_file), True) == 0
    assert json.loads(capsys.readouterr().out)["indexCount"] == 7  # 3 keys + 3 unique ids + unused 0
    assert dump_main(str(tmp_path / "checkpoint"), False) == 2
    assert "expected a file in commitlog/" in capsys.readouterr().err
