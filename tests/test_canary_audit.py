"""Canary audits of training code: broken DP-SGD is caught, correct DP-SGD is not, nulls give 0."""

import json
import math
import sys

import numpy as np
import pytest

from audit.demos import dp_trainers  # noqa: E402
from audit.dp_validation.canary_audit import (
    PrivacyClaim,
    canary_scores,
    default_audit_data,
    make_canary,
    multi_run_canary_audit,
    one_run_canary_audit,
    resolve_claim,
    run_canary_audit,
)
from audit.errors import AuditInputError
from audit.machinery.workers import WorkerPool
from audit.statistics.accountants import DPSGDEvent, epsilon_pld
from tests.mlflow_store import fresh_store


@pytest.fixture(scope="module")
def pool():
    """One pool of isolated workers for the module (the trainers below are imported in it by name)."""
    with WorkerPool(2, name="--trainer", timeout=600) as workers:
        yield workers


FEATURES, LABELS = default_audit_data(256, seed=0)
CLAIMED = epsilon_pld(
    DPSGDEvent(**{k: dp_trainers.CLAIM[k] for k in ("noise_multiplier", "sample_rate", "steps")}),
    dp_trainers.CLAIM["delta"],
)


# --------------------------------------------------------------------------------------------------
# Cheap stand-in trainers (numpy, microseconds): the statistics do not care how a model is made.
# --------------------------------------------------------------------------------------------------


class _Centroids:
    def __init__(self, centres):
        self.centres = centres

    def logits(self, features):
        return -((features[:, None, :] - self.centres[None]) ** 2).sum(-1)


def noisy_centroids(features, labels, seed):
    """Class means plus noise: a model that barely depends on any single record."""
    rng = np.random.default_rng(seed)
    centres = np.stack([features[labels == c].mean(0) for c in range(int(labels.max()) + 1)])
    return _Centroids(centres + rng.normal(0, 0.1, centres.shape))


class _Memoriser:
    def __init__(self, features, labels):
        self.features, self.labels = features, labels

    def predict_proba(self, features):
        nearest = ((features[:, None, :] - self.features[None]) ** 2).sum(-1).argmin(1)
        proba = np.full((len(features), 2), 0.01)
        proba[np.arange(len(features)), self.labels[nearest]] = 0.99
        return proba


def nearest_neighbour(features, labels, seed):
    """1-NN: remembers every training record, the opposite of differential privacy."""
    return _Memoriser(features, labels)


# --------------------------------------------------------------------------------------------------
# Multi-run audits of the demonstration trainers (Opacus DP-SGD, claim ε ≈ 1)
# --------------------------------------------------------------------------------------------------


def _audit(trainer, pool, seed=0, **kwargs):
    return multi_run_canary_audit(
        trainer,
        FEATURES,
        LABELS,
        canary_kind="out_of_distribution",
        n_models=50,
        claim=PrivacyClaim.stated(CLAIMED, dp_trainers.CLAIM["delta"]),
        seed=seed,
        pool=pool,
        **kwargs,
    )


def test_the_demo_claim_is_epsilon_about_1():
    assert pytest.approx(1.0, abs=0.02) == CLAIMED


@pytest.mark.slow  # 50 Opacus trainings in the worker pool
def test_a_trainer_without_per_sample_clipping_is_caught(pool):
    result = _audit(dp_trainers.broken_no_clipping, pool)
    assert result["violation"]
    assert result["epsilon_lower_bound"] > CLAIMED
    json.dumps(result, allow_nan=False)


@pytest.mark.slow  # 50 Opacus trainings in the worker pool
def test_a_trainer_with_a_64th_of_the_claimed_noise_is_caught(pool):
    result = _audit(dp_trainers.broken_low_noise, pool)
    assert result["violation"]
    assert result["evaluation"]["n_positive"] == result["evaluation"]["n_negative"] == 25


@pytest.mark.slow  # 3 × 50 Opacus trainings in the worker pool
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_correct_dpsgd_is_not_flagged_over_3_seeds(seed, pool):
    result = _audit(dp_trainers.correct_dpsgd, pool, seed=seed)
    assert not result["violation"]
    assert result["epsilon_lower_bound"] <= CLAIMED


