"""pyflame.utils.dlpack, as torch.utils.dlpack: DLPack capsules in and out."""

from .._interop import from_dlpack

__all__ = ["from_dlpack", "to_dlpack"]


def to_dlpack(tensor):
    """A DLPack capsule sharing `tensor`'s memory (consumed once, by another library's from_dlpack)."""
    return tensor.__dlpack__()
