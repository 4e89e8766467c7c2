"""pyflame.optim: optimizers and learning rate schedulers, as torch.optim.

    import pyflame as pf
    import pyflame.optim

    opt = pf.optim.AdamW(model.parameters(), lr=1e-3)
    sched = pf.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
    for x, y in batches:
        opt.zero_grad()
        pf.mse_loss(model(x), y).backward()
        opt.step()
        sched.step()

See docs/training.md.
"""

from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .sgd import SGD  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
