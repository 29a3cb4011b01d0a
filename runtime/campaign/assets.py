"""Phase 5 of ingestion: a campaign's binary assets described, checked and vetted
(docs/campaigns.md, "Assets", "Provenance").

Art and music stay on disk; what the pipeline keeps is an :class:`AssetRecord`
per file: its media type and format, image dimensions (read from the header by
Pillow, never by decoding the pixels: a campaign's art must validate in well
under 2 s), audio duration where the container says it, size, sha256 and
keywords.

Keywords come from the file name (``npc_wizard.png`` → npc, wizard;
``stormyNight.ogg`` → stormy, night) followed by the lines of the asset's
``<asset>.keywords.txt`` sidecar: the union of both (``npc_wizard.png`` → npc,
wizard, archmage, merlin).

Whatever else an author says about an asset — ``generated``, ``provenance``,
``alt_text``, ``loop`` — goes in a YAML frontmatter block (between ``---`` lines) at
the top of that same sidecar, the campaign's one format for "text about a file". A
sidecar is not searchable content, so this block is never chunked or embedded, and no
second kind of file is needed beside every asset::

    ---
    generated: true
    provenance:
      source_model: ollama/gemma:2b
      generated_at: 2026-02-03T11:00:00Z
      seed_data: a wizard in blue robes
    ---
    wizard

Provenance is enforced here (docs/campaigns.md, "Provenance"): an asset that breaks a rule is an
error, with the spec's message, and :func:`load_assets` leaves it out, so no
part of it reaches the store.
"""

from __future__ import annotations

import hashlib
import re
import struct
import wave
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Literal
from xml.etree import ElementTree

import msgspec
from PIL import Image, UnidentifiedImageError

from narratoria.runtime.bounded import shown
from narratoria.runtime.campaign.discovery import SIDECAR_SUFFIX, CampaignFile, discover
from narratoria.runtime.campaign.frontmatter import split_frontmatter
from narratoria.runtime.campaign.problems import CampaignError, Problem

MediaType = Literal["image", "audio", "video", "other"]

# Extension → the Pillow format it must hold. Pillow is only let try these
# parsers: an asset is never handed to an obscure decoder because of its bytes.
IMAGE_FORMATS = {"png": "PNG", "jpg": "JPEG", "jpeg": "JPEG", "webp": "WEBP", "gif": "GIF"}
AUDIO_FORMATS = frozenset({"mp3", "ogg", "oga", "opus", "wav", "flac"})
VIDEO_FORMATS = frozenset({"webm", "mp4"})

MISSING_PROVENANCE = ("Generated asset missing provenance (generated=true requires "
                      "provenance.source_model, provenance.generated_at, provenance.seed_data)")
UNEXPECTED_PROVENANCE = ("Human-created asset must not contain provenance "
                         "(generated=false conflicts with provenance object)")
PROVENANCE_FIELDS = ("source_model", "generated_at", "seed_data")


def generated_warning(count: int) -> str:
    return (f"Campaign contains {count} AI-generated asset(s). Review generated flags and "
            "provenance metadata to verify correctness.")


