"""Supervised-subspace inference: does a supervised subspace of X predict y?

Held-out OLS refits of a supervised subspace (PLS1, PLS2 for a multi-column y, supervised PCA, a ridge
probe, a fixed basis, any callable or scikit-learn transformer), scored by the held-out Pearson r over balanced random splits,
with the Nadeau–Bengio corrected t-test on Fisher-z (default) or its permutation twin, a pre-run gate,
built-in baselines, the per-component fixed-sequence test and varimax rotation.

- :func:`subspace_test` — the test; returns a :class:`SubspaceTestResult`.
- :func:`component_tests` — per-component fixed-sequence test over the PLS extraction order.
- :func:`varimax` — Kaiser-normalised varimax of a basis (the test is rotation invariant).
- :func:`check_gate` — the gate's decision for a design, without running a test.
- :func:`pls_svd_test` — the two-block PLS-SVD (PLS3) test of the first latent pair.
- :func:`select_n_components` — the number of PLS1 components (CV one-SE / max rule, or the sequence test).
- :func:`rotation_stability` — bootstrap congruence of the varimax axes, axis by axis.
- :func:`coefficient_intervals` — subsampling intervals for PLS1's β and per-variable leverage; :func:`preprocess`.
- ``learner="spls"`` of :func:`subspace_test` — sparse PLS1 with a keep-count (``spls_keep``).
- :class:`PLSInference` — scikit-learn estimator (fit/predict/transform) with ``test_`` after fit.
- :mod:`thrifty.inference.datasets` — Tecator and gasoline read from Debian's R packages.
"""

from thrifty.inference._api import (
    ConstantColumnWarning,
    GateWarning,
    UndefinedSplitWarning,
    check_gate,
    component_tests,
    subspace_test,
    varimax,
)
from thrifty.inference._estimator import PLSInference
from thrifty.inference._intervals import CoefficientIntervals, Preprocessed, coefficient_intervals, preprocess
from thrifty.inference._plssvd import PLSSVDTestResult, pls_svd_test
from thrifty.inference._results import (
    BaselineResult,
    ComponentTestsResult,
    ConfidenceInterval,
    GateDecision,
    SubspaceTestResult,
    VarimaxResult,
)
from thrifty.inference._select import NComponentsResult, select_n_components
from thrifty.inference._stability import RotationStabilityResult, rotation_stability

__all__ = [
    "BaselineResult",
    "ComponentTestsResult",
    "CoefficientIntervals",
    "ConfidenceInterval",
    "ConstantColumnWarning",
    "GateDecision",
    "GateWarning",
    "NComponentsResult",
    "PLSSVDTestResult",
    "Preprocessed",
    "PLSInference",
    "RotationStabilityResult",
    "SubspaceTestResult",
    "UndefinedSplitWarning",
    "VarimaxResult",
    "check_gate",
    "coefficient_intervals",
    "component_tests",
    "pls_svd_test",
    "preprocess",
    "rotation_stability",
    "select_n_components",
    "subspace_test",
    "varimax",
]
