"""pyflame.nn.functional: the functional ops under torch.nn.functional's names.

    import pyflame.nn.functional as F
    y = F.relu(F.linear(x, w, b))

Each name is the pf op of the same name (pf.conv2d is F.conv2d). A name of
torch.nn.functional that this build of PyFlame does not have raises
AttributeError saying so.
"""

import pyflame as _pf

# torch.nn.functional names that PyFlame provides as pf.<name>.
_OPS = (
    "linear",
    "conv1d", "conv2d", "conv3d", "conv_transpose2d",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d",
    "pad",
    "batch_norm", "layer_norm", "group_norm", "rms_norm",
    "relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "leaky_relu", "elu", "softplus",
    "hardtanh",
    "dropout", "embedding", "one_hot",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div",
    "scaled_dot_product_attention",
)

for _name in _OPS:
    if hasattr(_pf, _name):
        globals()[_name] = getattr(_pf, _name)
del _name

__all__ = [n for n in _OPS if n in globals()]


def __getattr__(name):
    if name in _OPS:
        raise AttributeError(f"pyflame.nn.functional.{name}: pf.{name} is not in this build of PyFlame")
    raise AttributeError(f"module 'pyflame.nn.functional' has no attribute '{name}'")
