"""KVConfigManager: the NameServer's namespace -> {key: value} store, persisted to ``kvConfigPath``.

The file is RocketMQ's KVConfigSerializeWrapper: ``{"configTable": {namespace: {key: value}}}``.
Writes are atomic (temp file + fsync + rename, the previous file kept as ``.bak``) and run in a
worker thread, never on the event loop. Concurrent changes coalesce: one write covers every change
made before it started, and each caller returns once a write covering its change has finished.
Loading falls back to the ``.bak`` copy when the main file is missing or corrupt.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from pathlib import Path

from rocketpy.errors import RocketpyError

log = logging.getLogger("rocketpy.namesrv.kv")

#: Bounds on what a client may store (a KV table is control-plane metadata, not a database).
MAX_KV_ENTRIES = 100_000
MAX_KV_TEXT_BYTES = 64 * 1024


class KVConfigError(RocketpyError):
    """The KV table could not be loaded or persisted; the message says where and why."""


def write_json_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via temp + fsync + rename, keeping the old file as ``path.bak``.

    Blocking: call it from a worker thread.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if path.exists():
        shutil.copyfile(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_kv_file(path: Path) -> dict[str, dict[str, str]]:
    """Read the table from ``path`` (or its ``.bak``); empty when neither exists. Blocking.

    Raises:
        KVConfigError: a file exists but neither it nor the backup is a valid table.
    """
    problems: list[str] = []
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as e:
            problems.append(f"{candidate}: {e.strerror or e}")
            continue
        try:
            return _parse_table(text)
        except ValueError as e:
            problems.append(f"{candidate}: {e}")
    if problems:
        raise KVConfigError("cannot load the KV config: " + "; ".join(problems) + "; fix or remove the file")
    return {}


def _parse_table(text: str) -> dict[str, dict[str, str]]:
    doc = json.loads(text)
    table = doc.get("configTable") if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        raise ValueError("no 'configTable' object")
    out: dict[str, dict[str, str]] = {}
    for ns, kv in table.items():
        if not isinstance(kv, dict):
            raise ValueError(f"namespace {ns!r} is not an object")
        out[str(ns)] = {str(k): str(v) for k, v in kv.items()}
    return out


class KVConfigManager:
    """Holds the KV table in memory and persists every change.

    Args:
        path: the kvConfig.json file.
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path).expanduser()
        self._table: dict[str, dict[str, str]] = {}
        self._version = 0
        self._persisted_version = 0
        self._write_lock = asyncio.Lock()

    async def load(self) -> None:
        """Load the file in a worker thread (missing file: empty table).

        Raises:
            KVConfigError: the file and its backup are unreadable or corrupt.
        """
        self._table = await asyncio.to_thread(read_kv_file, self.path)
        count = sum(len(kv) for kv in self._table.values())
        log.info("loaded %d KV entries from %s", count, self.path)

    def get(self, namespace: str, key: str) -> str | None:
        """The value, or None when the namespace or key is unknown."""
        return self._table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str]:
        """A copy of one namespace's entries."""
        return dict(self._table.get(namespace, {}))

    async def put(self, namespace: str, key: str, value: str) -> None:
        """Set a value and wait until it is on disk.

        Raises:
            ValueError: too many entries or an oversized field (the message says which).
            KVConfigError: the write failed (the change stays in memory).
        """
        for name, text in (("namespace", namespace), ("key", key), ("value", value)):
            if len(text.encode()) > MAX_KV_TEXT_BYTES:
                raise ValueError(f"KV {name} is longer than {MAX_KV_TEXT_BYTES} bytes; store less")
        entries = sum(len(kv) for kv in self._table.values())
        if entries >= MAX_KV_ENTRIES and self.get(namespace, key) is None:
            raise ValueError(f"the KV table is full ({MAX_KV_ENTRIES} entries); delete unused entries")
        self._table.setdefault(namespace, {})[key] = value
        await self._persist()

    async def delete(self, namespace: str, key: str) -> bool:
        """Remove a value (and an emptied namespace); returns False when it was absent.

        Raises:
            KVConfigError: the write failed (the change stays in memory).
        """
        kv = self._table.get(namespace)
        if kv is None or key not in kv:
            return False
        del kv[key]
        if not kv:
            del self._table[namespace]
        await self._persist()
        return True

    async def _persist(self) -> None:
        self._version += 1
        wanted = self._version
        async with self._write_lock:
            if self._persisted_version >= wanted:
                return  # a write that started after our change already covered it
            version = self._version
            text = json.dumps({"configTable": self._table}, indent=2, sort_keys=True)
            try:
                await asyncio.to_thread(write_json_atomically, self.path, text)
            except OSError as e:
                raise KVConfigError(
                    f"KV change kept in memory but not saved to {self.path}: {e.strerror or e}; "
                    "check the disk and the directory's permissions"
                ) from e
            self._persisted_version = version
