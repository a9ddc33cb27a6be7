"""Installing the Foundry module by manifest URL (issue 14): the bridge serves ``module.json``
and the zip it points at; the zip unpacks into a module folder Foundry can load; ``release``
writes the same files; ``python -m build`` builds the bridge."""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import re
import shlex
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest
import yaml
from websockets.datastructures import Headers
from websockets.http11 import Request

import bridge
from bridge import release
from bridge import server as bridge_server
from bridge.cli import main
from bridge.http import Pages
from bridge.session import hash_token, new_token
from bridge.status import Presence
from bridge.store import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "foundry-module"
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
IMPORT = re.compile(r"""(?:^|\s)(?:import|export)\s[^;]*?from\s*["'](\.[^"']+)["']|import\s*\(?\s*["'](\.[^"']+)["']""")


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:
        assert resp.status == 200
        return resp.read()


def unpack(zip_bytes: bytes, modules: Path) -> Path:
    """Unpack as Foundry's installer does: into Data/modules/<id>/."""
    folder = modules / release.MODULE_ID
    with zipfile.ZipFile(io.BytesIO(zip_bytes)) as archive:
        for name in archive.namelist():
            assert not name.startswith("/") and ".." not in Path(name).parts, name
        archive.extractall(folder)
    return folder


def unresolved_imports(folder: Path) -> list[str]:
    """Relative imports of the module's scripts that name no file in ``folder``."""
    missing = []
    for script in folder.rglob("*.js"):
        for match in IMPORT.finditer(script.read_text(encoding="utf-8")):
            target = (script.parent / (match.group(1) or match.group(2))).resolve()
            if not target.is_file():
                missing.append(f"{script.relative_to(folder)} -> {match.group(1) or match.group(2)}")
    return missing


def assert_loadable(folder: Path) -> dict:
    """The unpacked module loads: a valid manifest listing only files that exist, every
    relative import resolving, and no dev files. Returns the manifest."""
    assert release.manifest_problems(folder) == []
    assert unresolved_imports(folder) == []
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert not [n for n in names if n.startswith(("node_modules/", "test/")) or n.startswith("package")]
    manifest = json.loads((folder / "module.json").read_text())
    assert manifest["version"] == bridge.__version__
    assert (folder / manifest["readme"]).is_file() and (folder / manifest["license"]).is_file()
    return manifest


class TestManifestInTheRepo:
    def test_module_version_is_the_bridge_version(self):
        manifest = json.loads((MODULE / "module.json").read_text())
        assert manifest["version"] == bridge.__version__
        package = json.loads((MODULE / "package.json").read_text())
        assert package["version"] == bridge.__version__

    def test_the_checked_in_manifest_names_no_url_every_built_one_names_the_repository(self):
        # Foundry's ModuleManifestData: url, bugs and changelog are web URLs; readme and license
        # may be paths inside the package. The checked-in file names no place to install from:
        # each built manifest gets them from the repository and where it is served.
        manifest = json.loads((MODULE / "module.json").read_text())
        assert not {"url", "bugs", "changelog", "manifest", "download"} & set(manifest)
        assert (MODULE / manifest["readme"]).is_file()
        assert (MODULE / manifest["license"]).is_file()
        built = release.manifest(MODULE, "http://127.0.0.1:8765")
        assert (built["url"], built["bugs"], built["changelog"]) == (
            "https://github.com/fate-bridge/fate-bridge", "https://github.com/fate-bridge/fate-bridge/issues",
            f"https://github.com/fate-bridge/fate-bridge/blob/v{bridge.__version__}/CHANGELOG.md")

    def test_the_zip_leaves_out_tests_node_modules_and_npm_files(self):
        files = release.runtime_files(MODULE)
        assert "scripts/module.js" in files and "lang/en.json" in files and "LICENSE" in files
        assert not [f for f in files if f.startswith(("test/", "node_modules/", "package"))]


