"""Dropout: zeroes elements with probability p in training (scaling the rest by 1/(1-p)); identity in eval."""

from . import functional as F
from .module import Module


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        if not self.training:
            return input
        out = F.dropout(input, self.p, True)
        return input.copy_(out) if self.inplace else out

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
