"""The user's own causal language model: a local Hugging Face folder or a PyTorch module with
`logits(token_ids)`, inspected before anything is loaded and then loaded safely.

`inspect_hf_folder` runs in the audit's own process and executes nothing from the folder: it reads
file names, JSON files (size-capped, duplicate keys refused) and safetensors headers (8-byte length
+ JSON, capped). It refuses, naming the file:
* any symbolic link inside the folder (a tokenizer or weight file that resolves elsewhere);
* pickle-format weights or objects (.bin, .pt, .pth, .ckpt, .pkl, .pickle, .joblib, .npy, .npz):
  unpickling runs code, and transformers would fall back to them;
* any Python file, an `auto_map` entry or `trust_remote_code` in a config (remote code);
* a `model_type` transformers has no causal-LM class for;
* configs whose sizes would make `from_pretrained` allocate absurd memory (huge vocab, width,
  depth, positions) or a parameter count above `max_parameters`, by config or by safetensors header;
* tokenizer files named in `tokenizer_config.json` that point outside the folder.
Then `load_hf_causal_lm` (called only in an isolated worker) loads with
`local_files_only=True, trust_remote_code=False, use_safetensors=True` and the hub offline, and
the tokenizer from `tokenizer.json` with Hugging Face `tokenizers` alone (no Python tokenizer code,
no sentencepiece or tiktoken pickles).
"""

from __future__ import annotations

import json
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib", ".npy", ".npz", ".h5", ".msgpack")
CODE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")
JSON_LIMIT = 1 << 20  # bytes of config.json / tokenizer_config.json / generation_config.json
TOKENIZER_LIMIT = 64 << 20  # bytes of tokenizer.json
HEADER_LIMIT = 32 << 20  # bytes of one safetensors header
MAX_FILES = 10_000
DEFAULT_MAX_PARAMETERS = 3_000_000_000
# Config sizes beyond which a model is not a language model this audit can hold in memory.
SIZE_LIMITS = {
    "vocab_size": 1_000_000,
    "hidden_size": 65_536,
    "n_embd": 65_536,
    "d_model": 65_536,
    "intermediate_size": 262_144,
    "n_inner": 262_144,
    "num_hidden_layers": 512,
    "n_layer": 512,
    "num_layers": 512,
    "num_attention_heads": 1024,
    "n_head": 1024,
    "max_position_embeddings": 1_048_576,
    "n_positions": 1_048_576,
    "n_ctx": 1_048_576,
}
ANY_INT_LIMIT = 10**9  # any other integer in a config
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")
# Files whose presence makes transformers load something other than the folder's safetensors.
REFUSED_FILES = {
    "adapter_config.json": "is a PEFT adapter: loading it fetches a base model named inside it; give a merged "
    "model folder",
}
# config.json fields that make loading import or fetch code beyond the plain model class.
REFUSED_CONFIG_KEYS = {
    "custom_pipelines": "names pipeline code to import (remote code), which this audit never runs",
    "quantization_config": "asks for a quantization backend (its own kernels and code); give the float weights",
}


@dataclass(frozen=True)
class HFFolder:
    path: Path
    model_type: str
    parameters: int  # from the safetensors headers
    weight_files: list[str]
    config: dict[str, Any]


def _refuse(where: str, message: str) -> AuditInputError:
    return AuditInputError(where, message)


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate key {next(k for k in keys if keys.count(k) > 1)!r}")
    return dict(pairs)


def _read_json(path: Path, limit: int, where: str) -> Any:
    size = path.stat().st_size
    if size > limit:
        raise _refuse(where, f"is {size} bytes, more than the {limit} this audit reads (a huge config)")
    from targets.json_depth import JSON_DEPTH_LIMIT, json_depth

    try:
        text = path.read_text(encoding="utf-8")
        if json_depth(text) > JSON_DEPTH_LIMIT:  # before json.loads: a RecursionError was exit 3
            raise _refuse(where, f"nests arrays/objects more than {JSON_DEPTH_LIMIT} deep: not a model's JSON file")
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise _refuse(where, f"is not valid JSON ({str(exc)[:120]})") from None


def _walk_values(value: Any):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk_values(item)


