"""The text pipeline: word embeddings and documents to an interpretable semantic direction of an outcome.

Word level (the paper's experiment): :func:`lexicon_test` tests whether a supervised subspace of word vectors
predicts a word norm (valence) and names the direction's poles and varimax axes. Document level:
:class:`ConceptDirection` builds per-document concept vectors (SIF-weighted means of the context windows
around seed words), fits and tests the direction with :func:`thrifty.inference.subspace_test`, and reads it
through poles, clusters, snippets, per-document scores, group comparisons and a report.

- :class:`Embeddings` — load ``.txt``/``.vec``/``.bin``/``.kv``/``.npy`` (and ``.gz``), embed words with an
  encoder, L2 and all-but-the-top normalisation, nearest neighbours.
- :class:`Corpus` — sentences of lower-cased word tokens (dependency-free; spaCy on request), stop words.
- :func:`lexicon_test` → :class:`LexiconTestResult`.
- :class:`ConceptDirection` → :class:`ConceptFit` (and :class:`GroupComparison`).
"""

from thrifty.text._concept import ConceptDirection
from thrifty.text._corpus import ENGLISH_STOP_WORDS, Corpus
from thrifty.text._embeddings import Embeddings
from thrifty.text._fit import ConceptFit
from thrifty.text._lexicon import lexicon_test
from thrifty.text._results import Axis, Cluster, Contrast, GroupComparison, LexiconTestResult, Poles, Snippet

__all__ = [
    "ENGLISH_STOP_WORDS",
    "Axis",
    "Cluster",
    "ConceptDirection",
    "ConceptFit",
    "Contrast",
    "Corpus",
    "Embeddings",
    "GroupComparison",
    "LexiconTestResult",
    "Poles",
    "Snippet",
    "lexicon_test",
]
