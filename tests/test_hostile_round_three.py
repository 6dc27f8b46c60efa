"""Round three's own hostile battery (issue #39, "hidden cases from the same classes"): new inputs of
each class the issue names, written for this file — credentials in URI forms and places the
earlier batteries did not use, forged results files read by `gate` AND `report`, the ledger
database as an input in states a real disk leaves behind, hostile model and text inputs checked
where the worker loads them, and user code whose processes try to outlive the command.

Commands run in-process through the console entry point (`main`), as in the other hostile files;
user code runs in the real worker processes the tool starts.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import sqlite3
import stat
import tempfile
import time
from pathlib import Path

import pytest
from hostile_support import run_main, snapshot

from tests.conftest import run_cli_in_process

pytestmark = pytest.mark.security

SECRET = "Hunter2-Qz7-vault"
DATA = Path(__file__).parent / "data"


def _files_holding(folder: Path, needle: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.fixture
def private_temp(tmp_path, monkeypatch):
    """Crash logs fall back to the temp folder: it is made a folder of the test's own, to be grepped."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()


# --------------------------------------------------------------------------------------------------
# 1. Credentials. A SQLite URI accepts (and ignores) query parameters, so each form below is a ledger
# or tracking store that WORKS: the secret then travels through every writer of a successful command
# — console, stored command line (ledger rows), results.json, report.html, summary.md, junit.xml,
# the MLflow store's params and tags — and must reach none of them.

QUERY_FORMS = {
    "password=": f"password={SECRET}",
    "percent-encoded name pass%77ord=": f"pass%77ord={SECRET}",
    "percent-encoded first letter %70assword=": f"%70assword={SECRET}",
    "sslpassword= after another parameter": f"mode=rw&sslpassword={SECRET}",
    "mixed-case PassWord=": f"PassWord={SECRET}",
    "access_token=": f"access_token={SECRET}",
    "percent-encoded separator password%3D": f"password%3D{SECRET}",
}


@pytest.mark.parametrize("form", list(QUERY_FORMS), ids=list(QUERY_FORMS))
def test_a_working_ledger_uri_with_a_secret_stores_and_shows_none_of_it(tmp_path, private_temp, form):
    uri = f"sqlite:///{tmp_path / 'ledger.db'}?{QUERY_FORMS[form]}"
    recorded = run_cli_in_process(
        "ledger", "record", "--ledger", uri, "--dataset", "d", "--epsilon", "1", "--delta", "0", cwd=tmp_path
    )
    assert recorded.returncode == 0, recorded.stderr
    listed = run_cli_in_process("ledger", "list", "--ledger", uri, "--dataset", "d", cwd=tmp_path)
    shown = run_cli_in_process("ledger", "show", "--ledger", uri, "--dataset", "d", "--json", cwd=tmp_path)
    for done in (recorded, listed, shown):
        assert SECRET not in done.stdout + done.stderr, done.stdout + done.stderr
    assert listed.returncode == 0 and shown.returncode == 0
    assert not _files_holding(tmp_path, SECRET), "the secret reached the ledger rows or a log"


@pytest.fixture
def scores_file(tmp_path) -> Path:
    import numpy as np

    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 200)
    lines = ["member,score"] + [f"{m},{s:.6f}" for m, s in zip(member, rng.normal(size=200) + 0.1 * member)]
    path = tmp_path / "scores.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("form", ["password=", "percent-encoded name pass%77ord="])
