"""The bottom layer stands alone: the store imports with the network's packages missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: Imports ``rocketpy.broker.store`` where ``msgpack`` and ``uvloop`` cannot be imported, then
#: lists what it loaded of the layers above.
_PROBE = textwrap.dedent(
    """
    import sys

    class Blocked:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("msgpack", "uvloop"):
                raise ImportError(f"{name} is blocked by the test")
            return None

    sys.meta_path.insert(0, Blocked())
    import rocketpy.broker.store
    import rocketpy.protocol.specs
    from rocketpy._accel import MODULES
    above = ("remoting", "client", "nameserver", "acl", "metrics", "spark", "dashboard", "cli", "sync")
    # The chooser (rocketpy._accel) loads every compiled module at once, from its file, without its
    # package: a C module that binds to its package's Python modules only when one of its
    # functions first runs. Those are not imports of the layers above.
    loaded = [
        m for m in sys.modules
        if m.startswith("rocketpy.") and m.split(".")[1] in above and m not in MODULES
    ]
    print(sorted(loaded))
    """
)


def test_store_and_protocol_import_without_msgpack_or_uvloop() -> None:
    result = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
