"""Real data read at run time from what Debian installs (nothing is downloaded or shipped).

- :func:`load_tecator`: Tecator meat NIR spectra (215 × 100 absorbances; water, fat, protein) from
  ``r-cran-caret``'s ``data/tecator.RData`` (XZ-compressed R XDR, parsed with the pure-Python
  ``rdata`` package; no R needed).
- :func:`load_gasoline`: gasoline NIR spectra (60 × 401; octane) from ``r-cran-pls``'s lazy-load
  database ``data/Rdata.rdb``/``.rdx`` (gzip index + zlib records of R XDR).

Both raise :class:`FileNotFoundError` naming the Debian package when the files are absent.
"""

from __future__ import annotations

import gzip
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from thrifty.inference._results import FloatArray

R_LIBS = (Path("/usr/lib/R/site-library"), Path("/usr/lib/R/library"), Path("/usr/local/lib/R/site-library"))


def _find(package: str, relative: str) -> Path:
    for lib in R_LIBS:
        path = lib / package / relative
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{package}/{relative} not found under {', '.join(map(str, R_LIBS))}: install the Debian package "
        f"r-cran-{package} (apt-get install r-cran-{package})"
    )


def _rdata() -> Any:
    try:
        import rdata
    except ImportError as exc:  # pragma: no cover - setup.sh installs it
        raise ImportError("reading R data files needs the 'rdata' package (pip install rdata)") from exc
    return rdata


def load_tecator() -> tuple[FloatArray, FloatArray]:
    """Tecator: NIR absorbance spectra of 215 meat samples and their water/fat/protein content.

    Returns
    -------
    X : ndarray of shape (215, 100), float64
        Absorbances at 850–1050 nm.
    endpoints : ndarray of shape (215, 3), float64
        Water, fat and protein percentages (column means about 63.20, 18.14, 17.68).

    Raises
    ------
    FileNotFoundError
        When ``r-cran-caret`` is not installed.
    """
    path = _find("caret", "data/tecator.RData")
    data = _rdata().read_rda(str(path))
    return np.ascontiguousarray(data["absorp"], dtype=np.float64), np.ascontiguousarray(data["endpoints"], dtype=np.float64)


def _attributes(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = obj.attributes
    while node is not None and getattr(node.info.type, "name", "") == "LIST":
        tag = node.tag
        name = tag.value.value if tag is not None and tag.value is not None else None
        if isinstance(name, bytes):
            out[name.decode()] = node.value[0]
        node = node.value[1]
    return out


def _lazyload(package: str, name: str) -> Any:
    rdata = _rdata()
    rdx = _find(package, "data/Rdata.rdx")
    rdb = _find(package, "data/Rdata.rdb")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        index = rdata.conversion.convert(rdata.parser.parse_data(gzip.decompress(rdx.read_bytes()), expand_altrep=True))
        if name not in index["variables"]:
            raise KeyError(f"{name!r} is not in {package}'s data")
        offset, length = (int(v) for v in index["variables"][name])
        blob = rdb.read_bytes()[offset : offset + length]
        return rdata.parser.parse_data(zlib.decompress(blob[4:]), expand_altrep=True).object


def load_gasoline() -> tuple[FloatArray, FloatArray]:
    """Gasoline: NIR spectra (900–1700 nm, 2 nm steps) of 60 gasoline samples and their octane numbers.

    Returns
    -------
    X : ndarray of shape (60, 401), float64
    octane : ndarray of shape (60,), float64

    Raises
    ------
    FileNotFoundError
        When ``r-cran-pls`` is not installed.
    """
    obj = _lazyload("pls", "gasoline")
    names = [v.value.decode() for v in _attributes(obj)["names"].value]
    cols = dict(zip(names, obj.value))
    nir = cols["NIR"]
    dim = [int(v) for v in np.asarray(_attributes(nir)["dim"].value)]
    X = np.asarray(nir.value, dtype=np.float64).reshape(dim[1], dim[0]).T  # R is column-major
    y = np.asarray(cols["octane"].value, dtype=np.float64)
    return np.ascontiguousarray(X), np.ascontiguousarray(y)
