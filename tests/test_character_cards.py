"""SillyTavern character cards (V1/V2/V3) in and out of `narratoria characters`
(runtime/characters/cards.py, clients/commands/characters.py).

Real card files built in tmp_path with Pillow (PNG text chunks) and zipfile (CHARX),
the real CLI as a subprocess against a real data dir (NARRATORIA_DATA_DIR, as the
other character tests point it), and `narratoria campaigns validate` on the NPC it
writes into a copy of a shipped campaign.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from narratoria.runtime.characters.cards import card_fields, card_png, card_v2, png_text_chunks

NARRATORIA = Path(sys.executable).parent / "narratoria"
REPO = Path(__file__).resolve().parent.parent
LONG_EBB = REPO / "campaigns" / "long_ebb"

SERAPHINA = {
    "name": "Seraphina",
    "description": "{{char}} is the guardian of a forest glade, a healer who speaks softly.",
    "personality": "kind, protective, stubborn when the forest is threatened",
    "scenario": "{{user}} wakes in her cottage after a wolf attack.",
    "first_mes": "*She sets down a steaming cup.* You're awake. Don't sit up too fast.",
    "mes_example": "<START>\n{{char}}: The forest remembers.",
    "tags": ["fantasy", "healer"],
    "creator": "someone",
    "extensions": {"talkativeness": "0.5"},
}
BOOK = {"name": "The Glade", "entries": [
    {"keys": ["glade", "forest"], "content": "The glade is warded against wolves.",
     "enabled": True, "insertion_order": 10, "id": 1, "name": "Glade wards"},
    {"keys": ["wolves"], "content": "The wolves serve the Shadow King.", "enabled": True,
     "insertion_order": 20, "id": 2, "name": "Wolves"},
]}


# -- card files ----------------------------------------------------------------------------

def v2(data: dict) -> dict:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def v3(data: dict) -> dict:
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}


def b64(doc: object) -> str:
    return base64.b64encode(json.dumps(doc).encode("utf-8")).decode("ascii")


def png_card(path: Path, chunks: dict[str, str], color=(20, 160, 60), size=(300, 450)) -> Path:
    info = PngInfo()
    for keyword, text in chunks.items():
        info.add_text(keyword, text)
    Image.new("RGB", size, color).save(path, format="PNG", pnginfo=info)
    return path


def image_bytes(color, size=(64, 64)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def text_file(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def centre(path: Path) -> tuple[int, ...]:
    with Image.open(path) as im:
        return im.convert("RGB").getpixel((im.width // 2, im.height // 2))


def cli(*args: str, data_dir: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NARRATORIA_DATA_DIR": str(data_dir)}
    return subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def import_json(*args: str, data_dir: Path) -> dict:
    done = cli("characters", "import", *args, "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def stored(data_dir: Path) -> list[str]:
    root = data_dir / "characters"
    return sorted(p.name for p in root.iterdir() if p.name != ".lock") if root.is_dir() else []


@pytest.fixture
def data_dir(tmp_path) -> Path:
    return tmp_path / "data"


# -- import: a player character --------------------------------------------------------------

def test_a_v2_png_card_becomes_a_fresh_character_and_reports_what_it_leaves(data_dir, tmp_path):
    card = png_card(tmp_path / "seraphina.png", {"chara": b64(v2(SERAPHINA))}, color=(20, 160, 60))
    doc = import_json(str(card), data_dir=data_dir)

    assert doc["name"] == "Seraphina" and doc["status"] == "fresh" and doc["via"] == "local"
    assert doc["card"] == {"file": "seraphina.png", "spec": "chara_card_v2",
                           "from": "PNG chara chunk"}
    fields = card_fields(doc["description"])
    assert fields == {"description": SERAPHINA["description"],
                      "personality": SERAPHINA["personality"], "scenario": SERAPHINA["scenario"],
                      "first_mes": SERAPHINA["first_mes"], "tags": ["fantasy", "healer"]}
    portrait = Path(doc["portrait_file"])
    with Image.open(portrait) as im:
        assert im.size == (512, 512) and "chara" not in im.info  # the card did not ride along
    assert centre(portrait) == (20, 160, 60)
    reported = "\n".join(doc["unmapped"])
    assert "mes_example" in reported and "creator" in reported and "talkativeness" in reported
    assert doc["lore"] == {"imported": False, "reason": "the card has no character_book"}

    plain = cli("characters", "import", str(card), data_dir=data_dir)
    assert plain.returncode == 0 and plain.stdout.strip().startswith("char_")
    assert "mes_example: not imported" in plain.stderr  # text mode says it too


def test_ccv3_wins_over_chara_when_a_png_has_both(data_dir, tmp_path):
    old = {**SERAPHINA, "name": "Old Seraphina"}
    new = {**SERAPHINA, "name": "Seraphina the Third", "nickname": "Sera",
           "group_only_greetings": ["Hello, all of you."]}
    card = png_card(tmp_path / "both.png", {"chara": b64(v2(old)), "ccv3": b64(v3(new))})
    doc = import_json(str(card), data_dir=data_dir)
    assert doc["name"] == "Seraphina the Third"
    assert doc["card"]["spec"] == "chara_card_v3" and doc["card"]["from"] == "PNG ccv3 chunk"
    reported = "\n".join(doc["unmapped"])
    assert "nickname" in reported and "group_only_greetings" in reported


def test_a_plain_json_v1_card_needs_a_portrait_from_the_command_line(data_dir, tmp_path):
    v1 = {"name": "Brom", "description": "A dwarven smith with a burnt beard and a loud laugh.",
          "personality": "gruff", "scenario": "", "first_mes": "What do you want?",
          "mes_example": ""}
    card = tmp_path / "brom.json"
    card.write_text(json.dumps(v1))

    refused = cli("characters", "import", str(card), data_dir=data_dir)
    assert refused.returncode == 2
    assert "portrait: brom.json carries no image; give --portrait" in refused.stderr
    assert stored(data_dir) == []

    face = tmp_path / "face.png"
    face.write_bytes(image_bytes((200, 30, 30)))
    doc = import_json(str(card), "--portrait", str(face), data_dir=data_dir)
    assert doc["name"] == "Brom" and doc["card"]["spec"] == "chara_card_v1"
    assert card_fields(doc["description"])["first_mes"] == "What do you want?"
    assert centre(Path(doc["portrait_file"])) == (200, 30, 30)
    assert doc["unmapped"] == []  # the empty fields lose nothing


def test_a_charx_card_takes_its_main_icon_as_the_portrait(data_dir, tmp_path):
    data = {**SERAPHINA, "name": "Charx Sera", "assets": [
        {"type": "background", "uri": "embeded://assets/background/images/glade.png",
         "name": "glade", "ext": "png"},
        {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main",
         "ext": "png"}]}
    charx = tmp_path / "sera.charx"
    with zipfile.ZipFile(charx, "w") as archive:
        archive.writestr("card.json", json.dumps(v3(data)))
        archive.writestr("assets/icon/images/main.png", image_bytes((30, 40, 220)))
        archive.writestr("assets/background/images/glade.png", image_bytes((0, 90, 0)))
    doc = import_json(str(charx), data_dir=data_dir)
    assert doc["name"] == "Charx Sera" and doc["card"]["from"] == "CHARX card.json"
    assert centre(Path(doc["portrait_file"])) == (30, 40, 220)
    assert any("assets: 1 besides the portrait not imported (background)" in line
               for line in doc["unmapped"])


def test_a_character_book_goes_to_lore_dir_or_is_reported(data_dir, tmp_path):
    card = png_card(tmp_path / "booked.png", {"chara": b64(v2({**SERAPHINA, "character_book": BOOK}))})

    without = import_json(str(card), data_dir=data_dir)
    assert without["lore"]["imported"] is False and "--lore-dir" in without["lore"]["reason"]
    assert any(line.startswith("character_book: not imported") for line in without["unmapped"])

    lore = tmp_path / "lore"
    doc = import_json(str(card), "--lore-dir", str(lore), data_dir=data_dir)
    assert doc["lore"]["imported"] is True and doc["lore"]["entries"] == 2
    assert sorted(p.name for p in lore.iterdir()) == ["glade_wards.md", "wolves.md"]
    assert "warded against wolves" in (lore / "glade_wards.md").read_text()

    # The same lore again would overwrite: refused whole, before a character is made.
    before = stored(data_dir)
    again = cli("characters", "import", str(card), "--lore-dir", str(lore), data_dir=data_dir)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert stored(data_dir) == before


# -- import: an NPC ------------------------------------------------------------------------

def test_npc_import_writes_a_file_that_campaigns_validate_accepts(data_dir, tmp_path):
    campaign = tmp_path / "long_ebb"
    shutil.copytree(LONG_EBB, campaign)
    card = png_card(tmp_path / "seraphina.png",
                    {"chara": b64(v2({**SERAPHINA, "character_book": BOOK}))}, color=(90, 20, 120))
    done = cli("characters", "import", str(card), "--npc", str(campaign), "--json",
               data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)

    npc = campaign / "characters" / "character_seraphina.md"
    assert doc["npc"] == str(npc) and doc["entity_id"] == "seraphina"
    text = npc.read_text()
    assert text.startswith("---\nentity_type: npc\nentity_id: seraphina\nname: Seraphina\n")
    assert "portrait_asset: art/characters/seraphina.png" in text
    assert "Seraphina is the guardian of a forest glade" in text  # {{char}} is the name
    assert "the player wakes in her cottage" in text                 # {{user}} the player
    assert centre(campaign / "art" / "characters" / "seraphina.png") == (90, 20, 120)
    assert (campaign / "lore" / "glade_wards.md").is_file()
    assert any(line.startswith("first_mes: not imported") for line in doc["unmapped"])
    assert stored(data_dir) == []  # an NPC is the campaign's, not the player's gallery

    valid = cli("campaigns", "validate", str(campaign), "--json", data_dir=data_dir)
    assert valid.returncode == 0, valid.stdout
    report = json.loads(valid.stdout)
    assert report["ok"] is True
    assert [p for p in report["problems"] if p["file"] != "."] == []  # no new warnings either

    again = cli("characters", "import", str(card), "--npc", str(campaign), data_dir=data_dir)
    assert again.returncode == 2 and "already exists" in again.stderr
    not_campaign = cli("characters", "import", str(card), "--npc", str(tmp_path),
                       data_dir=data_dir)
    assert not_campaign.returncode == 2 and "is not a campaign folder" in not_campaign.stderr


# -- export ----------------------------------------------------------------------------------

def test_export_card_v2_round_trips_through_import(data_dir, tmp_path):
    card = png_card(tmp_path / "seraphina.png", {"chara": b64(v2(SERAPHINA))}, color=(20, 160, 60))
    first = import_json(str(card), data_dir=data_dir)

    out = tmp_path / "out" / "exported.png"
    exported = cli("characters", "export", first["id"], "--format", "card-v2", "-o", str(out),
                   "--json", data_dir=data_dir)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["output"] == str(out)

    # What SillyTavern reads: a tEXt chunk named chara, base64 of a V2 document.
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size == (512, 512)
        written = json.loads(base64.b64decode(im.text["chara"]))
    assert written["spec"] == "chara_card_v2" and written["spec_version"] == "2.0"
    for key in ("name", "description", "personality", "scenario", "first_mes", "tags"):
        assert written["data"][key] == SERAPHINA[key], key
    assert written["name"] == "Seraphina"  # V1 fields mirrored for older readers

    second = import_json(str(out), data_dir=data_dir)
    assert second["id"] != first["id"]
    assert second["name"] == first["name"] and second["description"] == first["description"]
    assert second["unmapped"] == []

    # Without -o: NAME.png in the working directory.
    here = tmp_path / "cwd"
    here.mkdir()
    default = cli("characters", "export", first["id"], "--format", "card-v2", data_dir=data_dir,
                  cwd=here)
    assert default.returncode == 0, default.stderr
    assert (here / "seraphina.png").is_file()
    native = cli("characters", "export", first["id"], data_dir=data_dir, cwd=here)
    assert native.returncode == 2 and "--output: required" in native.stderr


def test_cards_go_through_the_daemon_when_one_answers(pattern_daemon, tmp_path):
    """One source of truth: a card imported while a daemon runs is the daemon's character,
    and the card exported from it is built from what the daemon holds."""
    env = {k: v for k, v in os.environ.items() if k != "NARRATORIA_DATA_DIR"}
    env.update(XDG_DATA_HOME=str(tmp_path / "xdg"), NARRATORIA_ADDRESS=pattern_daemon.address)
    card = png_card(tmp_path / "seraphina.png", {"chara": b64(v2(SERAPHINA))})

    def characters(*args: str) -> dict:
        done = subprocess.run([str(NARRATORIA), "characters", *args, "--json"],
                              capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    made = characters("import", str(card))
    assert made["via"] == "daemon" and made["name"] == "Seraphina" and made["has_portrait"]
    out = tmp_path / "from-daemon.png"
    assert characters("export", made["id"], "--format", "card-v2", "-o", str(out))["via"] == "daemon"
    back = characters("import", str(out))
    assert back["description"] == made["description"] and back["unmapped"] == []
    assert not (tmp_path / "xdg").exists()  # the local store was never touched


def test_a_card_without_a_portrait_gets_a_plain_generated_image():
    png = card_png(card_v2("Nameless", "Someone who never sat for a portrait."), None)
    chunks = png_text_chunks(png, "generated.png")
    doc = json.loads(base64.b64decode(chunks["chara"]))
    assert doc["data"]["name"] == "Nameless"
    with Image.open(io.BytesIO(png)) as im:
        assert im.format == "PNG" and im.width > 0


# -- refused input --------------------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda d: text_file(d / "notes.png", "just text, no pixels"),
     "notes.png is not a character card"),
    (lambda d: png_card(d / "plain.png", {"Comment": "hello"}),
     "plain.png is a PNG without a 'chara' or 'ccv3' text chunk"),
    (lambda d: png_card(d / "b64.png", {"chara": "!!not base64!!"}),
     "b64.png: the chara chunk is not valid base64"),
    (lambda d: png_card(d / "json.png", {"chara": base64.b64encode(b"{name: nope").decode()}),
     "json.png: the chara chunk is not valid JSON"),
    (lambda d: png_card(d / "noname.png", {"chara": b64(v2({**SERAPHINA, "name": ""}))}),
     "name: noname.png: the card has no name (data.name"),
    (lambda d: text_file(d / "bad.json", '{"name": "X", "description": '),
     "bad.json: the file is not valid JSON"),
    (lambda d: text_file(d / "typed.json", json.dumps({"name": "X", "description": 7})),
     "description: typed.json: description must be text"),
])
def test_bad_cards_are_refused_naming_file_and_field(data_dir, tmp_path, make, message):
    path = make(tmp_path)
    done = cli("characters", "import", str(path), "--json", data_dir=data_dir)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and done.stdout == ""
    assert stored(data_dir) == []
