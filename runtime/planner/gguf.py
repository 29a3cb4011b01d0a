"""A GGUF model file: its header, and the form of it that runs fastest here.

The default model ships as Q4_1, a quantisation llama.cpp's CPU kernels serve
slowly: on 2 Zen 4 cores SmolLM2-135M reads a prompt at 245 tokens/s and writes
78 tokens/s as Q4_1, but 614 and 103 as Q8_0. Re-quantising Q4_1 to Q8_0 is all
but lossless — 8-bit blocks hold the 4-bit values to within 1/254 of each block's
range (perplexity on the architecture spec 24.46 as Q4_1, 24.52 as Q8_0; Q4_0
would be 30.7) — and takes under a second, so the planner loads a Q8_0 copy that
is made once and kept in the user's cache folder, keyed by the source's content.

Only file types measured to gain are converted (:data:`REQUANTIZE`); any other
GGUF is loaded as it is.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import struct
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
# llama.cpp's llama_ftype values (general.file_type).
FTYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
               32: "BF16"}
MOSTLY_Q4_1, MOSTLY_Q8_0 = 3, 7
REQUANTIZE = {MOSTLY_Q4_1: MOSTLY_Q8_0}  # slow kernels here -> fast, lossless enough

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """The file is not a GGUF file we can read; the message names it."""


def read_metadata(path: Path, keys: Iterable[str]) -> dict[str, Any]:
    """The values of ``keys`` in the header of the GGUF file at ``path`` (those present).

    Reads key/value pairs in order and stops once every wanted key is found, so
    the large tokenizer arrays are usually never read."""
    wanted = set(keys)
    found: dict[str, Any] = {}
    try:
        with path.open("rb") as fh:
            if fh.read(4) != GGUF_MAGIC:
                raise GGUFError(f"{path} is not a GGUF file")
            version, _tensors, count = struct.unpack("<IQQ", _exact(fh, 20))
            if version < 2:
                raise GGUFError(f"{path}: GGUF version {version} is too old (need 2 or later)")
            for _ in range(count):
                key = _string(fh)
                kind = struct.unpack("<I", _exact(fh, 4))[0]
                value = _value(fh, kind, keep=key in wanted)
                if key in wanted:
                    found[key] = value
                    if len(found) == len(wanted):
                        break
    except (OSError, struct.error, UnicodeDecodeError) as exc:
        raise GGUFError(f"{path}: unreadable GGUF header: {exc}") from None
    return found


def file_type(path: Path) -> int | None:
    """``general.file_type`` of the model (a llama_ftype), if the header says."""
    value = read_metadata(path, ["general.file_type"]).get("general.file_type")
    return int(value) if value is not None else None


def fast_form(path: Path, cache_dir: Path | None = None) -> Path:
    """The file to load for ``path``: a cached re-quantised copy when its type has a
    faster equivalent (made now if missing), else ``path`` itself. Never raises for
    a conversion that fails: the original still works, only slower."""
    try:
        source_type = file_type(path)
    except GGUFError:
        return path  # the loader reports the bad file with its own message
    target = REQUANTIZE.get(source_type) if source_type is not None else None
    if target is None:
        return path
    folder = cache_dir or default_cache_dir()
    digest = _digest(path)
    out = folder / f"{path.stem}.{digest[:16]}.{FTYPE_NAMES[target]}.gguf"
    if out.is_file():
        return out
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _requantize(path, out, target)
    except (OSError, RuntimeError) as exc:
        log.warning("model %s: no %s copy (%s); loading it as %s", path, FTYPE_NAMES[target],
                    exc, FTYPE_NAMES.get(source_type, source_type))
        return path
    log.info("model %s: re-quantised to %s at %s", path, FTYPE_NAMES[target], out)
    return out


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "narratoria" / "models"


def _requantize(source: Path, out: Path, ftype: int) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    # Written beside the final name and renamed: a reader never sees half a file,
    # and two daemons converting at once both end with a whole one.
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        rc = llama_cpp.llama_model_quantize(str(source).encode(), tmp.encode(),
                                            ctypes.byref(params))
        if rc != 0:
            raise RuntimeError(f"llama_model_quantize returned {rc}")
        if file_type(Path(tmp)) != ftype:
            raise RuntimeError("the converted file does not have the requested type")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _exact(fh: BinaryIO, n: int) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise GGUFError(f"{getattr(fh, 'name', 'file')}: header ends early")
    return data


def _string(fh: BinaryIO) -> str:
    (n,) = struct.unpack("<Q", _exact(fh, 8))
    return _exact(fh, n).decode("utf-8")


def _value(fh: BinaryIO, kind: int, *, keep: bool) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _exact(fh, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(fh)
    if kind == _ARRAY:
        item_kind, n = struct.unpack("<IQ", _exact(fh, 12))
        if item_kind in _SCALARS and not keep:  # skip fixed-size arrays without reading them
            fh.seek(n * struct.calcsize(_SCALARS[item_kind]), os.SEEK_CUR)
            return None
        return [_value(fh, item_kind, keep=keep) for _ in range(n)]
    raise GGUFError(f"{getattr(fh, 'name', 'file')}: unknown GGUF value type {kind}")
