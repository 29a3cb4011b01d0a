"""The built-in character-portraits skill (skills/character-portraits) end to end: its
scripts run as processes under a real daemon (pattern planner) and cache portraits in
the real store through the Store service, driven by fixed plans (execute_only, no
narration); bad input and the no-daemon cases run the scripts alone.

The daemon gets its own config folder (NARRATORIA_CONFIG_DIR) and its own copy of the
skill as its built-in one (NARRATORIA_BUILTIN_SKILLS): under the daemon the skill may
write only its data folder, the copy's, so the tests never write images into the
repository's skill folder. Scripts run alone get ``storageLocation`` in a temporary
folder.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import struct
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO
from skill_plans import failed_on_bad_input, finished, run_plan, run_script, skills_check, tool_events
from support.daemon import HASH_EMBEDDER, Daemon, done_of, kinds

SKILL = REPO / "skills" / "character-portraits"
SILHOUETTE = SKILL / "assets" / "silhouette.png"

ALDRIC = "a broad-shouldered blacksmith with a grey beard, a burn scar and a leather apron"
ALDRIC_PARAPHRASE = "a burly grey-bearded smith in a leather apron"
MIRA = "a young elven archer with long silver hair and a green cloak"
QUEEN = "a stern queen in a golden crown and a red velvet gown"
UNRELATED = "a tiny clockwork owl made of brass gears"


# -- reading PNGs (independently of the skill's writer) -------------------------------------

def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def read_png(path: str | Path) -> SimpleNamespace:
    """Check a PNG chunk by chunk (CRCs, IHDR first, IEND last), inflate its IDAT data,
    undo every row filter, and return its size and RGB(A) rows."""
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: no PNG signature"
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, f"{path}: bad CRC in {kind!r}"
        chunks.append((kind, body))
        at += 12 + length
    assert at == len(data)
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert depth == 8 and colour in (2, 6) and interlace == 0
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * channels
    assert len(raw) == height * (stride + 1), "IDAT does not hold width × height pixels"
    rows, previous = [], bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])
        assert kind <= 4, f"row {y}: unknown filter {kind}"
        for i in range(stride):
            left = row[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            row[i] = (row[i] + (0, left, up, (left + up) // 2, _paeth(left, up, corner))[kind]) & 0xFF
        rows.append(bytes(row))
        previous = row
    return SimpleNamespace(width=width, height=height, channels=channels, rows=rows)


def colours_of(png: SimpleNamespace) -> set[tuple[int, int, int]]:
    n = png.channels
    return {tuple(row[i:i + 3]) for row in png.rows for i in range(0, len(row), n)}


def hex_rgb(text: str) -> tuple[int, int, int]:
    return tuple(int(text[i:i + 2], 16) for i in (1, 3, 5))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- a daemon with its own config and storage folders -----------------------------------------

def write_config(config_dir: Path, config: dict) -> None:
    path = config_dir / "skills" / "character-portraits" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("portraits")
    builtin = root / "builtin"
    copy = Path(shutil.copytree(SKILL, builtin / SKILL.name, ignore=shutil.ignore_patterns("data")))
    ns = SimpleNamespace(config=root / "config", builtin=builtin, data=copy / "data",
                         storage=copy / "data" / "portraits", root=root,
                         silhouette=copy / SILHOUETTE.relative_to(SKILL))
    write_config(ns.config, {"storageLocation": "portraits"})  # in its data folder
    return ns


def start_daemon(dirs, folder: Path | None = None) -> Daemon:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NARRATORIA_CONFIG_DIR", str(dirs.config))
        env.setenv("NARRATORIA_BUILTIN_SKILLS", str(dirs.builtin))
        return Daemon("--planner", "pattern", *HASH_EMBEDDER, folder=folder)


@pytest.fixture(scope="module")
def daemon(dirs):
    d = start_daemon(dirs)
    yield d
    assert d.stop() == 0


def tool(tool_id: str, script: str, **input_: object) -> dict:
    return {"toolId": tool_id, "toolPath": f"character-portraits/{script}", "input": input_}


def after(step: dict, *dependencies: str) -> dict:
    return {**step, "dependencies": list(dependencies)}


def ok_plan(client, session_id: str, *tools: dict) -> list:
    events = run_plan(client, session_id, *tools)
    done = finished(events)
    assert {t["toolId"] for t in tools} <= set(done), kinds(events)
    assert all(done[t["toolId"]].ok for t in tools), [(k, v.error) for k, v in done.items()]
    return events


def only(events: list, tool_id: str, kind: str) -> dict:
    found = [ev for ev in tool_events(events, tool_id) if ev["type"] == kind]
    assert len(found) == 1, tool_events(events, tool_id)
    return found[0]


def info_log(events: list, tool_id: str, message: str) -> dict:
    logs = [ev for ev in tool_events(events, tool_id)
            if ev["type"] == "log" and ev["message"] == message]
    assert len(logs) == 1, tool_events(events, tool_id)
    return logs[0]["fields"]


@pytest.fixture(scope="module")
def generated(daemon):
    """One session that drew Aldric (default style and size) and Mira (pixel, 512 px)."""
    with daemon.client() as client:
        session = client.create_session(title="portraits")
        events = ok_plan(client, session.id,
                         tool("aldric", "generate-portrait", characterId="blacksmith_aldric",
                              description=ALDRIC),
                         tool("mira", "generate-portrait", characterId="mira", description=MIRA,
                              style="pixel", resolution=512))
    return SimpleNamespace(session=session, events=events,
                           aldric=only(events, "aldric", "asset"), mira=only(events, "mira", "asset"))


# -- generate-portrait ----------------------------------------------------------------------

def test_generate_writes_a_png_and_emits_an_asset_event_for_it(generated, dirs):
    asset = generated.aldric
    assert asset["assetId"] == "portrait-blacksmith-aldric"
    assert asset["kind"] == "image" and asset["mediaType"] == "image/png"
    path = Path(asset["path"])
    assert path.is_absolute() and path.parent == dirs.storage and path.is_file()
    png = read_png(path)
    assert (png.width, png.height) == (256, 256)  # the default resolution
    meta = asset["metadata"]
    assert meta["characterId"] == "blacksmith_aldric" and meta["descriptionHash"] == sha256(ALDRIC)
    assert meta["placeholder"] is False and meta["cached"] is True and meta["shared"] is True
    assert meta["style"] == "stylized" and (meta["width"], meta["height"]) == (256, 256)

    # The description decides the face, and the picture holds the colours it read.
    traits = meta["traits"]
    assert traits["beard"] == "grey" and traits["hair"] == "grey"
    assert traits["build"] == "broad" and "scar" in traits["features"]
    assert traits["clothing"] == "leather"
    pixels = colours_of(png)
    for part in ("hair", "beard", "skin", "clothing", "eyes"):
        assert hex_rgb(traits["colours"][part]) in pixels, part

    # The session state says where the portrait is; the narrator's summary names it.
    state = json.loads(done_of(generated.events).state_json)
    assert state["portraits"]["blacksmith_aldric"]["path"] == str(path)
    assert state["portraits"]["mira"]["assetId"] == generated.mira["assetId"]
    done = only(generated.events, "aldric", "done")
    assert done["ok"] and done["summary"].startswith("generated portrait of blacksmith_aldric")


def test_style_and_resolution_inputs_shape_the_image(generated):
    mira = generated.mira
    png = read_png(mira["path"])
    assert (png.width, png.height) == (512, 512)
    assert mira["metadata"]["style"] == "pixel" and "-pixel-512" in mira["path"]
    traits = mira["metadata"]["traits"]
    assert traits["hair"] == "silver" and traits["hairStyle"] == "long"
    assert traits["clothing"] == "green" and "pointed-ears" in traits["features"]
    # Pixel art: every row repeats in blocks, so the 512 px image has few distinct rows.
    assert len(set(png.rows)) <= 512 // 8


def test_the_same_description_draws_the_same_image_and_another_a_different_one(tmp_path):
    def draw(folder: Path, description: str) -> Path:
        config = json.dumps({"storageLocation": str(folder)})
        events = run_script(SKILL / "scripts" / "generate-portrait", json.dumps(
            {"input": {"characterId": "someone", "description": description}}).encode(),
            NARRATORIA_SKILL_CONFIG=config)
        assets = [e for e in events if e["type"] == "asset"]
        assert len(assets) == 1 and not assets[0]["metadata"]["placeholder"], events
        assert assets[0]["metadata"]["source"] == "local"  # drawn, not found in a cache
        assert Path(assets[0]["path"]).parent == folder
        return Path(assets[0]["path"])

    first, second = draw(tmp_path / "a", ALDRIC), draw(tmp_path / "b", ALDRIC)
    # Two processes, two folders: byte for byte the same image.
    assert first.read_bytes() == second.read_bytes()
    # Whitespace is not part of the description.
    spaced = draw(tmp_path / "c", "  " + ALDRIC.replace(" ", "   ") + "\n")
    assert spaced.read_bytes() == first.read_bytes()
    queen = draw(tmp_path / "d", QUEEN)
    assert queen.read_bytes() != first.read_bytes()
    assert read_png(queen).rows != read_png(first).rows


def test_a_second_character_with_the_same_description_shares_the_image(daemon, generated):
    with daemon.client() as client:
        session = client.create_session(title="twins")
        events = ok_plan(client, session.id, tool("twin", "generate-portrait",
                                                  characterId="aldric_twin", description=ALDRIC))
    asset = only(events, "twin", "asset")
    assert asset["path"] == generated.aldric["path"]
    assert asset["metadata"]["source"] == "cache"  # not drawn again
    assert info_log(events, "twin", "generated portrait")["cached"] is True


# -- lookup-portrait --------------------------------------------------------------------------

def test_lookup_finds_the_portrait_by_id_by_exact_description_and_by_paraphrase(daemon, generated):
    with daemon.client() as client:
        events = ok_plan(
            client, generated.session.id,
            tool("by-id", "lookup-portrait", characterId="blacksmith_aldric"),
            tool("exact", "lookup-portrait", description=ALDRIC),
            tool("paraphrase", "lookup-portrait", description=ALDRIC_PARAPHRASE),
            tool("unrelated", "lookup-portrait", description=UNRELATED),
            tool("nobody", "lookup-portrait", characterId="nobody_at_all"))
    path = generated.aldric["path"]
    by_id = info_log(events, "by-id", "found portrait")
    assert by_id["match"] == "character" and by_id["path"] == path
    assert by_id["record"]["descriptionHash"] == sha256(ALDRIC)
    assert only(events, "by-id", "asset")["path"] == path

    exact = info_log(events, "exact", "found portrait")
    assert exact["match"] == "exact" and exact["matchedCharacterId"] == "blacksmith_aldric"
    assert only(events, "exact", "asset")["path"] == path

    close = info_log(events, "paraphrase", "found portrait")
    assert close["match"] == "semantic" and close["matchedCharacterId"] == "blacksmith_aldric"
    assert close["threshold"] <= close["similarity"] < 1.0
    asset = only(events, "paraphrase", "asset")
    assert asset["path"] == path and asset["metadata"]["match"] == "semantic"
    assert "by a close description" in only(events, "paraphrase", "done")["summary"]

    for miss in ("unrelated", "nobody"):
        assert info_log(events, miss, "no cached portrait")["found"] is False
        assert not [e for e in tool_events(events, miss) if e["type"] == "asset"]
        assert only(events, miss, "done")["summary"].startswith("no cached portrait")


def test_lookup_reports_a_changed_description(daemon, generated):
    with daemon.client() as client:
        events = ok_plan(
            client, generated.session.id,
            tool("far", "lookup-portrait", characterId="blacksmith_aldric",
                 description="a tall thin woman with red hair in a blue silk dress"),
            tool("near", "lookup-portrait", characterId="blacksmith_aldric",
                 description=ALDRIC_PARAPHRASE))
    far = info_log(events, "far", "found portrait")
    assert far["descriptionChanged"] is True and far["significantChange"] is True
    assert far["similarity"] < far["threshold"]
    assert "update-portrait" in only(events, "far", "done")["summary"]
    near = info_log(events, "near", "found portrait")
    assert near["descriptionChanged"] is True and near["significantChange"] is False
    # Either way the cached portrait is shown.
    assert only(events, "far", "asset")["path"] == generated.aldric["path"]


def test_a_cached_portrait_whose_file_is_gone_is_drawn_again(daemon):
    description = "a gaunt old priest with a white beard and a grey robe"
    with daemon.client() as client:
        session = client.create_session(title="lost file")
        drawn = only(ok_plan(client, session.id, tool("draw", "generate-portrait",
                                                      characterId="priest",
                                                      description=description)),
                     "draw", "asset")
        path = Path(drawn["path"])
        original = path.read_bytes()
        path.unlink()
        events = ok_plan(client, session.id, tool("look", "lookup-portrait", characterId="priest"))
    assert info_log(events, "look", "found portrait")["path"] == str(path)
    assert any("missing; drawn again" in e["message"] for e in tool_events(events, "look")
               if e["type"] == "log" and e["level"] == "warn")
    assert path.read_bytes() == original  # the record's description is all it takes


def test_a_later_session_finds_the_portrait_drawn_in_another(daemon, generated):
    with daemon.client() as client:
        later = client.create_session(title="a later playthrough")
        # Drawn in another playthrough: found in the skill's shared portraits, and cached
        # for this playthrough...
        events = ok_plan(client, later.id, tool("same", "lookup-portrait",
                                                characterId="blacksmith_aldric",
                                                description=ALDRIC))
        # ...so from now on the id and a paraphrase find it here, in its own records.
        again = ok_plan(client, later.id,
                        tool("by-id", "lookup-portrait", characterId="blacksmith_aldric"),
                        tool("paraphrase", "lookup-portrait", description=ALDRIC_PARAPHRASE))
        # The first session, resumed, still has its own.
        client.resume_session(generated.session.id)
        first = ok_plan(client, generated.session.id,
                        tool("mira", "lookup-portrait", characterId="mira"))
    same = info_log(events, "same", "found portrait")
    assert same["match"] == "exact" and same["scope"] == "shared" and same["copied"] is True
    assert same["path"] == generated.aldric["path"]
    assert same["record"]["characterId"] == "blacksmith_aldric"
    assert only(events, "same", "asset")["path"] == generated.aldric["path"]
    assert "from another playthrough" in only(events, "same", "done")["summary"]
    by_id = info_log(again, "by-id", "found portrait")
    assert by_id["path"] == generated.aldric["path"] and by_id["scope"] == "playthrough"
    paraphrase = info_log(again, "paraphrase", "found portrait")
    assert paraphrase["match"] == "semantic" and paraphrase["path"] == generated.aldric["path"]
    assert paraphrase["scope"] == "playthrough"
    mira = info_log(first, "mira", "found portrait")
    assert mira["path"] == generated.mira["path"] and mira["scope"] == "playthrough"


def images(folder: Path) -> dict[str, int]:
    """The storage folder's image files and their modification times."""
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("*.png")}


