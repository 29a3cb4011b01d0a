"""The daemon API a web front-end uses (ListCampaigns, GetSessionView, assets, skill
settings, characters), end to end: a real daemon (pattern planner), a real unix
socket, the Python client; files checked on disk where the daemon writes them.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from PIL import Image

from narratoria.clients.client import ClientError, NarratoriaClient
from narratoria.runtime.host.identity import ClientRegistry

pytestmark = pytest.mark.daemon

REPO = Path(__file__).resolve().parent.parent
LONG_EBB = REPO / "campaigns" / "long_ebb"
DESCRIPTION = "A salt-stained salvager who owes the Lampwrights more than she can pay."


def png(size=(40, 60), color=(20, 120, 200)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    """A daemon of its own, whose skill settings live in a temporary config dir."""
    from support.daemon import HASH_EMBEDDER, Daemon

    config = tmp_path_factory.mktemp("config")
    saved = os.environ.get("NARRATORIA_CONFIG_DIR")
    os.environ["NARRATORIA_CONFIG_DIR"] = str(config)  # inherited by the daemon only
    try:
        d = Daemon("--planner", "pattern", *HASH_EMBEDDER)
    finally:
        if saved is None:
            os.environ.pop("NARRATORIA_CONFIG_DIR", None)
        else:
            os.environ["NARRATORIA_CONFIG_DIR"] = saved
    d.config_dir = config
    yield d
    assert d.stop() == 0


@pytest.fixture(scope="module")
def client(web):
    with web.client() as c:
        yield c


@pytest.fixture(scope="module")
def session(client):
    return client.create_session(campaign="long_ebb", title="web view")


def error_of(call) -> ClientError:
    with pytest.raises(ClientError) as err:
        call()
    return err.value


# -- campaigns and the session view ------------------------------------------------------

def test_list_campaigns_names_the_built_in_ones(client):
    campaigns = {c.id: c for c in client.list_campaigns()}
    ebb = campaigns["long_ebb"]
    assert ebb.title == "The Long Ebb" and ebb.builtin and ebb.valid and ebb.version == "1.0.0"
    assert "nineteen years" in ebb.description
    assert ebb.free_text  # no allowFreeText in its manifest: free text is on
    assert Path(ebb.path).resolve() == LONG_EBB.resolve()


def test_the_session_view_hides_hidden_stats_and_resolves_icons(client, session):
    view = client.get_session_view(session.id)
    assert (view.session_id, view.campaign, view.title) == (session.id, "long_ebb", "web view")
    assert view.free_text
    everything = " ".join([view.state_json, view.stats_json, view.icons_json,
                           view.inventory_json, view.npcs_json])
    assert "drowned_regard" not in everything and "Regard of the Drowned" not in everything
    # GetState leaves it out too: the daemon filters every front-end answer.
    assert "drowned_regard" not in client.get_state(session.id).state_json
    state = json.loads(view.state_json)
    assert state["player"]["stats"] == {"lamp_oil": 3, "nerve": 7, "vigour": 100}
    stats = {s["path"]: s for s in json.loads(view.stats_json)}
    assert set(stats) == {"player.stats.vigour", "player.stats.nerve", "player.stats.lamp_oil",
                          "npcs.odile_venn.stats.trust"}
    assert {k: stats["player.stats.lamp_oil"][k] for k in ("display", "min", "max", "value")} == \
        {"display": "pips", "min": 0, "max": 6, "value": 3}
    icons = json.loads(view.icons_json)
    assert icons["player.stats.vigour"] == "campaign/ui/state/player.stats.vigour.svg"
    assert icons["player.stats.nerve"] == "campaign/ui/state/player.stats.*.svg"
    assert icons["npcs.odile_venn.stats.trust"] == "campaign/ui/state/npcs.**.trust.svg"
    assert icons["player.inventory.boathook"] == "campaign/ui/items/weapon.svg"
    assert icons["player.inventory.lamp_oil_flask"] == "campaign/ui/items/lamp_oil_flask.svg"
    assert icons["world.time"] == "default:time"
    items = {i["id"]: i for i in json.loads(view.inventory_json)}
    assert items["tide_lantern"]["name"] == "Tide Lantern" and items["tide_lantern"]["type"] == "tool"
    npcs = json.loads(view.npcs_json)
    assert npcs[0]["id"] == "odile_venn" and npcs[0]["relationship"] == 4
    assert npcs[0]["portrait"] == "campaign/art/characters/odile_venn.png"
    # Every icon the view names is an asset the session can fetch.
    for path in {*icons.values(), npcs[0]["portrait"]} - {p for p in icons.values()
                                                         if p.startswith("default:")}:
        assert client.get_asset(session.id, path).data, path


def test_the_view_follows_a_turn(client, session):
    events = list(client.turn(session.id, text="I look around the quay"))
    assert events[-1].WhichOneof("event") == "done"
    view = client.get_session_view(session.id)
    assert view.turns == 1 and view.choices and view.last_narration


def test_another_client_sees_none_of_it(web, client, session):
    token = ClientRegistry(web.dir / "data").add("stranger")
    with NarratoriaClient(f"unix://{web.socket}", client_token=token) as stranger:
        for call in (lambda: stranger.get_session_view(session.id),
                     lambda: stranger.list_assets(session.id),
                     lambda: stranger.get_asset(session.id, "campaign/art/items/tide_lantern.png")):
            assert error_of(call).code == "PERMISSION_DENIED"
    assert error_of(lambda: client.get_session_view("no-such-session")).code == "NOT_FOUND"
    assert error_of(lambda: client.get_session_view("")).code == "INVALID_ARGUMENT"


# -- assets --------------------------------------------------------------------------------

def test_assets_of_the_campaign_and_the_playthrough(web, client, session):
    folder = web.dir / "data" / "playthroughs" / session.playthrough_id / "portraits"
    folder.mkdir(parents=True)
    (folder / "meret.png").write_bytes(png())
    (folder / "notes.bin").write_bytes(b"\x00\x01")
    assets = {a.path: a for a in client.list_assets(session.id)}
    icon = assets["campaign/ui/state/player.stats.*.svg"]
    assert (icon.kind, icon.media_type) == ("image", "image/svg+xml")
    lantern = assets["campaign/art/items/tide_lantern.png"]
    assert (lantern.kind, lantern.media_type) == ("image", "image/png")
    assert "lantern" in lantern.keywords and lantern.title.startswith("A tide lantern")
    assert assets["data/portraits/meret.png"].kind == "image"
    assert assets["data/portraits/notes.bin"].media_type == "application/octet-stream"
    # Campaign content (lore, stat files) is no asset: never listed, never served.
    assert not [p for p in assets if p.endswith((".md", ".json", ".yml", ".txt"))]

    got = client.get_asset(session.id, "campaign/ui/state/player.stats.*.svg")
    assert got.media_type == "image/svg+xml"
    assert got.data == (LONG_EBB / "ui" / "state" / "player.stats.*.svg").read_bytes()
    assert client.get_asset(session.id, "data/portraits/meret.png").data == png()


@pytest.mark.parametrize("path", [
    "campaign/../../../../etc/passwd", "campaign/ui/../../campaign.yml", "/etc/passwd",
    "campaign//etc/passwd", "data/../../daemon.token", "data/portraits/../../x.png",
    "etc/passwd", "", "campaign/", "campaign/a\x00b"])
def test_paths_that_leave_their_folder_are_refused_by_name(client, session, path):
    err = error_of(lambda: client.get_asset(session.id, path))
    assert err.code == "INVALID_ARGUMENT", err
    assert "path" in err.message and repr(path)[1:-1][:20] in err.message


def test_a_symlink_out_of_the_data_folder_is_refused(web, client, session, tmp_path):
    secret = tmp_path / "secret.png"
    secret.write_bytes(png(color=(0, 0, 0)))
    folder = web.dir / "data" / "playthroughs" / session.playthrough_id
    folder.mkdir(parents=True, exist_ok=True)
    os.symlink(secret, folder / "escape.png")
    os.symlink(tmp_path, folder / "escape_dir")
    for path in ("data/escape.png", "data/escape_dir/secret.png"):
        err = error_of(lambda: client.get_asset(session.id, path))
        assert err.code == "INVALID_ARGUMENT" and path in err.message, err
    assert not [a for a in client.list_assets(session.id) if "escape" in a.path]


def test_missing_assets_and_campaign_content_are_not_found(client, session):
    for path in ("campaign/art/nothing.png", "campaign/stats/hidden/drowned_regard.json",
                 "campaign/campaign.yml", "data/nothing.png"):
        err = error_of(lambda: client.get_asset(session.id, path))
        assert err.code == "NOT_FOUND" and path in err.message, err


# -- skill settings --------------------------------------------------------------------------

def test_skill_settings_are_validated_all_or_nothing(web, client):
    saved_file = web.config_dir / "skills" / "dice-roller" / "config.json"
    view = client.get_skill_config("dice-roller")
    fields = {f["name"]: f for f in json.loads(view.view_json)["fields"]}
    assert fields["randomSource"]["enum"] == ["crypto", "pseudo"]
    assert fields["randomSource"]["value"] == "crypto" and view.enabled

    bad = client.set_skill_config("dice-roller", {"randomSource": "quantum",
                                                  "showIndividualRolls": "maybe"})
    assert not bad.saved
    problems = {p.field: p.message for p in bad.problems}
    assert set(problems) == {"randomSource", "showIndividualRolls"}
    assert "crypto" in problems["randomSource"] and "true or false" in problems["showIndividualRolls"]
    assert not saved_file.exists()  # nothing written

    # One good and one bad value: still nothing written.
    mixed = client.set_skill_config("dice-roller", {"randomSource": "pseudo", "nope": "1"})
    assert not mixed.saved and [p.field for p in mixed.problems] == ["nope"]
    assert not saved_file.exists()

    good = client.set_skill_config("dice-roller", {"randomSource": "pseudo",
                                                   "showIndividualRolls": "false"})
    assert good.saved and not good.problems
    assert json.loads(saved_file.read_text()) == {"randomSource": "pseudo",
                                                  "showIndividualRolls": False}
    again = {f["name"]: f for f in json.loads(client.get_skill_config("dice-roller").view_json)["fields"]}
    assert again["randomSource"]["value"] == "pseudo" and again["randomSource"]["source"] == "set"

    cleared = client.set_skill_config("dice-roller", unset=["randomSource", "showIndividualRolls"])
    assert cleared.saved and json.loads(saved_file.read_text()) == {}


def test_skills_can_be_switched_off_and_on(web, client):
    off = client.set_skill_enabled("dice-roller", False)
    assert off.saved and not off.enabled
    listed = {s.name: s for s in client.list_skills()}
    assert not listed["dice-roller"].enabled and listed["dice-roller"].has_settings
    assert not listed["storyteller"].enabled  # ships off (defaultEnabled: false)
    settings = json.loads((web.config_dir / "skills.json").read_text())
    assert "dice-roller" in settings["disabled"]
    on = client.set_skill_enabled("dice-roller", True)
    assert on.enabled and {s.name: s for s in client.list_skills()}["dice-roller"].enabled
    # A skill that ships off is turned on the same way, and back off.
    assert client.set_skill_enabled("storyteller", True).enabled
    assert {s.name: s for s in client.list_skills()}["storyteller"].enabled
    assert not client.set_skill_enabled("storyteller", False).enabled


def test_unknown_skills_are_not_found(client):
    assert error_of(lambda: client.get_skill_config("no-such-skill")).code == "NOT_FOUND"
    assert error_of(lambda: client.set_skill_config("no-such-skill", {"a": "b"})).code == "NOT_FOUND"
    assert error_of(lambda: client.set_skill_enabled("", True)).code == "INVALID_ARGUMENT"


# -- characters ------------------------------------------------------------------------------

def test_characters_are_created_listed_edited_and_deleted(web, client):
    folder = web.dir / "data" / "characters"
    before = client.list_characters()

    err = error_of(lambda: client.save_character(DESCRIPTION, b"not an image at all"))
    assert err.code == "INVALID_ARGUMENT" and err.message.startswith("portrait:"), err
    err = error_of(lambda: client.save_character("too short", png()))
    assert err.code == "INVALID_ARGUMENT" and err.message.startswith("description:"), err
    err = error_of(lambda: client.save_character(DESCRIPTION, b""))
    assert err.message.startswith("portrait:"), err  # a fresh character needs one
    assert client.list_characters() == before

    made = client.save_character(DESCRIPTION, png(), name="Wren")
    assert made.id.startswith("char_") and made.fresh and made.has_portrait
    assert (made.name, made.description, list(made.campaigns)) == ("Wren", DESCRIPTION, [])
    assert [c.id for c in client.list_characters()] == [*(c.id for c in before), made.id]

    portrait = client.get_character_portrait(made.id)
    assert portrait.media_type == "image/png"
    with Image.open(io.BytesIO(portrait.data)) as image:
        assert image.size == (512, 512)

    files = sorted(p.name for p in folder.iterdir())
    err = error_of(lambda: client.save_character(portrait=b"\x89PNG broken", character_id=made.id))
    assert err.message.startswith("portrait:")
    assert sorted(p.name for p in folder.iterdir()) == files  # nothing written

    edited = client.save_character(name="Wren Tally", character_id=made.id)
    assert edited.name == "Wren Tally" and edited.description == DESCRIPTION  # kept
    assert client.get_character_portrait(made.id).data == portrait.data      # kept
    repainted = client.save_character(portrait=png(color=(200, 10, 10)), character_id=made.id)
    assert client.get_character_portrait(made.id).data != portrait.data
    assert repainted.name == "Wren Tally"

    gone = client.delete_character(made.id)
    assert gone.id == made.id
    assert made.id not in [c.id for c in client.list_characters()]
    assert error_of(lambda: client.get_character_portrait(made.id)).code == "NOT_FOUND"
    assert error_of(lambda: client.delete_character(made.id)).code == "NOT_FOUND"
    err = error_of(lambda: client.delete_character("../../etc"))
    assert err.code == "INVALID_ARGUMENT" and err.message.startswith("id:")


# -- robustness: every new call answers with a status that names the problem ------------------

NEW_METHODS = ["ListCampaigns", "GetSessionView", "ListAssets", "GetAsset", "GetSkillConfig",
               "SetSkillConfig", "SetSkillEnabled", "ListCharacters", "GetCharacterPortrait",
               "SaveCharacter", "DeleteCharacter"]


def test_bytes_that_are_no_request_are_invalid_arguments(web):
    import grpc

    from narratoria.runtime.host.endpoint import client_token, unix_endpoint

    token = [("x-narratoria-token", client_token(unix_endpoint(web.socket)) or "")]
    with grpc.insecure_channel(f"unix://{web.socket}") as channel:
        for method in NEW_METHODS:
            call = channel.unary_unary(f"/narratoria.v1.Narratoria/{method}",
                                       request_serializer=lambda b: b,
                                       response_deserializer=lambda b: b)
            with pytest.raises(grpc.RpcError) as err:
                call(b"\x0a\x05ab", timeout=30, metadata=token)  # a truncated string field
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, err.value)


def test_odd_requests_never_end_in_an_internal_error(client, session):
    odd = ["", "\x00", "x" * 5000, "../" * 50, "char_" + "0" * 40, "char_zz", "café/☃",
           "campaign/" + "y" * 300, "data/" + "z" * 300, "campaign/ui", "data/"]
    calls = []
    for text in odd:
        calls += [lambda t=text: client.get_session_view(t),
                  lambda t=text: client.list_assets(t),
                  lambda t=text: client.get_asset(session.id, t),
                  lambda t=text: client.get_skill_config(t),
                  lambda t=text: client.set_skill_config("dice-roller", {t: t}, [t]),
                  lambda t=text: client.set_skill_config("dice-roller", {"randomSource": t or "?"}),
                  lambda t=text: client.set_skill_enabled(t, True),
                  lambda t=text: client.get_character_portrait(t),
                  lambda t=text: client.save_character(t, b"", t, t),
                  lambda t=text: client.save_character(t, t.encode()),
                  lambda t=text: client.delete_character(t)]
    for call in calls:
        try:
            call()
        except ClientError as exc:
            assert exc.code not in ("UNKNOWN", "INTERNAL"), exc
            assert exc.message.strip()
    # Nothing above saved a setting or made a character.
    fields = json.loads(client.get_skill_config("dice-roller").view_json)["fields"]
    assert all(f["source"] != "set" for f in fields)
    assert not [c for c in client.list_characters() if c.description in odd]
