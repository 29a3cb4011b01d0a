"""Player characters: fresh characters on disk, the CLI, and realisation
(docs/campaigns.md, "Player characters").

Everything runs on real files under tmp_path (the data directory is pointed
there with NARRATORIA_DATA_DIR), real images written with Pillow, and, for
realisation, a small rule-based text generator: a real deterministic function
standing in for the local model, not a mock of anything the runtime ships.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from narratoria.runtime.characters import (
    CharacterError,
    CharacterNotFound,
    CharacterStore,
    RealizationError,
    campaign_context,
    ensure_in_store,
    load_campaign_context,
    lore_records,
    parse_constraints,
    realize,
)
from narratoria.runtime.embedding import EmbeddingSettings, make_backend
from narratoria.runtime.state import SessionState
from narratoria.runtime.store import PersistenceStore
from narratoria.runtime.turn.grounding import lore_scope

NARRATORIA = Path(sys.executable).parent / "narratoria"
DESCRIPTION = "A gruff, battle-scarred knight who secretly loves poetry."


# -- helpers ------------------------------------------------------------------------------

def image_bytes(fmt: str, size: tuple[int, int] = (64, 64), color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt)
    return out.getvalue()


PORTRAIT = image_bytes("PNG")  # a fresh character always has one


def write_image(path: Path, fmt: str, size=(64, 64), color=(200, 30, 30)) -> Path:
    path.write_bytes(image_bytes(fmt, size, color))
    return path


def open_png(path: Path) -> Image.Image:
    with Image.open(path) as im:
        assert im.format == "PNG"
        return im.convert("RGBA")


def stored_files(data_dir: Path) -> dict[str, bytes]:
    root = data_dir / "characters"
    if not root.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in root.iterdir() if p.is_file() and p.name != ".lock"}


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("NARRATORIA_DATA_DIR", str(path))
    return path


@pytest.fixture
def store(data_dir) -> CharacterStore:
    return CharacterStore()  # finds the data directory through the environment, as the CLI does


# -- create / validate ----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP"])
def test_create_stores_record_and_512_png_portrait(store, data_dir, tmp_path, fmt):
    src = write_image(tmp_path / f"me.{fmt.lower()}", fmt, (300, 300))
    c = store.create(f"  {DESCRIPTION}  ", src, name="Eredin")
    assert re.fullmatch(r"char_[0-9a-f]{16}", c.id)
    assert (c.status, c.description, c.name, c.realizations) == ("fresh", DESCRIPTION, "Eredin", [])
    record = json.loads((data_dir / "characters" / f"{c.id}.json").read_text())
    assert record["id"] == c.id and record["status"] == "fresh"
    assert record["description"] == DESCRIPTION and record["created_at"].endswith("Z")
    assert record["portrait_path"].startswith(f"characters/{c.id}_portrait_")
    portrait = data_dir / record["portrait_path"]
    assert portrait == store.portrait_file(c)
    assert open_png(portrait).size == (512, 512)
    assert store.get(c.id) == c


def test_non_square_portrait_is_letterboxed_not_cropped(store, tmp_path):
    c = store.create(DESCRIPTION, write_image(tmp_path / "wide.jpg", "JPEG", (800, 400), (250, 0, 0)))
    im = open_png(store.portrait_file(c))
    assert im.size == (512, 512)
    # 800x400 scaled to 512x256, centred: transparent bars of 128 px above and below.
    assert im.getpixel((256, 10))[3] == 0 and im.getpixel((256, 500))[3] == 0
    r, g, b, a = im.getpixel((256, 256))
    assert a == 255 and r > 200 and g < 40
    assert im.getpixel((2, 140))[3] == 255 and im.getpixel((509, 370))[3] == 255  # full width kept
    assert im.getbbox() == (0, 128, 512, 384)


def test_small_portrait_is_scaled_up(store):
    c = store.create(DESCRIPTION, image_bytes("PNG", (40, 80)))
    im = open_png(store.portrait_file(c))
    assert im.size == (512, 512) and im.getbbox() == (128, 0, 384, 512)


def test_portrait_format_is_judged_by_content_not_name(store, data_dir, tmp_path):
    fake = tmp_path / "portrait.png"
    fake.write_text("this is not an image at all, only text\n")
    with pytest.raises(CharacterError, match=r"^portrait: not a PNG, JPEG or WebP image"):
        store.create(DESCRIPTION, fake)
    gif = write_image(tmp_path / "anim.png", "GIF")  # a real image, of a format not accepted
    with pytest.raises(CharacterError, match="^portrait: not a PNG, JPEG or WebP"):
        store.create(DESCRIPTION, gif)
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(image_bytes("PNG", (256, 256))[:60])
    with pytest.raises(CharacterError, match="^portrait:"):
        store.create(DESCRIPTION, truncated)
    assert stored_files(data_dir) == {}
    # A WebP called .txt is a WebP.
    c = store.create(DESCRIPTION, write_image(tmp_path / "notes.txt", "WEBP"))
    assert open_png(store.portrait_file(c)).size == (512, 512)


def test_portrait_over_5_mb_is_refused_before_anything_is_written(store, data_dir, tmp_path):
    noise = Image.frombytes("RGB", (1400, 1400), os.urandom(1400 * 1400 * 3))
    big = tmp_path / "big.png"
    noise.save(big, format="PNG")
    assert big.stat().st_size > 5 * 1024 * 1024
    with pytest.raises(CharacterError, match=r"^portrait: .*5 MB"):
        store.create(DESCRIPTION, big)
    with pytest.raises(CharacterError, match=r"^portrait: .*5 MB"):
        store.create(DESCRIPTION, big.read_bytes())
    assert stored_files(data_dir) == {}
    with pytest.raises(CharacterError, match="^portrait: cannot read"):
        store.create(DESCRIPTION, tmp_path / "missing.png")


@pytest.mark.parametrize("length, ok", [(9, False), (10, True), (5000, True), (5001, False)])
def test_description_bounds(store, length, ok):
    text = ("x" * length)
    if ok:
        assert store.create(text, PORTRAIT).description == text
    else:
        with pytest.raises(CharacterError, match=rf"^description: must be 10-5000 characters, got {length}"):
            store.create(text, PORTRAIT)


def test_description_padding_does_not_count_and_type_is_checked(store):
    with pytest.raises(CharacterError, match="got 5$"):
        store.create("   short       ", PORTRAIT)
    with pytest.raises(CharacterError, match="^description: must be text"):
        store.create(12345678901, PORTRAIT)  # type: ignore[arg-type]
    with pytest.raises(CharacterError, match="^name:"):
        store.create(DESCRIPTION, PORTRAIT, name="   ")


def test_a_portrait_is_required(store, data_dir):
    with pytest.raises(CharacterError, match="^portrait: required"):
        store.create(DESCRIPTION, None)
    assert store.list() == []


# -- edit / list / delete -------------------------------------------------------------------

def test_edit_description_name_and_portrait(store, data_dir):
    c = store.create(DESCRIPTION, image_bytes("PNG", color=(255, 0, 0)))
    old_portrait = store.portrait_file(c)
    edited = store.edit(c.id, description="A quiet archivist with a dangerous memory.", name="Ilse",
                        portrait=image_bytes("JPEG", (100, 50), (0, 0, 255)))
    assert edited.id == c.id and edited.created_at == c.created_at
    assert (edited.description, edited.name) == ("A quiet archivist with a dangerous memory.", "Ilse")
    assert edited.portrait_path != c.portrait_path
    assert not old_portrait.exists(), "the replaced portrait is removed"
    assert open_png(store.portrait_file(edited)).getpixel((256, 256))[2] > 200
    assert store.get(c.id) == edited
    # Only what is given changes.
    again = store.edit(c.id, name="Ilse of Varn")
    assert again.description == edited.description and again.portrait_path == edited.portrait_path
    assert sorted(stored_files(data_dir)) == sorted([f"{c.id}.json", Path(edited.portrait_path).name])


def test_failed_edit_leaves_the_stored_character_intact(store, data_dir, tmp_path):
    c = store.create(DESCRIPTION, image_bytes("WEBP"), name="Eredin")
    before = stored_files(data_dir)
    fake = tmp_path / "x.png"
    fake.write_text("not really a png")
    with pytest.raises(CharacterError, match="^portrait:"):
        store.edit(c.id, description="A completely new description here.", portrait=fake)
    with pytest.raises(CharacterError, match="^description:"):
        store.edit(c.id, description="tiny", portrait=image_bytes("PNG"))
    assert stored_files(data_dir) == before
    assert store.get(c.id) == c
    with pytest.raises(CharacterNotFound):
        store.edit("char_00000000", name="Nobody")


def test_list_get_delete(store, data_dir):
    assert store.list() == []
    a = store.create("First character description.", image_bytes("PNG"))
    b = store.create("Second character description.", PORTRAIT)
    (data_dir / "characters" / "char_notes.json").write_text("{not json")  # litter, skipped
    assert [c.id for c in store.list()] == sorted([a.id, b.id], key=lambda i: (store.get(i).created_at, i))
    portrait = store.portrait_file(a)
    store.delete(a.id)
    assert not portrait.exists() and not (data_dir / "characters" / f"{a.id}.json").exists()
    assert [c.id for c in store.list()] == [b.id]
    with pytest.raises(CharacterNotFound):
        store.get(a.id)
    with pytest.raises(CharacterNotFound):
        store.delete(a.id)
    for bad in ("../etc/passwd", "char_../../x", "CHAR_ABCDEF12", ""):
        with pytest.raises(CharacterError, match="^id:"):
            store.get(bad)


# -- export / import ------------------------------------------------------------------------

def test_export_import_round_trip(store, data_dir, tmp_path):
    c = store.create(DESCRIPTION, image_bytes("JPEG", (640, 480), (10, 200, 10)), name="Eredin")
    out = store.export(c.id, tmp_path / "eredin.narratoria-character")
    with zipfile.ZipFile(out) as archive:
        assert sorted(archive.namelist()) == ["character.json", "portrait.png"]
        doc = json.loads(archive.read("character.json"))
    assert doc["format"] == "narratoria-character" and doc["description"] == DESCRIPTION
    imported = store.import_file(out)
    assert imported.id != c.id
    assert (imported.description, imported.name, imported.status) == (DESCRIPTION, "Eredin", "fresh")
    assert imported.realizations == []
    a, b = open_png(store.portrait_file(c)), open_png(store.portrait_file(imported))
    assert a.tobytes() == b.tobytes()
    assert {x.id for x in store.list()} == {c.id, imported.id}
    # Into another data directory, the way a template is shared.
    other = CharacterStore(tmp_path / "elsewhere")
    assert other.import_file(out).description == DESCRIPTION


def test_an_export_without_a_portrait_is_refused_on_import(store, tmp_path):
    plain = _archive(tmp_path / "plain.narratoria-character", {"character.json": _doc()})
    with pytest.raises(CharacterError, match="^portrait: required"):
        store.import_file(plain)
    assert store.list() == []


def _archive(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def _doc(**fields) -> bytes:
    return json.dumps({"format": "narratoria-character", "version": 1,
                       "description": DESCRIPTION, **fields}).encode()


@pytest.mark.parametrize("evil", ["../evil.png", "../../characters/char_0000000000000000.json",
                                  "/etc/evil", "sub/../../x", "a\\..\\b"])
def test_import_refuses_path_escapes(store, data_dir, tmp_path, evil):
    existing = store.create(DESCRIPTION, PORTRAIT)
    before = stored_files(data_dir)
    bad = _archive(tmp_path / "bad.narratoria-character",
                   {"character.json": _doc(portrait="portrait.png"),
                    "portrait.png": image_bytes("PNG"), evil: b"payload"})
    with pytest.raises(CharacterError, match="^import: unsafe entry name"):
        store.import_file(bad)
    assert stored_files(data_dir) == before
    assert [c.id for c in store.list()] == [existing.id]
    assert not (tmp_path / "evil.png").exists() and not (data_dir / "evil.png").exists()


def test_import_refuses_bad_files_and_keeps_the_store(store, data_dir, tmp_path):
    store.create(DESCRIPTION, PORTRAIT)
    before = stored_files(data_dir)
    cases = {
        "not a zip": (tmp_path / "a", None),
        "no json": (_archive(tmp_path / "b", {"portrait.png": image_bytes("PNG")}), "has no character.json"),
        "bad json": (_archive(tmp_path / "c", {"character.json": b"{"}), "character.json"),
        "wrong format": (_archive(tmp_path / "d", {"character.json": _doc(format="other")}), "not a version 1"),
        "short": (_archive(tmp_path / "e", {"character.json": _doc(description="hi")}), None),
        "fake portrait": (_archive(tmp_path / "f", {"character.json": _doc(portrait="portrait.png"),
                                                    "portrait.png": b"plain text"}), None),
        "missing portrait": (_archive(tmp_path / "g", {"character.json": _doc(portrait="portrait.png")}),
                             "is not in"),
        "extra entry": (_archive(tmp_path / "h", {"character.json": _doc(), "run.sh": b"x"}), "unexpected"),
    }
    (tmp_path / "a").write_text("hello")
    fields = {"short": "^description:", "fake portrait": "^portrait:"}
    for label, (path, message) in cases.items():
        with pytest.raises(CharacterError, match=fields.get(label, "^import:")) as info:
            store.import_file(path)
        if message:
            assert message in str(info.value), label
    assert stored_files(data_dir) == before


def test_import_refuses_an_oversized_portrait_member(store, data_dir, tmp_path):
    big = _archive(tmp_path / "big", {"character.json": _doc(portrait="portrait.png"),
                                      "portrait.png": b"\0" * (5 * 1024 * 1024 + 10)})
    with pytest.raises(CharacterError, match="^portrait: .*limit"):
        store.import_file(big)
    assert stored_files(data_dir) == {}


# -- CLI ------------------------------------------------------------------------------------

def cli(*args: str, env_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NARRATORIA_DATA_DIR": str(env_dir)}
    return subprocess.run([str(NARRATORIA), "characters", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_create_edit_list_show_export_import_delete(data_dir, tmp_path):
    portrait = write_image(tmp_path / "face.webp", "WEBP", (200, 300))
    made = cli("create", "--description", DESCRIPTION, "--portrait", str(portrait), "--name", "Eredin",
               "--json", env_dir=data_dir)
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    cid = doc["id"]
    assert doc["status"] == "fresh" and doc["name"] == "Eredin"
    assert Path(doc["portrait_file"]).is_file()
    assert CharacterStore(data_dir).get(cid).description == DESCRIPTION

    desc_file = tmp_path / "desc.txt"
    desc_file.write_text("A cunning rogue with a heart of gold.\n")
    edited = cli("edit", cid, "--description-file", str(desc_file), "--json", env_dir=data_dir)
    assert edited.returncode == 0, edited.stderr
    assert json.loads(edited.stdout)["description"] == "A cunning rogue with a heart of gold."

    listed = json.loads(cli("list", "--json", env_dir=data_dir).stdout)
    assert [c["id"] for c in listed["characters"]] == [cid]
    plain = cli("list", env_dir=data_dir).stdout
    assert cid in plain and "[fresh]" in plain

    shown = cli("show", cid, "--json", env_dir=data_dir)
    assert json.loads(shown.stdout)["name"] == "Eredin"

    out = tmp_path / "rogue.narratoria-character"
    exported = cli("export", cid, "-o", str(out), "--json", env_dir=data_dir)
    assert exported.returncode == 0 and json.loads(exported.stdout)["output"] == str(out)
    imported = cli("import", str(out), "--json", env_dir=data_dir)
    assert imported.returncode == 0, imported.stderr
    new = json.loads(imported.stdout)
    assert new["id"] != cid and new["description"] == "A cunning rogue with a heart of gold."

    assert cli("delete", cid, env_dir=data_dir).returncode == 0
    listed = json.loads(cli("list", "--json", env_dir=data_dir).stdout)
    assert [c["id"] for c in listed["characters"]] == [new["id"]]


def test_cli_errors_name_the_field_and_set_the_exit_status(data_dir, tmp_path):
    fake = tmp_path / "face.png"
    fake.write_text("text, not pixels")
    bad = cli("create", "--description", DESCRIPTION, "--portrait", str(fake), "--json", env_dir=data_dir)
    assert bad.returncode == 2 and "portrait: not a PNG, JPEG or WebP image" in bad.stderr
    assert bad.stdout == ""
    face = write_image(tmp_path / "ok.png", "PNG")
    no_portrait = cli("create", "--description", DESCRIPTION, env_dir=data_dir)
    assert no_portrait.returncode == 2 and "--portrait" in no_portrait.stderr
    short = cli("create", "--description", "too short", "--portrait", str(face), env_dir=data_dir)
    assert short.returncode == 2 and "description: must be 10-5000 characters" in short.stderr
    missing = cli("show", "char_0123456789abcdef", env_dir=data_dir)
    assert missing.returncode == 1 and "no character" in missing.stderr
    assert cli("show", "../../etc", env_dir=data_dir).returncode == 2
    unreadable = cli("create", "--description-file", str(tmp_path / "nope.txt"), "--portrait",
                     str(face), env_dir=data_dir)
    assert unreadable.returncode == 2 and "description: cannot read" in unreadable.stderr
    made = cli("create", "--description", DESCRIPTION, "--portrait", str(face), "--json",
               env_dir=data_dir)
    cid = json.loads(made.stdout)["id"]
    idle = cli("edit", cid, env_dir=data_dir)
    assert idle.returncode == 2 and "nothing to change" in idle.stderr
    assert cli("delete", cid, env_dir=data_dir).returncode == 0
    nothing = cli("create", env_dir=data_dir)
    assert nothing.returncode == 2 and "--description" in nothing.stderr  # argparse: one is required
    evil = _archive(tmp_path / "evil.narratoria-character",
                    {"character.json": _doc(), "../x": b"payload"})
    refused = cli("import", str(evil), "--json", env_dir=data_dir)
    assert refused.returncode == 2 and "unsafe entry name" in refused.stderr
    assert json.loads(cli("list", "--json", env_dir=data_dir).stdout)["characters"] == []


# -- realisation ----------------------------------------------------------------------------

class RuleModel:
    """A tiny deterministic "model": answers the realisation prompt from the prompt's own text.

    Picks the first allowed race and class that the description mentions (else the
    first allowed, else what ``race``/``klass`` say), names the character from the
    description, and answers yes/no checks: a dragon is not humanoid.
    """

    def __init__(self, race: str | None = None, klass: str | None = None, prose: bool = False):
        self.race, self.klass, self.prose = race, klass, prose
        self.calls: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.calls.append(prompt)
        if "Answer only yes or no." in prompt:
            character = prompt.split("Campaign rule:")[0].lower()
            return "No." if "humanoid" in prompt and "dragon" in character else "Yes."
        if self.prose:
            return "Once upon a time there was a hero. (no JSON here)"
        description = re.search(r'description:\n"(.*)"', prompt, re.S).group(1)
        race = self._pick(prompt, "Allowed races", description, self.race or "human")
        klass = self._pick(prompt, "Allowed classes", description, self.klass or "adventurer")
        doc = {
            "name": "Sir " + description.split()[1].strip(",.").capitalize(),
            "archetype": {"race": race, "class": klass, "subclass": "errant"},
            "personality": {"traits": ["gruff", "loyal"], "flaws": ["stubborn"], "virtues": ["honest"]},
            "background": f"Born far away. {description}",
            "goals": ["Find redemption", {"goal": "Protect the weak", "priority": "high"}],
            "speech_patterns": {"style": "formal", "examples": ["By my oath.", "Stand fast."]},
            "starting_stats": {"strength": 16, "wits": 12.5, "note": "ignored"},
        }
        return "Here is the character:\n```json\n" + json.dumps(doc) + "\n```"

    def _pick(self, prompt: str, label: str, description: str, default: str) -> str:
        if self.race and label == "Allowed races":
            return self.race  # a stubborn model
        if self.klass and label == "Allowed classes":
            return self.klass
        listed = re.search(rf"^{label}: (.*)$", prompt, re.M).group(1)
        allowed = [] if listed == "any" else [a.strip() for a in listed.split(",")]
        for name in allowed:
            if name in description.lower():
                return name
        return allowed[0] if allowed else default


CONSTRAINTS_YML = """\
entity_type: player_character
allowed_races: [human, elf, dwarf]
allowed_classes: [knight, wizard, rogue]
starting_location: gates_of_camelot
starting_items:
  - travelers_cloak
  - worn_dagger
