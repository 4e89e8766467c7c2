"""pyflame.nn: layers as modules, following torch.nn (names, arguments, state dict keys, repr).

    import pyflame as pf
    import pyflame.nn as nn

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    logits = model(pf.randn(32, 784))

See docs/nn.md for what is supported.
"""

from . import functional, init  # noqa: F401
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh  # noqa: F401
from .container import ModuleList, Sequential  # noqa: F401
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose2d  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .embedding import Embedding  # noqa: F401
from .flatten import Flatten  # noqa: F401
from .linear import Identity, Linear  # noqa: F401
from .loss import BCELoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss  # noqa: F401
from .module import Module  # noqa: F401
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm  # noqa: F401
from .parameter import Parameter  # noqa: F401
from .pooling import (  # noqa: F401
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
)
