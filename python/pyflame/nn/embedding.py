"""Embedding: a lookup table of num_embeddings vectors, N(0, 1) initialised with the padding row zero."""

from .. import NotSupportedError, _creation
from ..autograd.grad_mode import no_grad
from . import functional as F
from . import init
from .module import Module, _changed_settings
from .parameter import Parameter


class Embedding(Module):
    """torch.nn.Embedding. sparse=True gives the same gradient values as a dense tensor (PyFlame has no
    sparse tensors); scale_grad_by_freq and max_norm (which rewrites the weight) are not supported."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
        super().__init__()
        if scale_grad_by_freq:
            raise NotSupportedError("nn.Embedding: scale_grad_by_freq=True is not supported; see docs/nn.md")
        if max_norm is not None:
            raise NotSupportedError("nn.Embedding: max_norm (renormalising looked-up rows in place) is not "
                                    "supported; see docs/nn.md")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be within num_embeddings ({num_embeddings}), "
                                 f"got {padding_idx}")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(_creation.empty(num_embeddings, embedding_dim, dtype=dtype, device=device))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: the weight's shape {tuple(_weight.shape)} does not match "
                                 f"(num_embeddings, embedding_dim) = ({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        if embeddings.dim() != 2:
            raise ValueError(f"Embeddings parameter is expected to be 2-dimensional, got {embeddings.dim()}-D")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings,
                   _freeze=freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        return ", ".join([str(self.num_embeddings), str(self.embedding_dim),
                          *_changed_settings(self, padding_idx=None, max_norm=None, norm_type=2,
                                             scale_grad_by_freq=False, sparse=False)])
