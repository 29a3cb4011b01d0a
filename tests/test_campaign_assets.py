"""Campaign art and music as phase 5 of ingestion describes them, and provenance
(docs/campaigns.md, "Assets", "Provenance").

Real files: images written by Pillow, a WAV written by ``wave``. The FLAC, Ogg
and MP3 files are built byte by byte from their format specifications (header
blocks, Ogg pages with their CRCs, MPEG frames), since no encoder is installed:
they hold silence-sized payloads but real headers, which is all a duration is
read from.
"""

from __future__ import annotations

import shutil
import struct
import wave
from datetime import datetime, timezone
from pathlib import Path

import msgspec
import pytest
from PIL import Image

from narratoria.runtime.campaign import (
    AssetRecord,
    check_assets,
    load_assets,
    validate,
)
from narratoria.runtime.campaign.assets import name_keywords, sidecar_keywords

from conftest import TESTS

TINY = TESTS / "fixtures" / "campaigns" / "tiny"
MISSING = ("Generated asset missing provenance (generated=true requires provenance.source_model, "
           "provenance.generated_at, provenance.seed_data)")
HUMAN = ("Human-created asset must not contain provenance "
         "(generated=false conflicts with provenance object)")


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TINY, tmp_path / "tiny"))


def write(root: Path, relative: str, data: bytes | str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


def image(root: Path, relative: str, size: tuple[int, int], fmt: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (30, 60, 200)).save(path, fmt)
    return path


def records(root: Path) -> dict[str, AssetRecord]:
    return {r.path: r for r in load_assets(root)}


# -- images -----------------------------------------------------------------------------------

def test_png_jpeg_and_webp_dimensions_format_size_and_checksum(tmp_path: Path):
    png = image(tmp_path, "art/characters/npc_wizard.png", (64, 32), "PNG")
    image(tmp_path, "art/locations/stormyNight.jpg", (40, 30), "JPEG")
    image(tmp_path, "art/items/excalibur-scabbard.webp", (17, 23), "WEBP")
    found = records(tmp_path)
    wizard = found["art/characters/npc_wizard.png"]
    assert (wizard.media_type, wizard.format, wizard.width, wizard.height) == ("image", "png", 64, 32)
    assert wizard.size_bytes == png.stat().st_size
    import hashlib
    assert wizard.checksum == "sha256:" + hashlib.sha256(png.read_bytes()).hexdigest()
    assert (wizard.generated, wizard.provenance, wizard.duration_seconds) == (False, None, None)
    night = found["art/locations/stormyNight.jpg"]
    assert (night.format, night.width, night.height) == ("jpg", 40, 30)
    scabbard = found["art/items/excalibur-scabbard.webp"]
    assert (scabbard.format, scabbard.width, scabbard.height) == ("webp", 17, 23)
    assert check_assets(tmp_path) == []


def test_svg_icons_are_images_sized_by_their_root_element(tmp_path: Path):
    svg = 'xmlns="http://www.w3.org/2000/svg"'
    write(tmp_path, "ui/state/player.hp.svg", f'<svg {svg} width="48" height="40px"></svg>')
    write(tmp_path, "ui/state/world.time.svg", f'<svg {svg} viewBox="0 0 128 96"></svg>')
    write(tmp_path, "ui/state/quest.active.svg", f'<svg {svg} width="100%"></svg>')
    write(tmp_path, "ui/items/torch.svg", "<html>not an icon</html>")
    write(tmp_path, "ui/items/rope.svg", "<svg unclosed")
    found = records(tmp_path)
    hp, clock = found["ui/state/player.hp.svg"], found["ui/state/world.time.svg"]
    assert (hp.media_type, hp.format, hp.width, hp.height) == ("image", "svg", 48, 40)
    assert (clock.width, clock.height) == (128, 96)
    quest = found["ui/state/quest.active.svg"]
    assert quest.media_type == "image" and quest.width is None  # scalable, no intrinsic size
    problems = {p.file: str(p) for p in check_assets(tmp_path)}
    assert set(problems) == {"ui/items/torch.svg", "ui/items/rope.svg"}
    assert "its root element is <html>, not <svg>" in problems["ui/items/torch.svg"]
    assert "not an SVG file" in problems["ui/items/rope.svg"]
    assert "ui/items/torch.svg" not in found and "ui/items/rope.svg" not in found


def test_the_wire_form_uses_the_spec_names(tmp_path: Path):
    image(tmp_path, "art/npc_wizard.png", (8, 8), "PNG")
    wire = msgspec.json.decode(msgspec.json.encode(load_assets(tmp_path)[0]))
    assert wire["type"] == "image" and wire["sizeBytes"] > 0 and wire["keywords"] == ["npc", "wizard"]
    assert msgspec.json.decode(msgspec.json.encode(load_assets(tmp_path)[0]), type=AssetRecord) \
        == load_assets(tmp_path)[0]


def test_a_corrupt_or_truncated_image_is_an_error_naming_its_file_and_is_not_stored(tmp_path: Path):
    good = image(tmp_path, "art/good.png", (32, 32), "PNG")
    write(tmp_path, "art/cut.png", good.read_bytes()[:60])
    write(tmp_path, "art/junk.jpg", b"this is not a picture at all")
    jpeg = image(tmp_path, "art/whole.jpg", (64, 64), "JPEG")
    write(tmp_path, "art/half.jpg", jpeg.read_bytes()[: jpeg.stat().st_size // 2])
    problems = {p.file: p for p in check_assets(tmp_path)}
    assert set(problems) == {"art/cut.png", "art/junk.jpg", "art/half.jpg"}
    assert all(p.severity == "error" and p.line == 1 for p in problems.values())
    assert str(problems["art/cut.png"]).startswith("art/cut.png:1: -: cannot read the image: corrupt PNG")
    assert str(problems["art/junk.jpg"]) == ("art/junk.jpg:1: -: cannot read the image: not a JPEG "
                                             "file (corrupt, or not an image at all)")
    assert set(records(tmp_path)) == {"art/good.png", "art/whole.jpg"}


def test_a_jpeg_cut_short_after_its_header_is_a_warning(tmp_path: Path):
    from PIL import ImageDraw
    path = tmp_path / "art" / "sunset.jpg"
    path.parent.mkdir()
    picture = Image.new("RGB", (256, 256))
    ImageDraw.Draw(picture).ellipse((20, 20, 200, 240), fill=(200, 120, 30))
    picture.save(path, "JPEG")
    path.write_bytes(path.read_bytes()[:-200])
    assert [(str(p), p.severity) for p in check_assets(tmp_path)] == [
        ("art/sunset.jpg:1: -: the JPEG image has no end marker: it may be cut short", "warning")]
    assert records(tmp_path)["art/sunset.jpg"].width == 256  # a warning: still stored


def test_image_data_that_does_not_match_its_extension_is_a_warning(tmp_path: Path):
    image(tmp_path, "art/portrait.jpg", (8, 8), "PNG")
    [problem] = check_assets(tmp_path)
    assert (str(problem), problem.severity) == (
        "art/portrait.jpg:1: -: the file is named .jpg but holds a PNG image", "warning")
    assert records(tmp_path)["art/portrait.jpg"].width == 8


# -- keywords ---------------------------------------------------------------------------------

def test_keywords_from_the_name_split_on_separators_and_camel_case():
    assert name_keywords("art/characters/npc_wizard.png") == ["npc", "wizard"]
    assert name_keywords("music/ambient-forest.night.mp3") == ["ambient", "forest", "night"]
    assert name_keywords("music/stormyNightTheme.ogg") == ["stormy", "night", "theme"]
    assert name_keywords("art/NPCPortrait_02.webp") == ["npc", "portrait"]


def test_sidecar_keywords_are_added_after_the_name_ones_without_comments_or_duplicates(tmp_path: Path):
    assert sidecar_keywords("wizard\n# a comment\n\n  archmage  \nmerlin\nWizard\n") == \
        ["wizard", "archmage", "merlin"]
    image(tmp_path, "art/characters/npc_wizard.png", (8, 8), "PNG")
    write(tmp_path, "art/characters/npc_wizard.png.keywords.txt",
          "# art/characters/npc_wizard.png.keywords.txt\nwizard\narchmage\nmerlin\nelderly\n")
    record = records(tmp_path)["art/characters/npc_wizard.png"]
    assert record.keywords == ["npc", "wizard", "archmage", "merlin", "elderly"]
    assert record.sidecar == "art/characters/npc_wizard.png.keywords.txt"


def test_the_tiny_campaign_portrait_and_its_sidecar():
    [merlin] = load_assets(TINY)
    assert (merlin.path, merlin.width, merlin.height) == ("art/characters/merlin.png", 2, 3)
    assert merlin.keywords == ["merlin", "wizard", "grey_eyes"]
    assert check_assets(TINY) == []


def test_a_sidecar_beside_nothing_is_a_warning_once(tiny: Path):
    write(tiny, "art/ghost.png.keywords.txt", "ghost\n")
    assert [(str(p), p.severity) for p in check_assets(tiny)] == [
        ("art/ghost.png.keywords.txt:1: -: keywords sidecar for art/ghost.png, which does not exist",
         "warning")]
    assert [str(p) for p in validate(tiny).problems] == [
        "art/ghost.png.keywords.txt:1: -: keywords sidecar for art/ghost.png, which does not exist"]


def test_alt_text_and_loop_come_from_the_sidecar_frontmatter(tmp_path: Path):
    wav(tmp_path / "music" / "ambient_forest.wav", seconds=1.0)
    write(tmp_path, "music/ambient_forest.wav.keywords.txt",
          "---\nloop: true\nalt_text: birdsong under tall pines\n---\nbirds\n")
    record = records(tmp_path)["music/ambient_forest.wav"]
    assert (record.loop, record.alt_text) == (True, "birdsong under tall pines")
    assert record.keywords == ["ambient", "forest", "birds"]
    write(tmp_path, "music/ambient_forest.wav.keywords.txt", "---\nloop: sometimes\n---\n")
    assert [str(p) for p in check_assets(tmp_path)] == [
        "music/ambient_forest.wav.keywords.txt:2: loop: must be true or false, got 'sometimes'"]


# -- audio ------------------------------------------------------------------------------------

def wav(path: Path, seconds: float, rate: int = 8000, channels: int = 1) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * channels * int(rate * seconds))
    return path


def float_wav(seconds: float, rate: int = 16000) -> bytes:
    """An IEEE-float WAV (format 3), which the stdlib ``wave`` module refuses."""
    data = b"\0" * (4 * int(rate * seconds))
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def flac(seconds: float, rate: int = 44100) -> bytes:
    bits = rate << 44 | (2 - 1) << 41 | (16 - 1) << 36 | int(rate * seconds)
    info = struct.pack(">HH", 4096, 4096) + b"\0" * 6 + bits.to_bytes(8, "big") + b"\0" * 16
    return b"fLaC" + bytes([0x80, 0, 0, len(info)]) + info + b"\0" * 100


def _ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
            crc &= 0xFFFFFFFF
    return crc


def ogg_page(packet: bytes, granule: int, seq: int, flags: int, serial: int = 0x5EED) -> bytes:
    segments = [255] * (len(packet) // 255) + [len(packet) % 255]
    page = (b"OggS" + bytes([0, flags]) + struct.pack("<qIII", granule, serial, seq, 0)
            + bytes([len(segments)]) + bytes(segments) + packet)
    return page[:22] + struct.pack("<I", _ogg_crc(page)) + page[26:]


def vorbis(seconds: float, rate: int = 44100) -> bytes:
    ident = b"\x01vorbis" + struct.pack("<IBIiiiBB", 0, 2, rate, 0, 128000, 0, 0xB8, 1)
    return (ogg_page(ident, 0, 0, 0x02) + ogg_page(b"\x03vorbis" + b"\0" * 300, 0, 1, 0)
            + ogg_page(b"\0" * 600, rate * 1, 2, 0) + ogg_page(b"\0" * 600, int(rate * seconds), 3, 0x04))


def opus(seconds: float, pre_skip: int = 312) -> bytes:
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 2, pre_skip, 48000, 0, 0)
    return (ogg_page(head, 0, 0, 0x02) + ogg_page(b"OpusTags" + b"\0" * 8, 0, 1, 0)
            + ogg_page(b"\0" * 400, pre_skip + int(48000 * seconds), 2, 0x04))


MP3_HEADER = bytes([0xFF, 0xFB, 0x90, 0x00])  # MPEG-1 layer III, 128 kbit/s, 44.1 kHz, stereo
MP3_FRAME = 417                               # 144 * 128000 // 44100 bytes


def mp3_frame(payload: bytes = b"") -> bytes:
    return MP3_HEADER + payload + b"\0" * (MP3_FRAME - 4 - len(payload))


def id3(size: int = 100) -> bytes:
    synchsafe = bytes([(size >> 21) & 0x7F, (size >> 14) & 0x7F, (size >> 7) & 0x7F, size & 0x7F])
    return b"ID3\x04\x00\x00" + synchsafe + b"\0" * size


def test_wav_duration_and_bitrate_from_the_stdlib_wave_module(tmp_path: Path):
    wav(tmp_path / "music" / "ambient_forest.wav", seconds=1.5, rate=8000)
    write(tmp_path, "music/rain.wav", float_wav(seconds=0.25))
    found = records(tmp_path)
    forest = found["music/ambient_forest.wav"]
    assert (forest.media_type, forest.format, forest.duration_seconds) == ("audio", "wav", 1.5)
    assert forest.bitrate == 8000 * 16
    assert forest.keywords == ["ambient", "forest"]
    assert (forest.width, forest.height) == (None, None)
    assert found["music/rain.wav"].duration_seconds == 0.25  # RIFF sizes when wave refuses it


def test_flac_ogg_and_mp3_durations_from_their_headers(tmp_path: Path):
    write(tmp_path, "music/ending_bittersweet.flac", flac(seconds=5.0))
    write(tmp_path, "music/combat_theme.ogg", vorbis(seconds=3.0))
    write(tmp_path, "music/whisper.opus", opus(seconds=2.0))
    xing = b"\0" * 32 + b"Xing" + struct.pack(">II", 1, 1000)
    write(tmp_path, "music/vbr.mp3", id3() + mp3_frame(xing) + mp3_frame() * 5)
    write(tmp_path, "music/cbr.mp3", id3() + mp3_frame() * 50 + b"TAG" + b"\0" * 125)
    found = records(tmp_path)
    assert found["music/ending_bittersweet.flac"].duration_seconds == 5.0
    assert found["music/combat_theme.ogg"].duration_seconds == 3.0
    assert found["music/whisper.opus"].duration_seconds == 2.0
    assert found["music/vbr.mp3"].duration_seconds == round(1000 * 1152 / 44100, 3)
    cbr = found["music/cbr.mp3"]
    assert cbr.bitrate == 128000
    assert cbr.duration_seconds == pytest.approx(50 * 1152 / 44100, rel=0.01)
    assert all(r.bitrate and r.bitrate > 0 for r in found.values())


def test_audio_whose_duration_is_not_in_its_header_has_none(tmp_path: Path):
    write(tmp_path, "music/noise.mp3", b"\x00\x01" * 500)
    write(tmp_path, "music/noise.ogg", b"OggS broken")
    write(tmp_path, "music/noise.flac", b"fLaC")
    write(tmp_path, "music/noise.wav", b"RIFF")
    found = records(tmp_path)
    assert {path: (r.duration_seconds, r.bitrate) for path, r in found.items()} == {
        "music/noise.mp3": (None, None), "music/noise.ogg": (None, None),
        "music/noise.flac": (None, None), "music/noise.wav": (None, None)}


# -- provenance ---------------------------------------------------------------------------------

PROVENANCE = ("provenance:\n  source_model: ollama/gemma:2b\n  generated_at: 2026-02-03T11:00:00Z\n"
              "  seed_data: I am bread\n  version: 1.0.0\n")


def portrait(root: Path, sidecar: str | None) -> str:
    image(root, "art/characters/npc_wizard.png", (16, 16), "PNG")
    if sidecar is not None:
        write(root, "art/characters/npc_wizard.png.keywords.txt", sidecar)
    return "art/characters/npc_wizard.png.keywords.txt"


def test_a_generated_asset_with_full_provenance_is_stored_with_it_and_counted(tmp_path: Path):
    portrait(tmp_path, "---\ngenerated: true\n" + PROVENANCE + "---\nwizard\n")
    [record] = load_assets(tmp_path)
    assert record.generated is True and record.provenance is not None
    assert (record.provenance.source_model, record.provenance.seed_data, record.provenance.version) == (
        "ollama/gemma:2b", "I am bread", "1.0.0")
    assert record.provenance.generated_at == datetime(2026, 2, 3, 11, 0, tzinfo=timezone.utc)
    assert [(str(p), p.severity) for p in check_assets(tmp_path)] == [
        (".:1: generated: Campaign contains 1 AI-generated asset(s). Review generated flags and "
         "provenance metadata to verify correctness.", "warning")]


def test_generated_without_provenance_is_rejected_with_the_spec_message(tmp_path: Path):
    sidecar = portrait(tmp_path, "---\ngenerated: true\n---\nwizard\n")
    problems = [p for p in check_assets(tmp_path) if p.severity == "error"]
    assert [str(p) for p in problems] == [f"{sidecar}:2: provenance: {MISSING}"]
    assert load_assets(tmp_path) == []  # none of it stored


@pytest.mark.parametrize("missing", ["source_model", "generated_at", "seed_data"])
def test_generated_with_any_provenance_field_missing_is_rejected(tmp_path: Path, missing: str):
    fields = "".join(line + "\n" for line in PROVENANCE.splitlines() if f"{missing}:" not in line)
    sidecar = portrait(tmp_path, "---\ngenerated: true\n" + fields + "---\n")
    assert [str(p) for p in check_assets(tmp_path) if p.severity == "error"] == [
        f"{sidecar}:3: provenance: {MISSING}"]
    assert load_assets(tmp_path) == []


def test_an_empty_provenance_field_counts_as_missing(tmp_path: Path):
    sidecar = portrait(tmp_path, "---\ngenerated: true\n"
                       + PROVENANCE.replace("I am bread", '""') + "---\n")
    assert [p.message for p in check_assets(tmp_path) if p.file == sidecar] == [MISSING]


@pytest.mark.parametrize("generated", ["generated: false\n", ""])
def test_a_human_asset_with_provenance_is_rejected_with_the_spec_message(tmp_path: Path, generated: str):
    sidecar = portrait(tmp_path, "---\n" + generated + PROVENANCE + "---\nwizard\n")
    line = 2 + bool(generated)
    assert [(str(p), p.severity) for p in check_assets(tmp_path)] == [
        (f"{sidecar}:{line}: provenance: {HUMAN}", "error")]
    assert load_assets(tmp_path) == []


@pytest.mark.parametrize("stamp", ["yesterday", "2026-02-03", "'2026-02-03'", "'2026-13-45T10:00:00Z'",
                                   "'03/02/2026 11:00'", "2026-02-03 11:00"])
def test_generated_at_must_be_an_iso_8601_datetime(tmp_path: Path, stamp: str):
    sidecar = portrait(tmp_path, "---\ngenerated: true\n"
                       + PROVENANCE.replace("2026-02-03T11:00:00Z", stamp) + "---\n")
    [problem] = [p for p in check_assets(tmp_path) if p.severity == "error"]
    assert (problem.file, problem.line, problem.field) == (sidecar, 5, "provenance.generated_at")
    assert problem.message.startswith("must be an ISO 8601 date and time")
    assert load_assets(tmp_path) == []


def test_an_impossible_unquoted_timestamp_is_a_yaml_error_not_a_crash(tmp_path: Path):
    sidecar = portrait(tmp_path, "---\ngenerated: true\n"
                       + PROVENANCE.replace("2026-02-03T11:00:00Z", "2026-13-45T10:00:00Z") + "---\n")
    assert [str(p) for p in check_assets(tmp_path)] == [
        f"{sidecar}:2: -: invalid YAML: month must be in 1..12"]
    assert load_assets(tmp_path) == []


def test_an_iso_8601_string_with_an_offset_is_accepted(tmp_path: Path):
    portrait(tmp_path, "---\ngenerated: true\n"
             + PROVENANCE.replace("2026-02-03T11:00:00Z", "'2026-02-03T12:00:00+01:00'") + "---\n")
    [record] = load_assets(tmp_path)
    assert record.provenance is not None
    assert record.provenance.generated_at == datetime(2026, 2, 3, 11, 0, tzinfo=timezone.utc)


def test_generated_must_be_true_or_false(tmp_path: Path):
    sidecar = portrait(tmp_path, "---\ngenerated: yes please\n---\n")
    assert [str(p) for p in check_assets(tmp_path)] == [
        f"{sidecar}:2: generated: must be true or false, got 'yes please'"]
    assert load_assets(tmp_path) == []


def test_a_sidecar_that_does_not_parse_rejects_its_asset(tmp_path: Path):
    sidecar = portrait(tmp_path, "---\ngenerated: [true\n---\n")
    [problem] = check_assets(tmp_path)
    assert problem.file == sidecar and problem.severity == "error"
    assert problem.message.startswith("invalid YAML")
    assert load_assets(tmp_path) == []


def test_validate_reports_asset_problems_in_file_order_and_refuses_the_campaign(tiny: Path):
    write(tiny, "art/characters/merlin.png.keywords.txt", "---\ngenerated: true\n---\nwizard\n")
    write(tiny, "art/broken.png", b"\x89PNG\r\n\x1a\n broken")
    image(tiny, "art/items/staff.png", (4, 4), "PNG")
    write(tiny, "art/items/staff.png.keywords.txt", "---\ngenerated: true\n" + PROVENANCE + "---\n")
    report = validate(tiny)
    assert not report.ok
    assert [(str(p), p.severity) for p in report.problems] == [
        ("art/broken.png:1: -: cannot read the image: not a PNG file (corrupt, or not an image at all)",
         "error"),
        (f"art/characters/merlin.png.keywords.txt:2: provenance: {MISSING}", "error"),
        (".:1: generated: Campaign contains 2 AI-generated asset(s). Review generated flags and "
         "provenance metadata to verify correctness.", "warning"),
    ]
    assert {r.path for r in load_assets(tiny)} == {"art/items/staff.png"}
