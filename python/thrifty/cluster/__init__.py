"""Clustering: batched Hartigan k-means (and a fast bounded Lloyd) as a scikit-learn estimator.

>>> import numpy as np
>>> from thrifty.cluster import HartiganKMeans
>>> X = np.r_[np.random.default_rng(0).normal(0, 0.1, (50, 2)), np.random.default_rng(1).normal(3, 0.1, (50, 2))]
>>> km = HartiganKMeans(n_clusters=2, random_state=0).fit(X)
>>> sorted(np.bincount(km.labels_).tolist())
[50, 50]
"""

from thrifty.cluster._dask import DaskHartiganKMeans
from thrifty.cluster._hartigan import HartiganKMeans

__all__ = ["DaskHartiganKMeans", "HartiganKMeans"]
