"""`python -m pyflame.demo`: the device report, then a small CNN trained on the
handwritten-digits data set (pyflame.datasets.load_digits) on the best
available device (a GPU through the ROCm backend when one is usable, else the
CPU), with a progress bar; prints the test accuracy and the time, and writes
the loss and accuracy curves to a PNG. The bar (tqdm) and the plot (matplotlib)
come with the demo extra (`pip install .[demo]`); without them it runs and
says so.

    python -m pyflame.demo [--epochs 15] [--device cpu|rocm] [--plot digits_training.png]
"""

import argparse
import time

import pyflame as pf
from pyflame import nn
from pyflame.info import report
from pyflame.utils.data import DataLoader, TensorDataset, random_split


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),  # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(128, 10),
    )


def best_device():
    return "rocm" if pf.rocm_is_available() else "cpu"


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    with pf.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += int((model(x).argmax(dim=1) == y).sum().item())
            total += y.shape[0]
    model.train()
    return correct / total


def save_plot(path, losses, accuracies):
    try:
        import matplotlib
    except ImportError:
        print("No plot: matplotlib is not installed (`pip install .[demo]` adds it and the progress bar)")
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.plot(range(1, len(losses) + 1), losses, marker="o")
    a.set(xlabel="epoch", ylabel="training loss", title="loss")
    b.plot(range(1, len(accuracies) + 1), [100 * v for v in accuracies], marker="o", color="tab:green")
    b.set(xlabel="epoch", ylabel="test accuracy (%)", title="accuracy")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--device", default=None, help="cpu or rocm (default: the best available)")
    ap.add_argument("--plot", default="digits_training.png", help="where to write the curves ('' for none)")
    args = ap.parse_args(argv)
    try:
        from tqdm import tqdm
    except ImportError:  # a plain `pip install .`: epochs are printed without a bar
        tqdm = None

    print(report())
    device = args.device or best_device()
    pf.set_device(device)
    pf.manual_seed(0)
    images, labels = pf.datasets.load_digits(device="cpu")  # batches move to the device as they are used
    train, test = random_split(TensorDataset(images, labels), [0.8, 0.2], generator=pf.Generator().manual_seed(0))
    train_loader = DataLoader(train, batch_size=32, shuffle=True, generator=pf.Generator().manual_seed(1))
    test_loader = DataLoader(test, batch_size=256)
    model = make_model().to(device)
    optimizer = pf.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = pf.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    print(f"\nTraining a small CNN on {len(train)} handwritten digits (8x8), testing on {len(test)}, "
          f"on '{pf.get_device()}':")
    losses, accuracies = [], []
    start = time.perf_counter()
    for epoch in range(args.epochs):
        total = count = 0.0
        bar = train_loader
        if tqdm:
            bar = tqdm(train_loader, desc=f"epoch {epoch + 1:2d}/{args.epochs}", leave=False, ncols=80)
        for x, y in bar:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = pf.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item() * y.shape[0]
            count += y.shape[0]
        scheduler.step()
        losses.append(total / count)
        accuracies.append(evaluate(model, test_loader, device))
        (tqdm.write if tqdm else print)(f"epoch {epoch + 1:2d}: loss {losses[-1]:.4f}, test accuracy "
                                        f"{100 * accuracies[-1]:.1f}%")
    pf.synchronize()
    seconds = time.perf_counter() - start
    print(f"\nTest accuracy: {100 * accuracies[-1]:.1f}% after {args.epochs} epochs, {seconds:.1f} s on "
          f"'{pf.get_device()}'")
    if args.plot and save_plot(args.plot, losses, accuracies):
        print(f"Loss and accuracy curves: {args.plot}")
    return accuracies[-1]


if __name__ == "__main__":
    main()
