"""Every result file carries a digest of its content, signed where a key is configured
(audit/machinery/result_integrity.py); `gate` and `report` recompute it through one reader
(audit.dp_validation.result_files.read_result_file) and refuse an edited file — a results.json and a
canary-audit JSON alike — with exit 2 and the word "edited" (docs/gate.md, "Integrity"). A policy's
`require_signature` (or a configured key) fails a gate on an unsigned or wrongly signed file, exit 1.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hostile_support import assert_refused, run_main

from audit.errors import AuditInputError
from audit.machinery.result_integrity import (
    ENV_KEY,
    ENV_VERIFY,
    canonical_bytes,
    check_integrity,
    signing_key,
    verification_key,
    with_integrity,
)

DATA = Path(__file__).parent / "data"
RUN_EXAMPLE = json.loads((DATA / "results_smoke_example.json").read_text())
CANARY = json.loads((DATA / "audit_results" / "current" / "canary-audit.json").read_text())
SECRET = "a-shared-secret-of-the-ci-runner"


@pytest.fixture
def no_key(monkeypatch):
    monkeypatch.delenv(ENV_KEY, raising=False)
    monkeypatch.delenv(ENV_VERIFY, raising=False)


def test_the_digest_covers_the_content_not_its_formatting(no_key):
    written = with_integrity(RUN_EXAMPLE, None)
    reformatted = json.loads(json.dumps(dict(reversed(list(written.items()))), indent=4))
    assert check_integrity(reformatted, None).state == "intact"
    assert canonical_bytes(written) == canonical_bytes(RUN_EXAMPLE)  # the field itself is not covered
    edited = copy.deepcopy(written)
    edited["verdict"]["status"] = "pass"
    outcome = check_integrity(edited, None)
    assert outcome.edited and "edited" in outcome.sentence
    assert check_integrity(RUN_EXAMPLE, None).state == "no digest"
    assert "written by an older version" in check_integrity(RUN_EXAMPLE, None).sentence


def test_an_hmac_signature_verifies_with_its_key_only():
    key = signing_key({ENV_KEY: SECRET})
    signed = with_integrity(CANARY, key)
    assert signed["integrity"]["signature"]["algorithm"] == "hmac-sha256"
    assert SECRET not in json.dumps(signed)  # the key never reaches the file
    assert check_integrity(signed, key).signature == "valid"
    other = signing_key({ENV_KEY: "another-secret-of-16-chars"})
    assert check_integrity(signed, other).signature == "invalid"
    assert check_integrity(signed, None).signature == "not checked"
    assert check_integrity(with_integrity(CANARY, None), key).signature == "unsigned"
    forged = copy.deepcopy(signed)  # a forger who recomputes the SHA-256 cannot recompute the HMAC
    forged["claimed_epsilon"] = 50.0
    forged["integrity"]["sha256"] = with_integrity(forged, None)["integrity"]["sha256"]
    assert check_integrity(forged, key).state == "intact"
    assert check_integrity(forged, key).signature == "invalid"


def test_an_ed25519_signature_verifies_with_the_public_key(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    (tmp_path / "private.pem").write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (tmp_path / "public.pem").write_bytes(
        private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    signer = signing_key({ENV_KEY: f"ed25519:{tmp_path / 'private.pem'}"})
    signed = with_integrity(CANARY, signer)
    assert signed["integrity"]["signature"]["algorithm"] == "ed25519"
    verifier = verification_key({ENV_VERIFY: str(tmp_path / "public.pem")})
    assert verifier.private is None and check_integrity(signed, verifier).signature == "valid"
    stranger = Ed25519PrivateKey.generate()
    (tmp_path / "stranger.pem").write_bytes(
        stranger.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    assert (
        check_integrity(signed, verification_key({ENV_VERIFY: str(tmp_path / "stranger.pem")})).signature == "invalid"
    )


@pytest.mark.parametrize(
    "environ, names",
    [
        ({ENV_KEY: "short"}, ENV_KEY),
        ({ENV_KEY: "ed25519:/nonexistent/key.pem"}, ENV_KEY),
        ({ENV_VERIFY: "/etc/hostname"}, ENV_VERIFY),
    ],
)
def test_a_malformed_key_is_bad_input_naming_the_variable(environ, names):
    with pytest.raises(AuditInputError) as raised:
        verification_key(environ)
    assert names in str(raised.value)


@pytest.fixture
def gate_dir(tmp_path, monkeypatch, no_key):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.yaml").write_text("rules:\n  max_epsilon_lb: 50.0\n  fail_on_violation: true\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text(json.dumps(with_integrity(RUN_EXAMPLE, None)))
    (tmp_path / "canary-audit.json").write_text(json.dumps(with_integrity(CANARY, None)))
    return tmp_path


def _edit(path: Path, change) -> None:
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content, indent=1))


EDITS = {
    "results.json says pass": ("run/results.json", lambda r: r["verdict"].update(status="pass", passed=True)),
    "results.json with a lower AUC": ("run/results.json", lambda r: r["targets"][0]["attacks"][0].update(auc=0.5)),
    "canary-audit says pass": ("canary-audit.json", lambda r: r["verdict"].update(status="pass", passed=True)),
    "canary-audit with a smaller bound": (
        "canary-audit.json",
        lambda r: r.update(epsilon_lower_bound=r["epsilon_lower_bound"] - 0.25),
    ),
}


@pytest.mark.parametrize("command", ["gate", "report"])
@pytest.mark.parametrize("name", list(EDITS))
def test_an_edited_file_of_any_kind_is_refused_as_edited(gate_dir, capsys, command, name):
    path, change = EDITS[name]
    if command == "report" and path != "run/results.json":
        pytest.skip("report refuses a single-audit file by name (it re-renders results.json only)")
    _edit(gate_dir / path, change)
    args = (
        ["gate", path, "--policy", "policy.yaml", "--out", "gated"]
        if command == "gate"
        else ["report", path, "--out", "gated"]
    )
    err = assert_refused(capsys, args, Path(path).name, folder=gate_dir)
    assert "edited after privacy-audit wrote it" in err
    assert not (gate_dir / "gated").exists()


def test_a_reformatted_file_is_not_edited_and_an_old_file_is_noted(gate_dir, capsys):
    content = json.loads((gate_dir / "canary-audit.json").read_text())
    (gate_dir / "canary-audit.json").write_text(json.dumps(content, indent=8, sort_keys=True))
    code, _ = run_main(["gate", "canary-audit.json", "--policy", "policy.yaml", "--out", "gated"])
    out, err = capsys.readouterr()
    assert code == 0, err + out
    assert "integrity: the file matches its digest; it is not signed" in out
    gated = json.loads((gate_dir / "gated" / "canary-audit.json").read_text())
    assert check_integrity(gated, None).state == "intact"  # the gate's own output carries its digest
    (gate_dir / "old").mkdir()
    (gate_dir / "old" / "canary-audit.json").write_text(json.dumps(CANARY))
    code, _ = run_main(["gate", "old", "--policy", "policy.yaml", "--out", "gated-old"])
    out, err = capsys.readouterr()
    assert code == 0, err + out
    assert "no digest (written by an older version)" in " ".join(out.split())


@pytest.mark.slow
def test_require_signature_fails_an_unsigned_or_wrongly_signed_file(gate_dir, capsys, monkeypatch):
    (gate_dir / "signed.yaml").write_text("rules:\n  require_signature: true\n  fail_on_violation: true\n")
    monkeypatch.setenv(ENV_KEY, SECRET)
    signed = with_integrity(CANARY, signing_key())
    (gate_dir / "trusted").mkdir()
    (gate_dir / "trusted" / "canary-audit.json").write_text(json.dumps(signed))
    code, _ = run_main(["gate", "trusted", "--policy", "signed.yaml", "--out", "g1"])
    out, err = capsys.readouterr()
    assert code == 0, err + out
    assert "signed by the configured key" in out
    code, _ = run_main(["gate", "canary-audit.json", "--policy", "signed.yaml", "--out", "g2"])  # unsigned
    out, err = capsys.readouterr()
    assert code == 1, err + out
    checks = json.loads((gate_dir / "g2" / "canary-audit.json").read_text())["policy_evaluation"]["checks"]
    (rule,) = [c for c in checks if c["rule"] == "require_signature"]
    assert rule["status"] == "fail" and "not signed" in rule["message"]
    monkeypatch.setenv(ENV_KEY, "the-wrong-secret-for-this-file")
    code, _ = run_main(["gate", "trusted", "--policy", "signed.yaml", "--out", "g3"])
    out, err = capsys.readouterr()
    assert code == 1, err + out
    assert "signed with another key" in out
    monkeypatch.delenv(ENV_KEY)  # required by the policy, but no key here to check it: not a pass
    code, _ = run_main(["gate", "trusted", "--policy", "signed.yaml", "--out", "g4"])
    out, err = capsys.readouterr()
    assert code == 1, err + out


def test_a_configured_key_requires_a_signature_unless_the_policy_waives_it(gate_dir, capsys, monkeypatch):
    monkeypatch.setenv(ENV_KEY, SECRET)
    code, _ = run_main(["gate", "canary-audit.json", "--policy", "policy.yaml", "--out", "g1"])
    out, err = capsys.readouterr()
    assert code == 1, err + out
    (gate_dir / "waived.yaml").write_text("rules:\n  max_epsilon_lb: 50.0\n  require_signature: false\n")
    code, _ = run_main(["gate", "canary-audit.json", "--policy", "waived.yaml", "--out", "g2"])
    out, err = capsys.readouterr()
    assert code == 0, err + out


def test_a_malformed_signing_key_is_refused_before_a_run_folder_exists(tmp_path, monkeypatch):
    from audit.machinery.run_directory import StagedRunDirectory

    monkeypatch.setenv(ENV_KEY, "short")
    with pytest.raises(AuditInputError) as raised:
        StagedRunDirectory(tmp_path / "runs", "smoke").create()
    assert ENV_KEY in str(raised.value)
    assert not (tmp_path / "runs").exists()
