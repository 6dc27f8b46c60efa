"""Libraries' own output never reaches the console of a language-model command; it is in the run's
library.log where it occurred (issue #39: transformers warnings, raw ANSI codes from its loading
report, the resource tracker's "leaked semaphore" note, with or without --quiet).

The model folder is a real GPT-2 saved by transformers whose config names special-token ids outside
its (tiny) vocabulary: transformers warns about it on every load, which is the warning to route.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.security

NOISE = ("\x1b", "leaked semaphore", "[transformers]", "bos_token_id", "Model config", "Traceback", "it/s]")


def _console_is_clean(done: subprocess.CompletedProcess) -> None:
    console = done.stdout + done.stderr
    for word in NOISE:
        assert word not in console, f"{word!r} on the console:\n{console[-3000:]}"


@pytest.fixture(scope="module")
def warned_folder(tmp_path_factory) -> Path:
    """A 1-layer GPT-2 whose bos/eos ids (GPT-2's 50256) lie outside its 60-token vocabulary."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel

    root = tmp_path_factory.mktemp("warned")
    texts = [f"record {i}: patient {i % 7} seen on day {i}" for i in range(24)]
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(texts, trainers.WordLevelTrainer(vocab_size=60, special_tokens=["[UNK]"]))
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=60, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    model = GPT2LMHeadModel(config)
    model.save_pretrained(root / "model", safe_serialization=True)
    tokenizer.save(str(root / "model" / "tokenizer.json"))
    for name, part in (("members.jsonl", texts[:12]), ("nonmembers.jsonl", texts[12:])):
        (root / name).write_text("".join(json.dumps({"text": t}) + "\n" for t in part))
    return root


@pytest.mark.slow  # one audit of a language model in a fresh process (~10 s of CPU)
@pytest.mark.parametrize("quiet", [False, True], ids=["console", "quiet"])
def test_audit_model_hf_routes_transformers_warnings_to_the_run_log(tmp_path, warned_folder, quiet):
    args = ["audit-model", "--hf-model", str(warned_folder / "model")]
    args += ["--members", str(warned_folder / "members.jsonl"), "--nonmembers", str(warned_folder / "nonmembers.jsonl")]
    args += ["--out", "runs", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--allow-leak"]
    done = subprocess.run(
        [sys.executable, "-m", "audit.cli", *args, *(["--quiet"] if quiet else [])],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    _console_is_clean(done)
    (log,) = (tmp_path / "runs").glob("*/library.log")
    text = log.read_text(encoding="utf-8")
    assert "bos_token_id" in text and "transformers" in text  # where it occurred: the run that loaded the model
    assert "\x1b" not in text


@pytest.mark.slow  # transformers imported in a fresh process, a forked child (~5 s of CPU)
def test_the_leaked_semaphore_note_and_library_warnings_land_in_the_log_not_on_stderr(tmp_path):
    # A child that holds a multiprocessing lock and is ended without cleaning up: what the resource
    # tracker reports at shutdown as "leaked semaphore objects" (a worker ended by the tool does this).
    script = textwrap.dedent(
        """\
        import multiprocessing, os, sys, warnings
        from pathlib import Path
        from targets.library_output import set_library_log, route_library_output

        set_library_log(Path(sys.argv[1]), resource_tracker=True)
        route_library_output()
        import logging
        logging.getLogger("transformers.modeling_utils").warning("\\x1b[31mLOAD REPORT\\x1b[0m missing keys")
        warnings.warn_explicit("a library FutureWarning", FutureWarning, "/x/site-packages/transformers/y.py", 1)

        def hold_a_lock_and_die():
            lock = multiprocessing.get_context("spawn").Lock()
            lock.acquire()
            os._exit(0)

        if __name__ == "__main__":
            child = multiprocessing.get_context("fork").Process(target=hold_a_lock_and_die)
            child.start()
            child.join()
        """
    )
    (tmp_path / "leak.py").write_text(script)
    log = tmp_path / "library.log"
    done = subprocess.run(
        [sys.executable, "leak.py", str(log)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    _console_is_clean(done)
    assert "LOAD REPORT" not in done.stderr and "FutureWarning" not in done.stderr
    text = log.read_text(encoding="utf-8")
    assert "LOAD REPORT missing keys" in text and "\x1b" not in text
    assert "a library FutureWarning" in text
    assert "leaked semaphore" in text


LLM_TINY = """\
privacy: {epsilons: [8.0, .inf]}
llm: {n_candidates: 40, n_pool: 40, n_test: 10, vocab_size: 250, canaries_per_design: 24, canary_repetitions: 4,
      d_model: 32, n_heads: 2, pretrain_epochs: 1, epochs: 3, synthetic_samples: 16, synthetic_epochs: 1}
"""


@pytest.mark.slow  # the llm preset at a tiny size: fine-tunings, canaries, the synthetic-text audit (~1 min of CPU)
def test_the_llm_preset_console_carries_no_library_output(tmp_path):
    (tmp_path / "tiny.yaml").write_text(LLM_TINY)
    done = subprocess.run(
        [sys.executable, "-m", "audit.cli", "run", "--preset", "llm", "--config", "tiny.yaml", "--out", "runs"]
        + ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]  # a verdict either way; never 2 or 3
    _console_is_clean(done)
    for log in (tmp_path / "runs").glob("*/library.log"):  # where libraries said something, it is here
        assert "\x1b" not in log.read_text(encoding="utf-8")
