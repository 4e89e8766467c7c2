"""Small data sets shipped with PyFlame, for demos and tests.

load_digits(): the UCI optical recognition of handwritten digits test set
(1,797 images of 8x8 pixels valued 0..16, ten classes), the copy that
scikit-learn also ships; licence and citation in DIGITS_LICENSE.md.
"""

import os

import numpy as np

from .. import _creation

_HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits(device=None):
    """(images, labels): float32 (1797, 1, 8, 8) scaled to [0, 1] and int64 (1797,) class labels."""
    with np.load(os.path.join(_HERE, "digits.npz")) as data:
        images = data["images"].astype(np.float32)[:, None] / 16.0
        labels = data["labels"].astype(np.int64)
    return _creation.tensor(images, device=device), _creation.tensor(labels, device=device)
