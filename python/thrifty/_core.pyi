"""Type stubs for the compiled extension ``thrifty._core`` (PyO3). One section per capability."""

from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

# ---- kmeans (thrifty.cluster) ------------------------------------------------------------------

# ---- inference (thrifty.inference) -------------------------------------------------------------

# ---- dpp (thrifty.dpp) -------------------------------------------------------------------------
