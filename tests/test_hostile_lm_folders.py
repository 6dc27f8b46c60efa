"""Hostile Hugging Face folders for `audit-model --hf-model` (issue 26, second round): pickle weights,
remote code, huge configs, files that point outside the folder, FIFOs. Each is exit 2, one line
naming the file or field, nothing executed (a payload that would create a marker file never runs)
and nothing written. The folder is inspected in the command's own process before any worker
starts (targets/language_model_sources.py); a hypothesis fuzz test of the inspector closes the
class: whatever the folder, the answer is a valid folder or one AuditInputError, and a folder it
accepts obeys every rule."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import struct
from pathlib import Path

import pytest
from hostile_support import assert_refused
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.errors import AuditInputError

pytestmark = pytest.mark.security

TEXTS = [f"patient number {i} lives at {i} main street . phone {i} {i} {i} ." for i in range(8)]


class _Payload:
    """Unpickling this creates the marker file: the proof that a pickle was never loaded."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory) -> Path:
    """A GPT-2-shaped folder written by hand (config.json, a safetensors file, tokenizer.json): the
    inspector reads names, JSON and safetensors headers only, so no model is built or trained here."""
    import numpy as np
    from safetensors.numpy import save_file

    from targets.text_models import train_tokenizer

    folder = tmp_path_factory.mktemp("lm") / "model"
    folder.mkdir()
    tokenizer = train_tokenizer(TEXTS, vocab_size=80)
    vocab = tokenizer.get_vocab_size()
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "gpt2",
                "architectures": ["GPT2LMHeadModel"],
                "vocab_size": vocab,
                "n_positions": 32,
                "n_embd": 8,
                "n_layer": 1,
                "n_head": 2,
                "bos_token_id": 2,
                "eos_token_id": 3,
            }
        )
    )
    save_file(
        {
            "transformer.wte.weight": np.zeros((vocab, 8), dtype=np.float32),
            "transformer.wpe.weight": np.zeros((32, 8), dtype=np.float32),
        },
        str(folder / "model.safetensors"),
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture
def work(tmp_path, monkeypatch, tiny_folder):
    for name in ("members", "nonmembers"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS))
    shutil.copytree(tiny_folder, tmp_path / "model")
    (tmp_path / "outside.txt").write_text("a file outside the model folder\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _args(folder: str = "model", *extra: str) -> list[str]:
    return [
        "audit-model",
        "--hf-model",
        folder,
        "--members",
        "members.jsonl",
        "--nonmembers",
        "nonmembers.jsonl",
        "--out",
        "runs",
        "--tracking-uri",
        "sqlite:///mlflow.db",
        "--quiet",
        *extra,
    ]


def _config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _pickle(name: str):
    def make(folder: Path, marker: Path) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(_Payload(str(marker))))

    return make


def _write(name: str, text: str):
    def make(folder: Path, marker: Path) -> None:
        (folder / name).write_text(text)

    return make


def _set(**changes):
    return lambda folder, marker: _config(folder, **changes)


def _symlink(name: str, target: str):
    def make(folder: Path, marker: Path) -> None:
        path = folder / name
        if path.exists():
            path.unlink()
        path.symlink_to(Path(target) if target.startswith("/") else folder.parent / target)

    return make


def _fifo(name: str):
    def make(folder: Path, marker: Path) -> None:
        path = folder / name
        if path.exists():
            path.unlink()
        os.mkfifo(path)

    return make


def _tokenizer_config(**fields):
    return lambda folder, marker: (folder / "tokenizer_config.json").write_text(json.dumps(fields))


def _index(weight_map: dict):
    return lambda folder, marker: (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )


def _forged_header(folder: Path, marker: Path) -> None:
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 2**62) + b"{}")


