"""The NameServer's KV config store: atomic persistence, backup fallback, bounds, coalesced writes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from rocketpy.nameserver import kv_config
from rocketpy.nameserver.kv_config import KVConfigError, KVConfigManager, read_kv_file


def on_disk(path: Path) -> dict[str, dict[str, str]]:
    return dict(json.loads(path.read_text())["configTable"])


async def test_put_get_delete_are_persisted(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "kvConfig.json"
    kv = KVConfigManager(str(path))
    await kv.load()
    assert kv.get("ns", "k") is None
    await kv.put("ns", "k", "v1")
    assert await asyncio.to_thread(on_disk, path) == {"ns": {"k": "v1"}}
    await kv.put("ns", "k", "v2")
    assert kv.get("ns", "k") == "v2" and kv.namespace("ns") == {"k": "v2"}
    backup = await asyncio.to_thread(on_disk, path.with_name("kvConfig.json.bak"))
    assert backup == {"ns": {"k": "v1"}}  # the previous file is kept
    assert await kv.delete("ns", "k")
    assert not await kv.delete("ns", "k")
    assert await asyncio.to_thread(on_disk, path) == {}
    assert not path.with_name("kvConfig.json.tmp").exists()


async def test_reload_and_corrupt_file_falls_back_to_backup(tmp_path: Path) -> None:
    path = tmp_path / "kv.json"
    kv = KVConfigManager(str(path))
    await kv.put("ns", "a", "1")
    await kv.put("ns", "b", "2")
    path.write_text("{ torn")
    again = KVConfigManager(str(path))
    await again.load()
    assert again.namespace("ns") == {"a": "1"}  # the .bak copy


def test_both_files_corrupt_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "kv.json"
    path.write_text("[]")
    path.with_name("kv.json.bak").write_text('{"configTable": {"ns": 3}}')
    with pytest.raises(KVConfigError) as ei:
        read_kv_file(path)
    message = str(ei.value)
    assert message.startswith("cannot load the KV config: ") and message.endswith("fix or remove the file")
    assert "no 'configTable' object" in message and "namespace 'ns' is not an object" in message


async def test_concurrent_puts_coalesce_and_all_land(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[str] = []
    real = kv_config.write_json_atomically

    def counting(path: Path, text: str) -> None:
        writes.append(text)
        real(path, text)

    monkeypatch.setattr(kv_config, "write_json_atomically", counting)
    path = tmp_path / "kv.json"
    kv = KVConfigManager(str(path))
    await asyncio.gather(*(kv.put("ns", f"k{i}", str(i)) for i in range(20)))
    assert await asyncio.to_thread(on_disk, path) == {"ns": {f"k{i}": str(i) for i in range(20)}}
    assert 1 <= len(writes) < 20


async def test_bounds_are_refused_with_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kv = KVConfigManager(str(tmp_path / "kv.json"))
    with pytest.raises(ValueError, match="longer than"):
        await kv.put("ns", "k", "x" * (kv_config.MAX_KV_TEXT_BYTES + 1))
    monkeypatch.setattr(kv_config, "MAX_KV_ENTRIES", 2)
    await kv.put("ns", "a", "1")
    await kv.put("ns", "b", "1")
    with pytest.raises(ValueError, match="table is full"):
        await kv.put("ns", "c", "1")
    await kv.put("ns", "a", "2")  # replacing an entry is fine


async def test_write_failure_says_where_and_what_to_do(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    kv = KVConfigManager(str(blocker / "kv.json"))
    with pytest.raises(KVConfigError, match=r"not saved to .*kv\.json: .*check the disk"):
        await kv.put("ns", "k", "v")
    assert kv.get("ns", "k") == "v"