class Provenance(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Where a generated asset came from; required when ``generated`` is true."""

    source_model: str
    generated_at: datetime
    seed_data: str
    version: str | None = None


class AssetRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One binary asset as the persistence layer stores it (ingestion phases 5-6)."""

    path: str                              # relative to the campaign folder, "/"-separated
    media_type: MediaType = msgspec.field(name="type")
    format: str                            # extension, lower case ("png", "ogg")
    size_bytes: int
    checksum: str                          # "sha256:<hex>"
    keywords: list[str]
    generated: bool = False
    provenance: Provenance | None = None
    width: int | None = None               # images
    height: int | None = None
    alt_text: str | None = None
    duration_seconds: float | None = None  # audio, where the container says it
    bitrate: int | None = None             # audio, bits per second (average where variable)
    loop: bool | None = None               # audio: the author's loop flag, if written
    sidecar: str | None = None             # the keywords sidecar read, if any


# -- public API ----------------------------------------------------------------------------

def check_assets(root: Path, files: list[CampaignFile] | None = None) -> list[Problem]:
    """Every problem of the campaign's assets and sidecars, in file order.

    Errors: an image that cannot be read, a sidecar that does not parse, and the
    provenance rules (docs/campaigns.md, "Provenance"). Warnings: a sidecar beside nothing, and the
    count of AI-generated assets (file ``.``), shown on every load.
    """
    return _scan(Path(root), files, checksums=False).problems


def load_assets(root: Path, files: list[CampaignFile] | None = None) -> list[AssetRecord]:
    """The records of every asset that passed its checks; a rejected one has none."""
    return _scan(Path(root), files, checksums=True).records


def name_keywords(relative: str) -> list[str]:
    """Keywords of a file name: split on ``_ - .`` and camelCase, without the extension.

    Numbers are dropped: ``portrait_02.png`` is numbered, not about "02".
    """
    stem = PurePosixPath(relative).name.rsplit(".", 1)[0]
    words: list[str] = []
    for part in re.split(r"[_\-.\s]+", stem):
        # "stormyNight" → stormy, Night; "NPCPortrait" → NPC, Portrait
        words += re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", part)
    return _unique(w.lower() for w in words if not w.isdigit())


def sidecar_keywords(text: str) -> list[str]:
    """The keyword lines of a sidecar body: one a line, ``#`` comments and blanks skipped."""
    lines = (line.strip() for line in text.splitlines())
    return _unique(line for line in lines if line and not line.startswith("#"))


def check_provenance(file: str, text: str, meta: dict[str, Any]) -> list[Problem]:
    """The provenance rules over ``meta`` (a sidecar's frontmatter), in ``file``/``text``."""
    problems: list[Problem] = []
    generated = meta.get("generated", False)
    if not isinstance(generated, bool):
        return [Problem(file, _key_line(text, "generated"), "generated",
                        f"must be true or false, got {shown(generated)}")]
    provenance = meta.get("provenance")
    line = _key_line(text, "provenance") if "provenance" in meta else _key_line(text, "generated")
    if not generated and "provenance" in meta:
        return [Problem(file, line, "provenance", UNEXPECTED_PROVENANCE)]
    if not generated:
        return []
    fields = provenance if isinstance(provenance, dict) else {}
    if any(_blank(fields.get(key)) for key in PROVENANCE_FIELDS):
        problems.append(Problem(file, line, "provenance", MISSING_PROVENANCE))
    stamp = fields.get("generated_at")
    if not _blank(stamp) and _datetime(stamp) is None:
        problems.append(Problem(file, _key_line(text, "generated_at", line), "provenance.generated_at",
                                f"must be an ISO 8601 date and time (2026-02-03T11:00:00Z), "
                                f"got {shown(str(stamp))}"))
    return problems


# -- the scan ------------------------------------------------------------------------------

@dataclass
class _Scan:
    records: list[AssetRecord] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class _Sidecar:
    relative: str
    keywords: list[str]
    meta: dict[str, Any]


def _scan(root: Path, files: list[CampaignFile] | None, *, checksums: bool) -> _Scan:
    files = discover(root) if files is None else files
    present = {f.relative for f in files}
    scan = _Scan()
    sidecars: dict[str, _Sidecar] = {}  # asset path → its parsed sidecar
    rejected: set[str] = set()          # assets whose sidecar has an error: provenance unknown
    for f in files:
        if f.kind != "sidecar":
            continue
        target = f.relative[: -len(SIDECAR_SUFFIX)]
        if target not in present:
            scan.problems.append(Problem(f.relative, 1, "-", f"keywords sidecar for {target}, "
                                                             "which does not exist", "warning"))
            continue
        sidecar, problems = _read_sidecar(f)
        if sidecar is not None:
            sidecars[target] = sidecar
        if _errors(problems):
            rejected.add(target)
        scan.problems += problems
    generated = 0
    for f in files:
        if f.kind != "asset":
            continue
        problems, record = _describe(f, sidecars.get(f.relative), checksums)
        scan.problems += problems
        generated += record.generated
        if not _errors(problems) and f.relative not in rejected:
            scan.records.append(record)
    if generated:
        scan.problems.append(Problem(".", 1, "generated", generated_warning(generated), "warning"))
    # Sidecars were read first; sorted, each asset's problems come just before its sidecar's.
    scan.problems.sort(key=lambda p: (p.file == ".", p.file))
    return scan


def _errors(problems: list[Problem]) -> bool:
    return any(p.severity == "error" for p in problems)


def _read_sidecar(f: CampaignFile) -> tuple[_Sidecar | None, list[Problem]]:
    try:
        text = f.path.read_text("utf-8")
    except UnicodeDecodeError as exc:
        line = 1 + f.path.read_bytes()[: exc.start].count(b"\n")
        return None, [Problem(f.relative, line, "-", "not UTF-8 text")]
    try:
        meta, body, _ = split_frontmatter(text, f.relative)
    except CampaignError as exc:  # an impossible date too: parsing.load_yaml says so
        return None, exc.problems
    meta = meta or {}
    problems = check_provenance(f.relative, text, meta)
    if "alt_text" in meta and not isinstance(meta["alt_text"], str):
        problems.append(Problem(f.relative, _key_line(text, "alt_text"), "alt_text",
                                f"must be text, got {shown(meta['alt_text'])}"))
    if "loop" in meta and not isinstance(meta["loop"], bool):
        problems.append(Problem(f.relative, _key_line(text, "loop"), "loop",
                                f"must be true or false, got {shown(meta['loop'])}"))
    return _Sidecar(f.relative, sidecar_keywords(body), meta), problems


def _describe(f: CampaignFile, sidecar: _Sidecar | None,
              checksums: bool) -> tuple[list[Problem], AssetRecord]:
    """The asset's record and its own problems (sidecar problems are the sidecar's)."""
    problems: list[Problem] = []
    width = height = duration = bitrate = None
    if f.format in IMAGE_FORMATS:
        media_type: MediaType = "image"
        size, problem = _image_size(f)
        if problem is not None:
            problems.append(problem)
        if size is not None:
            width, height = size
    elif f.format == "svg":  # state icons: vector art
        media_type = "image"
        size, problem = _svg_size(f)
        if problem is not None:
            problems.append(problem)
        if size is not None:
            width, height = size
    elif f.format in AUDIO_FORMATS:
        media_type = "audio"
        duration, bitrate = _audio(f)
    else:
        media_type = "video" if f.format in VIDEO_FORMATS else "other"
    meta = sidecar.meta if sidecar is not None else {}
    generated = meta.get("generated") is True
    # Only a sidecar without errors is stored (_scan): its provenance then parses.
    fields = meta.get("provenance")
    provenance = _provenance(fields) if generated and isinstance(fields, dict) else None
    record = AssetRecord(
        path=f.relative, media_type=media_type, format=f.format, size_bytes=f.size_bytes,
        checksum=_sha256(f.path) if checksums else "",
        keywords=_unique([*name_keywords(f.relative), *(sidecar.keywords if sidecar else [])]),
        generated=generated, provenance=provenance, width=width, height=height,
        alt_text=meta.get("alt_text") if isinstance(meta.get("alt_text"), str) else None,
        duration_seconds=None if duration is None else round(duration, 3), bitrate=bitrate,
        loop=meta.get("loop") if isinstance(meta.get("loop"), bool) else None,
        sidecar=sidecar.relative if sidecar else None)
    return problems, record


def _provenance(fields: dict[str, Any]) -> Provenance | None:
    if any(_blank(fields.get(key)) for key in PROVENANCE_FIELDS):
        return None
    stamp = _datetime(fields["generated_at"])
    if stamp is None:
        return None
    version = fields.get("version")
    return Provenance(source_model=str(fields["source_model"]).strip(), generated_at=stamp,
                      seed_data=str(fields["seed_data"]),
                      version=None if _blank(version) else str(version))


# -- images --------------------------------------------------------------------------------

_SVG_LENGTH = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(px)?\s*$")


def _svg_size(f: CampaignFile) -> tuple[tuple[int, int] | None, Problem | None]:
    """(width, height) of an SVG from its root element's width/height, else its viewBox
    (None when it gives neither in plain units), and what is wrong with the file."""
    try:
        _, root = next(ElementTree.iterparse(f.path, events=("start",)))
    except (ElementTree.ParseError, StopIteration, OSError) as exc:
        return None, Problem(f.relative, 1, "-", f"cannot read the image: not an SVG file ({exc})")
    if root.tag.rpartition("}")[2] != "svg":
        return None, Problem(f.relative, 1, "-", f"cannot read the image: its root element is "
                                                 f"<{root.tag.rpartition('}')[2]}>, not <svg>")
    sides = [_SVG_LENGTH.match(root.get(k, "")) for k in ("width", "height")]
    if all(sides):
        return (round(float(sides[0][1])), round(float(sides[1][1]))), None  # type: ignore[index]
    box = (root.get("viewBox") or "").replace(",", " ").split()
    try:
        return (round(float(box[2])), round(float(box[3]))), None
    except (IndexError, ValueError):
        return None, None  # a scalable image with no intrinsic size is still an image

def _image_size(f: CampaignFile) -> tuple[tuple[int, int] | None, Problem | None]:
    """(width, height) from the header, and what is wrong with the file, if anything."""
    expected = IMAGE_FORMATS[f.format]
    name = {"WEBP": "WebP"}.get(expected, expected)
    try:
        with Image.open(f.path, formats=list(dict.fromkeys(IMAGE_FORMATS.values()))) as image:
            size, actual = image.size, image.format
            # verify() walks the file's structure (PNG: every chunk and its CRC)
            # without decoding pixels; it leaves the image unusable, which is fine.
            image.verify()
    except UnidentifiedImageError:
        return None, Problem(f.relative, 1, "-", f"cannot read the image: not a {name} file "
                                                 "(corrupt, or not an image at all)")
    except Image.DecompressionBombError as exc:
        return None, Problem(f.relative, 1, "-", f"cannot read the image: {exc}")
    except (OSError, SyntaxError, ValueError, EOFError, struct.error) as exc:
        return None, Problem(f.relative, 1, "-", f"cannot read the image: corrupt {name} data "
                                                 f"({exc})")
    if actual != expected:
        return size, Problem(f.relative, 1, "-", f"the file is named .{f.format} but holds a "
                                                 f"{actual} image", "warning")
    if expected == "JPEG" and not _jpeg_ends(f):
        return size, Problem(f.relative, 1, "-", "the JPEG image has no end marker: it may be "
                                                 "cut short", "warning")
    return size, None


def _jpeg_ends(f: CampaignFile) -> bool:
    """JPEG's verify() checks nothing: a file cut short shows as a missing end marker.

    Only a warning: some cameras write padding after the marker, and a viewer
    shows a cut JPEG anyway, its last rows grey.
    """
    with f.path.open("rb") as fh:
        fh.seek(max(0, f.size_bytes - 64))
        return fh.read().rstrip(b"\x00\r\n ").endswith(b"\xff\xd9")


# -- audio ---------------------------------------------------------------------------------

def _audio(f: CampaignFile) -> tuple[float | None, int | None]:
    """(duration in seconds, bits per second) from the container's header, or Nones.

    Only what the header states: WAV (sizes), FLAC (STREAMINFO sample count),
    Ogg Vorbis/Opus/FLAC (last page's granule position), MP3 (Xing/Info/VBRI
    frame count, or a constant bitrate confirmed over the first frames).
    Anything else is None rather than a guess.
    """
    try:
        with f.path.open("rb") as fh:
            if f.format == "wav":
                found = _wav(f.path, fh)
            elif f.format == "flac":
                found = _flac(fh)
            elif f.format in ("ogg", "oga", "opus"):
                found = _ogg(fh, f.size_bytes)
            else:
                found = _mp3(fh, f.size_bytes)
    except (OSError, EOFError, struct.error, ValueError, ZeroDivisionError, wave.Error):
        return None, None
    if found is None:
        return None, None
    duration, bitrate = found
    if duration <= 0:
        return None, None
    if bitrate is None:
        bitrate = round(f.size_bytes * 8 / duration)
    return duration, bitrate


def _wav(path: Path, fh: BinaryIO) -> tuple[float, int | None] | None:
    try:
        with wave.open(str(path)) as w:
            rate = w.getframerate()
            return w.getnframes() / rate, rate * w.getnchannels() * w.getsampwidth() * 8
    except (wave.Error, EOFError):
        pass  # not PCM (float, extensible): the RIFF sizes still give the duration
    fh.seek(0)
    if fh.read(4) != b"RIFF" or (fh.read(4), fh.read(4))[1] != b"WAVE":
        return None
    byte_rate = data = None
    while (header := fh.read(8)) and len(header) == 8:
        chunk, size = header[:4], struct.unpack("<I", header[4:])[0]
        if chunk == b"fmt ":
            byte_rate = struct.unpack("<I", fh.read(16)[8:12])[0]
            fh.seek(size - 16 + (size & 1), 1)
        elif chunk == b"data":
            data = size
            break
        else:
            fh.seek(size + (size & 1), 1)
    if not byte_rate or data is None:
        return None
    return data / byte_rate, byte_rate * 8


def _flac(fh: BinaryIO) -> tuple[float, None] | None:
    _skip_id3(fh)
    if fh.read(4) != b"fLaC":
        return None
    block = fh.read(4 + 34)
    if len(block) < 38 or block[0] & 0x7F != 0:  # STREAMINFO must come first
        return None
    return _streaminfo(block[4:])


def _streaminfo(info: bytes) -> tuple[float, None] | None:
    bits = int.from_bytes(info[10:18], "big")
    rate, total = bits >> 44, bits & ((1 << 36) - 1)
    return (total / rate, None) if rate and total else None  # total 0: "unknown"


def _ogg(fh: BinaryIO, size: int) -> tuple[float, None] | None:
    first = _ogg_page(fh.read(27 + 255 + 128), 0)
    if first is None:
        return None
    _, serial, packet = first
    if packet.startswith(b"\x01vorbis"):
        rate, skip = struct.unpack("<I", packet[12:16])[0], 0
    elif packet.startswith(b"OpusHead"):
        rate, skip = 48000, struct.unpack("<H", packet[10:12])[0]  # granules count at 48 kHz
    elif packet.startswith(b"\x7fFLAC") and packet[9:13] == b"fLaC":
        rate, skip = int.from_bytes(packet[17 + 10:17 + 13], "big") >> 4, 0
    else:
        return None
    # The last page of the stream holds the total granule position; a page is at most 65307 bytes.
    fh.seek(max(0, size - 65307 - 27))
    tail = fh.read()
    at = len(tail)
    while (at := tail.rfind(b"OggS", 0, at)) >= 0:
        page = _ogg_page(tail, at)
        if page is not None and page[1] == serial and page[0] >= 0:
            return ((page[0] - skip) / rate, None) if rate else None
    return None


def _ogg_page(data: bytes, at: int) -> tuple[int, int, bytes] | None:
    """(granule position, serial number, first packet bytes) of the page at ``at``."""
    if data[at:at + 4] != b"OggS" or len(data) < at + 27:
        return None
    granule, serial = struct.unpack("<qI", data[at + 6:at + 18])
    segments = data[at + 26]
    start = at + 27 + segments
    return granule, serial, data[start:start + sum(data[at + 27:start])]


_MP3_BITRATES = {  # (MPEG-1?, layer) → kbit/s by index 1-14
    (True, 1): (32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_MP3_BITRATES[(False, 3)] = _MP3_BITRATES[(False, 2)]
_MP3_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}


@dataclass(frozen=True)
class _Frame:
    bitrate: int          # bits per second
    rate: int             # samples per second
    samples: int          # per frame
    length: int           # bytes
    side_info: int        # bytes between the header and a Xing tag
    mpeg1: bool


def _mp3_frame(header: bytes) -> _Frame | None:
    if len(header) < 4:
        return None
    h = int.from_bytes(header[:4], "big")
    version, layer_bits = (h >> 19) & 3, (h >> 17) & 3
    index, rate_index, padding = (h >> 12) & 15, (h >> 10) & 3, (h >> 9) & 1
    if h >> 21 != 0x7FF or version == 1 or layer_bits == 0 or index in (0, 15) or rate_index == 3:
        return None
    mpeg1, layer = version == 3, 4 - layer_bits
    bitrate = _MP3_BITRATES[(mpeg1, layer)][index - 1] * 1000
    rate = _MP3_RATES[version][rate_index]
    samples = 384 if layer == 1 else 1152 if layer == 2 or mpeg1 else 576
    length = (12 * bitrate // rate + padding) * 4 if layer == 1 else samples // 8 * bitrate // rate + padding
    mono = (h >> 6) & 3 == 3
    side_info = (17 if mono else 32) if mpeg1 else (9 if mono else 17)
    return _Frame(bitrate, rate, samples, length, side_info, mpeg1)


def _mp3(fh: BinaryIO, size: int) -> tuple[float, int | None] | None:
    start = _skip_id3(fh)
    data = fh.read(64 * 1024)
    fh.seek(max(0, size - 128))
    end = size - 128 if fh.read(3) == b"TAG" else size  # ID3v1 tag at the very end
    at = data.find(b"\xff")
    while 0 <= at < len(data) - 4:
        frame = _mp3_frame(data[at:at + 4])
        if frame is not None:
            tag = data[at + 4 + frame.side_info:at + 4 + frame.side_info + 12]
            if tag[:4] in (b"Xing", b"Info"):
                flags = struct.unpack(">I", tag[4:8])[0]
                if flags & 1:
                    count = struct.unpack(">I", tag[8:12])[0]
                    return count * frame.samples / frame.rate, None
            vbri = data[at + 36:at + 36 + 18]
            if vbri[:4] == b"VBRI":
                count = struct.unpack(">I", vbri[14:18])[0]
                return count * frame.samples / frame.rate, None
            if _constant(data, at, frame):
                return (end - start - at) * 8 / frame.bitrate, frame.bitrate
        at = data.find(b"\xff", at + 1)
    return None


def _constant(data: bytes, at: int, first: _Frame, frames: int = 3) -> bool:
    """The frames after ``at`` follow on exactly, all at the first one's bitrate."""
    for _ in range(frames):
        frame = _mp3_frame(data[at:at + 4])
        if frame is None or frame.bitrate != first.bitrate or frame.rate != first.rate:
            return False
        at += frame.length
    return True


def _skip_id3(fh: BinaryIO) -> int:
    """Past a leading ID3v2 tag (MP3, some FLAC); the offset where the audio starts."""
    head = fh.read(10)
    if len(head) == 10 and head[:3] == b"ID3":
        size = 0
        for byte in head[6:10]:  # "synchsafe": 7 bits a byte
            size = size << 7 | (byte & 0x7F)
        offset = 10 + size + (10 if head[5] & 0x10 else 0)
    else:
        offset = 0
    fh.seek(offset)
    return offset


# -- small helpers ---------------------------------------------------------------------------

def _datetime(value: Any) -> datetime | None:
    """An ISO 8601 date and time, or None. YAML has already parsed an unquoted one."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, date) or not isinstance(value, str):
        return None  # a date alone says when, not at what time
    text = value.strip()
    if not re.fullmatch(r"\d{4}-?\d{2}-?\d{2}T\d{2}.*", text):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _key_line(text: str, key: str, default: int = 1) -> int:
    match = re.search(rf"^[ \t]*{re.escape(key)}\s*:", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else default


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return f"sha256:{h.hexdigest()}"


def _unique(words: Any) -> list[str]:
    """First occurrence of each word, compared without case."""
    seen: dict[str, str] = {}
    for word in words:
        seen.setdefault(str(word).lower(), str(word))
    return list(seen.values())