def test_another_playthrough_finds_a_portrait_by_id_and_by_paraphrase_without_drawing(
        daemon, generated, dirs):
    """Only the skill's shared records connect the playthroughs: neither lookup gives the
    exact description, so the image file cannot be found by its hash."""
    before = images(dirs.storage)
    with daemon.client() as client:
        by_id = client.create_session(title="by id elsewhere")
        id_events = ok_plan(client, by_id.id, tool("mira", "lookup-portrait", characterId="mira"))
        by_text = client.create_session(title="by paraphrase elsewhere")
        text_events = ok_plan(client, by_text.id, tool("close", "lookup-portrait",
                                                       description=ALDRIC_PARAPHRASE))
        # Copied on the way: the next lookups are this playthrough's own.
        local = ok_plan(client, by_id.id, tool("mira", "lookup-portrait", characterId="mira"))
        stranger = client.create_session(title="same id, another character")
        other = ok_plan(client, stranger.id, tool("queen", "lookup-portrait",
                                                  characterId="blacksmith_aldric",
                                                  description=QUEEN))
    assert images(dirs.storage) == before  # nothing was drawn, nothing rewritten

    mira = info_log(id_events, "mira", "found portrait")
    assert mira["scope"] == "shared" and mira["match"] == "character" and mira["copied"] is True
    assert mira["path"] == generated.mira["path"]
    assert mira["record"]["descriptionHash"] == sha256(MIRA)
    asset = only(id_events, "mira", "asset")
    assert asset["path"] == generated.mira["path"] and asset["metadata"]["source"] == "cache"
    state = json.loads(done_of(id_events).state_json)
    assert state["portraits"]["mira"]["path"] == generated.mira["path"]
    assert info_log(local, "mira", "found portrait")["scope"] == "playthrough"

    close = info_log(text_events, "close", "found portrait")
    assert close["scope"] == "shared" and close["match"] == "semantic"
    # aldric_twin (drawn in another test) shares Aldric's description and image.
    assert close["matchedCharacterId"] in {"blacksmith_aldric", "aldric_twin"}
    assert close["path"] == generated.aldric["path"]
    assert close["threshold"] <= close["similarity"] < 1.0
    assert only(text_events, "close", "asset")["path"] == generated.aldric["path"]

    # Another story's character of the same id, described otherwise, is not this one.
    assert info_log(other, "queen", "no cached portrait")["found"] is False


