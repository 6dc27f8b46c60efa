"""The llm job fine-tunes each ε twice (full and LoRA): its summary.md rows, report.html cells and console
headers say which is which, and its summary shows the test perplexity, not an always-empty accuracy column."""

from reports.console import _target_header
from reports.html_tables import _target_eps
from reports.markdown_summary import render_summary_markdown


def _target(epsilon, finetuning, perplexity):
    return {
        "kind": "text",
        "epsilon_target": epsilon,
        "epsilon_accountant": epsilon,
        "test_accuracy": None,
        "attacks": [],
        "whitebox_one_run": {"claim": epsilon, "status": "held"} if epsilon is not None else None,
        "llm": {"finetuning": finetuning, "test_perplexity": perplexity},
    }


RESULTS = {
    "config": {"name": "llm", "privacy": {"accountant": "prv"}},
    "targets": [_target(None, "full", 16.81), _target(8.0, "full", 34.32), _target(8.0, "lora", 85.17)],
    "verdict": {"status": "pass", "claims": []},
}


def test_summary_rows_name_the_fine_tuning_and_show_perplexity():
    table = [line for line in render_summary_markdown(RESULTS).splitlines() if line.startswith("| ")]
    assert "test perplexity" in table[0] and "test acc" not in table[0]
    assert table[1].startswith("| ∞ · full |") and "| 16.8 |" in table[1]
    assert table[2].startswith("| 8 · full |") and "| 34.3 |" in table[2]
    assert table[3].startswith("| 8 · LoRA |") and "| 85.2 |" in table[3]


def test_report_cells_and_console_headers_name_the_fine_tuning():
    assert [_target_eps(t) for t in RESULTS["targets"]] == ["∞ · full", "8 · full", "8 · LoRA"]
    headers = [_target_header(t, "prv", "held").plain for t in RESULTS["targets"]]
    assert headers[0].startswith("ε target ∞ · full fine-tuning")
    assert headers[2].startswith("ε target 8 · LoRA fine-tuning · prv ε 8")


def test_a_target_of_another_job_keeps_its_plain_epsilon():
    plain = {"epsilon_target": 1.0, "epsilon_accountant": 1.0, "attacks": []}
    assert _target_eps(plain) == "1"
    assert "fine-tuning" not in _target_header(plain, "prv", "held").plain
