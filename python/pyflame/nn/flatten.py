"""Flatten merges dims start_dim..end_dim into one; Unflatten splits one dim into several (views when the
layout allows)."""

from .module import Module


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size` (ints, one of them may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, str):
            raise TypeError("Unflatten: named dims (a str dim) need named tensors, which PyFlame does not have")
        if not isinstance(dim, int):
            raise TypeError("invalid argument type for dim parameter")
        if not isinstance(unflattened_size, (tuple, list)) or not all(isinstance(s, int) for s in unflattened_size):
            raise TypeError(f"unflattened_size must be tuple of ints, but found type {type(unflattened_size).__name__}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        dim = self.dim + input.dim() if self.dim < 0 else self.dim
        if not 0 <= dim < input.dim():
            raise IndexError(f"Dimension out of range (expected to be in range of [{-input.dim()}, "
                             f"{input.dim() - 1}], but got {self.dim})")
        sizes = list(self.unflattened_size)
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        if sizes.count(-1) > 1:
            raise ValueError("unflatten: only one dimension can be inferred (-1)")
        n = input.shape[dim]
        if -1 in sizes:
            if known == 0 or n % known:
                raise ValueError(f"unflatten: provided sizes {tuple(sizes)} don't multiply up to the size of dim "
                                 f"{self.dim} ({n}) in the input tensor")
            sizes[sizes.index(-1)] = n // known
        elif known != n:
            raise ValueError(f"unflatten: provided sizes {tuple(sizes)} don't multiply up to the size of dim "
                             f"{self.dim} ({n}) in the input tensor")
        shape = tuple(input.shape)
        return input.reshape(shape[:dim] + tuple(sizes) + shape[dim + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