def test_null_runs_never_inserting_the_canary_give_zero_in_at_least_95_percent_of_repeats(pool):
    bounds = [
        multi_run_canary_audit(
            noisy_centroids,
            FEATURES,
            LABELS,
            n_models=50,
            claim=PrivacyClaim.stated(1.0, 1e-5),
            seed=s,
            insert_canary=False,
            pool=pool,
        )["epsilon_lower_bound"]
        for s in range(40)
    ]
    assert sum(b == 0 for b in bounds) >= 38


@pytest.mark.slow  # 20 Opacus trainings in the worker pool
def test_null_runs_of_the_leakiest_demo_trainer_give_zero(pool):
    # The unclipped trainer is caught when the canary is inserted; never inserting it, both sides
    # are the same mechanism and the audit must find nothing.
    result = multi_run_canary_audit(
        dp_trainers.broken_no_clipping,
        FEATURES,
        LABELS,
        n_models=20,
        claim=PrivacyClaim.stated(CLAIMED, 1e-5),
        seed=0,
        insert_canary=False,
        pool=pool,
    )
    assert result["epsilon_lower_bound"] == 0.0 and not result["canary_inserted"]


# --------------------------------------------------------------------------------------------------
# One-run audit
# --------------------------------------------------------------------------------------------------


def test_a_memorising_trainer_is_caught_in_one_run(pool):
    result = one_run_canary_audit(
        nearest_neighbour,
        FEATURES,
        LABELS,
        n_canaries=1000,
        canary_kind="out_of_distribution",
        claim=PrivacyClaim.stated(1.0, 1e-5),
        seed=0,
        pool=pool,
    )
    # The nearest neighbour's scaled-logit scores saturate at two values (±4.6): the guess rule takes a
    # tie group whole (input order never decides a guess), so the bound is what the tie groups prove
    # (538 of 700 right: ε ≈ 1.05), above the claim of 1 — caught, with no credit for an arbitrary order.
    assert result["violation"] and result["epsilon_lower_bound"] > result["claimed_epsilon"]
    assert result["details"]["r"] == result["details"]["m_eval"]  # every evaluated candidate is guessed
    assert 400 < result["n_inserted"] < 600  # fair coins
    json.dumps(result, allow_nan=False)


@pytest.mark.slow  # one Opacus training on 200 canaries plus the data
def test_one_run_audit_of_correct_dpsgd_stays_below_its_claim(pool):
    result = one_run_canary_audit(
        dp_trainers.correct_dpsgd,
        FEATURES,
        LABELS,
        n_canaries=200,
        claim=PrivacyClaim.stated(CLAIMED, 1e-5),
        seed=0,
        pool=pool,
    )
    assert not result["violation"]


# --------------------------------------------------------------------------------------------------
# Claims, canaries, the CLI entry point and bad input
# --------------------------------------------------------------------------------------------------


def test_the_claim_comes_from_the_trainer_module_and_flags_override_it():
    from_module = resolve_claim(dp_trainers.correct_dpsgd)
    assert from_module.epsilon == pytest.approx(CLAIMED) and from_module.is_dpsgd
    assert from_module.steps == 20 and from_module.sample_rate == 0.25
    from_flags = resolve_claim(dp_trainers.correct_dpsgd, claimed_epsilon=2.0, delta=1e-6)
    assert (from_flags.epsilon, from_flags.delta, from_flags.is_dpsgd) == (2.0, 1e-6, False)
    with pytest.raises(AuditInputError) as info:
        resolve_claim(noisy_centroids)
    assert info.value.where == "claimed_epsilon"  # the parameter; the CLI shows --claimed-epsilon


def test_the_out_of_distribution_canary_lives_in_a_column_no_real_record_uses():
    canary = make_canary("out_of_distribution", FEATURES, LABELS, seed=0, label=1)
    X_in, y_in = canary.dataset(FEATURES, LABELS, include=True)
    X_out, _ = canary.dataset(FEATURES, LABELS, include=False)
    assert X_in.shape == (257, FEATURES.shape[1] + 1) and X_out.shape == (256, FEATURES.shape[1] + 1)
    assert np.all(X_out[:, -1] == 0) and X_in[-1, -1] > 10 * np.abs(FEATURES).max()
    assert y_in[-1] == 1
    mislabeled = make_canary("mislabeled", FEATURES, LABELS, seed=0)
    assert mislabeled.label != LABELS[mislabeled.source_row]
    assert np.array_equal(mislabeled.features, FEATURES[mislabeled.source_row])


