"""Hostile model and text inputs (issue #39 item 4): each ends in exit 2 naming the file.

A real (untrained, 1-layer, 8-wide) GPT-2 folder is written with transformers' own
`save_pretrained`, then broken one way per case; `load_hf_causal_lm` — what the isolated worker
runs — must refuse it with an AuditInputError naming the file (the worker turns that into exit 2,
tests/test_workers.py), never load a mostly random model or raise anything else. Deeply nested
JSON (config, text rows, results) is refused before json.loads recurses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.errors import AuditInputError

pytestmark = pytest.mark.security

TEXTS = [f"record {i}: alice paid {i * 7} euros to bob on day {i % 28}" for i in range(40)]


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from targets.text_models import train_tokenizer

    folder = tmp_path_factory.mktemp("gpt2") / "model"
    tokenizer = train_tokenizer(TEXTS, vocab_size=80)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=tokenizer.get_vocab_size(), n_positions=32, n_embd=8, n_layer=1, n_head=2)
    )
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "model"
    shutil.copytree(folder, target)
    return target


def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _bert_type(folder: Path) -> None:
    _edit_config(folder, model_type="bert", architectures=["BertLMHeadModel"], is_decoder=True)


def _truncated_weights(folder: Path) -> None:
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])


def _malformed_tokenizer(folder: Path) -> None:
    (folder / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": 3}}')


def _tokenizer_larger_than_vocab(folder: Path) -> None:
    _edit_config(folder, vocab_size=10)
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    tensors = {k: (v[:10].clone() if v.shape and v.shape[0] > 10 and "wte" in k else v) for k, v in tensors.items()}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


BROKEN = {
    "GPT-2 weights under model_type bert": (_bert_type, "config.json"),
    "truncated safetensors": (_truncated_weights, "cannot be loaded"),
    "malformed tokenizer.json": (_malformed_tokenizer, "tokenizer.json"),
    "tokenizer larger than the vocabulary": (_tokenizer_larger_than_vocab, "tokenizer.json"),
}


@pytest.mark.slow  # loads transformers and a real model per case (~30 s with the fixture)
@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_a_broken_model_folder_is_refused_by_the_worker_naming_the_file(gpt2_folder, tmp_path, case):
    from targets.language_model_sources import load_hf_causal_lm

    breaker, words = BROKEN[case]
    folder = _copy(gpt2_folder, tmp_path)
    breaker(folder)
    with pytest.raises(AuditInputError) as refused:
        load_hf_causal_lm(folder)
    assert words in str(refused.value) and "--hf-model" in str(refused.value)


@pytest.mark.slow
def test_the_intact_folder_loads(gpt2_folder):
    from targets.language_model_sources import load_hf_causal_lm

    model, tokenizer = load_hf_causal_lm(gpt2_folder)
    assert tokenizer.get_vocab_size() > 10 and model.model.config.model_type == "gpt2"


@pytest.mark.parametrize("key", ["n_positions", "max_position_embeddings", "n_ctx"])
def test_one_position_is_refused_by_the_inspector(gpt2_folder, tmp_path, key):
    from targets.language_model_sources import inspect_hf_folder

    folder = _copy(gpt2_folder, tmp_path)
    _edit_config(folder, **{key: 1})
    with pytest.raises(AuditInputError, match=key):
        inspect_hf_folder(folder)


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "generation_config.json"])
def test_deeply_nested_json_in_a_model_folder_is_exit_2_not_recursion(gpt2_folder, tmp_path, name):
    from targets.language_model_sources import inspect_hf_folder

    folder = _copy(gpt2_folder, tmp_path)
    deep = "[" * 50_000 + "]" * 50_000
    if name == "config.json":
        config = (folder / "config.json").read_text().rstrip().rstrip("}") + f', "x": {deep}}}'
        (folder / name).write_text(config)
    else:
        (folder / name).write_text(f'{{"x": {deep}}}')
    with pytest.raises(AuditInputError, match="deep|JSON"):
        inspect_hf_folder(folder)


@pytest.mark.parametrize(
    "line",
    [
        '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"text": "ok", "meta": ' + '{"a": ' * 5_000 + "1" + "}" * 5_000 + "}",
    ],
    ids=["deep array", "deep objects"],
)
def test_deeply_nested_text_rows_are_exit_2(tmp_path, line):
    from audit.model_audits.language_model_audit import read_texts

    path = tmp_path / "texts.jsonl"
    path.write_text('{"text": "a"}\n' + line + "\n")
    with pytest.raises(AuditInputError, match="line 2"):
        read_texts(path, "--members")


def test_a_deeply_nested_results_file_is_exit_2(tmp_path):
    from audit.machinery.input_files import load_json_file

    path = tmp_path / "results.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(AuditInputError, match="deep"):
        load_json_file(path, "--results")


@pytest.mark.parametrize(
    "text, depth", [("[]", 1), ('{"a": [1, {"b": 2}]}', 3), ('"[[[["', 0), ('["\\"[[", [[]]]', 3), ("", 0)]
)
def test_json_depth_counts_brackets_outside_strings(text, depth):
    from audit.machinery.input_files import json_depth

    assert json_depth(text) == depth
