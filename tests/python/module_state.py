"""A torch.nn module's state, randomised and copied into its pyflame.nn counterpart, for the tests that
run the same layer in both libraries."""

from collections import OrderedDict

import torch

import pyflame as pf
from op_registry import make_values


def to_pf_state(tmod):
    """tmod's state dict as PyFlame tensors, for load_state_dict."""
    return OrderedDict((k, pf.tensor(v.detach().numpy())) for k, v in tmod.state_dict().items())


def randomize(tmod, rng, low=-1.0, high=1.0, running_var_low=None):
    """Non-trivial values, uniform in [low, high], in every floating-point parameter and buffer (biases are
    zeros and norms' weights ones by default); running variances from running_var_low where it is given."""
    with torch.no_grad():
        for name, t in tmod.state_dict().items():
            if t.dtype.is_floating_point:
                lo = running_var_low if running_var_low is not None and name.endswith("running_var") else low
                t.copy_(torch.from_numpy(make_values(rng, tuple(t.shape), "float32", low=lo, high=high)))