def test_canary_scores_do_not_saturate_where_the_loss_does():
    class Confident:
        def logits(self, features):
            return np.array([[0.0, 50.0], [0.0, 5000.0]])

    scaled = canary_scores(Confident(), np.zeros((2, 3)), np.array([1, 1]))
    loss = canary_scores(Confident(), np.zeros((2, 3)), np.array([1, 1]), statistic="loss")
    assert scaled.tolist() == [50.0, 5000.0]
    assert loss[0] == pytest.approx(0.0, abs=1e-15) and loss[1] == 0.0


@pytest.mark.slow  # ~7 s of CPU: a full canary audit through the CLI entry point
def test_the_cli_entry_point_loads_a_user_trainer_and_its_claim(tmp_path, monkeypatch):
    (tmp_path / "my_trainer_module.py").write_text(
        "import numpy as np\n"
        "CLAIM = {'epsilon': 1.0, 'delta': 1e-5}\n"
        "class M:\n"
        "    def __init__(self, X, y): self.X, self.y = X, y\n"
        "    def predict_proba(self, F):\n"
        "        i = ((F[:, None] - self.X[None]) ** 2).sum(-1).argmin(1)\n"
        "        p = np.full((len(F), 2), 0.01); p[np.arange(len(F)), self.y[i]] = 0.99; return p\n"
        "def train(features, labels, seed):\n"
        "    return M(features, labels)\n"
        "def no_logits(features, labels, seed):\n"
        "    return 'a model'\n"
    )
    monkeypatch.chdir(tmp_path)
    result = run_canary_audit("my_trainer_module:train", mode="multi-canary", n_models=30, seed=0)
    assert result["violation"] and result["claim"]["epsilon"] == 1.0
    assert result["trainer"] == "my_trainer_module:train"
    json.dumps(result, allow_nan=False)
    with pytest.raises(AuditInputError) as info:
        run_canary_audit("my_trainer_module:no_logits", mode="multi-canary", n_models=4)
    assert info.value.where == "trainer" and "logits" in info.value.message


def test_dirac_kind_refuses_a_black_box_trainer_instead_of_auditing_other_code():
    # It used to audit the harness's own DP-SGD under the user's trainer's name; a trainer that
    # raises on every call "passed". A black-box train() cannot receive a gradient canary.
    for trainer in (dp_trainers.correct_dpsgd, _raises):
        with pytest.raises(AuditInputError) as info:
            run_canary_audit(trainer, kind="dirac", claimed_epsilon=1.0, delta=1e-5)
        assert info.value.where == "kind" and "black-box" in info.value.message


def _raises(*args, **kwargs):
    raise RuntimeError("out of memory")


@pytest.mark.parametrize(
    "call, where",
    [
        (lambda: run_canary_audit(noisy_centroids, n_models=0, claimed_epsilon=1.0, delta=1e-5), "n_models"),
        (lambda: run_canary_audit(noisy_centroids, n_models=40, claimed_epsilon=0.0, delta=1e-5), "claimed_epsilon"),
        (lambda: run_canary_audit(noisy_centroids, n_models=40, claimed_epsilon=-2.0, delta=1e-5), "claimed_epsilon"),
        (
            lambda: run_canary_audit(noisy_centroids, n_models=40, claimed_epsilon=1.0),
            "delta",
        ),  # a library error names the parameter; the CLI says --delta
        (lambda: run_canary_audit(noisy_centroids, kind="poisoned", claimed_epsilon=1.0, delta=1e-5), "kind"),
        (lambda: run_canary_audit(noisy_centroids, mode="twice", claimed_epsilon=1.0, delta=1e-5), "mode"),
        (lambda: run_canary_audit(_raises, n_models=40, claimed_epsilon=1.0, delta=1e-5), "trainer"),
        (lambda: run_canary_audit("no_such_module:train"), "trainer"),
        (
            lambda: multi_run_canary_audit(
                noisy_centroids, FEATURES, LABELS[:10], n_models=4, claim=PrivacyClaim.stated(1.0, 1e-5)
            ),
            "labels",
        ),
    ],
)
def test_bad_input_names_the_problem(call, where):
    # (The two cases that reach a worker start a pool of their own, ~5 s of CPU each. Given the module's pool
    # instead, they cost nothing but the next test of the pool took ~6 s more: no saving, measured.)
    with pytest.raises(AuditInputError) as info:
        call()
    assert info.value.where == where


