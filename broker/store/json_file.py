"""Config JSON files (topics.json, consumerOffset.json, ...) written atomically, read with fallback.

Owns the write protocol: serialize -> ``{path}.tmp`` -> fsync -> keep the previous file as
``{path}.bak`` -> rename the temp file over ``path`` -> fsync the directory. A reader that finds
``path`` missing or unreadable falls back to ``.bak``. Both functions block on the disk: call them
in a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

log = logging.getLogger("rocketpy.store")


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: str, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically, keeping the previous version as ``path.bak``.

    Raises:
        TypeError: ``obj`` is not JSON-serializable (nothing is written).
        OSError: the directory is not writable.
    """
    data = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False).encode()
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    if os.path.exists(path):
        os.replace(path, path + ".bak")
    os.replace(tmp, path)
    _fsync_dir(directory)


def read_json_with_backup(path: str) -> Any | None:
    """Read the JSON document at ``path``, falling back to ``path.bak``; None when neither exists.

    A damaged file is logged (``rocketpy.store``) and the backup used instead.

    Raises:
        ValueError: both the file and its backup exist but neither is valid JSON (the message names
            both files so the operator can repair or remove them).
    """
    errors: list[str] = []
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            log.error("cannot read %s: %s; trying the backup", candidate, e)
            errors.append(f"{candidate}: {e}")
            continue
        if candidate != path:
            log.warning("%s missing or damaged; using its backup %s", path, candidate)
        return doc
    if errors:
        raise ValueError(f"cannot read {path} nor its backup ({'; '.join(errors)}); repair or delete them")
    return None