class TestServedByTheBridge:
    async def test_manifest_download_unpacks_into_a_loadable_module(self, store, tmp_path):
        server = await bridge_server.start(store, "127.0.0.1", 0)
        try:
            port = server.sockets[0].getsockname()[1]
            manifest_url = f"http://127.0.0.1:{port}/module/module.json"
            served = json.loads(await asyncio.to_thread(get, manifest_url))
            assert served["manifest"] == manifest_url
            assert served["download"] == f"http://127.0.0.1:{port}/module/fate-bridge.zip"
            zip_bytes = await asyncio.to_thread(get, served["download"])
        finally:
            server.close()
            await server.wait_closed()

        folder = unpack(zip_bytes, tmp_path / "Data" / "modules")
        unpacked = assert_loadable(folder)
        assert unpacked == served  # the zip carries the manifest it was downloaded by

    async def test_public_url_sets_where_the_manifest_points(self, store):
        public = "https://foundry.example.org/fate-bridge/"
        server = await bridge_server.start(store, "127.0.0.1", 0, public_url=public)
        try:
            port = server.sockets[0].getsockname()[1]
            served = json.loads(await asyncio.to_thread(get, f"http://127.0.0.1:{port}/module/module.json"))
        finally:
            server.close()
            await server.wait_closed()
        assert served["manifest"] == public + "module/module.json"
        assert served["download"] == public + "module/fate-bridge.zip"

    async def test_landing_page_links_health_overlay_and_manifest(self, store):
        token, key = new_token(), await store.viewer_key("w", new_token())
        await store.set_token("w", hash_token(token))
        server = await bridge_server.start(store, "127.0.0.1", 0)
        try:
            port = server.sockets[0].getsockname()[1]
            page = (await asyncio.to_thread(get, f"http://127.0.0.1:{port}/")).decode()
        finally:
            server.close()
            await server.wait_closed()
        assert f"fate-bridge {bridge.__version__}" in page
        for link in ('href="/healthz"', 'href="/overlay"', f'href="http://127.0.0.1:{port}/module/module.json"'):
            assert link in page
        assert token not in page and key not in page and hash_token(token) not in page
        assert 'href="/verify"' in page and "Next step" not in page  # a world is registered

    async def test_landing_page_says_the_next_step_while_no_world_is_registered(self):
        """Issue 25: a GM who opens the bridge's address before `world add` is told to run it."""
        store = await SQLiteStore.open(":memory:")
        try:
            pages = Pages(store, Presence(), lambda world: 0, origins=None, public_url="http://127.0.0.1:8765")
            page = (await pages(None, Request("/", Headers()))).body.decode()
            assert "Next step: register a world." in page
            assert "<code>fate-bridge world add YOUR_WORLD_ID</code>" in page and 'href="/verify"' in page
            await store.add_world("w", None)
            assert "Next step" not in (await pages(None, Request("/", Headers()))).body.decode()
        finally:
            await store.close()


