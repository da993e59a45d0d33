"""The inference additions give, bit for bit, the results recorded in fixtures/inference_extra.json.

Sparse PLS1 in the subspace test (with ``result.basis``), ``pls_svd_test``, ``select_n_components``,
``rotation_stability`` and ``coefficient_intervals`` (see make_inference_extra_fixtures.py); the R
package recomputes the same cases through the C ABI.
"""

from __future__ import annotations

import json

import pytest
from make_inference_extra_fixtures import CASES, FIXTURE, run_case
from make_inference_fixtures import inputs
from test_inference_fixtures import _bits

RECORDED = json.loads(FIXTURE.read_text())


def test_every_case_is_recorded() -> None:
    assert set(RECORDED["cases"]) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_is_identical_to_the_recorded_result(name: str) -> None:
    got = run_case(name, inputs())
    want = RECORDED["cases"][name]
    assert got["warnings"] == want["warnings"]
    assert _bits(got["result"]) == _bits(want["result"])


def test_the_recorded_cases_show_what_they_cover() -> None:
    cases = RECORDED["cases"]
    basis = cases["spls_keep2"]["result"]["basis"]
    # every column of the sparse basis loads on exactly spls_keep = 2 variables
    assert basis["shape"] == [15, 1] and sum(v != 0.0 for v in basis["data"]) == 2
    assert cases["plssvd"]["result"]["test"]["method"] == "nb-permutation"
    assert cases["plssvd_k2_forced"]["result"]["test"]["method"] == "nb"
    assert cases["select_sequence"]["result"]["sequence"] is not None