def _check_no_remote_code(content: Any, where: str) -> None:
    for key, value in _walk_values(content):
        if key == "auto_map":
            raise _refuse(
                where,
                "has an 'auto_map' entry: it asks to run the folder's own Python code (remote code), "
                "which this audit never does",
            )
        if key == "trust_remote_code" and value:
            raise _refuse(where, "sets 'trust_remote_code': this audit never runs a model's own code")


def _check_sizes(config: dict[str, Any], where: str) -> None:
    for key, value in _walk_values(config):
        if (
            key in SIZE_LIMITS
            and value is not None
            and (isinstance(value, bool) or not isinstance(value, int) or value < 0)
        ):
            raise _refuse(f"{where}: field '{key}'", f"must be a whole number ≥ 0, got {str(value)[:40]!r}")
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        limit = SIZE_LIMITS.get(key, ANY_INT_LIMIT)
        if key in _POSITION_KEYS and value < 2:  # one position scores no next token: every text would crash the model
            raise _refuse(
                f"{where}: field '{key}'", f"is {value}; a causal LM needs at least 2 positions to score a text"
            )
        if value > limit or value < -ANY_INT_LIMIT:
            raise _refuse(
                f"{where}: field '{key}'",
                f"is {value}, beyond {limit} (a huge config would make loading allocate that much memory)",
            )


def _check_weight_index(folder: Path, index: Path, flag: str) -> None:
    """A sharded checkpoint's index names its shards: each must be a .safetensors file inside the folder."""
    where = f"{flag} file '{index.relative_to(folder)}'"
    content = _read_json(index, JSON_LIMIT, where)
    weight_map = content.get("weight_map") if isinstance(content, dict) else None
    if not isinstance(weight_map, dict):
        raise _refuse(where, "needs a 'weight_map' object (tensor name → shard file)")
    root = folder.resolve()
    for shard in set(weight_map.values()):
        target = (folder / str(shard)).resolve() if isinstance(shard, str) else None
        if target is None or root not in target.parents or not str(shard).endswith(".safetensors"):
            raise _refuse(
                f"{where}: weight_map",
                f"names {str(shard)[:80]!r}: shards must be .safetensors files inside the model folder",
            )
        if not target.is_file():
            raise _refuse(f"{where}: weight_map", f"names {str(shard)[:80]!r}, which the folder does not hold")


def _estimated_parameters(config: dict[str, Any]) -> int:
    """A lower estimate of a decoder's parameters from its config: embeddings plus 12·d² per layer."""
    get = lambda *keys: next((int(config[k]) for k in keys if isinstance(config.get(k), int)), 0)  # noqa: E731
    width = get("hidden_size", "n_embd", "d_model")
    return get("vocab_size") * width + get("num_hidden_layers", "n_layer", "num_layers") * 12 * width * width


def _class_parameters(config: dict[str, Any], model_type: str, flag: str) -> int:
    """The same lower estimate, from the config as transformers' class for `model_type` reads it: its
    defaults fill what the file leaves out (GPT-2's `n_embd` means nothing to a Llama config, whose
    default width is 4096). Building a config object allocates no weights."""
    from transformers import AutoConfig

    from targets.library_output import route_library_output

    route_library_output()  # the config class's own warnings (ids outside the vocabulary…): to the log
    fields = {k: v for k, v in config.items() if k != "model_type"}
    try:
        built = AutoConfig.for_model(model_type, **fields)
    except Exception as exc:  # noqa: BLE001 - the class's own validation of the file's values
        raise _refuse(
            f"{flag} file 'config.json'", f"is not a valid {model_type} config ({' '.join(str(exc).split())[:160]})"
        ) from None
    width = getattr(built, "hidden_size", 0)
    layers = getattr(built, "num_hidden_layers", 0)
    vocab = getattr(built, "vocab_size", 0)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (width, layers, vocab)):
        return 0
    return vocab * width + layers * 12 * width * width


