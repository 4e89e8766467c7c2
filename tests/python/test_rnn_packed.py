"""nn.utils.rnn's packed sequences and the recurrent layers over them, against torch on both devices."""

import numpy as np
import pytest
import torch

import pyflame as pf
from pyflame.nn.utils.rnn import (PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence,
                                  pad_sequence, unpack_sequence, unpad_sequence)


def _np(t):
    return (t.detach().cpu() if isinstance(t, pf.Tensor) else t.detach()).detach().numpy()


def _padded(rng, lengths, features, batch_first):
    """A (T, B, F) batch (or (B, T, F)) whose padded positions hold values too: they must not count."""
    x = rng.standard_normal((max(lengths), len(lengths), features)).astype(np.float32)
    return np.ascontiguousarray(x.transpose(1, 0, 2)) if batch_first else x


@pytest.mark.parametrize("lengths,enforce_sorted", [([5, 3, 3, 1], True), ([2, 6, 1, 4], False)])
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_and_pad_as_torch(lengths, enforce_sorted, batch_first, device, rng):
    x = _padded(rng, lengths, 3, batch_first)
    got = pack_padded_sequence(pf.tensor(x, device=device), lengths, batch_first, enforce_sorted)
    want = torch.nn.utils.rnn.pack_padded_sequence(torch.from_numpy(x), lengths, batch_first, enforce_sorted)
    assert isinstance(got, PackedSequence) and got.data.device.type == device
    np.testing.assert_array_equal(_np(got.data), _np(want.data))
    np.testing.assert_array_equal(_np(got.batch_sizes), _np(want.batch_sizes))
    for g, w in ((got.sorted_indices, want.sorted_indices), (got.unsorted_indices, want.unsorted_indices)):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_array_equal(_np(g), _np(w))
    for total in (None, max(lengths) + 2):
        padded, lens = pad_packed_sequence(got, batch_first, -2.0, total)
        t_padded, t_lens = torch.nn.utils.rnn.pad_packed_sequence(want, batch_first, -2.0, total)
        np.testing.assert_array_equal(_np(padded), _np(t_padded))
        np.testing.assert_array_equal(_np(lens), _np(t_lens))
        assert lens.dtype == pf.int64 and lens.device.type == "cpu"


def test_sequence_lists_and_errors(device, rng):
    seqs = [rng.standard_normal((n, 2)).astype(np.float32) for n in (4, 2, 3)]
    got = pack_sequence([pf.tensor(s, device=device) for s in seqs], enforce_sorted=False)
    want = torch.nn.utils.rnn.pack_sequence([torch.from_numpy(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(_np(got.data), _np(want.data))
    for a, b in zip(unpack_sequence(got), seqs):
        np.testing.assert_array_equal(_np(a), b)
    padded = pad_sequence([pf.tensor(s, device=device) for s in seqs], batch_first=True)
    for a, b in zip(unpad_sequence(padded, [4, 2, 3], batch_first=True), seqs):
        np.testing.assert_array_equal(_np(a), b)
    x = pf.tensor(_padded(rng, [2, 3], 2, False), device=device)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack_padded_sequence(x, [2, 3])
    with pytest.raises(RuntimeError, match="greater than 0"):
        pack_padded_sequence(x, [3, 0])
    with pytest.raises(ValueError, match="total_length"):
        pad_packed_sequence(pack_padded_sequence(x, [3, 2]), total_length=2)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first,with_hx", [(False, False), (True, True)])
def test_recurrent_layers_over_packed_sequences(kind, batch_first, with_hx, device, rng):
    lengths, features, hidden, layers = [3, 7, 1, 7, 4], 5, 6, 2
    torch.manual_seed(0)
    tmod = getattr(torch.nn, kind)(features, hidden, layers, batch_first=batch_first, bidirectional=True)
    pmod = getattr(pf.nn, kind)(features, hidden, layers, batch_first=batch_first, bidirectional=True)
    pmod.load_state_dict({k: pf.tensor(_np(v)) for k, v in tmod.state_dict().items()})
    pmod.to(device)
    x = _padded(rng, lengths, features, batch_first)
    tx, px = torch.from_numpy(x).requires_grad_(True), pf.tensor(x, device=device).requires_grad_(True)
    hx = t_hx = None
    if with_hx:
        h = [rng.standard_normal((2 * layers, len(lengths), hidden)).astype(np.float32) for _ in range(2)]
        hx = (tuple(pf.tensor(a, device=device) for a in h) if kind == "LSTM" else pf.tensor(h[0], device=device))
        t_hx = tuple(torch.from_numpy(a) for a in h) if kind == "LSTM" else torch.from_numpy(h[0])
    got, got_final = pmod(pack_padded_sequence(px, lengths, batch_first, enforce_sorted=False), hx)
    want, want_final = tmod(torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, batch_first, enforce_sorted=False),
                            t_hx)
    assert isinstance(got, PackedSequence)
    np.testing.assert_allclose(_np(got.data), _np(want.data), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(_np(got.batch_sizes), _np(want.batch_sizes))
    finals = (got_final, want_final) if kind != "LSTM" else None
    pairs = [finals] if finals else list(zip(got_final, want_final))
    for g, w in pairs:
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-5, atol=1e-5)
    # gradients through the packed output and the final states
    g_out = rng.standard_normal(tuple(want.data.shape)).astype(np.float32)
    g_fin = rng.standard_normal(tuple(pairs[0][1].shape)).astype(np.float32)
    ((got.data * pf.tensor(g_out, device=device)).sum() + (pairs[0][0] * pf.tensor(g_fin, device=device)).sum()
     ).backward()
    ((want.data * torch.from_numpy(g_out)).sum() + (pairs[0][1] * torch.from_numpy(g_fin)).sum()).backward()
    np.testing.assert_allclose(_np(px.grad), _np(tx.grad), rtol=1e-4, atol=1e-5)
    for (name, p), (_, t) in zip(pmod.named_parameters(), tmod.named_parameters()):
        np.testing.assert_allclose(_np(p.grad), _np(t.grad), rtol=1e-4, atol=1e-4, err_msg=name)
