"""Dropout layers: Dropout zeroes elements with probability p in training (scaling the rest by 1/(1-p));
Dropout1d/2d/3d zero whole channels; all are the identity in eval."""

from . import functional as F
from .module import _OpModule
from .utils import _op_classes


class _DropoutNd(_OpModule):
    _settings = ("p", "inplace")

    def __init__(self, p=0.5, inplace=False):
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        super().__init__(p, inplace)

    def forward(self, input):
        return self._fn(input, self.p, self.training, self.inplace)


Dropout, Dropout1d, Dropout2d, Dropout3d = _op_classes(_DropoutNd, Dropout=F.dropout, Dropout1d=F.dropout1d,
                                                       Dropout2d=F.dropout2d, Dropout3d=F.dropout3d)