def test_a_malformed_claim_in_the_trainer_module_is_bad_input(monkeypatch):
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "CLAIM", {"epsilon": 1.0}, raising=False)
    with pytest.raises(AuditInputError, match="expected keys"):
        resolve_claim(noisy_centroids)


# --------------------------------------------------------------------------------------------------
# Ceilings: an audit that could not have refuted the claim says so
# --------------------------------------------------------------------------------------------------


def test_an_audit_whose_ceiling_is_below_the_claim_is_inconclusive_not_a_pass(pool):
    # 10 models per side leave 5 for evaluation: even a perfect attack gets at most ~0.4 < 3.
    result = multi_run_canary_audit(
        nearest_neighbour, FEATURES, LABELS, n_models=10, claim=PrivacyClaim.stated(3.0, 1e-5), seed=0, pool=pool
    )
    verdict = result["verdict"]
    assert result["ceiling"] == verdict["ceiling"] < 3.0
    assert verdict["status"] == "inconclusive" and verdict["passed"] is False and not result["violation"]
    assert verdict["needed"] > 10 and f"≥ {verdict['needed']}" in verdict["reasons"][0]
    json.dumps(result, allow_nan=False)


def test_a_leaky_trainer_with_enough_models_fails_and_a_zero_bound_with_power_passes(pool):
    leaky = multi_run_canary_audit(
        nearest_neighbour, FEATURES, LABELS, n_models=30, claim=PrivacyClaim.stated(1.0, 1e-5), seed=0, pool=pool
    )
    assert leaky["verdict"]["status"] == "fail" and not leaky["verdict"]["passed"]
    quiet = multi_run_canary_audit(
        noisy_centroids, FEATURES, LABELS, n_models=30, claim=PrivacyClaim.stated(1.0, 1e-5), seed=0, pool=pool
    )
    assert quiet["ceiling"] > 1.0 and quiet["verdict"]["status"] == (
        "pass" if quiet["epsilon_lower_bound"] <= 1.0 else "fail"
    )


def test_the_one_run_audit_reports_its_ceiling(pool):
    result = one_run_canary_audit(
        noisy_centroids, FEATURES, LABELS, n_canaries=40, claim=PrivacyClaim.stated(8.0, 1e-5), seed=0, pool=pool
    )
    assert result["epsilon_lower_bound"] <= result["ceiling"] < 8.0
    assert result["verdict"]["status"] == "inconclusive" and "canaries" in result["verdict"]["needed_unit"]


def test_the_trainer_runs_in_workers_and_its_module_is_never_imported_by_the_audit(tmp_path, monkeypatch):
    (tmp_path / "exit_trainer.py").write_text(
        "import sys\nCLAIM = {'epsilon': 1.0, 'delta': 1e-5}\ndef train(features, labels, seed):\n    sys.exit(0)\n"
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AuditInputError) as info:
        run_canary_audit("exit_trainer:train", n_models=40, workers=1)
    assert info.value.where == "trainer" and "sys.exit" in info.value.message
    assert "exit_trainer" not in sys.modules


# --------------------------------------------------------------------------------------------------
# The multi-canary audit: many runs × column canaries, on the planted-bug suite (audit/demos/planted_bugs)
# --------------------------------------------------------------------------------------------------

from audit.demos import planted_bugs  # noqa: E402
from audit.dp_validation.canary_audit import column_canaries, multi_canary_audit, profile_canary_audit  # noqa: E402


def test_column_canaries_each_own_a_column_that_real_records_leave_at_zero():
    points, base = column_canaries(FEATURES, 4, scale=10.0)
    d = FEATURES.shape[1]
    assert points.shape == (4, d + 4) and np.all(base[d:] == 0)
    assert np.all(points[:, d:] == np.diag(np.diag(points[:, d:]))) and np.all(np.diag(points[:, d:]) > 0)


