"""Packaging: the wheel carries resources/, the self-test, the desktop files, install scripts.

The PyInstaller bundle itself is built by ``make package`` (and CI), not here: it takes
minutes. These tests cover what that build relies on and what can be checked in seconds.
"""

from __future__ import annotations

import configparser
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
RESOURCES = REPO_ROOT / "resources"
PACKAGING = REPO_ROOT / "packaging"
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
APP_ID = "io.github.conversation_workbench.Workbench"
SOURCE_PARTS = ("pyproject.toml", "setup.py", "README.md", "workbench", "resources")


def _resource_files() -> list[str]:
    """Files of the checkout's resources/ folder, relative to it."""
    return sorted(
        path.relative_to(RESOURCES).as_posix()
        for path in RESOURCES.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and not any(part.startswith(".") for part in path.relative_to(RESOURCES).parts)
    )


def _run(
    args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


# -- the wheel -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the source tree, offline, with this environment's
    setuptools (a copy: building in place would leave build/ in the checkout)."""
    source = tmp_path_factory.mktemp("source")
    for part in SOURCE_PARTS:
        origin = REPO_ROOT / part
        if origin.is_dir():
            shutil.copytree(
                origin, source / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(origin, source / part)
    out = tmp_path_factory.mktemp("wheel")
    result = _run([
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
        "--disable-pip-version-check", "-q", "-w", str(out), str(source),
    ])
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed with ``pip install --target`` into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    result = _run([
        sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
        "--disable-pip-version-check", "-q", "--target", str(target), str(wheel),
    ])
    assert result.returncode == 0, result.stdout + result.stderr
    return target


def test_wheel_carries_every_resource_file_under_workbench_resources(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        packaged = sorted(
            name.removeprefix("workbench/resources/")
            for name in archive.namelist()
            if name.startswith("workbench/resources/")
        )
        top_level = {name.split("/", 1)[0] for name in archive.namelist()}
    assert packaged == _resource_files()
    assert "resources" not in top_level  # inside the package, not a folder of its own


def test_wheel_declares_the_workbench_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (entry_points_name,) = [
            n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")
        ]
        entry_points = archive.read(entry_points_name).decode()
    parser = configparser.ConfigParser()
    parser.read_string(entry_points)
    assert dict(parser["console_scripts"]) == PYPROJECT["project"]["scripts"]


# Runs with -S (no site-packages): only the installed wheel provides ``workbench``, never
# the checkout's editable install. resources.py and errors.py need nothing else.
_PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from importlib.resources import files
import workbench
from workbench.engine.resources import resource_path

def walk(node, prefix=""):
    for child in node.iterdir():
        if child.is_dir():
            yield from walk(child, prefix + child.name + "/")
        else:
            yield prefix + child.name

print(json.dumps({
    "package": workbench.__file__,
    "version": workbench.__version__,
    "files": sorted(walk(files("workbench") / "resources")),
    "sample": str(resource_path("sample_session.json")),
}))
"""


def test_installed_wheel_finds_its_resources_through_importlib(
    installed: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = _run([sys.executable, "-S", "-c", _PROBE, str(installed)], cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)

    assert Path(found["package"]).is_relative_to(installed)
    assert found["version"] == PYPROJECT["project"]["version"]
    assert found["files"] == _resource_files()
    sample = Path(found["sample"])
    assert sample.is_relative_to(installed)
    assert sample.read_bytes() == (RESOURCES / "sample_session.json").read_bytes()


# -- the self-test -----------------------------------------------------------------------


def test_selftest_command_passes_without_touching_user_folders(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("WORKBENCH_HOME", "WORKBENCH_DB", "QT_QPA_PLATFORM", "DISPLAY",
                     "WAYLAND_DISPLAY")
    }
    env |= {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    result = _run([sys.executable, "-m", "workbench", "--selftest"], cwd=tmp_path, env=env)

    assert result.returncode == 0, result.stdout + result.stderr
    from workbench.gui.selftest import CHECKS

    lines = result.stdout.splitlines()
    for name, _ in CHECKS:
        assert any(line.startswith(f"ok    {name}:") for line in lines), result.stdout
    assert lines[-1] == f"selftest passed: {len(CHECKS)} checks"
    for folder in ("data", "config", "cache"):
        assert not (home / folder / "conversation-workbench").exists()


def test_selftest_fails_when_token_vocabularies_are_missing(
    qapp: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.core import tokens
    from workbench.gui import selftest

    home_before = os.environ.get("WORKBENCH_HOME")
    monkeypatch.setattr(tokens, "get_counter", lambda *a, **k: tokens.TokenCounter(None))
    out = io.StringIO()

    assert selftest.run_selftest(out) == selftest.EXIT_FAILED
    report = out.getvalue()
    assert "FAIL  token encodings:" in report
    assert "bpe-openai" in report
    assert "ok    database" not in report  # stops at the first failure
    assert os.environ.get("WORKBENCH_HOME") == home_before


def test_selftest_names_a_missing_resource_file(
    qapp: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.gui import selftest

    monkeypatch.setattr(
        selftest, "REQUIRED_RESOURCES", (*selftest.REQUIRED_RESOURCES, "icons/missing.svg")
    )
    out = io.StringIO()

    assert selftest.run_selftest(out) == selftest.EXIT_FAILED
    assert "FAIL  resources:" in out.getvalue()
    assert "icons/missing.svg" in out.getvalue()


# -- desktop entry, icon, AppStream metadata ---------------------------------------------


def _desktop_entry(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment, method-assign]  # keys are case-sensitive
    parser.read(path, encoding="utf-8")
    return parser["Desktop Entry"]


def test_desktop_entry_icon_and_metainfo_agree() -> None:
    desktop_path = RESOURCES / f"{APP_ID}.desktop"
    entry = _desktop_entry(desktop_path)
    command = next(iter(PYPROJECT["project"]["scripts"]))
    assert entry["Type"] == "Application"
    assert entry["Exec"].split()[0] == command
    assert (RESOURCES / "icons" / f"{entry['Icon']}.svg").is_file()

    png = (RESOURCES / "icons" / f"{entry['Icon']}.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # build.sh installs it as the 256x256 size: IHDR holds width and height.
    assert int.from_bytes(png[16:20], "big") == int.from_bytes(png[20:24], "big") == 256

    metainfo = ET.parse(PACKAGING / f"{APP_ID}.metainfo.xml").getroot()
    assert metainfo.findtext("id") == desktop_path.stem
    assert metainfo.findtext("launchable") == desktop_path.name
    assert metainfo.findtext("provides/binary") == command
    assert metainfo.findtext("name") == entry["Name"]
    versions = [r.get("version") for r in metainfo.iter("release")]
    assert PYPROJECT["project"]["version"] in versions
    assert metainfo.findtext("project_license") == PYPROJECT["project"]["license"]


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None,
                    reason="desktop-file-validate (desktop-file-utils) is not installed")
def test_desktop_entry_passes_desktop_file_validate() -> None:
    result = _run(["desktop-file-validate", str(RESOURCES / f"{APP_ID}.desktop")])
    assert result.returncode == 0 and "error" not in result.stdout, result.stdout


@pytest.mark.skipif(shutil.which("appstreamcli") is None,
                    reason="appstreamcli (appstream) is not installed")
def test_metainfo_passes_appstream_validation() -> None:
    result = _run(
        ["appstreamcli", "validate", "--no-net", str(PACKAGING / f"{APP_ID}.metainfo.xml")]
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- install.sh / uninstall.sh on a stand-in bundle ----------------------------------------


@pytest.fixture
def fake_bundle(tmp_path: Path) -> Path:
    """A bundle folder as build.sh lays it out, with a shell script for the program."""
    bundle = tmp_path / "unpacked" / "conversation-workbench"
    (bundle / "_internal").mkdir(parents=True)
    (bundle / "_internal" / "library.so").write_bytes(b"stand-in")
    program = bundle / "workbench"
    program.write_text('#!/bin/sh\necho "stand-in workbench $*"\n', encoding="utf-8")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    result = _run(["bash", str(PACKAGING / "stage-desktop-files.sh"), str(bundle)])
    assert result.returncode == 0, result.stderr
    return bundle


def _script_env(home: Path, prefix: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env |= {"HOME": str(home), "PREFIX": str(prefix)}
    return env


def test_install_then_uninstall_leaves_only_the_users_data(
    fake_bundle: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    prefix = tmp_path / "prefix"
    data = home / ".local" / "share" / "conversation-workbench"
    data.mkdir(parents=True)
    (data / "workbench.db").write_bytes(b"conversations")
    env = _script_env(home, prefix)
    app_dir = prefix / "lib" / "conversation-workbench"
    installed_files = [
        prefix / "share" / "applications" / f"{APP_ID}.desktop",
        prefix / "share" / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg",
        prefix / "share" / "icons" / "hicolor" / "256x256" / "apps" / f"{APP_ID}.png",
        prefix / "share" / "metainfo" / f"{APP_ID}.metainfo.xml",
    ]

    for _ in range(2):  # a second run replaces the first installation
        result = _run(["bash", str(fake_bundle / "install.sh")], env=env)
        assert result.returncode == 0, result.stdout + result.stderr

    command = prefix / "bin" / "workbench"
    assert _run([str(command), "--version"]).stdout == "stand-in workbench --version\n"
    assert (app_dir / "_internal" / "library.so").read_bytes() == b"stand-in"
    assert all(path.is_file() for path in installed_files)
    entry = _desktop_entry(installed_files[0])
    assert entry["Exec"] == str(app_dir / "workbench")
    assert entry["Icon"] == APP_ID
    assert installed_files[1].read_bytes() == (RESOURCES / "icons" / f"{APP_ID}.svg").read_bytes()

    result = _run(["bash", str(app_dir / "uninstall.sh")], env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not app_dir.exists()
    assert not command.exists() and not command.is_symlink()
    assert not any(path.exists() for path in installed_files)
    assert (data / "workbench.db").read_bytes() == b"conversations"
    assert str(data) in result.stdout  # it says where the data it kept is


def test_uninstall_refuses_a_folder_that_is_not_an_installation(tmp_path: Path) -> None:
    folder = tmp_path / "lib" / "conversation-workbench"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("keep me", encoding="utf-8")
    shutil.copy2(PACKAGING / "uninstall.sh", folder / "uninstall.sh")

    result = _run(["bash", str(folder / "uninstall.sh")], env=_script_env(tmp_path, tmp_path))

    assert result.returncode != 0
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "keep me"
