"""Campaign packages (.narratoria/.zip): pack, open safely, validate, ingest and list.

Unsafe packages are built here with zipfile, entry by entry, the way a hostile
or careless tool would write them.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from narratoria.runtime.campaign import (CampaignError, ingest, list_campaigns, open_campaign,
                                         pack, validate)
from narratoria.runtime.campaign.package import extract
from narratoria.runtime.embedding import shared_local
from narratoria.runtime.store import PersistenceStore
from narratoria.runtime.turn.grounding import lore_scope

from conftest import TESTS

TINY = TESTS / "fixtures" / "campaigns" / "tiny"
BROKEN = TESTS / "fixtures" / "campaigns" / "broken"
NARRATORIA = Path(sys.executable).parent / "narratoria"
MANIFEST = b"title: Zipped\nversion: '1'\n"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(NARRATORIA), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def zip_with(path: Path, entries: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in entries:
            archive.writestr(info, data)
    return path


@pytest.fixture
def tiny_package(tmp_path: Path) -> Path:
    return pack(TINY, tmp_path / "out" / "tiny.narratoria").output


# -- pack ------------------------------------------------------------------------------

def test_pack_writes_the_campaign_under_campaign_with_a_version_file_and_no_hidden_files(
        tiny_package: Path):
    names = zipfile.ZipFile(tiny_package).namelist()
    assert names[0] == "version.txt"
    assert "campaign/campaign.yml" in names and "campaign/stats/hidden/suspicion.json" in names
    assert "campaign/.notes.txt" not in names and (TINY / ".notes.txt").exists()
    assert names[1:] == sorted(names[1:])


def test_pack_is_deterministic(tmp_path: Path):
    first = pack(TINY, tmp_path / "a.narratoria").output.read_bytes()
    copy = shutil.copytree(TINY, tmp_path / "tiny")
    os.utime(copy / "campaign.yml", (0, 0))  # a different mtime changes nothing
    second = pack(copy, tmp_path / "b.narratoria").output.read_bytes()
    assert first == second


def test_pack_refuses_an_invalid_campaign_and_writes_nothing(tmp_path: Path):
    with pytest.raises(CampaignError) as caught:
        pack(BROKEN, tmp_path / "broken.narratoria")
    assert any(p.file == "campaign.yml" and p.field == "version" for p in caught.value.problems)
    assert list(tmp_path.iterdir()) == []


def test_pack_refuses_a_symbolic_link(tmp_path: Path):
    tiny = Path(shutil.copytree(TINY, tmp_path / "tiny"))
    (tiny / "lore" / "outside.txt").symlink_to("/etc/hostname")
    with pytest.raises(CampaignError, match="symbolic link") as caught:
        pack(tiny, tmp_path / "tiny.narratoria")
    assert caught.value.problems[0].file == "lore/outside.txt"


# -- a package wherever a folder is ----------------------------------------------------

def test_a_package_validates_like_its_folder(tiny_package: Path):
    report, folder = validate(tiny_package), validate(TINY)
    assert report.ok and report.root == tiny_package
    assert report.manifest == folder.manifest  # same id ("tiny", from the package's name)
    assert [f.relative for f in report.files] == [f.relative for f in folder.files]


def test_a_plain_zip_with_the_campaign_at_its_root_or_in_one_folder_opens(tmp_path: Path):
    at_root = zip_with(tmp_path / "zipped.zip", [("campaign.yml", MANIFEST),
                                                 ("lore/a.md", b"Hello.\n")])
    nested = zip_with(tmp_path / "nested.zip", [("mine/campaign.yml", MANIFEST),
                                                ("mine/lore/a.md", b"Hello.\n"),
                                                ("__MACOSX/mine/._a.md", b"\0")])
    for package, campaign_id in ((at_root, "zipped"), (nested, "nested")):
        with open_campaign(package) as folder:
            assert (folder / "lore" / "a.md").read_text() == "Hello.\n"
        assert not folder.exists()  # extracted for the block only
        report = validate(package)
        assert report.ok and report.manifest.id == campaign_id


def test_ingesting_a_package_stores_the_same_chunks_as_its_folder(tiny_package: Path, tmp_path: Path):
    with PersistenceStore(tmp_path / "narratoria.duckdb", shared_local()) as store:
        result = ingest(tiny_package, store)
        assert result.campaign_id == "tiny" and result.chunks_embedded > 0
        again = ingest(TINY, store)  # same files, same chunk ids: nothing re-embedded
        assert again.chunks_embedded == 0 and again.chunks_reused == result.text_chunks
        records = store.playthrough(lore_scope("tiny")).exact_match("lore_chunk")
        assert {r.file_path for r in records} >= {"character_merlin.txt", "stats/health.json"}


# -- refusals --------------------------------------------------------------------------

def symlink_entry(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


@pytest.mark.parametrize(("entry", "reason"), [
    (("../x", b"escaped"), "'..' in the path"),
    (("lore/../../x", b"escaped"), "'..' in the path"),
    (("/abs", b"escaped"), "absolute path"),
    (("C:/windows/x", b"escaped"), "absolute path"),
    (symlink_entry("lore/link.txt", "/etc/passwd"), "symbolic link"),
    (("LORE/A.md", b"twin"), "case-insensitive"),
])
def test_an_entry_that_escapes_its_folder_is_refused_and_named(tmp_path: Path, entry, reason):
    package = zip_with(tmp_path / "bad.narratoria",
                       [("campaign.yml", MANIFEST), ("lore/a.md", b"Hi.\n"), entry])
    name = entry[0] if isinstance(entry[0], str) else entry[0].filename
    with pytest.raises(CampaignError, match=reason) as caught:
        with open_campaign(package):
            pass
    assert caught.value.problems[0].file == name
    assert not (tmp_path / "x").exists() and not Path("/abs").exists()
    report = validate(package)  # the same refusal, as a report
    assert not report.ok and report.problems[0].file == name


def test_a_package_bigger_than_the_limit_unpacked_is_refused(tmp_path: Path):
    package = zip_with(tmp_path / "bomb.zip", [("campaign.yml", MANIFEST),
                                               ("lore/zeros.txt", b"\0" * 100_000)])
    assert package.stat().st_size < 10_000  # compresses well: the size that counts is unpacked
    with pytest.raises(CampaignError, match="more than 50000 bytes") as caught:
        extract(package, tmp_path / "out", max_bytes=50_000)
    assert caught.value.problems[0].file == "lore/zeros.txt"
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_not_a_zip_is_a_problem_not_a_crash(tmp_path: Path):
    package = tmp_path / "fake.narratoria"
    package.write_text("not a zip")
    report = validate(package)
    assert not report.ok and "not a readable zip package" in report.problems[0].message


# -- discovery -------------------------------------------------------------------------

def test_list_finds_folders_and_packages_and_skips_everything_else(tmp_path: Path):
    user = tmp_path / "user"
    shutil.copytree(TINY, user / "tiny")
    shutil.copytree(BROKEN, user / "broken")
    pack(TINY, user / "packed.narratoria")
    (user / "README.md").write_text("not a campaign")
    (user / "notes").mkdir()  # a folder without a manifest
    entries = list_campaigns([("builtin", tmp_path / "none"), ("user", user)])
    assert [(e.path.name, e.kind, e.id, e.valid) for e in entries] == [
        ("broken", "folder", None, False), ("packed.narratoria", "package", "packed", True),
        ("tiny", "folder", "tiny", True)]
    assert any("version: required field is missing" in err for err in entries[0].errors)


# -- the CLI ---------------------------------------------------------------------------

def test_cli_pack_prints_the_package_and_validate_accepts_it(tmp_path: Path):
    out = tmp_path / "tiny.narratoria"
    proc = cli("campaigns", "pack", str(TINY), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out)
    doc = json.loads(cli("campaigns", "pack", str(TINY), "-o", str(out), "--json").stdout)
    assert doc["status"] == "packed" and doc["campaign"] == "tiny" and doc["files"] == 9
    proc = cli("campaigns", "validate", str(out), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"] is True


def test_cli_pack_of_an_invalid_campaign_fails_with_its_problems(tmp_path: Path):
    proc = cli("campaigns", "pack", str(BROKEN), "-o", str(tmp_path / "b.narratoria"))
    assert proc.returncode == 1
    assert "campaign.yml:1: version: required field is missing" in proc.stderr
    assert "not packed" in proc.stderr and not (tmp_path / "b.narratoria").exists()


def test_cli_validate_refuses_an_escaping_package(tmp_path: Path):
    package = zip_with(tmp_path / "bad.zip", [("campaign.yml", MANIFEST), ("../evil", b"x")])
    proc = cli("campaigns", "validate", str(package))
    assert proc.returncode == 1
    assert "../evil:1: -: '..' in the path" in proc.stdout


def test_cli_list_json_over_the_user_folder(tmp_path: Path):
    user = tmp_path / "data" / "narratoria" / "campaigns"
    shutil.copytree(TINY, user / "tiny")
    pack(TINY, user / "tower.narratoria")
    (user / "README.md").write_text("not a campaign")
    builtin = tmp_path / "builtin"
    builtin.mkdir()
    (builtin / "README.md").write_text("built-in campaigns arrive later")
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "NARRATORIA_BUILTIN_CAMPAIGNS": str(builtin)}
    proc = cli("campaigns", "list", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["userDir"] == str(user)
    assert [(c["source"], c["kind"], c["id"], c["title"], c["version"], c["valid"])
            for c in doc["campaigns"]] == [
        ("user", "folder", "tiny", "The Tiny Tower", "1.0.0", True),
        ("user", "package", "tower", "The Tiny Tower", "1.0.0", True)]
    text = cli("campaigns", "list", env=env).stdout
    assert "tower\t1.0.0\tThe Tiny Tower\t[user]" in text


def test_cli_list_of_the_repository_campaigns_folder_skips_its_readme():
    proc = cli("campaigns", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert all(c["source"] == "builtin" and c["valid"] for c in doc["campaigns"])
    assert not any(Path(c["path"]).name == "README.md" for c in doc["campaigns"])