def test_a_restarted_daemon_still_has_the_portraits(daemon, generated, dirs):
    """The module's daemon is stopped and started again on the same data folder (the
    fixture then stops the new one); the first session, resumed, finds its portraits."""
    assert daemon.stop() == 0
    restarted = start_daemon(dirs, daemon.dir)
    daemon.proc, daemon.ready = restarted.proc, restarted.ready
    with daemon.client() as client:
        client.resume_session(generated.session.id)
        events = ok_plan(client, generated.session.id,
                         tool("close", "lookup-portrait", description=ALDRIC_PARAPHRASE),
                         tool("mira", "lookup-portrait", characterId="mira"))
    close = info_log(events, "close", "found portrait")
    assert close["match"] == "semantic" and close["matchedCharacterId"] == "blacksmith_aldric"
    assert close["path"] == generated.aldric["path"]
    assert info_log(events, "mira", "found portrait")["path"] == generated.mira["path"]
    assert read_png(close["path"]).width == 256


# -- update-portrait --------------------------------------------------------------------------

def test_update_portrait_draws_the_changed_description_and_replaces_the_record(daemon):
    changed = ("a broad-shouldered sea captain with grey hair, a black eyepatch and "
               "a navy coat")
    with daemon.client() as client:
        session = client.create_session(title="updates")
        events = ok_plan(
            client, session.id,
            tool("draw", "generate-portrait", characterId="captain",
                 description="a young sea captain with red hair and a navy coat"),
            after(tool("update", "update-portrait", characterId="captain", description=changed),
                  "draw"),
            after(tool("look", "lookup-portrait", characterId="captain"), "update"),
            after(tool("restyle", "update-portrait", characterId="captain", style="realistic"),
                  "look"))
    old, new = only(events, "draw", "asset"), only(events, "update", "asset")
    assert new["path"] != old["path"] and Path(old["path"]).is_file()
    assert Path(new["path"]).read_bytes() != Path(old["path"]).read_bytes()
    assert read_png(new["path"]).rows != read_png(old["path"]).rows
    assert new["metadata"]["descriptionChanged"] is True
    assert new["metadata"]["previousPath"] == old["path"]
    assert new["metadata"]["descriptionHash"] == sha256(changed)
    assert "eyepatch" in new["metadata"]["traits"]["features"]
    updated = info_log(events, "update", "updated portrait")
    assert updated["previous"]["descriptionHash"] == sha256(
        "a young sea captain with red hair and a navy coat")

    looked = info_log(events, "look", "found portrait")
    assert looked["path"] == new["path"] and looked["record"]["description"] == changed

    # Without a description: the cached one, drawn again in the requested style.
    restyled = only(events, "restyle", "asset")
    assert "-realistic-" in restyled["path"] and restyled["path"] != new["path"]
    assert restyled["metadata"]["descriptionHash"] == sha256(changed)
    assert restyled["metadata"]["descriptionChanged"] is False
    read_png(restyled["path"])


