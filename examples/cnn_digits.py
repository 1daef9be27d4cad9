"""A small convolutional network on the 8x8 handwritten digits that ship with adcuda.

    python examples/cnn_digits.py                 # 12 epochs: ~98.7% test accuracy, ~2 s on one core
    python examples/cnn_digits.py --quick         # 2 epochs, a few seconds on one CPU core
    python examples/cnn_digits.py --device cpu

The code is what a PyTorch user writes: with ``import torch`` in place of ``import adcuda as torch``
the model and training code run unchanged (tests/test_examples.py runs this model under PyTorch from
the same weights and compares); only the bundled data comes from ``adcuda.data``.
"""

import argparse

import adcuda as torch
import adcuda.nn as nn
from adcuda.data import load_digits


def build_model(nn):
    """Two conv blocks and a classifier; ``nn`` is passed in so that the tests can build the same model
    with PyTorch's ``torch.nn`` and compare."""
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 8x8 -> 4x4
        nn.Conv2d(16, 32, kernel_size=3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 4x4 -> 2x2
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, 10),
    )


def train_step(model, optimizer, criterion, images, labels):
    model.train()
    optimizer.zero_grad()
    loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def accuracy(model, images, labels, batch_size=512):
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits = model(images[start : start + batch_size])
            correct += (logits.argmax(dim=1) == labels[start : start + batch_size]).sum().item()
    return correct / len(images)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2 epochs: a smoke run of a few seconds")
    args = parser.parse_args()
    if args.quick:
        args.epochs = 2
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    images, labels = load_digits()
    images = images.view(-1, 1, 8, 8)  # (N, 64) rows -> (N, channels, height, width)
    order = torch.randperm(len(images))
    test_idx, train_idx = order[:300], order[300:]
    x_train, y_train = images[train_idx].to(device), labels[train_idx].to(device)
    x_test, y_test = images[test_idx].to(device), labels[test_idx].to(device)

    model = build_model(nn).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    criterion = nn.CrossEntropyLoss()

    print(
        f"device {device}, {len(x_train)} training and {len(x_test)} test images, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters"
    )
    print(f"test accuracy before training: {accuracy(model, x_test, y_test):.3f}")
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(x_train), device=device)
        losses = []
        for start in range(0, len(x_train), args.batch_size):
            batch = perm[start : start + args.batch_size]
            losses.append(train_step(model, optimizer, criterion, x_train[batch], y_train[batch]))
        scheduler.step()
        print(f"epoch {epoch:2d}  train loss {sum(losses) / len(losses):.4f}")
    print(f"test accuracy: {accuracy(model, x_test, y_test):.3f}")


if __name__ == "__main__":
    main()