def _huge_config_file(folder: Path, marker: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    config["padding"] = "x" * (2 << 20)
    (folder / "config.json").write_text(json.dumps(config))


def _remove(name: str):
    return lambda folder, marker: (folder / name).unlink()


CASES = {
    # pickle-format weights or objects, never unpickled
    "pytorch_model.bin": (_pickle("pytorch_model.bin"), "pytorch_model.bin"),
    "model.pt": (_pickle("model.pt"), "model.pt"),
    "weights.pth": (_pickle("weights.pth"), "weights.pth"),
    "last.ckpt": (_pickle("last.ckpt"), "last.ckpt"),
    "state.pkl": (_pickle("state.pkl"), "state.pkl"),
    "optimizer.pickle": (_pickle("optimizer.pickle"), "optimizer.pickle"),
    "arrays.npy": (_pickle("arrays.npy"), "arrays.npy"),
    "upper-case .BIN": (_pickle("PYTORCH_MODEL.BIN"), "PYTORCH_MODEL.BIN"),
    "pickle in a subfolder": (_pickle("checkpoint-1/pytorch_model.bin"), "pytorch_model.bin"),
    # remote code
    "auto_map in config.json": (_set(auto_map={"AutoModelForCausalLM": "modeling_evil.Evil"}), "auto_map"),
    "trust_remote_code in config.json": (_set(trust_remote_code=True), "config.json"),
    "auto_map nested in config.json": (_set(text_config={"auto_map": {"AutoConfig": "x.Y"}}), "auto_map"),
    "auto_map in tokenizer_config.json": (
        _tokenizer_config(auto_map={"AutoTokenizer": ["evil.T", None]}),
        "tokenizer_config.json",
    ),
    "trust_remote_code in generation_config.json": (
        _write("generation_config.json", '{"trust_remote_code": true}'),
        "generation_config.json",
    ),
    "a Python module": (_write("modeling_evil.py", "open('pwned', 'w').close()\n"), "modeling_evil.py"),
    "a shared library": (_write("kernel.so", "\x7fELF"), "kernel.so"),
    "custom_pipelines": (_set(custom_pipelines={"text-generation": {"impl": "evil.Pipe"}}), "custom_pipelines"),
    "quantization_config": (_set(quantization_config={"quant_method": "bitsandbytes"}), "quantization_config"),
    "a PEFT adapter": (_write("adapter_config.json", '{"base_model_name_or_path": "/etc"}'), "adapter_config.json"),
    # huge configs
    "n_layer 10⁶": (_set(n_layer=10**6), "n_layer"),
    "vocab_size 10⁹": (_set(vocab_size=10**9), "vocab_size"),
    "n_embd 10⁹": (_set(n_embd=10**9), "n_embd"),
    "n_positions 10¹²": (_set(n_positions=10**12), "n_positions"),
    "vocab_size as a float": (_set(vocab_size=1e9), "vocab_size"),
    "vocab_size as text": (_set(vocab_size="1000000000"), "vocab_size"),
    "negative n_layer": (_set(n_layer=-4), "n_layer"),
    "a huge nested text_config": (_set(text_config={"vocab_size": 10**9}), "vocab_size"),
    "any integer 10¹⁵": (_set(bos_token_id=10**15), "bos_token_id"),
    "3·10⁹ parameters by config": (_set(n_embd=65_536, n_layer=512), "parameters"),
    "a 2 MiB config.json": (_huge_config_file, "config.json"),
    "duplicate keys": (_write("config.json", '{"model_type": "gpt2", "model_type": "llama"}'), "config.json"),
    "config.json not JSON": (_write("config.json", "{model_type: gpt2"), "config.json"),
    "config.json a list": (_write("config.json", "[1, 2]"), "config.json"),
    "an unknown model_type": (_set(model_type="evil"), "model_type"),
    "a forged safetensors header": (_forged_header, "model.safetensors"),
    # files that point outside the folder
    "tokenizer vocab_file ../": (_tokenizer_config(vocab_file="../outside.txt"), "vocab_file"),
    "tokenizer_file absolute": (_tokenizer_config(tokenizer_file="/etc/passwd"), "tokenizer_file"),
    "merges_file ../../": (_tokenizer_config(merges_file="../../../etc/hosts"), "merges_file"),
    "tokenizer.json a symlink outside": (_symlink("tokenizer.json", "outside.txt"), "tokenizer.json"),
    "config.json a symlink to /etc/passwd": (_symlink("config.json", "/etc/passwd"), "config.json"),
    "a subfolder linking to /etc": (_symlink("extra", "/etc"), "extra"),
    "a dangling symlink": (_symlink("special_tokens_map.json", "missing.json"), "special_tokens_map.json"),
    "shard index ../outside": (_index({"w": "../outside.safetensors"}), "weight_map"),
    "shard index naming a .bin": (_index({"w": "pytorch_model.bin"}), "weight_map"),
    "shard index naming a missing shard": (_index({"w": "model-00002.safetensors"}), "weight_map"),
    "shard index absolute": (_index({"w": "/etc/passwd.safetensors"}), "weight_map"),
    # not regular files
    "a FIFO as model.safetensors": (_fifo("model.safetensors"), "model.safetensors"),
    "a FIFO as config.json": (_fifo("config.json"), "config.json"),
    "a FIFO as tokenizer.json": (_fifo("tokenizer.json"), "tokenizer.json"),
    "a stray FIFO": (_fifo("pipe"), "pipe"),
    # incomplete folders
    "no config.json": (_remove("config.json"), "config.json"),
    "no tokenizer.json": (_remove("tokenizer.json"), "tokenizer.json"),
    "no weights": (_remove("model.safetensors"), "safetensors"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malicious_model_folder_is_refused_unrun(work, capsys, case):
    make, names = CASES[case]
    marker = work / "pwned"
    make(work / "model", marker)
    assert_refused(capsys, _args(), names, folder=work, limit=60)
    assert not marker.exists(), "the folder's payload ran"
    assert not (work / "runs").exists() and not (work / "mlflow.db").exists()


def _folder_a_symlink(work: Path) -> None:
    (work / "model").rename(work / "real")
    (work / "model").symlink_to(work / "real")


def _folder_a_file(work: Path) -> None:
    shutil.rmtree(work / "model")
    (work / "model").write_text("x")


@pytest.mark.parametrize(
    "make, names",
    [
        (_folder_a_symlink, "symbolic link"),
        (_folder_a_file, "not a folder"),
        (lambda work: shutil.rmtree(work / "model"), "not a folder"),
    ],
    ids=["the folder a symlink", "a file", "missing"],
)
def test_a_model_path_that_is_not_a_folder_is_refused(work, capsys, make, names):
    make(work)
    assert_refused(capsys, _args(), names, folder=work)


def test_a_folder_name_with_terminal_escapes_is_shown_escaped(work, capsys):
    evil = "model\x1b]0;owned\x07\x1b[2J"
    (work / "model").rename(work / evil)
    (work / evil / "config.json").unlink()
    err = assert_refused(capsys, _args(evil), "config.json", folder=work)
    assert "\\x1b]0;owned\\x07" in err


COUNT_CASES = [
    (["--max-length", "1"], "--max-length"),
    (["--max-length", str(10**7)], "--max-length"),
    (["--batch-size", "0"], "--batch-size"),
    (["--batch-size", str(10**6)], "--batch-size"),
    # every count in range, but one batch's logits are 65,536 × 10⁶ tokens × the vocabulary
    (["--batch-size", "65536", "--max-length", "1000000"], "needs about"),
]


@pytest.mark.parametrize("extra, names", COUNT_CASES, ids=[" ".join(e) for e, _ in COUNT_CASES])
def test_language_model_counts_are_in_the_range_table(work, capsys, extra, names):
    assert_refused(capsys, _args("model", *extra), names, folder=work)


def test_a_texts_file_outside_the_range_is_refused(work, capsys):
    import pandas as pd

    pd.DataFrame({"text": ["only one"]}).to_parquet(work / "one.parquet")
    args = _args()
    args[args.index("members.jsonl")] = "one.parquet"
    assert_refused(capsys, args, "one.parquet", folder=work)


def _tokenizer_fifo(work: Path) -> str:
    os.mkfifo(work / "tok.json")
    return "tok.json"


def _tokenizer_link(work: Path) -> str:
    (work / "tok.json").symlink_to(work / "model" / "tokenizer.json")
    return "tok.json"


def _tokenizer_huge(work: Path) -> str:
    with open(work / "tok.json", "wb") as handle:  # sparse: 65 MiB of nothing, no disk used
        handle.truncate((64 << 20) + 1)
    return "tok.json"


@pytest.mark.parametrize(
    "make",
    [_tokenizer_fifo, _tokenizer_link, _tokenizer_huge, lambda work: "missing.json"],
    ids=["a FIFO", "a symlink", "65 MiB", "missing"],
)
def test_an_lm_module_tokenizer_that_is_not_a_plain_small_file_is_refused(work, capsys, make):
    name = make(work)
    args = [
        "audit-model",
        "--lm-module",
        "evil_lm:build",
        "--tokenizer",
        name,
        "--members",
        "members.jsonl",
        "--nonmembers",
        "nonmembers.jsonl",
        "--out",
        "runs",
        "--tracking-uri",
        "sqlite:///mlflow.db",
        "--quiet",
    ]
    (work / "evil_lm.py").write_text("open('pwned', 'w').close()\ndef build():\n    raise SystemExit\n")
    assert_refused(capsys, args, "--tokenizer", folder=work)
    assert not (work / "pwned").exists(), "the module was imported before its inputs were checked"


def test_a_clean_folder_passes_the_inspection(tiny_folder):
    """The battery refuses only what it should: the untouched folder is a valid causal LM."""
    from targets.language_model_sources import inspect_hf_folder

    folder = inspect_hf_folder(tiny_folder)
    assert folder.model_type == "gpt2" and folder.parameters > 0 and folder.weight_files == ["model.safetensors"]


# ------------------------------------------------------------------------------------------------
# Fuzz: generated folders through the inspector (in-process: it runs nothing of the folder)

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
SIZE_KEYS = ["vocab_size", "n_embd", "n_layer", "n_head", "n_positions", "hidden_size", "num_hidden_layers"]
config_values = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from([10**6, 10**9, 10**12, 0, -1, 512, 513]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.none(),
    st.booleans(),
    st.dictionaries(st.sampled_from(SIZE_KEYS + ["auto_map", "x"]), st.integers(-5, 2**31), max_size=2),
)
file_names = st.sampled_from(
    [
        "model.safetensors",
        "pytorch_model.bin",
        "x.PT",
        "evil.py",
        "notes.txt",
        "adapter_config.json",
        "tokenizer_config.json",
        "sub/model.ckpt",
        "a.npz",
        "model.safetensors.index.json",
        "generation_config.json",
    ]
)
file_kinds = st.sampled_from(["keep", "bytes", "json-out", "symlink-out", "fifo"])


@FUZZ
@given(
    changes=st.dictionaries(
        st.sampled_from(
            SIZE_KEYS + ["model_type", "auto_map", "trust_remote_code", "quantization_config", "bos_token_id"]
        ),
        config_values,
        max_size=3,
    ),
    extra=st.lists(st.tuples(file_names, file_kinds), max_size=3),
)
def test_fuzz_the_model_folder_inspector(tmp_path_factory, tiny_folder, changes, extra):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from targets import language_model_sources as lm

    root = tmp_path_factory.mktemp("fuzz")
    folder = root / "model"
    shutil.copytree(tiny_folder, folder)
    (root / "outside.txt").write_text("outside")
    _config(folder, **changes)
    for name, kind in extra:
        if kind == "keep":
            continue
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() or path.is_symlink():
            path.unlink()
        if kind == "symlink-out":
            path.symlink_to(root / "outside.txt")
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "json-out":
            path.write_text(json.dumps({"vocab_file": "../outside.txt", "weight_map": {"w": "../outside.safetensors"}}))
        elif kind == "bytes":
            path.write_bytes(b"\x80\x04K\x01.")
    try:
        inspected = lm.inspect_hf_folder(folder)
    except AuditInputError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 600
        return
    # Accepted: then every rule holds.
    names = [p for p in folder.rglob("*")]
    assert not any(p.is_symlink() for p in names)
    assert all(p.is_dir() or p.is_file() for p in names)
    assert not any(p.suffix.lower() in lm.PICKLE_SUFFIXES + lm.CODE_SUFFIXES for p in names if p.is_file())
    assert not any(p.name in lm.REFUSED_FILES for p in names)
    config = inspected.config
    assert "auto_map" not in json.dumps(config) and not config.get("trust_remote_code")
    assert config.get("model_type") in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    for key, value in lm._walk_values(config):
        if key in lm.SIZE_LIMITS and value is not None:
            assert isinstance(value, int) and 0 <= value <= lm.SIZE_LIMITS[key]
        if isinstance(value, int) and not isinstance(value, bool):
            assert value <= lm.ANY_INT_LIMIT
    assert inspected.parameters <= lm.DEFAULT_MAX_PARAMETERS
