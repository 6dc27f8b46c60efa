"""The fast inverse blow-up (audit.statistics.profile_inverse) equals the every-line evaluation bit for bit."""

import numpy as np
import pytest

from audit.statistics.profile_inverse import profile_inverse_fast, profile_inverse_reference
from audit.statistics.tradeoff_curves import PrivacyProfile, dpsgd_privacy_profile, pair_privacy_profile


def _bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.int64)  # -0.0 and 0.0 differ here


def _ys(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    edges = np.arange(0, 4097, 7) / 4096.0  # uniform bins' ends, and just inside them
    return np.concatenate(
        [
            rng.random(1000),
            10.0 ** rng.uniform(-320, 0, 1000),  # the exponent bins, down to subnormals
            edges,
            np.nextafter(edges, 2.0),
            np.nextafter(edges, -1.0),
            [0.0, 1.0, 5e-324, 2.0**-8, 2.0**-12, -1.0, 2.0, np.inf, np.nan],
        ]
    )


@pytest.mark.parametrize(
    "profile",
    [
        pytest.param(dpsgd_privacy_profile(1.0357666015625, 1 / 19, 570), id="default_eps8"),
        pytest.param(dpsgd_privacy_profile(5.0390625, 0.2, 40), id="smoke_eps1"),
        pytest.param(dpsgd_privacy_profile(2.0, 1.0, 1), id="gaussian_once"),
        pytest.param(pair_privacy_profile(1.0, 0.0), id="pure_pair"),
        pytest.param(pair_privacy_profile(0.5, 1e-5), id="approx_pair"),
        pytest.param(PrivacyProfile((0.0, 0.3, 0.3, 2.0), (0.4, 0.1, 0.1, 0.0), "ties"), id="tied_lines"),
        pytest.param(
            PrivacyProfile((0.5, 800.0), (0.01, 0.0), "beyond e^709"),
            id="overflowing_scale",  # the reference's own overflow (inf·0 at y = 1) is the behaviour kept
            marks=pytest.mark.filterwarnings("ignore::RuntimeWarning"),
        ),
    ],
)
def test_the_fast_inverse_equals_the_reference_on_every_y(profile):
    fast, reference = profile_inverse_fast(profile), profile_inverse_reference(profile)
    ys = _ys(len(profile.epsilons))
    expected = _bits([reference(y) for y in ys])
    assert np.array_equal(_bits([fast(y) for y in ys]), expected)
    assert np.array_equal(_bits([fast(y) for y in ys[::-1]]), expected[::-1])  # bins memoised in any order


def test_the_fdp_recursion_gives_the_same_p_values_with_either_inverse():
    from audit.statistics import fdp_one_run

    profile = dpsgd_privacy_profile(1.0357666015625, 1 / 19, 570)
    fast, reference = profile_inverse_fast(profile), profile_inverse_reference(profile)
    for m, guesses, right in [(1000, 1000, 1000), (7373, 736, 700), (7373, 7372, 4000), (200, 20, 19)]:
        for alpha in (1e-40, 1e-9, 0.003, 0.05, 0.5):
            assert fdp_one_run._excess(fast, m, guesses, right, alpha) == fdp_one_run._excess(
                reference, m, guesses, right, alpha
            )
