"""Small data sets that ship with adcuda, so that ``adcuda train`` and the tests need no download.

- ``load_digits()``: the 8x8 handwritten digits (1,797 images, 10 classes), from ``digits.csv.gz``.
- ``load_chars_corpus()``: English text from Python's own ``pydoc_data.topics`` (the help() topics
  that ship with every CPython), as a character-level language-modelling corpus.

See README.md beside this file for where the digits come from and their licence.
"""

import gzip
import importlib.resources
from dataclasses import dataclass

import numpy as np

from ..factories import from_numpy

__all__ = ["load_digits", "load_chars_corpus", "CharCorpus", "DIGITS_FILE"]

DIGITS_FILE = "digits.csv.gz"
_DIGITS_SHAPE = (1797, 65)
_DIGITS_MAX_PIXEL = 16.0


def load_digits():
    """``(images, labels)``: images float32 of shape (1797, 64) scaled from 0..16 to [0, 1] (each row
    an 8x8 image, row-major), labels int64 in 0..9."""
    resource = importlib.resources.files(__name__).joinpath(DIGITS_FILE)
    with resource.open("rb") as raw, gzip.open(raw, "rt") as text:
        table = np.loadtxt(text, delimiter=",", dtype=np.int64)
    if table.shape != _DIGITS_SHAPE:
        raise ValueError(
            f"load_digits: {DIGITS_FILE} holds a table of shape {table.shape}, "
            f"expected {_DIGITS_SHAPE}; the packaged file is damaged"
        )
    images = (table[:, :64] / _DIGITS_MAX_PIXEL).astype(np.float32)
    labels = np.ascontiguousarray(table[:, 64])
    return from_numpy(images), from_numpy(labels)


@dataclass(frozen=True)
class CharCorpus:
    """A text as character ids: ``vocab`` lists the characters (id = position), ``train`` and ``val``
    are int64 tensors of ids (the first ``1 - val_fraction`` of the text and the rest)."""

    text: str
    vocab: tuple
    train: object
    val: object

    @property
    def vocab_size(self):
        return len(self.vocab)

    def encode(self, text):
        index = {ch: i for i, ch in enumerate(self.vocab)}
        unknown = sorted(set(text) - index.keys())
        if unknown:
            raise ValueError(f"CharCorpus.encode: characters not in the vocabulary: {unknown!r}")
        return [index[ch] for ch in text]

    def decode(self, ids):
        return "".join(self.vocab[int(i)] for i in ids)


def _topics_text():
    from pydoc_data.topics import topics

    # sorted by topic name, so that the text (and the split) is the same on every run
    return "\n\n".join(topics[name].strip() for name in sorted(topics)) + "\n"


def load_chars_corpus(val_fraction=0.1):
    """Python's help() topics as a ``CharCorpus``; the last ``val_fraction`` of the text is held out."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"load_chars_corpus: val_fraction must be between 0 and 1, got {val_fraction}")
    text = _topics_text()
    vocab = tuple(sorted(set(text)))
    # characters sort by code point, so each character's id is its code point's rank in the vocabulary
    code_points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    ids = np.searchsorted(np.array([ord(ch) for ch in vocab], dtype=np.uint32), code_points).astype(np.int64)
    split = int(len(ids) * (1 - val_fraction))
    return CharCorpus(text=text, vocab=vocab, train=from_numpy(ids[:split].copy()), val=from_numpy(ids[split:].copy()))
