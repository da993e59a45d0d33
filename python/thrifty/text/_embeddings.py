"""Word embeddings: a vocabulary and its vectors, read from the common file formats or an encoder.

Formats (``Embeddings.load``; a ``.gz`` suffix on any of the text or ``.npy`` formats is read through gzip):

- word2vec/GloVe text (``.txt``, ``.vec``): one ``word v1 ... vd`` line per word, an optional first
  ``n_words dim`` header line (word2vec); the dimension is taken from the first vector line.
- word2vec binary (``.bin``): ``n_words dim\\n`` then, per word, ``word<space>`` and ``dim`` little-endian
  float32 values (an optional newline before each word, as gensim writes it).
- gensim ``KeyedVectors`` (``.kv``): read with gensim when it is installed (an ImportError says so otherwise).
- NumPy (``.npy``): a 2-D array plus a vocabulary file (one word per line, ``vocab=`` or ``<stem>.vocab.txt``
  / ``<stem>.txt`` beside it).

``from_encoder`` embeds words with a transformers encoder (AutoTokenizer + AutoModel, mean pooling over the
attention mask, the sentence-transformers recipe) or a sentence-transformers model's ``encode``.
"""

from __future__ import annotations

import gzip
import importlib
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import numpy.typing as npt

from thrifty._validation import check_finite_matrix, check_int

FloatArray = npt.NDArray[np.float64]
AnyFloatArray = npt.NDArray[np.floating[Any]]

_TEXT_SUFFIXES = (".txt", ".vec")


def _open(path: Path) -> IO[bytes]:
    """The file as bytes, through gzip for a ``.gz`` suffix."""
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


def _base_suffix(path: Path) -> str:
    """``.txt`` for ``glove.txt.gz`` and ``glove.txt``."""
    return Path(path.stem).suffix if path.suffix == ".gz" else path.suffix


def str_items(words: Any, name: str) -> list[str]:
    """The strings of the iterable ``words`` as a list; ``TypeError`` naming ``name`` for a bare str
    (which would be read as its characters), a non-iterable or an item that is not a str."""
    if isinstance(words, (str, bytes)) or not isinstance(words, Iterable):
        hint = f" (one word: [{words!r}])" if isinstance(words, str) else ""
        raise TypeError(f"{name} must be an iterable of str, got {type(words).__name__}{hint}")
    out = list(words)
    for i, w in enumerate(out):
        if not isinstance(w, str):
            raise TypeError(f"{name} must hold str only, got {type(w).__name__} at position {i}")
    return out


def _check_words(words: Any, name: str) -> list[str]:
    """A list of distinct, non-empty strings, or a TypeError/ValueError naming ``name``."""
    out = str_items(words, name)
    for w in out:
        if not w:
            raise ValueError(f"{name} holds an empty string")
    seen: set[str] = set()
    for w in out:
        if w in seen:
            raise ValueError(f"{name} holds {w!r} more than once")
        seen.add(w)
    return out


def _read_text(f: IO[bytes], path: Path) -> tuple[list[str], AnyFloatArray]:
    words: list[str] = []
    rows: list[npt.NDArray[np.float32]] = []
    dim = -1
    for lineno, raw in enumerate(io.TextIOWrapper(f, encoding="utf-8", errors="strict"), 1):
        parts = raw.rstrip("\n\r").rstrip(" ").split(" ")
        if lineno == 1 and len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            continue  # word2vec header: n_words dim
        if parts == [""]:
            continue
        if dim < 0:
            dim = len(parts) - 1
            if dim < 1:
                raise ValueError(f"{path}: line {lineno} holds a word and no vector")
        if len(parts) != dim + 1:
            raise ValueError(f"{path}: line {lineno} has {len(parts) - 1} values, expected {dim}")
        try:
            rows.append(np.asarray(parts[1:], dtype=np.float32))
        except ValueError as exc:
            raise ValueError(f"{path}: line {lineno} holds a non-numeric value") from exc
        words.append(parts[0])
    if not words:
        raise ValueError(f"{path} holds no vectors")
    return words, np.vstack(rows)


