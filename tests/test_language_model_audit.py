"""`audit-model` on the user's own causal LM: a real Hugging Face folder (GPT-2 built from a config,
trained here, saved as safetensors) and a PyTorch module with logits(token_ids), scored in an
isolated worker; malicious folders refused with exit 2 before anything of theirs runs."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
from pathlib import Path

import pytest
import torch

from targets.text_corpus import make_text_corpus

CORPUS = make_text_corpus(n_candidates=40, n_pool=40, n_test=4, seed=21)


@pytest.fixture
def cli(cli_in_process):
    """In this process (the conftest convention): these tests read what `audit-model` prints, writes and exits
    with; the model is still scored in its own isolated worker process, and a refused folder must be refused
    before anything of it runs, in this process as in a fresh one."""
    return cli_in_process


def _write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory) -> Path:
    """A 1-layer GPT-2 (from a config, never the hub) trained to memorise 16 records; tokenizer.json beside it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from targets.text_models import train_tokenizer

    folder = tmp_path_factory.mktemp("hf") / "model"
    tokenizer = train_tokenizer([r.text for r in CORPUS.pool], vocab_size=300)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_positions=64, n_embd=48, n_layer=1, n_head=2)
    )
    ids = torch.as_tensor(
        [
            tokenizer.encode(r.text).ids[:64] + [0] * (64 - len(tokenizer.encode(r.text).ids[:64]))
            for r in CORPUS.candidates[:16]
        ]
    )
    mask = (ids != 0).long()
    labels = ids.masked_fill(mask == 0, -100)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(60):
        optimizer.zero_grad()
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        optimizer.step()
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture
def texts(tmp_path) -> tuple[Path, Path]:
    members = _write_jsonl(tmp_path / "members.jsonl", [r.text for r in CORPUS.candidates[:16]])
    nonmembers = _write_jsonl(tmp_path / "nonmembers.jsonl", [r.text for r in CORPUS.candidates[16:32]])
    return members, nonmembers


def _results(tmp_path: Path) -> dict:
    (found,) = list((tmp_path / "runs").glob("*language-model*/results.json"))
    return json.loads(found.read_text())


def test_a_hugging_face_folder_that_memorised_its_members_is_caught(cli, tmp_path, hf_folder, texts):
    members, nonmembers = texts
    done = cli(
        "audit-model",
        "--hf-model",
        str(hf_folder),
        "--members",
        str(members),
        "--nonmembers",
        str(nonmembers),
        "--out",
        "runs",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--quiet",
    )
    assert done.returncode == 1, done.stderr[-2000:]  # LEAKS on the user's own model is a finding
    results = _results(tmp_path)
    from audit.machinery.policy import validate_results

    validate_results(results)  # what `gate` and `report` read
    attacks = {a["name"]: a for a in results["targets"][0]["attacks"]}
    assert set(attacks) == {"lm_loss", "zlib_ratio", "min_k", "min_k_plus_plus"}  # no reference model given
    assert attacks["lm_loss"]["auc"] > 0.95
    assert attacks["lm_loss"]["epsilon_lb"]["one_run"] is None  # the user's split is not a coin flip
    assert results["data"]["model"]["model_type"] == "gpt2"
    assert results["text"]["blind_baseline"]["distribution_shift"] is False
    assert results["verdict"]["status"] == "fail" and not results["verdict"]["passed"]
    assert not results["verdict"]["claims"] and [e["status"] for e in results["verdict"]["leakage"]] == ["leaks"]
    assert "LEAKS" in json.dumps(results["verdict"])