def test_update_of_an_unknown_character_without_a_description_is_an_error(daemon):
    with daemon.client() as client:
        session = client.create_session(title="update nobody")
        events = run_plan(client, session.id, {**tool("bad", "update-portrait",
                                                       characterId="ghost"), "required": False})
    assert not finished(events)["bad"].ok
    error = only(events, "bad", "error")
    assert error["errorCode"] == "not_found" and "ghost" in error["errorMessage"]
    assert only(events, "bad", "done")["ok"] is False
    assert not [e for e in tool_events(events, "bad") if e["type"] == "asset"]


# -- failures ---------------------------------------------------------------------------------

def draw_with_storage(daemon, dirs, storage: str, title: str) -> list:
    """A portrait drawn and looked up with ``storageLocation`` set to ``storage``."""
    write_config(dirs.config, {"storageLocation": storage})
    try:
        with daemon.client() as client:
            session = client.create_session(title=title)
            return ok_plan(client, session.id,
                           tool("draw", "generate-portrait", characterId="stranger",
                                description=MIRA),
                           after(tool("look", "lookup-portrait", characterId="stranger"), "draw"))
    finally:
        write_config(dirs.config, {"storageLocation": "portraits"})


def test_a_portrait_that_cannot_be_made_is_the_placeholder_silhouette(daemon, dirs):
    blocker = dirs.data / "not-a-folder"
    blocker.write_text("a file where the storage folder should be")
    events = draw_with_storage(daemon, dirs, "not-a-folder/portraits", "no storage")
    asset = only(events, "draw", "asset")
    assert Path(asset["path"]) == dirs.silhouette and asset["mediaType"] == "image/png"
    assert asset["metadata"]["placeholder"] is True
    assert "not-a-folder" in asset["metadata"]["reason"]
    png = read_png(asset["path"])
    assert png.width == png.height == asset["metadata"]["width"]
    failed = [e for e in tool_events(events, "draw")
              if e["type"] == "log" and e["level"] == "error"]
    assert len(failed) == 1 and failed[0]["fields"]["errorCode"] == "generation_failed"
    assert "placeholder" in only(events, "draw", "done")["summary"]
    state = json.loads(done_of(events).state_json)
    assert state["portraits"]["stranger"]["placeholder"] is True
    # A placeholder is not cached: the next attempt draws the real portrait.
    assert info_log(events, "look", "no cached portrait")["found"] is False


