"""Every inference result is identical, bit for bit, to the one recorded in fixtures/inference.json.

The cases run in a child process under ``OPENBLAS_CORETYPE=Haswell`` (see make_inference_fixtures.py).
The file was written from the code before issue 20 moved the route and the run into thrifty-core
(see make_inference_fixtures.py): p-values, statistics, per-split r, null distributions, splits,
gate decisions and reasons, warnings, for every learner, method and design branch.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from make_inference_fixtures import CASES, FIXTURE, array, draw_inputs, encode, inputs, run_pinned

RECORDED = json.loads(FIXTURE.read_text())


def _bits(v: Any) -> Any:
    """The recorded form with every float replaced by its exact hex (so -0.0 != 0.0, NaN == NaN)."""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else v.hex()
    if isinstance(v, list):
        return [_bits(e) for e in v]
    if isinstance(v, dict):
        return {k: _bits(e) for k, e in v.items()}
    return v


def test_the_inputs_are_the_recorded_ones() -> None:
    # the cases run on the recorded arrays; a fresh draw from the seeds gives them again, up to the last bit
    # of NumPy's power (SVML on AVX-512 CPUs, libm elsewhere: one ulp in 6 of w_skew's 150 entries)
    data, drawn = inputs(), draw_inputs()
    assert set(data) == set(drawn) == set(RECORDED["inputs"])
    for name, arr in drawn.items():
        want = array(RECORDED["inputs"][name])
        assert np.array_equal(data[name], want), name
        assert arr.dtype == want.dtype and arr.shape == want.shape, name
        if arr.dtype.kind == "f":
            np.testing.assert_array_max_ulp(arr, want, maxulp=1)
        else:
            assert np.array_equal(arr, want), name


@pytest.fixture(scope="module")
def today() -> dict[str, Any]:
    """Every case recomputed by today's code, with OpenBLAS's kernels pinned as when the file was recorded
    (the callable/transformer/Dask cases pass through NumPy's BLAS, whose last bits follow the CPU)."""
    names = sorted(n for n in CASES if not CASES[n][0].startswith("dask:") or _has_dask())
    return run_pinned(names)


def _has_dask() -> bool:
    try:
        import dask.array  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_is_identical_to_the_recorded_result(name: str, today: dict[str, Any]) -> None:
    if CASES[name][0].startswith("dask:"):
        pytest.importorskip("dask.array")
    got = today[name]
    want = RECORDED["cases"][name]
    assert got["warnings"] == want["warnings"]
    assert _bits(_recorded_fields(got["result"], want["result"])) == _bits(want["result"])


def _recorded_fields(got: Any, want: Any) -> Any:
    """``got`` without the result fields added after the recording (e.g. ``basis``, set by
    ``learner="spls"`` only); such a field must be None here, so nothing recorded can hide in it."""
    if isinstance(got, dict) and isinstance(want, dict):
        extra = set(got) - set(want)
        assert all(got[k] is None for k in extra), {k: got[k] for k in extra}
        return {k: _recorded_fields(v, want[k]) for k, v in got.items() if k not in extra}
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return [_recorded_fields(g, w) for g, w in zip(got, want)]
    return got


def test_encode_tells_apart_what_must_differ() -> None:
    # the comparison itself: a one-ulp change, a sign of zero and an int/float swap are differences
    a = _bits(encode(np.array([1.0, 0.0])))
    assert a != _bits(encode(np.array([np.nextafter(1.0, 2.0), 0.0])))
    assert a != _bits(encode(np.array([1.0, -0.0])))
    assert _bits(encode(np.array([math.nan]))) == _bits(encode(np.array([math.nan])))
