"""Regenerate the committed gRPC stubs from ``narratoria.proto`` (grpcio-tools)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STUBS = ("narratoria_pb2.py", "narratoria_pb2.pyi", "narratoria_pb2_grpc.py")


def generate(out_dir: Path) -> list[Path]:
    """Write the stubs into ``out_dir``; they import each other as ``narratoria.proto``."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as tmp:
        # The virtual path makes the generated imports read `from narratoria.proto import ...`.
        rc = protoc.main(["protoc", f"-Inarratoria/proto={HERE}", f"--python_out={tmp}",
                          f"--pyi_out={tmp}", f"--grpc_python_out={tmp}",
                          str(HERE / "narratoria.proto")])
        if rc != 0:
            raise RuntimeError(f"protoc failed with exit code {rc} on {HERE / 'narratoria.proto'}")
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in STUBS:
            shutil.copyfile(Path(tmp) / "narratoria" / "proto" / name, out_dir / name)
    return [out_dir / name for name in STUBS]


if __name__ == "__main__":
    for path in generate(HERE if len(sys.argv) < 2 else Path(sys.argv[1])):
        print(path)