def test_a_working_tracking_uri_with_a_secret_reaches_no_output_file_or_mlflow(
    tmp_path, private_temp, scores_file, form
):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}?{QUERY_FORMS[form]}"
    done = run_cli_in_process("audit-scores", str(scores_file), "--out", "runs", "--tracking-uri", uri, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    written = {p.name for p in (tmp_path / "runs").rglob("*") if p.is_file()}
    assert {"results.json", "report.html", "summary.md", "junit.xml"} <= written
    assert not _files_holding(tmp_path, SECRET), "the secret reached a results file, a report or MLflow"


@pytest.mark.parametrize(
    "variable, value",
    [
        ("MLFLOW_TRACKING_URI", f"postgresql://alice:{SECRET}@127.0.0.1:1/db"),
        ("DATABASE_URL", f"postgresql://alice@127.0.0.1:1/db?password={SECRET}"),
        ("MLFLOW_TRACKING_PASSWORD", SECRET),
    ],
)
def test_credentials_in_the_environment_are_neither_used_nor_shown(
    tmp_path, private_temp, scores_file, monkeypatch, variable, value
):
    # The documented default store is sqlite:///mlflow.db in the working folder, set explicitly: a
    # credential in the environment must not send the audit to a server, nor be echoed anywhere.
    monkeypatch.setenv(variable, value)
    done = run_cli_in_process("audit-scores", str(scores_file), "--out", "runs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mlflow.db").is_file()
    assert SECRET not in done.stdout + done.stderr
    assert not _files_holding(tmp_path, SECRET)


@pytest.mark.parametrize(
    "config",
    [
        f"tracking_uri: postgresql://alice:{SECRET}@127.0.0.1:1/db\n",
        f"name: 'postgresql://alice@127.0.0.1:1/db?password={SECRET}'\n",
        f"privacy:\n  accountant: 'sqlite:///x.db?pass%77ord={SECRET}'\n",
    ],
    ids=["unknown field holding a URI", "audit name holding a URI", "field value percent-encoded"],
)
def test_a_config_file_holding_a_credential_is_refused_without_echoing_it(tmp_path, private_temp, config):
    (tmp_path / "c.yaml").write_text(config)
    done = run_cli_in_process("run", "--preset", "smoke", "--config", "c.yaml", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error:") and done.stderr.count("\n") == 1, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert _files_holding(tmp_path, SECRET) == [str(tmp_path / "c.yaml")]  # the user's own file only


def test_a_crash_log_redacts_a_percent_encoded_secret_in_argv_and_message(tmp_path, private_temp):
    from audit.machinery.crash_log import write_crash_log

    uri = f"postgresql://bob@h:1/db?pass%77ord={SECRET}"
    try:
        raise RuntimeError(f"cannot reach {uri}")
    except RuntimeError as exc:
        log = write_crash_log(exc, ["ledger", "list", "--ledger", uri, "--token", SECRET])
    assert log.is_file() and SECRET not in log.read_text()


# --------------------------------------------------------------------------------------------------
# 2. Forged results files: every one goes through `gate` AND `report`; they must agree, and none may
# exit 0 (a forger rewrites the file and drops the digest; the figures the verdict reads are
# recomputed, flags are never trusted).

ONE_RUN = json.loads((DATA / "results_one_run_example.json").read_text())


def _edit(*steps):
    def forge(results: dict) -> dict:
        for path, value in steps:
            node = results
            parts = path.split(".")
            for part in parts[:-1]:
                node = node[int(part)] if isinstance(node, list) else node[part]
            if isinstance(node, list):
                node[int(parts[-1])] = value
            else:
                node[parts[-1]] = value
        return results

    return forge


def _ledger_block(**fields):
    block = {
        "recorded": True,
        "dataset": "d",
        "ledger": "ledger.db",
        "epsilon_spent": 1.0,
        "epsilon_spent_unbounded": False,
        "delta": 1e-5,
        "method": "pld",
        "method_note": None,
        "basic_epsilon": 1.0,
        "advanced_epsilon": 1.0,
        "max_total_epsilon": None,
        "release_ids": [1],
        "limit_source": None,
        "results_sha256": "0" * 64,
    }
    return _edit(("ledger", {**block, **fields}))


WB = "targets.0.whitebox_one_run"
FORGED = {
    "one-run bound far above the claim, still held": _edit((f"{WB}.steinke_epsilon", 40.0)),
    "one-run ceiling negative": _edit((f"{WB}.ceiling", -1.0)),
    "one-run members more than canaries": _edit((f"{WB}.n_in", 10_000)),
    "one-run p-value as text": _edit((f"{WB}.p_value", "1.0")),
    "one-run unknown field": _edit((f"{WB}.trusted_by_auditor", True)),
    "one-run family renamed": _edit((f"{WB}.family", "zero-run")),
    "conformance check failed, verdict pass": _edit(("targets.0.conformance.checks.0.passed", False)),
    "best bound NaN as text": _edit(("targets.0.epsilon_lb_best", "NaN")),
    "accountant epsilon negative": _edit(("targets.0.epsilon.prv", -3.9)),
    "attack AUC above 1": _edit(("targets.0.attacks.0.auc", 1.7)),
    "claimed epsilon zero": _edit(("targets.0.epsilon_target", 0.0)),
    "verdict status in capitals": _edit(("verdict.status", "PASS")),
    "schema version from the future": _edit(("schema_version", 4)),
    "bogus digest": _edit(("integrity", {"algorithm": "sha256", "sha256": "f" * 64})),
    "ledger spent negative": _ledger_block(epsilon_spent=-1.0),
    "ledger spent as text": _ledger_block(epsilon_spent="0.5"),
    "ledger unbounded but a figure given": _ledger_block(epsilon_spent=2.0, epsilon_spent_unbounded=True),
    "ledger with an unknown field": _ledger_block(approved_by="auditor"),
    "ledger release ids negative": _ledger_block(release_ids=[-4]),
}


@pytest.fixture
def policy_folder(tmp_path, monkeypatch):
    (tmp_path / "policy.yaml").write_text("rules:\n  max_epsilon_lb: 50.0\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_genuine_one_run_file_passes_both_readers(policy_folder, capsys):
    (policy_folder / "r.json").write_text(json.dumps(ONE_RUN))
    assert run_main(["gate", "r.json", "--policy", "policy.yaml", "--out", "g"])[0] == 0
    assert run_main(["report", "r.json", "--out", "rep"])[0] == 0


@pytest.mark.parametrize("forgery", list(FORGED), ids=list(FORGED))
def test_gate_and_report_agree_on_a_forged_file_and_neither_passes_it(policy_folder, capsys, forgery):
    raw = json.dumps(FORGED[forgery](copy.deepcopy(ONE_RUN)))
    (policy_folder / "r.json").write_text(raw)
    before = snapshot(policy_folder)
    gate, _ = run_main(["gate", "r.json", "--policy", "policy.yaml", "--out", "g"])
    gate_err = capsys.readouterr().err
    report, _ = run_main(["report", "r.json", "--out", "rep"])
    report_err = capsys.readouterr().err
    assert gate != 0 and report != 0, (gate, gate_err, report, report_err)
    assert gate == report, (gate, gate_err, report, report_err)
    assert "Traceback" not in gate_err + report_err
    if gate == 2:  # refused: nothing written by either reader
        assert snapshot(policy_folder) == before


def test_a_results_file_with_a_duplicated_verdict_key_is_refused_by_both(policy_folder, capsys):
    text = json.dumps(ONE_RUN)
    forged = text[:-1] + ', "verdict": {"status": "pass", "passed": true}}'  # the last key would win in json.loads
    (policy_folder / "r.json").write_text(forged)
    assert run_main(["gate", "r.json", "--policy", "policy.yaml", "--out", "g"])[0] == 2
    assert run_main(["report", "r.json", "--out", "rep"])[0] == 2


# --------------------------------------------------------------------------------------------------
# 3. The ledger database as an input, in states a real disk leaves behind.


def _recorded_ledger(folder: Path) -> Path:
    path = folder / "ledger.db"
    done = run_cli_in_process(
        "ledger", "record", "--ledger", str(path), "--dataset", "d", "--epsilon", "1", "--delta", "0", cwd=folder
    )
    assert done.returncode == 0, done.stderr
    return path


def _list(folder: Path, uri: str):
    return run_cli_in_process("ledger", "list", "--ledger", uri, "--dataset", "d", cwd=folder)


def _one_error_line(done, *names: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("error:") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    for name in names:
        assert name in done.stderr, done.stderr


def test_a_ledger_symlink_is_followed_to_the_ledger_but_a_dangling_one_is_refused(tmp_path):
    # Choice: a link to a ledger file is the ledger (shared storage is often linked in); what it points
    # at passes every check a path does. A link to nothing would create a database wherever it points.
    real = _recorded_ledger(tmp_path)
    (tmp_path / "link.db").symlink_to(real)
    assert _list(tmp_path, str(tmp_path / "link.db")).returncode == 0
    (tmp_path / "dangling.db").symlink_to(tmp_path / "elsewhere" / "new.db")
    done = run_cli_in_process(
        "ledger",
        "record",
        "--ledger",
        str(tmp_path / "dangling.db"),
        "--dataset",
        "d",
        "--epsilon",
        "1",
        "--delta",
        "0",
        cwd=tmp_path,
    )
    _one_error_line(done, "dangling.db")
    assert not (tmp_path / "elsewhere").exists()


def test_a_ledger_symlink_to_a_text_file_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("not a database\n" * 10)
    (tmp_path / "link.db").symlink_to(tmp_path / "notes.txt")
    _one_error_line(_list(tmp_path, str(tmp_path / "link.db")), "link.db")


def test_a_ledger_with_a_table_someone_added_is_refused_and_left_alone(tmp_path):
    path = _recorded_ledger(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (x TEXT)")
    before = path.read_bytes()
    done = run_cli_in_process(
        "ledger", "record", "--ledger", str(path), "--dataset", "d", "--epsilon", "1", "--delta", "0", cwd=tmp_path
    )
    _one_error_line(done, "ledger.db")
    assert path.read_bytes() == before


def test_a_ledger_with_a_wal_file_left_by_a_killed_writer_still_reads_its_rows(tmp_path):
    path = _recorded_ledger(tmp_path)
    # A writer in WAL mode killed before a checkpoint: its committed row is only in ledger.db-wal.
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.close()
    done = run_cli_in_process(
        "ledger", "record", "--ledger", str(path), "--dataset", "d", "--epsilon", "1", "--delta", "0", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    shown = run_cli_in_process("ledger", "show", "--ledger", str(path), "--dataset", "d", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["active_releases"] == 2


def test_a_read_only_ledger_is_read_but_recording_into_it_is_bad_input(tmp_path):
    path = _recorded_ledger(tmp_path)
    path.chmod(stat.S_IRUSR)
    try:
        if os.access(path, os.W_OK):
            pytest.skip("running as a user that writes read-only files (root)")
        assert _list(tmp_path, str(path)).returncode == 0
        done = run_cli_in_process(
            "ledger", "record", "--ledger", str(path), "--dataset", "d", "--epsilon", "1", "--delta", "0", cwd=tmp_path
        )
        _one_error_line(done, "ledger.db")
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)


@pytest.mark.parametrize(
    "column, value",
    [("label", "x" * 2_000_000), ("mechanisms", json.dumps([{"kind": "pure", "epsilon": 0.001}] * 20_000))],
    ids=["a 2 MB label", "20 000 mechanisms in one row"],
)
def test_a_huge_hand_written_row_is_named_and_refused(tmp_path, column, value):
    path = _recorded_ledger(tmp_path)
    with sqlite3.connect(path) as db:
        (table,) = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name LIKE '%release%'")][:1]
        db.execute(f"UPDATE {table} SET {column} = ?", (value,))
    done = run_cli_in_process("ledger", "show", "--ledger", str(path), "--dataset", "d", cwd=tmp_path)
    _one_error_line(done, "release #1")


def test_a_sqlite_header_with_nothing_after_it_is_refused(tmp_path):
    path = tmp_path / "ledger.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x10\x00\x01\x01" + b"\x00" * 10)
    _one_error_line(_list(tmp_path, str(path)), "ledger.db")


# --------------------------------------------------------------------------------------------------
# 4. Model and text inputs, checked where the worker loads them (the functions the isolated worker
# runs, called here directly: what reaches the user is their AuditInputError, exit 2).


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory) -> Path:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel

    root = tmp_path_factory.mktemp("gpt2") / "model"
    texts = [f"visit {i} of patient {i % 5}" for i in range(30)]
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(texts, trainers.WordLevelTrainer(vocab_size=40, special_tokens=["[UNK]"]))
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=16, n_embd=8, n_layer=1, n_head=2)).save_pretrained(
        root, safe_serialization=True
    )
    tokenizer.save(str(root / "tokenizer.json"))
    return root


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "model"
    shutil.copytree(folder, target)
    return target


def _config_edit(**fields):
    def edit(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config.update(fields)
        (folder / "config.json").write_text(json.dumps(config))

    return edit


def _nested_tokenizer(folder: Path) -> None:
    (folder / "tokenizer.json").write_text('{"model": ' + "[" * 50_000 + "]" * 50_000 + "}")


def _safetensors_cut(keep: float):
    def edit(folder: Path) -> None:
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: int(len(data) * keep)])

    return edit


def _safetensors_header_lies(folder: Path) -> None:
    data = (folder / "model.safetensors").read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"] = [0, 10**12]
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + data[8 + size :])