def safetensors_parameters(path: Path, where: str) -> int:
    """Σ of the tensors' element counts in a safetensors header (nothing else of the file is read)."""
    with path.open("rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise _refuse(where, "is too short to be a safetensors file")
        (length,) = struct.unpack("<Q", raw)
        if length > HEADER_LIMIT or length > path.stat().st_size - 8:
            raise _refuse(where, f"declares a {length}-byte header: not a valid safetensors file")
        from targets.json_depth import JSON_DEPTH_LIMIT, json_depth

        try:
            text = handle.read(length).decode("utf-8")
            if json_depth(text) > JSON_DEPTH_LIMIT:
                raise ValueError(f"nested more than {JSON_DEPTH_LIMIT} deep")
            header = json.loads(text, object_pairs_hook=_no_duplicates)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise _refuse(where, f"has an unreadable safetensors header ({str(exc)[:100]})") from None
    total = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise _refuse(where, f"tensor '{str(name)[:60]}' has no valid shape")
        count = 1
        for dim in shape:
            count *= dim
        total += count
    return total


def inspect_hf_folder(
    folder: str | Path, *, flag: str = "--hf-model", max_parameters: int = DEFAULT_MAX_PARAMETERS
) -> HFFolder:
    """Everything about a Hugging Face causal-LM folder that can be checked without running it."""
    path = Path(folder)
    where = f"{flag} '{folder}'"
    if path.is_symlink():
        raise _refuse(where, "is a symbolic link; give the folder itself")
    if not path.is_dir():
        raise _refuse(
            where, "is not a folder (a local Hugging Face model folder: config.json, *.safetensors, tokenizer.json)"
        )
    files: list[Path] = []
    for root, dirs, names in os.walk(path, followlinks=False):
        for name in dirs + names:
            entry = Path(root) / name
            if entry.is_symlink():
                raise _refuse(
                    f"{flag} file '{entry.relative_to(path)}'",
                    "is a symbolic link (it may point outside the folder); copy the real file in",
                )
        for name in names:  # a FIFO would block the reader forever, a device read another file
            mode = (Path(root) / name).lstat().st_mode
            if not stat.S_ISREG(mode):
                raise _refuse(
                    f"{flag} file '{(Path(root) / name).relative_to(path)}'",
                    "is not a regular file (a FIFO, socket or device); a model folder holds files only",
                )
        files.extend(Path(root) / n for n in names)
        if len(files) > MAX_FILES:
            raise _refuse(where, f"holds more than {MAX_FILES} files")
    for file in files:
        relative = file.relative_to(path)
        suffix = file.suffix.lower()
        if suffix in PICKLE_SUFFIXES:
            raise _refuse(
                f"{flag} file '{relative}'",
                "is a pickle-format file (unpickling runs code); only "
                ".safetensors weights are loaded — convert it with safetensors",
            )
        if suffix in CODE_SUFFIXES:
            raise _refuse(f"{flag} file '{relative}'", "is code; this audit never runs a model folder's own code")
        if file.name in REFUSED_FILES:
            raise _refuse(f"{flag} file '{relative}'", REFUSED_FILES[file.name])
    config_path = path / "config.json"
    if not config_path.is_file():
        raise _refuse(where, "has no config.json")
    config = _read_json(config_path, JSON_LIMIT, f"{flag} file 'config.json'")
    if not isinstance(config, dict):
        raise _refuse(f"{flag} file 'config.json'", "must be a JSON object")
    for name in ("config.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"):
        if (path / name).is_file():
            content = config if name == "config.json" else _read_json(path / name, JSON_LIMIT, f"{flag} file '{name}'")
            _check_no_remote_code(content, f"{flag} file '{name}'")
    _check_sizes(config, f"{flag} file 'config.json'")
    for key in REFUSED_CONFIG_KEYS:
        if any(k == key for k, _ in _walk_values(config)):
            raise _refuse(f"{flag} file 'config.json': field '{key}'", REFUSED_CONFIG_KEYS[key])
    model_type = config.get("model_type")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if not isinstance(model_type, str) or model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise _refuse(
            f"{flag} file 'config.json': field 'model_type'",
            f"{str(model_type)[:40]!r} is not a causal-LM type transformers knows",
        )
    described = max(_estimated_parameters(config), _class_parameters(config, model_type, flag))
    if described > max_parameters:
        raise _refuse(
            f"{flag} file 'config.json'",
            f"describes about {described:.3g} parameters, more than the limit {max_parameters:.3g}",
        )
    tokenizer_config = path / "tokenizer_config.json"
    if tokenizer_config.is_file():
        content = _read_json(tokenizer_config, JSON_LIMIT, f"{flag} file 'tokenizer_config.json'")
        for key, value in _walk_values(content):
            if isinstance(key, str) and key.endswith("_file") and isinstance(value, str):
                target = (path / value).resolve()
                if path.resolve() not in target.parents and target != path.resolve():
                    raise _refuse(
                        f"{flag} file 'tokenizer_config.json': field '{key}'",
                        f"points outside the model folder ({value[:80]!r})",
                    )
    tokenizer = path / "tokenizer.json"
    if not tokenizer.is_file():
        raise _refuse(where, "has no tokenizer.json (a fast tokenizer file; only it is loaded)")
    if tokenizer.stat().st_size > TOKENIZER_LIMIT:
        raise _refuse(f"{flag} file 'tokenizer.json'", f"is larger than {TOKENIZER_LIMIT} bytes")
    weights = sorted(f for f in files if f.suffix == ".safetensors")
    if not weights:
        raise _refuse(where, "has no .safetensors weights")
    for index in sorted(f for f in files if f.name.endswith(".index.json")):
        _check_weight_index(path, index, flag)
    parameters = sum(safetensors_parameters(f, f"{flag} file '{f.relative_to(path)}'") for f in weights)
    if described > 2 * parameters + 1_000_000:
        # model_type (with its class's defaults) describes a model the weights cannot fill: transformers
        # would allocate it whole (a Llama's defaults are 6.7·10⁹ parameters) and leave it mostly random.
        raise _refuse(
            f"{flag} file 'config.json'",
            f"model_type '{model_type}' describes about {described:.3g} parameters but the safetensors files "
            f"hold {parameters:.3g}: the config does not match the weights",
        )
    if parameters > max_parameters:
        raise _refuse(where, f"holds {parameters:.3g} parameters, more than the limit {max_parameters:.3g}")
    return HFFolder(path, model_type, parameters, [str(f.relative_to(path)) for f in weights], config)


def load_hf_causal_lm(folder: str | Path, device: str = "cpu"):
    """(model, tokenizer) of an inspected folder — offline, safetensors only, never remote code.
    Call only in an isolated worker, after `inspect_hf_folder`."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    from targets.library_output import route_library_output

    # transformers' own warnings and loading report (raw ANSI codes) go to the run's library.log, never
    # the console: what matters from them (weights that do not fit the architecture) is checked below
    # and said in one line.
    route_library_output()
    folder = Path(folder)
    where = f"--hf-model '{folder}'"
    try:
        loaded: Any = AutoModelForCausalLM.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=False, use_safetensors=True, output_loading_info=True
        )
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - a truncated safetensors file, a config the class rejects: the folder's
        raise _refuse(
            where, f"cannot be loaded as a causal LM ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
        ) from None
    model, info = loaded  # output_loading_info=True: (model, the loading report)
    missing = list(info.get("missing_keys") or []) + list(info.get("mismatched_keys") or [])
    if missing:
        # The weights are of another architecture (GPT-2 weights under model_type: bert): transformers
        # would fill these tensors at random and the audit would score a mostly random model.
        model_type = getattr(model.config, "model_type", "?")
        raise _refuse(
            f"{where} file 'config.json'",
            f"model_type '{model_type}' does not match the weights: "
            f"{len(missing)} of the model's tensors are not in the safetensors files (e.g. "
            f"{str(missing[0])[:80]}); loading would leave them random",
        )
    try:
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # noqa: BLE001 - the tokenizers library's parse errors are the file's
        raise _refuse(
            f"{where} file 'tokenizer.json'", f"is not a valid tokenizers file ({' '.join(str(exc).split())[:200]})"
        ) from None
    vocab = getattr(model.config, "vocab_size", None)
    if isinstance(vocab, int) and tokenizer.get_vocab_size(with_added_tokens=True) > vocab:
        raise _refuse(
            f"{where} file 'tokenizer.json'",
            f"has {tokenizer.get_vocab_size(with_added_tokens=True):,} "
            f"tokens but the model's vocabulary is {vocab:,}: token ids beyond it cannot be scored",
        )
    return HFCausalLM(model.to(device).eval()), tokenizer


class HFCausalLM:
    """A transformers causal LM behind the `logits(token_ids)` interface the attacks use."""

    def __init__(self, model) -> None:
        self.model = model

    def logits(self, token_ids, attention_mask=None):
        return self.model(input_ids=token_ids, attention_mask=attention_mask).logits