def _read_word2vec_bin(f: IO[bytes], path: Path) -> tuple[list[str], AnyFloatArray]:
    header = f.readline().split()
    if len(header) != 2 or not all(h.isdigit() for h in header):
        raise ValueError(f"{path}: not a word2vec binary file (no 'n_words dim' header)")
    n, dim = int(header[0]), int(header[1])
    if n < 1 or dim < 1:
        raise ValueError(f"{path}: header announces {n} words of dimension {dim}")
    words: list[str] = []
    vectors = np.empty((n, dim), dtype=np.float32)
    for i in range(n):
        chars = bytearray()
        while True:
            c = f.read(1)
            if not c:
                raise ValueError(f"{path}: file ends after {i} of {n} words")
            if c == b" ":
                break
            if c != b"\n" or chars:
                chars += c
        words.append(chars.decode("utf-8"))
        buf = f.read(4 * dim)
        if len(buf) != 4 * dim:
            raise ValueError(f"{path}: file ends inside the vector of word {i}")
        vectors[i] = np.frombuffer(buf, dtype="<f4")
    return words, vectors


def _read_npy(path: Path, vocab: str | os.PathLike[str] | None) -> tuple[list[str], AnyFloatArray]:
    with _open(path) as f:
        arr = np.load(io.BytesIO(f.read()), allow_pickle=False)
    if vocab is None:
        stem = Path(path.stem).stem if path.suffix == ".gz" else path.stem
        cands = [path.with_name(stem + ".vocab.txt"), path.with_name(stem + ".vocab"), path.with_name(stem + ".txt")]
        found = [c for c in cands if c.exists()]
        if not found:
            raise ValueError(f"{path}: a .npy file needs its vocabulary: pass vocab= (one word per line)")
        vocab = found[0]
    with _open(Path(vocab)) as vf:
        words = [w.rstrip("\n\r") for w in io.TextIOWrapper(vf, encoding="utf-8")]
    while words and not words[-1]:
        words.pop()
    return words, arr


def _read_kv(path: Path) -> tuple[list[str], AnyFloatArray]:
    try:
        models = importlib.import_module("gensim.models")
    except ImportError as exc:
        raise ImportError("reading gensim .kv files needs gensim (pip install gensim)") from exc
    kv = models.KeyedVectors.load(str(path))
    return list(kv.index_to_key), np.asarray(kv.vectors)