def _tokenizer_bigger(folder: Path) -> None:
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    for i in range(200):
        vocab[f"extra{i}"] = len(vocab)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))


MODEL_CASES = {
    "model_type llama over GPT-2 weights": _config_edit(model_type="llama", architectures=["LlamaForCausalLM"]),
    "vocab_size larger than the weights": _config_edit(vocab_size=4000),
    "n_embd that does not divide by the heads": _config_edit(n_embd=9),
    "tokenizer nested 50 000 deep": _nested_tokenizer,
    "safetensors cut at half": _safetensors_cut(0.5),
    "safetensors header names a terabyte": _safetensors_header_lies,
    "tokenizer with more tokens than the model": _tokenizer_bigger,
}


@pytest.mark.slow  # transformers loads a (tiny) model per case
@pytest.mark.parametrize("case", list(MODEL_CASES), ids=list(MODEL_CASES))
def test_a_hostile_model_folder_is_bad_input_naming_the_file(tmp_path, gpt2_folder, case):
    from audit.errors import AuditInputError
    from targets.language_model_sources import inspect_hf_folder, load_hf_causal_lm

    folder = _copy(gpt2_folder, tmp_path)
    MODEL_CASES[case](folder)
    with pytest.raises(AuditInputError) as refused:
        inspect_hf_folder(folder, flag="--hf-model")
        load_hf_causal_lm(folder)
    message = str(refused.value)
    assert "--hf-model" in message and len(message) < 600, message


