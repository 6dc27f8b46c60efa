"""Hostile run folders (issue 26, class "a run folder that points elsewhere"): `report` and `gate`
read a run folder through one reader (audit/machinery/safe_files.py) — no symlink below the
folder, regular files only, bounded sizes, never blocking. A figure that links to a secret file,
a `figures/` that links to another folder, a FIFO or a device named like a figure or a results
file: exit 2 naming it, within seconds, nothing written and the secret never copied anywhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hostile_support import assert_refused, run_main, snapshot

from audit.errors import AuditInputError
from audit.machinery.safe_files import read_regular_file, read_run_file, run_folder_files

pytestmark = pytest.mark.security

RUN_EXAMPLE = json.loads((Path(__file__).parent / "data" / "results_smoke_example.json").read_text())
SECRET = "TOP-SECRET-CONTENTS-4711"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64  # the signature is all the reader checks; the page embeds it as is


def _run_folder(root: Path) -> Path:
    folder = root / "run"
    (folder / "figures").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(RUN_EXAMPLE))
    (root / "policy.yaml").write_text("rules:\n  max_auc: 0.99\n")
    return folder


def _secret(root: Path) -> Path:
    path = root.parent / f"{root.name}-secret.txt"  # outside the working folder
    path.write_text(SECRET)
    return path


def _figure_link(root, folder):
    (folder / "figures" / "roc_all.png").symlink_to(_secret(root))
    return "roc_all.png"


def _figure_link_relative(root, folder):
    secret = _secret(root)
    (folder / "figures" / "privacy_utility.png").symlink_to(os.path.relpath(secret, folder / "figures"))
    return "privacy_utility.png"


def _figure_link_to_system_file(root, folder):
    (folder / "figures" / "other.png").symlink_to("/etc/passwd")
    return "other.png"


def _figures_folder_link(root, folder):
    (folder / "figures").rmdir()
    elsewhere = root.parent / f"{root.name}-elsewhere"
    elsewhere.mkdir(exist_ok=True)
    (elsewhere / "roc_all.png").write_bytes(PNG + SECRET.encode())
    (folder / "figures").symlink_to(elsewhere)
    return "figures"


def _figure_fifo(root, folder):
    os.mkfifo(folder / "figures" / "roc_eps_1.png")
    return "roc_eps_1.png"


def _figure_socket_name_dangling(root, folder):
    (folder / "figures" / "roc_eps_2.png").symlink_to(root / "does-not-exist")
    return "roc_eps_2.png"


def _figure_device(root, folder):
    (folder / "figures" / "synthetic_x.png").symlink_to("/dev/zero")
    return "synthetic_x.png"


def _figure_folder(root, folder):
    (folder / "figures" / "nested.png").mkdir()
    return "nested.png"


def _figure_not_png(root, folder):
    (folder / "figures" / "roc_all.png").write_text(SECRET)
    return "roc_all.png"


def _figure_huge(root, folder):
    with open(folder / "figures" / "roc_all.png", "wb") as handle:  # sparse: no disk used
        handle.write(PNG)
        handle.truncate(65 * 2**20)
    return "roc_all.png"


FIGURE_CASES = {
    "figure links to a file outside": _figure_link,
    "figure links outside by a relative path": _figure_link_relative,
    "figure links to /etc/passwd": _figure_link_to_system_file,
    "figures/ links to another folder": _figures_folder_link,
    "figure is a FIFO": _figure_fifo,
    "figure is a dangling link": _figure_socket_name_dangling,
    "figure links to a device": _figure_device,
    "figure is a folder": _figure_folder,
    "figure is not a PNG": _figure_not_png,
    "figure is 65 MiB": _figure_huge,
}


def _outputs_hold_secret(root: Path) -> bool:
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file() or path.stat().st_size > 2**26:
                continue
            if SECRET.encode() in path.read_bytes() and "secret" not in name and "elsewhere" not in dirpath:
                if not (name == "roc_all.png" and path.parent.name == "figures"):
                    return True
    return False


@pytest.mark.parametrize("command", ["report", "gate"])
@pytest.mark.parametrize("case", list(FIGURE_CASES))
def test_a_run_folder_that_points_elsewhere_is_refused(tmp_path, monkeypatch, capsys, command, case):
    monkeypatch.chdir(tmp_path)
    folder = _run_folder(tmp_path)
    name = FIGURE_CASES[case](tmp_path, folder)
    args = ["report", "run/results.json"] if command == "report" else ["gate", "run", "--policy", "policy.yaml"]
    assert_refused(capsys, args, name, folder=tmp_path, limit=30)
    assert not _outputs_hold_secret(tmp_path)


RESULTS_CASES = ["link to a results file outside", "FIFO", "link to /dev/zero", "folder", "dangling link"]


def _results_entry(tmp_path: Path, folder: Path, case: str) -> None:
    target = folder / "results.json"
    target.unlink()
    if case == "link to a results file outside":
        outside = tmp_path.parent / f"{tmp_path.name}-results.json"
        outside.write_text(json.dumps(RUN_EXAMPLE))
        target.symlink_to(outside)
    elif case == "FIFO":
        os.mkfifo(target)
    elif case == "link to /dev/zero":
        target.symlink_to("/dev/zero")
    elif case == "folder":
        target.mkdir()
    else:
        target.symlink_to(tmp_path / "nothing-here")


@pytest.mark.parametrize("command", ["report", "gate"])
@pytest.mark.parametrize("case", RESULTS_CASES)
def test_a_results_file_inside_a_run_folder_must_be_a_regular_file(tmp_path, monkeypatch, capsys, command, case):
    monkeypatch.chdir(tmp_path)
    folder = _run_folder(tmp_path)
    _results_entry(tmp_path, folder, case)
    args = (
        ["report", "run/results.json"]
        if command == "report" and case not in ("folder",)
        else ["report", "run"]
        if command == "report"
        else ["gate", "run", "--policy", "policy.yaml"]
    )
    if command == "report" and case == "link to a results file outside":
        args = ["report", "run"]  # named inside a folder: the link is refused (named directly, it is the user's choice)
    assert_refused(capsys, args, "results.json", folder=tmp_path, limit=30)


@pytest.mark.parametrize("kind", ["canary-audit", "conformance"])
def test_a_single_audit_folder_holding_a_fifo_is_refused_without_blocking(tmp_path, monkeypatch, capsys, kind):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.yaml").write_text("rules:\n  max_epsilon_lb: 50.0\n")
    (tmp_path / "audit").mkdir()
    os.mkfifo(tmp_path / "audit" / f"{kind}.json")
    assert_refused(capsys, ["gate", "audit", "--policy", "policy.yaml"], f"{kind}.json", folder=tmp_path, limit=30)


def test_policy_and_config_fifos_are_refused_without_blocking(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _run_folder(tmp_path)
    os.mkfifo(tmp_path / "fifo.yaml")
    assert_refused(capsys, ["gate", "run", "--policy", "fifo.yaml"], "fifo.yaml", folder=tmp_path, limit=30)
    assert_refused(capsys, ["run", "--config", "fifo.yaml", "--dry-run"], "fifo.yaml", folder=tmp_path, limit=30)


def test_a_clean_run_folder_still_renders_its_figures(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    folder = _run_folder(tmp_path)
    (folder / "figures" / "roc_all.png").write_bytes(PNG)
    code, _ = run_main(["report", "run/results.json", "--out", "out"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert (tmp_path / "out" / "report.html").is_file()


# --------------------------------------------------------------------------------------------
# the reader itself


def test_the_reader_refuses_links_fifos_devices_and_big_files(tmp_path):
    regular = tmp_path / "a.txt"
    regular.write_text("x")
    (tmp_path / "link").symlink_to(regular)
    os.mkfifo(tmp_path / "fifo")
    assert read_regular_file(regular, "a") == b"x"
    assert read_regular_file(tmp_path / "link", "link") == b"x"  # a path the user named may be a link
    with pytest.raises(AuditInputError, match="symbolic link"):
        read_regular_file(tmp_path / "link", "link", follow=False)
    with pytest.raises(AuditInputError, match="FIFO"):
        read_regular_file(tmp_path / "fifo", "fifo")
    with pytest.raises(AuditInputError, match="character device"):
        read_regular_file("/dev/null", "null")
    with pytest.raises(AuditInputError, match="larger than"):
        read_regular_file(regular, "a", limit=0)
    with pytest.raises(AuditInputError, match="outside the run folder"):
        read_run_file(tmp_path / "run", regular)
    with pytest.raises(AuditInputError, match="not a regular file"):
        run_folder_files(tmp_path, tmp_path, "*")
    assert snapshot(tmp_path)  # nothing was consumed from the FIFO or changed