class Embeddings:
    """A vocabulary and its word vectors.

    Parameters
    ----------
    words : sequence of str of length n_words
        Distinct, non-empty words.
    vectors : array-like of shape (n_words, dim)
        Real vectors (float32 is kept, anything else becomes float64; NaN/inf rejected). Copied.

    Attributes
    ----------
    words : tuple of str
    vectors : ndarray of shape (n_words, dim)
        Read-only.
    dim : int

    Raises
    ------
    ValueError
        Mismatched lengths, duplicate or empty words, NaN/inf vectors.
    TypeError
        Non-string words or non-numeric vectors.

    Examples
    --------
    >>> import numpy as np
    >>> from thrifty.text import Embeddings
    >>> emb = Embeddings(["good", "great", "bad"], np.array([[1.0, 0.1], [0.9, 0.2], [-1.0, 0.0]]))
    >>> [w for w, _ in emb.most_similar("good", topn=2)]
    ['great', 'bad']
    >>> emb.normalize(l2=True, abtt=0)["bad"].tolist()
    [-1.0, 0.0]
    """

    def __init__(self, words: Sequence[str], vectors: npt.ArrayLike) -> None:
        w = _check_words(words, "words")
        v = check_finite_matrix(np.array(vectors, copy=True), "vectors", None)
        if v.shape[0] != len(w):
            raise ValueError(f"vectors has {v.shape[0]} rows but words has {len(w)} entries")
        v.setflags(write=False)
        self.words: tuple[str, ...] = tuple(w)
        self.vectors: AnyFloatArray = v
        self._index = {word: i for i, word in enumerate(w)}
        self._unit: FloatArray | None = None

    # ---- construction ----------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str], *, vocab: str | os.PathLike[str] | None = None) -> Embeddings:
        """Read embeddings from ``.txt``/``.vec`` (word2vec/GloVe text), ``.bin`` (word2vec binary),
        ``.kv`` (gensim) or ``.npy`` (+ vocabulary), each also gzip-compressed (``.gz``).

        Parameters
        ----------
        path : str or PathLike
            The file; its suffix picks the format.
        vocab : str or PathLike, optional
            For ``.npy``: the vocabulary file (one word per line). Default: ``<stem>.vocab.txt``,
            ``<stem>.vocab`` or ``<stem>.txt`` beside the array.

        Returns
        -------
        Embeddings

        Raises
        ------
        ValueError
            Unknown suffix, a malformed file (ragged rows, a truncated binary), a missing vocabulary.
        FileNotFoundError
            No such file.
        ImportError
            A ``.kv`` file without gensim installed.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> from thrifty.text import Embeddings
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "tiny.vec"
        >>> _ = p.write_text("2 3\\ncat 1 0 0\\ndog 0.9 0.1 0\\n")
        >>> Embeddings.load(p).words
        ('cat', 'dog')
        """
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"path: no such file {p}")
        kind = _base_suffix(p)
        if kind in _TEXT_SUFFIXES:
            with _open(p) as f:
                words, vectors = _read_text(f, p)
        elif kind == ".bin":
            with _open(p) as f:
                words, vectors = _read_word2vec_bin(f, p)
        elif kind == ".npy":
            words, vectors = _read_npy(p, vocab)
        elif kind == ".kv" and p.suffix != ".gz":
            words, vectors = _read_kv(p)
        else:
            raise ValueError(f"path: unknown embeddings format {p.name!r} (use .txt, .vec, .bin, .kv or .npy, optionally .gz)")
        return cls(words, vectors)

    @classmethod
    def from_encoder(
        cls, model: Any, words: Sequence[str], *, batch_size: int = 256, max_length: int = 16, device: str = "cpu"
    ) -> Embeddings:
        """Embed each word alone with a transformer encoder (mean pooling over its tokens).

        Parameters
        ----------
        model : str, PathLike or model object
            A folder holding a transformers model and tokenizer (loaded with ``AutoTokenizer`` /
            ``AutoModel``, offline files only), a sentence-transformers model (anything with ``encode``),
            or a ``(tokenizer, model)`` pair of transformers objects.
        words : sequence of str
            Distinct words to embed.
        batch_size : int, default=256
        max_length : int, default=16
            Tokens per word at most (longer words are truncated).
        device : str, default="cpu"
            torch device for a transformers model.

        Returns
        -------
        Embeddings
            float32 vectors: the mean of the last hidden states over the attention mask (the
            ``[CLS]``/``[SEP]`` tokens included, as sentence-transformers pools), not normalised.

        Raises
        ------
        TypeError, ValueError
            Bad ``words`` or parameters, or a ``model`` that is none of the above.
        ImportError
            transformers/torch missing for a model folder.

        Examples
        --------
        >>> import numpy as np
        >>> from thrifty.text import Embeddings
        >>> class Toy:  # anything with a sentence-transformers style encode()
        ...     def encode(self, texts, batch_size=32):
        ...         return np.array([[len(t), t.count("a")] for t in texts], dtype=float)
        >>> Embeddings.from_encoder(Toy(), ["a", "banana"]).vectors.tolist()
        [[1.0, 1.0], [6.0, 3.0]]
        """
        w = _check_words(words, "words")
        if not w:
            raise ValueError("words must hold at least one word")
        bs = check_int(batch_size, "batch_size", 1)
        ml = check_int(max_length, "max_length", 3)
        if hasattr(model, "encode") and not isinstance(model, (str, os.PathLike, tuple)):
            vecs = np.asarray(model.encode(w, batch_size=bs), dtype=np.float32)
            return cls(w, vecs)
        tokenizer, net = _load_transformers(model)
        return cls(w, _mean_pooled(tokenizer, net, w, bs, ml, device))

    # ---- mapping protocol ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self.words)

    def __getitem__(self, word: str) -> AnyFloatArray:
        try:
            row: AnyFloatArray = self.vectors[self._index[word]]
        except KeyError:
            raise KeyError(f"word {word!r} is not in the vocabulary") from None
        return row

    def __repr__(self) -> str:
        return f"Embeddings(n_words={len(self)}, dim={self.dim}, dtype={self.vectors.dtype})"

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return int(self.vectors.shape[1])

    def index(self, word: str) -> int:
        """Row of ``word`` (KeyError if absent)."""
        try:
            return self._index[word]
        except KeyError:
            raise KeyError(f"word {word!r} is not in the vocabulary") from None

    def lookup(self, words: Iterable[str]) -> tuple[list[int], list[str]]:
        """Rows of the words present and the list of words missing (in input order).

        ``TypeError`` when ``words`` is a bare str or holds something other than str."""
        rows, missing = [], []
        for word in str_items(words, "words"):
            i = self._index.get(word)
            if i is None:
                missing.append(word)
            else:
                rows.append(i)
        return rows, missing

    def subset(self, words: Iterable[str]) -> Embeddings:
        """The embeddings of ``words`` (those present), in their order."""
        rows, _ = self.lookup(dict.fromkeys(str_items(words, "words")))
        return Embeddings([self.words[i] for i in rows], self.vectors[rows])

    # ---- normalisation and neighbours --------------------------------------------------------------
    def centered(self) -> Embeddings:
        """The vectors minus their mean (float64), as a new object.

        Contextual encoders give every word a large shared component; cosines between centred vectors
        are what the poles and scores of :mod:`thrifty.text` report.
        """
        v = np.asarray(self.vectors, dtype=np.float64)
        return Embeddings(self.words, v - v.mean(axis=0))

    def normalize(self, *, l2: bool = True, abtt: int = 1) -> Embeddings:
        """All-but-the-top (Mu & Viswanath 2018) and L2 normalisation, as a new object.

        Parameters
        ----------
        l2 : bool, default=True
            Scale every vector to unit length (last, so the result has unit rows).
        abtt : int, default=1
            Centre the vectors and remove their projections on the top ``abtt`` principal
            directions (0: neither centre nor remove).

        Returns
        -------
        Embeddings
            float64 vectors; zero vectors stay zero.

        Raises
        ------
        ValueError
            ``abtt`` negative or not below min(n_words, dim).
        """
        if not isinstance(l2, (bool, np.bool_)):
            raise TypeError(f"l2 must be a bool, got {type(l2).__name__}")
        k = check_int(abtt, "abtt", 0)
        if k >= min(len(self), self.dim):
            raise ValueError(f"abtt must be below min(n_words, dim) = {min(len(self), self.dim)}, got {k}")
        v = np.asarray(self.vectors, dtype=np.float64)
        if k:
            # on vectors rescaled exactly by a power of two (the SVD of 1e300-scaled ones overflows)
            _, e = np.frexp(np.max(np.abs(v)) if v.size else 0.0)
            v = np.ldexp(v, -e)
            v = v - v.mean(axis=0)
            _, _, vt = np.linalg.svd(v, full_matrices=False)
            top = vt[:k]
            v = np.ldexp(v - (v @ top.T) @ top, e)
        if l2:
            v = unit_rows(v)
        return Embeddings(self.words, v)

    def _unit_vectors(self) -> FloatArray:
        if self._unit is None:
            self._unit = unit_rows(np.asarray(self.vectors, dtype=np.float64))
        return self._unit

    def similar_by_vector(
        self, vector: npt.ArrayLike, topn: int = 10, *, exclude: Iterable[str] = ()
    ) -> list[tuple[str, float]]:
        """The ``topn`` words of largest cosine similarity with ``vector``, best first.

        Parameters
        ----------
        vector : array-like of shape (dim,)
        topn : int, default=10
        exclude : iterable of str
            Words left out of the answer.

        Returns
        -------
        list of (str, float)

        Raises
        ------
        TypeError
            ``vector`` not real numbers (str, complex, object), ``exclude`` not an iterable of str.
        ValueError
            Wrong length, NaN/inf or a zero vector.
        """
        raw = np.asarray(vector)
        if raw.dtype.kind not in "biuf":
            raise TypeError(f"vector must hold real numbers, got dtype {raw.dtype}")
        v = raw.astype(np.float64)
        if v.shape != (self.dim,):
            raise ValueError(f"vector must have shape ({self.dim},), got {v.shape}")
        if not (np.isfinite(v).all() and v.any()):
            raise ValueError("vector must be finite and non-zero")
        n = check_int(topn, "topn", 1)
        sims = self._unit_vectors() @ unit_rows(v)
        drop = [self._index[w] for w in str_items(exclude, "exclude") if w in self._index]
        sims[drop] = -np.inf
        n = min(n, len(self) - len(set(drop)))
        if n == 0:
            return []
        top = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(self.words[i], float(sims[i])) for i in top[:n]]

    def most_similar(self, word: str, topn: int = 10) -> list[tuple[str, float]]:
        """Nearest neighbours of ``word`` by cosine (the word itself left out).

        Raises
        ------
        KeyError
            ``word`` is not in the vocabulary.
        """
        return self.similar_by_vector(self[word], topn, exclude=(word,))