@pytest.mark.slow
@pytest.mark.parametrize("bug", ["batch_clip", "noise_divided_twice", "clip_after_noise"])
def test_the_multi_canary_mode_flags_a_planted_bug(bug, pool):
    result = run_canary_audit(f"audit.demos.planted_bugs:{bug}", mode="multi-canary", pool=pool)
    assert result["mode"] == "multi-canary" and result["n_runs"] == 200
    assert result["verdict"]["status"] == "fail" and result["epsilon_lower_bound"] > result["claimed_epsilon"]


@pytest.mark.parametrize("recipe", sorted(planted_bugs.CORRECT))
def test_small_multi_canary_audits_of_correct_recipes_flag_nothing(recipe, pool):
    # 6 audits with 40 runs × 32 canaries.
    result = run_canary_audit(f"audit.demos.planted_bugs:{recipe}", mode="multi-canary", n_models=40, seed=1, pool=pool)
    assert result["verdict"]["status"] != "fail"
    assert result["epsilon_lower_bound"] <= result["claimed_epsilon"]


def test_null_column_canary_audits_give_zero_in_at_least_95_percent_of_repeats(pool):
    # The leakiest correct recipe, canaries never inserted: both worlds are one mechanism.
    bounds = [
        multi_canary_audit(
            planted_bugs.correct_eps_8,
            FEATURES,
            LABELS,
            n_runs=8,
            n_canaries=32,
            claim=PrivacyClaim.stated(1.0, 1e-5),
            seed=s,
            insert_canary=False,
            pool=pool,
        )["epsilon_lower_bound"]
        for s in range(20)
    ]
    assert sum(b == 0 for b in bounds) >= 19


# --------------------------------------------------------------------------------------------------
# What a returned model must answer (a broken model must not pass as "no membership signal")
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "log_probs, message",
    [
        (np.full((3, 2), np.nan), "not finite"),
        (np.array([[np.inf, 0.0]] * 3), "not finite"),
        (np.log(np.full((3, 7), 1 / 7)), "outputs 7 classes"),
        (np.log(np.full((3, 2), 0.3)), "do not sum to 1"),
    ],
)
def test_a_returned_model_with_broken_outputs_is_refused(log_probs, message):
    from audit.dp_validation.canary_audit import _check_model_output

    with pytest.raises(AuditInputError, match=message):
        _check_model_output(log_probs, 2)


def test_a_returned_model_with_valid_outputs_is_accepted():
    from audit.dp_validation.canary_audit import _check_model_output

    _check_model_output(np.log(np.array([[0.2, 0.8], [1.0, 0.0]])), 2)  # p = 0 is a probability


