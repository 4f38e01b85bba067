#!/usr/bin/env python3
"""Generate ``rocketpy/grpc_api/v2/*_pb2.py(i)`` from the RocketMQ 5 protos in ``proto/``.

The protos are ``apache/rocketmq-apis``' v2 files (``proto/apache/rocketmq/v2/``; their field
numbers are the contract with the official 5.x clients). The generated modules are committed
(docs/design.md §15 says why); this script is how they are made, with ``grpcio-tools``:

    .venv/bin/python -m pip install 'grpcio-tools==1.85.1'
    .venv/bin/python scripts/gen_grpc.py [--check]

protoc's output is then rewritten in three ways, so that it lives inside ``rocketpy`` and never
meets the copies other packages generate from the same protos (the 5.x Python client's
``rocketmq.grpc_protocol``):

* imports of ``apache.rocketmq.v2`` become ``rocketpy.grpc_api.v2``;
* the files are added to rocketpy's own descriptor pool (``rocketpy.grpc_api.pool.POOL``), not
  protobuf's default pool, where another package's ``apache/rocketmq/v2/definition.proto`` of a
  different version would be refused as a duplicate file;
* the classes' module name is ``rocketpy.grpc_api.v2.<name>_pb2``.

``--check`` regenerates into a temporary directory and exits 1 when a committed file differs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "rocketpy" / "grpc_api" / "v2"
PROTOS = ["definition", "service", "admin"]
PACKAGE = "rocketpy.grpc_api.v2"


def rewrite(text: str) -> str:
    """protoc's module text, moved into ``rocketpy.grpc_api.v2`` and onto rocketpy's pool."""
    text = text.replace("from apache.rocketmq.v2 import", f"from {PACKAGE} import")
    text = text.replace("'apache.rocketmq.v2.", f"'{PACKAGE}.")
    if "_descriptor_pool.Default().AddSerializedFile(" in text:
        text = text.replace(
            "_descriptor_pool.Default().AddSerializedFile(", "_POOL.AddSerializedFile("
        ).replace(
            "from google.protobuf import descriptor_pool as _descriptor_pool\n",
            "from rocketpy.grpc_api.pool import POOL as _POOL\n",
        )
    return text


def generate(out: Path) -> list[Path]:
    """Run protoc into ``out``; returns the rewritten files."""
    import grpc_tools  # the generator; not a runtime dependency
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto
    args = ["protoc", f"-I{PROTO_DIR}", f"-I{well_known}", f"--python_out={out}", f"--pyi_out={out}"]
    args += [str(PROTO_DIR / "apache" / "rocketmq" / "v2" / f"{name}.proto") for name in PROTOS]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    files = []
    for name in PROTOS:
        for suffix in (".py", ".pyi"):
            path = out / "apache" / "rocketmq" / "v2" / f"{name}_pb2{suffix}"
            path.write_text(rewrite(path.read_text()))
            files.append(path)
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a committed file is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stale = []
        for path in generate(Path(tmp)):
            target = OUT_DIR / path.name
            if args.check:
                if not target.exists() or target.read_text() != path.read_text():
                    stale.append(target)
            else:
                target.write_text(path.read_text())
        for target in stale:
            print(f"stale: {target.relative_to(ROOT)} (run scripts/gen_grpc.py)", file=sys.stderr)
        version = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", "--version"], capture_output=True, text=True
        ).stdout.strip()
        print(f"generated with grpcio-tools ({version})")
        return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