@pytest.mark.parametrize(
    "line",
    ['{"text": ' + "[" * 5000 + "]" * 5000 + "}", '{"text": {"text": {"text": "deep"}}}', '{"text": 1e999}'],
    ids=["nested 5000 deep", "an object where a string belongs", "a number out of range"],
)
def test_a_hostile_texts_file_is_refused_in_one_line(tmp_path, line):
    members = tmp_path / "members.jsonl"
    members.write_text('{"text": "a fine record"}\n' + line + "\n")
    (tmp_path / "nonmembers.jsonl").write_text('{"text": "b"}\n{"text": "c"}\n')
    before = snapshot(tmp_path)
    done = run_cli_in_process(
        "audit-model",
        "--hf-model",
        str(tmp_path / "absent-model"),
        "--members",
        str(members),
        "--nonmembers",
        str(tmp_path / "nonmembers.jsonl"),
        "--out",
        "runs",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------------------------------
# 5. Processes: what user code starts never outlives the worker — also a child that ignores SIGTERM,
# one that changes its process group, one started with start_new_session by subprocess.


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _wait_for_pids(record: str, count: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if Path(record).is_file() and len(Path(record).read_text().split()) >= count:
            return
        time.sleep(0.05)


def _stubborn_child(record: str, *, own_group: bool) -> str:
    if os.fork() == 0:
        if own_group:
            os.setpgid(0, 0)  # its own group: a kill of the worker's group misses it
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        Path(record).open("a").write(f"{os.getpid()}\n")
        time.sleep(300)
        os._exit(0)
    _wait_for_pids(record, 1)
    return "done"


def forks_a_child_that_ignores_sigterm(record: str) -> str:
    return _stubborn_child(record, own_group=False)


def leaves_its_process_group(record: str) -> str:
    return _stubborn_child(record, own_group=True)


def starts_a_new_session_with_subprocess(record: str) -> str:
    import subprocess

    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    Path(record).open("a").write(f"{child.pid}\n")
    return "done"


def hangs_after_forking(record: str) -> str:
    if os.fork() == 0:
        os.setsid()
        Path(record).open("a").write(f"{os.getpid()}\n")
        time.sleep(300)
        os._exit(0)
    _wait_for_pids(record, 1)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the worker itself ignores the polite stop
    time.sleep(300)
    return "never"


@pytest.mark.parametrize(
    "task",
    [forks_a_child_that_ignores_sigterm, leaves_its_process_group, starts_a_new_session_with_subprocess],
    ids=["child ignores SIGTERM", "child leaves the process group", "subprocess in a new session"],
)
def test_no_process_user_code_started_outlives_the_worker(tmp_path, task):
    from audit.machinery.workers import run_isolated

    record = tmp_path / "pids"
    assert run_isolated(task, str(record), name="user task", timeout=60) == "done"
    pids = [int(p) for p in record.read_text().split()]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert pids and not any(_alive(p) for p in pids)


@pytest.mark.slow  # waits for the worker's time limit (3 s) and the kill that follows
def test_a_worker_that_ignores_sigterm_and_hangs_is_ended_with_its_session_child(tmp_path):
    from audit.errors import AuditInputError
    from audit.machinery.workers import run_isolated

    record = tmp_path / "pids"
    with pytest.raises(AuditInputError):  # the time limit is the user's: exit 2 naming it
        run_isolated(hangs_after_forking, str(record), name="user task", timeout=3)
    pids = [int(p) for p in record.read_text().split()]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert pids and not any(_alive(p) for p in pids)