hard_constraints:
  must_be_humanoid: true
  forbidden_attributes: [immortal]
soft_constraints:
  recommended_archetype: warrior
  narrative_note: "You arrive as a stranger to Camelot"
"""


def make_campaign(root: Path, *, constraints: str | None = CONSTRAINTS_YML, cid: str = "merlin") -> Path:
    root.mkdir(parents=True)
    (root / "campaign.yml").write_text(f"title: Chronicles of Merlin\nversion: 2.1.0\nid: {cid}\n"
                                       "description: Arthurian legend\ntone: Epic\n")
    if constraints is not None:
        (root / "player_character_constraints.yml").write_text(constraints)
    return root


def test_constraints_are_read_from_the_campaign(tmp_path):
    ctx = load_campaign_context(make_campaign(tmp_path / "c"))
    assert (ctx.id, ctx.title, ctx.version, ctx.setting, ctx.tone) == (
        "merlin", "Chronicles of Merlin", "2.1.0", "Arthurian legend", "Epic")
    c = ctx.constraints
    assert c.allowed_races == ("human", "elf", "dwarf") and c.allowed_classes == ("knight", "wizard", "rogue")
    assert c.starting_location == "gates_of_camelot" and c.starting_items == ("travelers_cloak", "worn_dagger")
    assert c.hard_constraints == {"must_be_humanoid": True, "forbidden_attributes": ["immortal"]}
    assert c.soft_constraints["recommended_archetype"] == "warrior"
    permissive = load_campaign_context(make_campaign(tmp_path / "p", constraints=None, cid="open"))
    assert permissive.constraints == parse_constraints(None) and permissive.constraints.allowed_races == ()
    with pytest.raises(RealizationError, match="^allowed_races: must be a list"):
        parse_constraints({"allowed_races": "human"})
    with pytest.raises(RealizationError, match="^hard_constraints: must be a mapping"):
        parse_constraints({"hard_constraints": ["x"]})
    with pytest.raises(RealizationError, match="^id:"):
        campaign_context({"title": "T", "version": "1", "id": "../up"})


def test_realisation_honours_constraints_and_records_itself(store, data_dir, tmp_path):
    ctx = load_campaign_context(make_campaign(tmp_path / "c"))
    fresh = store.create("A gruff elf knight who secretly loves poetry.", image_bytes("PNG"))
    model = RuleModel()
    r = realize(fresh.id, ctx, model, store=store)

    assert (r.persona.race, r.persona.char_class, r.persona.name) == ("elf", "knight", "Sir Gruff")
    assert r.violation_state == "none" and r.violations == [] and r.source == "model"
    assert "Allowed races: human, elf, dwarf" in model.calls[0]
    assert "forbidden_attributes" in model.calls[0] and "A gruff elf knight" in model.calls[0]
    # Chunks: isPlayer, tier 2, the player entity, one per part of the persona.
    assert {c.content_type for c in r.chunks} == {"archetype", "personality", "background", "goals",
                                                  "speech_patterns"}
    assert all(c.is_player and c.weight_tier == 2 and c.entity_type == "player"
               and c.entity_ids == [fresh.id] for c in r.chunks)
    assert [c.chunk_index for c in r.chunks] == list(range(len(r.chunks)))
    personality = next(c for c in r.chunks if c.content_type == "personality")
    assert personality.content == "Personality traits: gruff, loyal. Flaws: stubborn. Virtues: honest."
    goals = next(c for c in r.chunks if c.content_type == "goals")
    assert "Protect the weak (high priority)" in goals.content
    # Session state, usable as the session's initial tree.
    player = SessionState(r.player_state).tree["player"]
    assert player["name"] == "Sir Gruff" and player["race"] == "elf" and player["class"] == "knight"
    assert player["stats"] == {"strength": 16, "wits": 12.5}
    assert player["character_id"] == fresh.id and player["location"] == "gates_of_camelot"
    assert player["inventory"] == ["travelers_cloak", "worn_dagger"]
    # The fresh character is now "used" in this campaign.
    used = store.get(fresh.id)
    assert used.status == "used" and used.description == fresh.description
    [record] = used.realizations
    assert (record.campaign_id, record.campaign_title, record.realization_id, record.realized_name,
            record.violation_state) == ("merlin", "Chronicles of Merlin", r.id, "Sir Gruff", "none")
    assert (data_dir / "realizations" / "merlin" / f"{fresh.id}.json").is_file()
    # Storage records: LoreChunks in the campaign's scope, isPlayer set.
    records = lore_records(r)
    assert len(records) == len(r.chunks)
    assert all(x.is_player and x.campaign_id == "merlin" and x.weight_tier == 2 for x in records)


def test_same_character_same_campaign_reuses_the_realisation(store, tmp_path):
    ctx = load_campaign_context(make_campaign(tmp_path / "c"))
    fresh = store.create("A wandering dwarf rogue with a heart of gold.", PORTRAIT)
    model = RuleModel()
    first = realize(fresh, ctx, model, store=store)
    calls = len(model.calls)
    again = realize(fresh.id, ctx, model, store=CharacterStore())  # a new store: read from disk
    assert len(model.calls) == calls, "no second generation"
    assert again == first
    assert len(store.get(fresh.id).realizations) == 1

    other = load_campaign_context(make_campaign(tmp_path / "noir", constraints=None, cid="noir"))
    elsewhere = realize(fresh.id, other, model, store=store)
    assert elsewhere.id != first.id and len(model.calls) > calls
    assert {r.campaign_id for r in store.get(fresh.id).realizations} == {"merlin", "noir"}

    # An edited description is a different character: realised again; force does the same.
    store.edit(fresh.id, description="A wandering elf wizard who hoards maps.")
    renewed = realize(fresh.id, ctx, model, store=store)
    assert renewed.id != first.id and renewed.persona.race == "elf"
    assert store.get(fresh.id).realization_for("merlin").realization_id == renewed.id
    assert realize(fresh.id, ctx, model, store=store, force=True).id != renewed.id


def test_hard_constraints_set_incompatible(store, tmp_path):
    ctx = load_campaign_context(make_campaign(tmp_path / "c"))
    immortal = store.create("An immortal human wizard who has seen empires fall.", PORTRAIT)
    r = realize(immortal.id, ctx, RuleModel(), store=store)
    assert r.violation_state == "incompatible"
    [v] = r.violations
    assert v.constraint == "hard_constraints.forbidden_attributes" and "'immortal'" in v.detail
    assert store.get(immortal.id).realizations[0].violation_state == "incompatible"
    assert all("violation:incompatible" in c.tags for c in r.chunks)
    assert r.player_state["player"]["violation_state"] == "incompatible"

    dragon = store.create("A young dragon knight, scales like bronze.", PORTRAIT)
    r = realize(dragon.id, ctx, RuleModel(), store=store)
    assert [v.constraint for v in r.violations] == ["hard_constraints.must_be_humanoid"]
    assert r.violation_state == "incompatible"


def test_archetype_outside_the_lists(store, tmp_path):
    strict = load_campaign_context(make_campaign(tmp_path / "c"))
    orc = store.create("A brutal warrior raised in the mountains.", PORTRAIT)
    stubborn = RuleModel(race="orc")
    r = realize(orc.id, strict, stubborn, store=store)
    generations = [p for p in stubborn.calls if "Answer only yes or no." not in p]
    assert len(generations) == 2 and "The race must be one of: human, elf, dwarf" in generations[1]
    assert r.violation_state == "incompatible"
    assert [v.constraint for v in r.violations] == ["allowed_races"]

    lenient = campaign_context({"title": "Open Roads", "version": "1"},
                               {"allowed_races": ["human"], "allow_override": True}, campaign_id="roads")
    r = realize(orc.id, lenient, RuleModel(race="orc"), store=store)
    assert r.violation_state == "warning" and r.violations[0].severity == "warning"


def test_unusable_model_answers_fall_back_to_the_description(store, tmp_path):
    ctx = load_campaign_context(make_campaign(tmp_path / "c"))
    fresh = store.create("A quiet scribe who notices everything.", PORTRAIT, name="Wren")
    model = RuleModel(prose=True)
    r = realize(fresh.id, ctx, model, store=store, attempts=3)
    assert r.source == "fallback" and len([p for p in model.calls if "yes or no" not in p]) == 3
    assert (r.persona.name, r.persona.race, r.persona.char_class) == ("Wren", "human", "knight")
    assert r.persona.background == fresh.description
    assert any(c.content_type == "background" and c.content == fresh.description for c in r.chunks)


def test_permissive_campaign_and_unknown_character(store, tmp_path):
    ctx = campaign_context({"title": "Anything Goes", "version": "3"}, None, campaign_id="free")
    fresh = store.create("A cheerful clockwork automaton who collects hats.", PORTRAIT)
    r = realize(fresh.id, ctx, RuleModel(), store=store)
    assert r.violation_state == "none" and r.persona.race == "human"
    assert "location" not in r.player_state["player"] and r.player_state["player"]["inventory"] == []
    with pytest.raises(CharacterNotFound):
        realize("char_0000000000000000", ctx, RuleModel(), store=store)


def test_long_background_is_split_into_several_chunks(store, tmp_path):
    ctx = campaign_context({"title": "Long", "version": "1"}, None, campaign_id="long")
    sentence = "He remembers every road he ever walked and every name he ever lost. "
    fresh = store.create("A " + sentence * 60, PORTRAIT)
    r = realize(fresh.id, ctx, RuleModel(), store=store)
    background = [c for c in r.chunks if c.content_type == "background"]
    assert len(background) > 1 and all(c.token_count <= 512 for c in background)
    assert all(c.is_player for c in background)


def test_chunks_go_into_the_campaign_lore_scope_once(store, tmp_path):
    ctx = load_campaign_context(make_campaign(tmp_path / "c"))
    fresh = store.create("A gruff elf knight who secretly loves poetry.", PORTRAIT)
    r = realize(fresh.id, ctx, RuleModel(), store=store)
    hasher = make_backend(EmbeddingSettings(backend="hash"))
    with PersistenceStore(tmp_path / "narratoria.duckdb", hasher) as db:
        assert ensure_in_store(db, r) == len(r.chunks)
        assert ensure_in_store(db, r) == 0, "already there: nothing embedded again"
        scope = db.playthrough(lore_scope("merlin"))
        stored = scope.exact_match("lore_chunk", {"isPlayer": True, "entityId": fresh.id})
        assert sorted(x.content for x in stored) == sorted(c.content for c in r.chunks)
        hits = scope.semantic_search("player personality traits", "lore_chunk", limit=3)
        assert hits
        # A new realisation replaces the old one's chunks in the same transaction.
        newer = realize(fresh.id, ctx, RuleModel(), store=store, force=True)
        assert ensure_in_store(db, newer) == len(newer.chunks)
        stored = scope.exact_match("lore_chunk", {"isPlayer": True})
        assert {x.id.split("@")[1].split("#")[0] for x in stored} == {newer.id}


def test_a_sparse_answer_keeps_the_players_words_as_background(store):
    ctx = campaign_context({"title": "Sparse", "version": "1"}, None, campaign_id="sparse")
    fresh = store.create("A lighthouse keeper who talks to gulls.", PORTRAIT)

    def terse(prompt: str) -> str:
        return '{"name": "Moll", "archetype": {"race": "human", "class": "keeper"}}'

    r = realize(fresh.id, ctx, terse, store=store)
    assert r.persona.background == fresh.description
    assert [c.content_type for c in r.chunks] == ["archetype", "background"]
