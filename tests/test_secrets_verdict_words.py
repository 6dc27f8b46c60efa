"""The console's secret redaction (audit/machinery/secrets.py) must not eat the verdict's own words: "rule
passed: ε = 1" was shown as "rule passed: *** = 1", because "pass" in "passed" read as a secret's name."""

from audit.machinery.secrets import MASK, redact


def test_a_passed_rule_line_is_shown_as_written():
    line = "rule passed: ε = 1, attack loss: AUC = 0.5132 ≤ 0.65 (max_auc)"
    assert redact(line) == line
    assert redact("3 passes: ε = 8") == "3 passes: ε = 8"


def test_pass_as_a_secret_name_is_still_masked():
    for text, secret in (("pass=hunter2", "hunter2"), ("PGPASS=hunter2", "hunter2"), ("password: hunter2", "hunter2")):
        shown = redact(text)
        assert secret not in shown and MASK in shown


def test_words_that_hold_auth_or_sig_are_shown_as_written():
    # "design" holds "sig", "author" / "authority" hold "auth": words of a console line, not secrets' names.
    for line in ("design: 20 runs planned, 4 looks", "author: alice", "authority: the accountant"):
        assert redact(line) == line


def test_auth_and_sig_as_a_whole_part_of_a_name_are_still_masked():
    for text in ("auth=hunter2", "x-auth-token: hunter2", "AUTH_TOKEN=hunter2", "sig=hunter2", "aws_sig=hunter2"):
        shown = redact(text)
        assert "hunter2" not in shown and MASK in shown


def test_a_count_of_tokens_is_shown_as_written():
    # "tokens: 5" (a language model's text size) read as a secret's name: the llm run's console showed "*** = 5".
    for line in ("tokens: 5", "new tokens: 512", "max_new_tokens=512", "secret tokens_per_canary: 8"):
        assert redact(line) == line


def test_a_token_as_a_secret_name_is_still_masked():
    for text in ("token=hunter2", "MLFLOW_TRACKING_TOKEN=hunter2", "x-auth-token: hunter2", "--token hunter2"):
        shown = redact(text)
        assert "hunter2" not in shown and MASK in shown
    assert "hf_abcdefghijklmnopqrstuvwxyz012345" not in redact("tokens: hf_abcdefghijklmnopqrstuvwxyz012345")
