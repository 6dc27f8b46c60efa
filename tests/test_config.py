import math

import pytest

from audit.errors import AuditInputError
from audit.machinery.config import PRESETS, config_to_yaml, parse_epsilon_list, resolve_config


def test_every_preset_resolves_and_the_default_sweeps_six_epsilons_including_infinity():
    for preset in PRESETS:
        resolve_config(preset)
    default = resolve_config("default")
    assert default.privacy.epsilons == [0.5, 1.0, 2.0, 4.0, 8.0, math.inf]
    assert default.privacy.delta == 1e-5 and default.privacy.accountant == "prv"


def test_a_yaml_file_overrides_the_preset_and_cli_overrides_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("training:\n  epochs: 3\nprivacy:\n  epsilons: [2, .inf]\n")
    config = resolve_config("smoke", path, {"privacy": {"epsilons": parse_epsilon_list("1,inf")}})
    assert config.training.epochs == 3
    assert config.privacy.epsilons == [1.0, math.inf]


def test_the_resolved_config_round_trips_through_yaml(tmp_path):
    config = resolve_config("default")
    path = tmp_path / "resolved.yaml"
    path.write_text(config_to_yaml(config))
    assert resolve_config("default", path) == config
    assert resolve_config("default", path).config_hash() == config.config_hash()


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"privacy": {"epsilons": [0.0]}}, "privacy.epsilons"),
        ({"privacy": {"epsilons": [-1.0]}}, "privacy.epsilons"),
        ({"privacy": {"delta": 1.5}}, "privacy.delta"),
        ({"privacy": {"delta": 0}}, "privacy.delta"),
        ({"training": {"epochs": "many"}}, "training.epochs"),
        ({"training": {"batchsize": 3}}, "training.batchsize"),
        ({"privacy": {"accountant": "moments"}}, "privacy.accountant"),
        ({"data": {"source": "file"}}, "data"),
    ],
    ids=[
        "eps zero",
        "eps negative",
        "delta above 1",
        "delta zero",
        "wrong type",
        "typo field",
        "bad accountant",
        "file without path",
    ],
)
def test_bad_config_fields_are_named(overrides, field):
    with pytest.raises(AuditInputError, match=f"field '{field}'"):
        resolve_config("default", overrides=overrides)


def test_an_unknown_preset_lists_the_known_ones():
    with pytest.raises(AuditInputError, match="smoke, default, full"):
        resolve_config("huge")


def test_epsilon_list_parsing_accepts_inf_and_names_the_flag_on_garbage():
    assert parse_epsilon_list("1, 8,inf") == [1.0, 8.0, math.inf]
    with pytest.raises(AuditInputError, match="--epsilons"):
        parse_epsilon_list("1,abc")


def test_a_config_file_that_is_not_a_mapping_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(AuditInputError, match="mapping"):
        resolve_config("default", path)
