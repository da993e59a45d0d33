"""Supervised-subspace inference: does a supervised subspace of X predict y?

Held-out OLS refits of a supervised subspace (PLS1, PLS2 for a multi-column y, supervised PCA, a ridge
probe, a fixed basis, any callable or scikit-learn transformer), scored by the held-out Pearson r over balanced random splits,
with the Nadeau–Bengio corrected t-test on Fisher-z (default) or its permutation twin, a pre-run gate,
built-in baselines, the per-component fixed-sequence test and varimax rotation.

- :func:`subspace_test` — the test; returns a :class:`SubspaceTestResult`.
- :func:`component_tests` — per-component fixed-sequence test over the PLS extraction order.
- :func:`varimax` — Kaiser-normalised varimax of a basis (the test is rotation invariant).
- :func:`check_gate` — the gate's decision for a design, without running a test.
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
from thrifty.inference._results import (
    BaselineResult,
    ComponentTestsResult,
    ConfidenceInterval,
    GateDecision,
    SubspaceTestResult,
    VarimaxResult,
)

__all__ = [
    "BaselineResult",
    "ComponentTestsResult",
    "ConfidenceInterval",
    "ConstantColumnWarning",
    "GateDecision",
    "GateWarning",
    "PLSInference",
    "SubspaceTestResult",
    "UndefinedSplitWarning",
    "VarimaxResult",
    "check_gate",
    "component_tests",
    "subspace_test",
    "varimax",
]