def test_a_storage_folder_outside_the_data_folder_is_refused_naming_the_setting(daemon, dirs):
    """Under the daemon a skill writes only its data folder (and TMPDIR): a
    ``storageLocation`` elsewhere cannot be written, and the placeholder's reason and the
    error log say which setting to change."""
    outside = dirs.root / "elsewhere"
    events = draw_with_storage(daemon, dirs, str(outside), "storage outside")
    asset = only(events, "draw", "asset")
    assert Path(asset["path"]) == dirs.silhouette and asset["metadata"]["placeholder"] is True
    reason = asset["metadata"]["reason"]
    assert str(outside) in reason and "storageLocation" in reason, reason
    assert f"outside the skill's data folder {dirs.data}" in reason, reason
    [failed] = [e for e in tool_events(events, "draw")
                if e["type"] == "log" and e["level"] == "error"]
    assert "storageLocation" in failed["message"] + json.dumps(failed.get("fields")), failed
    assert not outside.exists() or not list(outside.iterdir())  # nothing was written there


def test_an_unreachable_hosted_provider_falls_back_to_the_local_drawing(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    request = json.dumps({"input": {"characterId": "mira", "description": MIRA}}).encode()
    hosted = run_script(SKILL / "scripts" / "generate-portrait", request,
                        NARRATORIA_SKILL_CONFIG=json.dumps({
                            "storageLocation": str(tmp_path / "hosted"), "imageProvider": "hosted",
                            "hostedEndpoint": f"http://127.0.0.1:{port}/v1", "apiKey": "k"}))
    local = run_script(SKILL / "scripts" / "generate-portrait", request,
                       NARRATORIA_SKILL_CONFIG=json.dumps({"storageLocation": str(tmp_path / "local")}))
    warnings = [e["message"] for e in hosted if e["type"] == "log" and e["level"] == "warn"]
    assert any("hosted image provider failed" in w for w in warnings), warnings
    assert any("not cached" in w for w in warnings)  # no daemon, no store: still drawn
    assets = [e for e in hosted if e["type"] == "asset"]
    assert len(assets) == 1 and assets[0]["metadata"]["source"] == "local"
    local_asset = next(e for e in local if e["type"] == "asset")
    assert Path(assets[0]["path"]).read_bytes() == Path(local_asset["path"]).read_bytes()
    assert hosted[-1] == {**hosted[-1], "type": "done", "ok": True}


@pytest.mark.parametrize("script,input_,field", [
    ("generate-portrait", {}, "input.characterId"),
    ("generate-portrait", {"characterId": "x"}, "input.description"),
    ("generate-portrait", {"characterId": 7, "description": "a man"}, "input.characterId"),
    ("generate-portrait", {"characterId": "x", "description": "   "}, "input.description"),
    ("generate-portrait", {"characterId": "x", "description": "y" * 2001}, "input.description"),
    ("generate-portrait", {"characterId": "x", "description": "a man", "style": "cubist"},
     "input.style"),
    ("generate-portrait", {"characterId": "x", "description": "a man", "resolution": 300},
     "input.resolution"),
    ("lookup-portrait", {}, "input.characterId"),
    ("lookup-portrait", {"description": ["a", "man"]}, "input.description"),
    ("lookup-portrait", {"characterId": "x", "minSimilarity": 2}, "input.minSimilarity"),
    ("update-portrait", {"description": "a man"}, "input.characterId"),
    ("update-portrait", {"characterId": "x", "resolution": "huge"}, "input.resolution"),
])
def test_bad_input_is_an_error_event_and_a_failed_done(daemon, script, input_, field):
    with daemon.client() as client:
        session = client.create_session(title="bad input")
        emitted = failed_on_bad_input(client, session.id, tool("bad", script, **input_), field)
    assert [ev["ok"] for ev in emitted if ev["type"] == "done"] == [False]  # maxRetries 0
    assert not [ev for ev in emitted if ev["type"] == "asset"]


@pytest.mark.parametrize("script", ["generate-portrait", "lookup-portrait", "update-portrait"])
def test_without_a_daemon_garbage_on_stdin_is_an_error_event(script):
    events = run_script(SKILL / "scripts" / script, b"\x00not json{")
    assert [e["type"] for e in events] == ["error", "done"]
    assert events[0]["errorCode"] == "invalid_input" and events[1]["ok"] is False


@pytest.mark.parametrize("script,input_", [
    ("lookup-portrait", {"characterId": "x"}),
    ("update-portrait", {"characterId": "x", "description": "a man"}),
])
def test_without_a_daemon_the_store_is_reported_unavailable(script, input_, tmp_path):
    request = json.dumps({"requestId": "r-1", "input": input_}).encode()
    config = json.dumps({"storageLocation": str(tmp_path)})
    missing = run_script(SKILL / "scripts" / script, request, NARRATORIA_SKILL_CONFIG=config)
    assert missing[0]["errorCode"] == "store_unavailable" and missing[-1]["ok"] is False
    assert all(e["requestId"] == "r-1" for e in missing)
    gone = run_script(SKILL / "scripts" / script, request, NARRATORIA_SKILL_CONFIG=config,
                      NARRATORIA_ADDRESS=f"unix://{tmp_path}/none.sock", NARRATORIA_SKILL_TOKEN="t")
    assert gone[0]["errorCode"] == "store_unavailable" and gone[-1]["ok"] is False


def test_a_forged_token_is_refused_in_protocol(daemon, tmp_path):
    request = json.dumps({"input": {"characterId": "blacksmith_aldric"}}).encode()
    events = run_script(SKILL / "scripts" / "lookup-portrait", request,
                        NARRATORIA_SKILL_CONFIG=json.dumps({"storageLocation": str(tmp_path)}),
                        NARRATORIA_ADDRESS=f"unix://{daemon.socket}", NARRATORIA_SKILL_TOKEN="forged")
    assert events[0]["type"] == "error" and events[0]["errorCode"] == "store_forbidden"
    assert events[-1] == {**events[-1], "type": "done", "ok": False}


def test_the_shipped_silhouette_is_a_valid_png():
    png = read_png(SILHOUETTE)
    assert png.width == png.height == 256
    assert len(colours_of(png)) > 1


def test_skills_check_passes(tmp_path):
    # The probes run the manifest examples: their images go to a temporary folder.
    write_config(tmp_path / "config", {"storageLocation": str(tmp_path / "images")})
    assert not skills_check(SKILL, NARRATORIA_CONFIG_DIR=str(tmp_path / "config"))["findings"]
    assert len(list((tmp_path / "images").glob("*.png"))) == 2  # generate-portrait's two examples