class TestRelease:
    def test_release_writes_manifest_and_zip_for_the_public_address(self, tmp_path, capsys):
        out = tmp_path / "dist"
        assert main(["release", "--out", str(out), "--public-url", "https://fb.example.org/x"]) == 0
        manifest = json.loads((out / "module.json").read_text())
        assert manifest["manifest"] == "https://fb.example.org/x/module/module.json"
        assert manifest["download"] == "https://fb.example.org/x/module/fate-bridge.zip"
        assert "Foundry installs it from https://fb.example.org/x/module/module.json" in capsys.readouterr().err
        folder = unpack((out / "fate-bridge.zip").read_bytes(), tmp_path / "modules")
        assert assert_loadable(folder) == manifest

    def test_release_without_an_address_points_at_the_github_release(self, tmp_path, capsys):
        out = tmp_path / "dist"
        assert main(["release", "--out", str(out)]) == 0
        manifest = json.loads((out / "module.json").read_text())
        assert manifest["manifest"] == "https://github.com/fate-bridge/fate-bridge/releases/latest/download/module.json"
        assert manifest["download"] == (f"https://github.com/fate-bridge/fate-bridge/releases/download/"
                                        f"v{bridge.__version__}/fate-bridge.zip")
        assert f"Foundry installs it from {manifest['manifest']}" in capsys.readouterr().err

    def test_a_tag_that_is_not_this_version_writes_nothing(self, tmp_path, capsys):
        assert main(["release", "--out", str(tmp_path), "--tag", "v99.0.0"]) == 2
        assert (f"the tag 'v99.0.0' is not this version's: the bridge and the module are {bridge.__version__}, "
                f"so the tag must be 'v{bridge.__version__}'") in capsys.readouterr().err
        assert not (tmp_path / "module.json").exists()

    @pytest.mark.parametrize("repository", ["fate-bridge", "a/b/c", "https://github.com/a/b", "a/..", "-x/y z"])
    def test_a_repository_not_written_owner_slash_repo_is_one_clear_line(self, tmp_path, capsys, repository):
        with pytest.raises(SystemExit) as exited:
            main(["release", "--out", str(tmp_path), "--repository", repository])
        assert exited.value.code == 2
        assert f"{repository!r} is not a GitHub repository: write it as OWNER/REPO" in capsys.readouterr().err
        assert not (tmp_path / "module.json").exists()

    def test_release_zip_is_the_same_bytes_each_time(self, tmp_path):
        assert release.package("https://a.example/").zip == release.package("https://a.example/").zip

    def test_a_bad_public_url_is_one_clear_line(self, tmp_path, capsys):
        with pytest.raises(SystemExit) as exited:
            main(["release", "--out", str(tmp_path), "--public-url", "foundry.example.org"])
        assert exited.value.code == 2
        assert "is not a bridge address" in capsys.readouterr().err
        assert not (tmp_path / "module.json").exists()

    def test_manifest_problems_names_a_listed_file_that_is_missing(self, tmp_path):
        folder = unpack(release.package(None).zip, tmp_path)
        (folder / "styles" / "fate-bridge.css").unlink()
        assert release.manifest_problems(folder) == ["styles/fate-bridge.css is listed but missing"]

    def test_python_m_build_makes_a_wheel_with_the_runtime_files(self, tmp_path):
        done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        (wheel,) = tmp_path.glob(f"fate_bridge-{bridge.__version__}-*.whl")
        names = set(zipfile.ZipFile(wheel).namelist())
        # every file of the package (templates moved to bridge/rulesets/<id>/templates/, the
        # fairness cards and /verify page, the German catalog): the .pot is only for translators
        runtime = {path.relative_to(ROOT).as_posix() for path in (ROOT / "bridge").rglob("*")
                   if path.is_file() and "__pycache__" not in path.parts and path.name != "messages.pot"}
        assert {"bridge/http.py", "bridge/overlay/index.html", "bridge/rulesets/sohl/templates/sohl_fate.html.j2",
                "bridge/fairness/templates/reveal.html.j2", "bridge/locale/de/LC_MESSAGES/messages.po"} <= runtime
        assert runtime - names == set()
        assert not [n for n in names if n.startswith("tests/")]


