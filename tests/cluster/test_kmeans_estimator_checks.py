"""scikit-learn's estimator contract for HartiganKMeans, both algorithms.

The only expected failures are the sample-weight-equivalence checks, which scikit-learn also
expects KMeans to fail (weights are not equivalent to repeating samples for a seeded init).
"""

from __future__ import annotations

from typing import Any

from sklearn.utils.estimator_checks import parametrize_with_checks

from thrifty.cluster import HartiganKMeans

EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": (
        "sample_weight is not equivalent to removing/repeating samples (as for KMeans)."
    ),
    "check_sample_weight_equivalence_on_sparse_data": (
        "sample_weight is not equivalent to removing/repeating samples (as for KMeans)."
    ),
}


def _expected_failures(estimator: Any) -> dict[str, str]:
    return EXPECTED_FAILURES


@parametrize_with_checks(
    [
        HartiganKMeans(n_clusters=2, n_init=2, max_iter=5, algorithm="hartigan"),
        HartiganKMeans(n_clusters=2, n_init=2, max_iter=5, algorithm="lloyd"),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator: Any, check: Any) -> None:
    check(estimator)