def test_a_pytorch_module_with_logits_is_audited_in_a_worker(cli, tmp_path, texts):
    from targets.text_models import train_tokenizer

    tokenizer = train_tokenizer([r.text for r in CORPUS.pool], vocab_size=300)
    tokenizer.save(str(tmp_path / "tok.json"))
    (tmp_path / "my_lm.py").write_text(
        "import torch\nfrom targets.text_models import TinyCausalLM\n"
        f"def build():\n    torch.manual_seed(0)\n    return TinyCausalLM({tokenizer.get_vocab_size()}, d_model=16, "
        "n_layers=1, n_heads=2, max_length=64).eval()\n",
        encoding="utf-8",
    )
    members, nonmembers = texts
    done = cli(
        "audit-model",
        "--lm-module",
        "my_lm:build",
        "--tokenizer",
        "tok.json",
        "--members",
        str(members),
        "--nonmembers",
        str(nonmembers),
        "--max-length",
        "64",
        "--claimed-epsilon",
        "2",
        "--out",
        "runs",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--quiet",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = _results(tmp_path)
    assert results["verdict"]["status"] == "inconclusive"  # a claim, but no coin-flip membership to test it
    assert all(0.2 < a["auc"] < 0.8 for a in results["targets"][0]["attacks"])  # untrained: near chance


def test_a_shifted_member_set_is_flagged_by_the_blind_baseline(tmp_path, hf_folder):
    from audit.model_audits.language_model_audit import LanguageModelInputs, audit_language_model

    members = _write_jsonl(tmp_path / "m.jsonl", [r.text + " signed dr smith ." for r in CORPUS.candidates[16:36]])
    nonmembers = _write_jsonl(tmp_path / "n.jsonl", [r.text for r in CORPUS.pool[:20]])
    results = audit_language_model(
        LanguageModelInputs(
            members=members, nonmembers=nonmembers, hf_model=hf_folder, max_length=64, attack_names=("lm_loss",)
        )
    )
    assert results["text"]["blind_baseline"]["distribution_shift"] is True
    assert any("distribution shift" in note for note in results["notes"])


# --- malicious folders: refused (exit 2), nothing of theirs executed ----------------------------------


class _Payload:
    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _copy(hf_folder: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "evil"
    shutil.copytree(hf_folder, folder)
    return folder


def _refused(cli, tmp_path, folder: Path, texts, marker: Path) -> str:
    members, nonmembers = texts
    done = cli(
        "audit-model",
        "--hf-model",
        str(folder),
        "--members",
        str(members),
        "--nonmembers",
        str(nonmembers),
        "--out",
        "runs",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--quiet",
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert not marker.exists()
    assert not list((tmp_path / "runs").glob("*language-model*")) if (tmp_path / "runs").exists() else True
    return done.stderr


def test_pickle_weights_are_refused_unopened(cli, tmp_path, hf_folder, texts):
    folder = _copy(hf_folder, tmp_path)
    marker = tmp_path / "pwned"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(str(marker))))
    assert "pickle" in _refused(cli, tmp_path, folder, texts, marker)


def test_remote_code_is_refused_unrun(cli, tmp_path, hf_folder, texts):
    folder = _copy(hf_folder, tmp_path)
    marker = tmp_path / "pwned"
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "evil_model.EvilModel"}
    (folder / "config.json").write_text(json.dumps(config))
    assert "auto_map" in _refused(cli, tmp_path, folder, texts, marker)
    (folder / "evil_model.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    del config["auto_map"]
    (folder / "config.json").write_text(json.dumps(config))
    assert "code" in _refused(cli, tmp_path, folder, texts, marker)


def test_a_huge_config_is_refused(cli, tmp_path, hf_folder, texts):
    folder = _copy(hf_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["vocab_size"] = 10**9
    (folder / "config.json").write_text(json.dumps(config))
    assert "vocab_size" in _refused(cli, tmp_path, folder, texts, tmp_path / "none")
    config["vocab_size"], config["n_embd"], config["n_layer"] = 500_000, 32_768, 200
    (folder / "config.json").write_text(json.dumps(config))
    assert "parameters" in _refused(cli, tmp_path, folder, texts, tmp_path / "none")


def test_a_forged_safetensors_header_is_refused(cli, tmp_path, hf_folder, texts):
    folder = _copy(hf_folder, tmp_path)
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    assert "header" in _refused(cli, tmp_path, folder, texts, tmp_path / "none")


def test_tokenizer_files_pointing_outside_are_refused(cli, tmp_path, hf_folder, texts):
    folder = _copy(hf_folder, tmp_path)
    outside = tmp_path / "outside.json"
    shutil.move(folder / "tokenizer.json", outside)
    (folder / "tokenizer.json").symlink_to(outside)
    assert "symbolic link" in _refused(cli, tmp_path, folder, texts, tmp_path / "none")
    (folder / "tokenizer.json").unlink()
    shutil.copy(outside, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_file": "../outside.json"}))
    assert "outside" in _refused(cli, tmp_path, folder, texts, tmp_path / "none")


def test_bad_text_files_are_refused(cli, tmp_path, hf_folder):
    (tmp_path / "m.jsonl").write_text('{"body": "x"}\n')
    (tmp_path / "n.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    done = cli(
        "audit-model",
        "--hf-model",
        str(hf_folder),
        "--members",
        "m.jsonl",
        "--nonmembers",
        "n.jsonl",
        "--out",
        "runs",
        "--quiet",
    )
    assert done.returncode == 2 and "'text'" in done.stderr and "line 1" in done.stderr