class TestReleaseWorkflow:
    """``.github/workflows/release.yml``: on a tag ``v*`` it installs the bridge, runs
    ``fate-bridge release`` and publishes the two files it writes as the tag's release assets.
    The command is read from the file and run here as GitHub would run it for this version's
    tag in a repository ``someone/fork``."""

    GITHUB = {"github.repository": "someone/fork", "github.ref_name": f"v{bridge.__version__}",
              "github.token": "TOKEN"}

    @pytest.fixture
    def workflow(self) -> dict:
        return yaml.safe_load(WORKFLOW.read_text())

    def expand(self, text: str) -> str:
        """``text`` with its ``${{ name }}`` expressions replaced from :attr:`GITHUB`."""
        return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: self.GITHUB[m.group(1)], text)

    def steps(self, workflow: dict) -> dict[str, list[str]]:
        """Each step's ``run`` as argv, its ``$NAME`` taken from the job's and step's env."""
        (job,) = workflow["jobs"].values()
        runs = {}
        for step in job["steps"]:
            if "run" in step:
                env = {name: self.expand(value) for name, value in {**job.get("env", {}),
                                                                     **step.get("env", {})}.items()}
                argv = shlex.split(step["run"])
                runs[argv[0]] = [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], arg) for arg in argv]  # noqa: B023 (used at once)
        return runs

    def test_it_runs_on_a_version_tag_and_may_write_releases(self, workflow):
        # PyYAML reads the key `on` as YAML 1.1's true
        assert workflow[True] == {"push": {"tags": ["v*"]}}
        assert workflow["permissions"] == {"contents": "write"}
        (job,) = workflow["jobs"].values()
        assert [step.get("uses", "").split("@")[0] for step in job["steps"][:2]] == [
            "actions/checkout", "actions/setup-python"]

    def test_the_release_command_writes_the_files_it_publishes(self, workflow, tmp_path, monkeypatch, capsys):
        runs = self.steps(workflow)
        # editable: `release` reads foundry-module/ beside the bridge package
        assert runs["python"] == ["python", "-m", "pip", "install", "-e", "."]
        command = runs["fate-bridge"]
        assert command == ["fate-bridge", "release", "--out", "dist", "--repository", "someone/fork",
                           "--tag", f"v{bridge.__version__}"]
        monkeypatch.chdir(tmp_path)
        assert main(command[1:]) == 0
        written = capsys.readouterr().out.split()
        assert written == ["dist/module.json", "dist/fate-bridge.zip"]
        publish = runs["gh"]
        assert publish[:4] == ["gh", "release", "create", f"v{bridge.__version__}"]
        assert [arg for arg in publish if arg.startswith("dist/")] == written
        assert "--verify-tag" in publish  # a release only for a tag that was pushed

        manifest = json.loads((tmp_path / "dist" / "module.json").read_text())
        # Foundry's Install Module takes the newest release's module.json; it names this tag's zip
        assert manifest["manifest"] == "https://github.com/someone/fork/releases/latest/download/module.json"
        assert manifest["download"] == (f"https://github.com/someone/fork/releases/download/"
                                        f"v{bridge.__version__}/fate-bridge.zip")
        assert manifest["url"] == "https://github.com/someone/fork"
        assert manifest["bugs"] == "https://github.com/someone/fork/issues"
        assert [Path(name).name for name in written] == [release.MANIFEST_NAME, release.ZIP_NAME]
        folder = unpack((tmp_path / "dist" / "fate-bridge.zip").read_bytes(), tmp_path / "modules")
        assert assert_loadable(folder) == manifest


class TestTheServedManifestIgnoresTheHostHeader:
    """Anyone may send any Host: the manifest, the zip's manifest and the landing page name
    ``--public-url`` or the address the bridge listens on, never the Host a request carries."""

    FORGED = "attacker.example:666"

    async def served(self, store, tmp_path: Path, **options) -> tuple[int, dict, dict, str]:
        """The bridge's port, and, each asked for with a forged Host: the manifest, the manifest
        inside the zip, the landing page."""
        server = await bridge_server.start(store, "127.0.0.1", 0, **options)
        try:
            port = server.sockets[0].getsockname()[1]
            forged = {"Host": self.FORGED}
            manifest = json.loads(await asyncio.to_thread(get_with, port, "/module/module.json", forged))
            zipped = unpack(await asyncio.to_thread(get_with, port, "/module/fate-bridge.zip", forged),
                            tmp_path)
            page = (await asyncio.to_thread(get_with, port, "/", forged)).decode()
        finally:
            server.close()
            await server.wait_closed()
        return port, manifest, json.loads((zipped / "module.json").read_text()), page

    async def test_without_public_url_the_listening_address(self, store, tmp_path):
        port, manifest, zipped, page = await self.served(store, tmp_path)
        assert manifest["manifest"] == f"http://127.0.0.1:{port}/module/module.json"
        assert manifest["download"] == f"http://127.0.0.1:{port}/module/fate-bridge.zip"
        assert zipped == manifest
        assert f'href="http://127.0.0.1:{port}/module/module.json"' in page
        assert "attacker" not in json.dumps(manifest) + page

    async def test_with_public_url_that_address(self, store, tmp_path):
        _, manifest, zipped, page = await self.served(store, tmp_path, public_url="https://fb.example.org/fate-bridge/")
        assert manifest["manifest"] == "https://fb.example.org/fate-bridge/module/module.json"
        assert manifest["download"] == "https://fb.example.org/fate-bridge/module/fate-bridge.zip"
        assert zipped == manifest
        assert 'href="https://fb.example.org/fate-bridge/module/module.json"' in page
        assert "attacker" not in json.dumps(manifest) + page


def get_with(port: int, path: str, headers: dict[str, str]) -> bytes:
    """GET ``path`` from 127.0.0.1:``port`` sending ``headers`` (urllib would send its own Host)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 200, (path, response.status)
        return response.read()
    finally:
        conn.close()
