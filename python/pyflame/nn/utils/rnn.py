"""torch.nn.utils.rnn: batches of sequences of different lengths, padded or packed.

A PackedSequence holds the sequences' elements time step by time step, longest sequence first:
`data` (total elements, *), `batch_sizes` (how many sequences are still running at each step, a
CPU int64 tensor), and `sorted_indices` / `unsorted_indices` (the order by length and back; None
when the batch came sorted). The RNN modules take one and return their output packed the same way;
their final states are those of each sequence's last element, in the batch's own order.
"""

import collections

from ... import _C, _creation, _sorting


class PackedSequence(collections.namedtuple("PackedSequence",
                                            ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    __slots__ = ()

    def __new__(cls, data, batch_sizes, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _inverse(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """The data moved or cast as Tensor.to; the indices follow the data's device."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = lambda t: None if t is None else t.to(data.device)  # noqa: E731
        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def cpu(self):
        return self.to("cpu")

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return self.data.is_pinned()


def _inverse(permutation):
    inverse = _creation.empty(permutation.shape[0], dtype=permutation.dtype, device=permutation.device)
    return inverse.scatter_(0, permutation, _creation.arange(permutation.shape[0], device=permutation.device))


def _lengths_list(lengths):
    if isinstance(lengths, _C.Tensor):
        if lengths.dim() != 1:
            raise ValueError(f"lengths must be a 1D tensor, got {lengths.dim()}D")
        return [int(n) for n in lengths.cpu().tolist()]
    return [int(n) for n in lengths]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks tensors of shapes (L_i, *) into (max L, B, *) (or (B, max L, *) with batch_first), each padded
    along its first dim with padding_value, after its elements (padding_side='right') or before ('left')."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, _C.Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise ValueError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        extra = longest - s.shape[0]
        pad = [0, 0] * (s.dim() - 1) + ([0, extra] if padding_side == "right" else [extra, 0])
        padded.append(_C.pad(s, pad, "constant", padding_value) if extra else s)
    return _C.stack(padded, 0 if batch_first else 1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences of `lengths` (a list
    or a 1-D CPU int64 tensor). With enforce_sorted the lengths must decrease; otherwise the batch is
    sorted here and the PackedSequence remembers the order."""
    lengths = _lengths_list(lengths)
    if batch_first:
        input = input.transpose(0, 1)
    if len(lengths) != input.shape[1]:
        raise ValueError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} (batch_size="
                         f"{input.shape[1]})")
    if any(n <= 0 for n in lengths):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' "
                           "that is <= 0")
    sorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                               "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                               "to sidestep this requirement if you do not need ONNX exportability.")
    else:
        ordered, sorted_indices = _sorting.sort(_creation.tensor(lengths), descending=True, stable=True)
        lengths = ordered.tolist()
        sorted_indices = sorted_indices.to(input.device)
        input = input.index_select(1, sorted_indices)
    if lengths[0] > input.shape[0]:
        raise RuntimeError(f"Expected the longest length ({lengths[0]}) to be at most the padded length "
                           f"({input.shape[0]})")
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = _C.cat([input[t, :b] for t, b in enumerate(batch_sizes)], 0)
    return PackedSequence(data, _creation.tensor(batch_sizes, dtype=_C.dtype.int64), sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths as a CPU int64
    tensor), in the batch's own order; T is the longest length, or total_length if given."""
    batch_sizes = _lengths_list(sequence.batch_sizes)
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, "
                             f"but got total_length={total_length} and max sequence length being {steps}")
        steps = total_length
    data = sequence.data
    batch = batch_sizes[0] if batch_sizes else 0
    rows, offset = [], 0
    for t in range(steps):
        b = batch_sizes[t] if t < len(batch_sizes) else 0
        part = data[offset:offset + b]
        offset += b
        if b < batch:
            fill = _creation.full((batch - b,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype,
                                  device=data.device)
            part = _C.cat([part, fill], 0)
        rows.append(part)
    padded = _C.stack(rows, 0)
    lengths = _creation.tensor([sum(1 for b in batch_sizes if b > i) for i in range(batch)], dtype=_C.dtype.int64,
                                device="cpu")
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices.cpu())
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of tensors (L_i, *): pack_padded_sequence(pad_sequence(sequences), lengths)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The sequences of a padded batch as a list of tensors (L_i, *)."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:n] for seq, n in zip(padded_sequences.unbind(0), _lengths_list(lengths))]


def unpack_sequence(packed_sequences):
    """The sequences of a PackedSequence as a list of tensors (L_i, *), in the batch's own order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