@pytest.mark.slow
def test_a_trainer_whose_model_answers_nan_exits_2_not_pass(tmp_path):
    import subprocess
    import sys

    (tmp_path / "nan_trainer.py").write_text(
        "import numpy as np\nCLAIM = {'epsilon': 1.0, 'delta': 1e-5}\n"
        "class NanModel:\n    def predict_proba(self, X):\n        return np.full((len(X), 2), np.nan)\n"
        "def train(features, labels, seed):\n    return NanModel()\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "audit.cli",
            "canary-audit",
            "--trainer",
            "nan_trainer:train",
            "--models",
            "8",
            "--quiet",
            "--out",
            str(tmp_path / "runs"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: --trainer:") and "not finite" in done.stderr


# --------------------------------------------------------------------------------------------------
# The default: independent runs tested against the claim's whole trade-off curve (profile mode)
# --------------------------------------------------------------------------------------------------


def test_the_profile_audit_refutes_the_profile_of_a_grossly_broken_trainer(pool):
    result = profile_canary_audit(
        planted_bugs.noise_divided_twice,
        FEATURES,
        LABELS,
        n_runs=120,
        claim=PrivacyClaim(1.0, 1e-5, "a DP-SGD claim", 4.5, 0.25, 20),
        seed=0,
        pool=pool,
    )
    assert result["verdict"]["status"] == "fail" and result["violation"]
    pair = result["profile_test"]["supporting_pair"]
    assert f"its pair ({pair['epsilon']:.2f}, {pair['delta']:.3g})" in result["verdict"]["reasons"][0]
    assert result["profile_test"]["p_value"] <= 0.05
    json.dumps(result, allow_nan=False)


def _one_class_shift(recipe, seed: int) -> float:
    """Score with minus score without the one-class canary, the same seed (same noise and batches)."""
    from audit.dp_validation.canary_audit import _centred_logit, one_class_canary

    point, base = one_class_canary(FEATURES.shape[1], 1.0)
    X = np.hstack([FEATURES, np.zeros((len(FEATURES), 1), dtype=FEATURES.dtype)]).astype(float)
    y = np.zeros_like(LABELS)  # every real record in class 0; the canary in class 1
    scores = []
    for X_run, y_run in ((np.vstack([X, point]), np.append(y, 1)), (X, y)):
        logits = recipe(X_run, y_run, seed).logits(np.vstack([point, base]))
        scores.append(_centred_logit(logits - np.log(np.exp(logits).sum(1, keepdims=True)), 1))
    return scores[0] - scores[1]


def test_the_one_class_canary_sees_the_clipping_budget_the_bias_gets_extra():
    # Per-tensor clipping gives the weights C and the bias C (total √2·C) where one clip of both
    # gives √2/2·C each: the one-class canary reads both, so its shift grows by about √2. The
    # column canary's gain over the base point cancels the bias and cannot see this.
    import dataclasses

    quiet = {
        name: dataclasses.replace(recipe, noise_multiplier=1e-6)
        for name, recipe in (("correct", planted_bugs.correct_eps_1), ("per_layer", planted_bugs.per_layer_clip))
    }
    ratios = [_one_class_shift(quiet["per_layer"], s) / _one_class_shift(quiet["correct"], s) for s in range(5)]
    assert all(1.2 < r < 1.5 for r in ratios), ratios


def test_the_one_class_design_keeps_one_record_of_each_class_and_relabels_the_rest(pool):
    from audit.dp_validation.canary_audit import one_class_labels

    labels = np.array([2, 0, 1, 2, 0, 1, 1])
    assert one_class_labels(labels, canary_label=2, n_classes=3).tolist() == [2, 0, 1, 0, 0, 0, 0]
    result = profile_canary_audit(
        planted_bugs.correct_eps_8,
        FEATURES,
        LABELS,
        n_runs=16,
        n_pilot_runs=8,
        claim=PrivacyClaim.stated(8.0, 1e-5),
        seed=0,
        scales=(),
        pool=pool,
    )
    assert result["canary"]["design"] == "one_class" and result["canary"]["value"] == 1.0
    assert set(result["pilot_auc_by_design"]) == {"one_class 1"}


def test_the_one_class_design_is_kept_unless_a_column_design_is_clearly_stronger_on_the_pilot():
    from audit.dp_validation.canary_audit import DESIGN_PREFERENCE_Z, choose_profile_design

    one, col = ("one_class", 1.0), ("column", 1.0)
    sizes = {one: 1500, col: 1500}
    two_se = DESIGN_PREFERENCE_Z * math.sqrt(0.25 / 1500 * 2)  # ≈ 0.037 at 1500 pilot runs a side
    # per_layer_clip's seed-2 pilot: a column canary that cannot see the bug ahead by noise only.
    assert choose_profile_design({col: 0.012, one: 0.010}, sizes, preferred=one) == one
    assert choose_profile_design({col: 0.010 + 0.9 * two_se, one: 0.010}, sizes, preferred=one) == one
    # batch_clip: the column canary's margin 0.33 against 0.08 is no noise.
    assert choose_profile_design({col: 0.33, one: 0.08}, sizes, preferred=one) == col
    # No preference (no one-class design), or a preferred design without a rule: the largest margin.
    assert choose_profile_design({col: 0.012, one: 0.010}, sizes) == col
    assert choose_profile_design({col: -0.02, one: -math.inf}, {col: 1500, one: 0}, preferred=one) == col
    # Fewer pilot runs: a larger lead is needed.
    assert choose_profile_design({col: 0.09, one: 0.02}, {col: 100, one: 100}, preferred=one) == one


def test_the_profile_audit_reports_each_designs_pilot_margin(pool):
    result = profile_canary_audit(
        planted_bugs.correct_eps_8,
        FEATURES,
        LABELS,
        n_runs=40,
        n_pilot_runs=40,
        claim=PrivacyClaim.stated(8.0, 1e-5),
        seed=0,
        pool=pool,
    )
    assert (
        set(result["pilot_margin_by_design"])
        == set(result["pilot_auc_by_design"])
        == {"column 0.1", "column 0.3", "column 1", "one_class 1"}
    )
    json.dumps(result, allow_nan=False)


@pytest.mark.parametrize("recipe", ["correct_eps_0_5", "correct_eps_8"])
def test_profile_audits_of_correct_recipes_flag_nothing(recipe, pool):
    result = run_canary_audit(f"audit.demos.planted_bugs:{recipe}", n_models=400, seed=3, pool=pool)
    assert not result["profile_test"]["refuted"] and result["profile_ceiling"]["refutable"]
    # 400 runs refute only 2 of the 4 planted bugs (docs/canary-audit.md, power table): not refuted, never
    # held; the claim status names the mode that decides.
    assert result["mode"] == "profile" and result["verdict"]["status"] == "inconclusive"
    assert result["power"]["kind"] == "none" and "--models 1600" in result["power"]["decider"]


def test_profile_null_audits_refute_nothing_in_at_least_95_percent_of_repeats(pool):
    # Canary never inserted: both worlds are one mechanism, so the most permissive claim (a bare
    # ε = 0.1 pair, far below the recipe's ε 8) must still not be refuted.
    refuted = [
        profile_canary_audit(
            planted_bugs.correct_eps_8,
            FEATURES,
            LABELS,
            n_runs=60,
            claim=PrivacyClaim.stated(0.1, 1e-5),
            seed=s,
            insert_canary=False,
            pool=pool,
        )["violation"]
        for s in range(20)
    ]
    assert sum(refuted) <= 1


def test_a_profile_audit_with_too_few_runs_is_inconclusive():
    from audit.dp_validation.scope import profile_verdict
    from audit.statistics.tradeoff_curves import (
        HIGH,
        ProfileRule,
        dpsgd_privacy_profile,
        profile_test,
        tangent_test_ceiling,
    )

    profile = dpsgd_privacy_profile(4.5, 0.25, 20)
    ceiling = tangent_test_ceiling(profile, 2, 2)
    test = profile_test([1.0, 2.0], [-1.0, -2.0], ProfileRule(0.0, HIGH, 1.0), profile)
    verdict = profile_verdict(test, ceiling, claimed_epsilon=1.0, delta=1e-5, n_runs=4)
    assert verdict["status"] == "inconclusive" and verdict["passed"] is False and "more runs" in verdict["reasons"][0]


@pytest.mark.slow  # 2000 + 500 pilot runs of a numpy trainer in worker processes, ~25 s of CPU
def test_the_cli_canary_audit_in_its_default_mode_flags_sigma_not_sigma_c(cli_in_process, tmp_path):
    # The default mode and designs (profile, 6 looks by default: 4 at this size) with a 24th of the default
    # runs: this bug (true ε 6.6 against a claim of 1) needs no more: refuted at the last look, p = 0.00015
    # against its level 0.045 (measured; 1000 runs do not refute it, 4000 refute at p = 0.0005). In this
    # process: the verdict and exit code are the point, the trainer runs in worker processes either way
    # (tests/test_executors.py and the README's blocks run canary-audit in processes of their own). The
    # default run count itself is measured by the planted-bug bench (benchmarks/bench_planted_bugs.py),
    # not here: ~1.5 min a run would cost CI.
    proc = cli_in_process(
        "canary-audit",
        "--trainer",
        "audit.demos.planted_bugs:sigma_not_sigma_c",
        "--models",
        "2000",
        "--quiet",
        "--tracking-uri",
        fresh_store(tmp_path),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REFUTED" in proc.stdout + proc.stderr
    assert "4 looks" in proc.stdout + proc.stderr  # the default sequential design, shrunk to this size


def test_half_the_pilot_goes_to_the_preferred_design_and_the_rest_cycle():
    from audit.dp_validation.canary_audit import pilot_design_plan

    designs = [("column", 0.1), ("column", 0.3), ("column", 1.0), ("one_class", 1.0)]
    plan = pilot_design_plan(designs, ("one_class", 1.0), 12)
    assert plan.count(("one_class", 1.0)) == 6 and all(plan.count(d) == 2 for d in designs[:3])
    assert pilot_design_plan(designs, None, 8) == designs * 2