def unit_rows(v: FloatArray) -> FloatArray:
    """``v`` (1-D, or 2-D by rows) scaled to unit length; zero vectors stay zero. Each vector is first
    rescaled exactly by a power of two (its largest |value| into [0.5, 1)), so that vectors at
    1e±300, whose squared norms leave the float range, come out as at unit scale."""
    v = np.asarray(v, dtype=np.float64)
    _, e = np.frexp(np.max(np.abs(v), axis=-1, keepdims=True) if v.size else np.zeros(v.shape[:-1] + (1,)))
    s = np.ldexp(v, -e)
    norms = np.linalg.norm(s, axis=-1, keepdims=True)
    return np.asarray(np.divide(s, norms, out=np.zeros_like(s), where=norms > 0), dtype=np.float64)


def _load_transformers(model: Any) -> tuple[Any, Any]:
    if isinstance(model, tuple) and len(model) == 2:
        return model[0], model[1]
    if isinstance(model, (str, os.PathLike)):
        try:
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise ImportError("from_encoder with a model folder needs transformers and torch") from exc
        path = Path(model)
        if not path.is_dir():
            raise ValueError(f"model: {path} is not a folder holding a transformers model")
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        net = AutoModel.from_pretrained(str(path), local_files_only=True)
        return tok, net
    raise TypeError(
        "model must be a model folder, a (tokenizer, model) pair or an object with encode(), "
        f"got {type(model).__name__}"
    )


def _mean_pooled(tokenizer: Any, net: Any, words: list[str], batch_size: int, max_length: int, device: str) -> AnyFloatArray:
    import torch

    net = net.to(device).eval()
    out = np.empty((len(words), int(net.config.hidden_size)), dtype=np.float32)
    with torch.inference_mode():
        for lo in range(0, len(words), batch_size):
            chunk = words[lo : lo + batch_size]
            enc = tokenizer(chunk, padding=True, truncation=True, max_length=max_length, return_tensors="pt").to(device)
            hidden = net(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
            out[lo : lo + len(chunk)] = pooled.float().cpu().numpy()
    return out
