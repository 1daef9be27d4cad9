"""A variational autoencoder on the 8x8 handwritten digits that ship with adcuda.

    python examples/vae.py                        # 60 epochs: ~24.5 nats per test image, ~2 s on one core
    python examples/vae.py --quick                # 3 epochs, a few seconds on one CPU core
    python examples/vae.py --device cpu

The encoder gives a Gaussian over an 8-dimensional code, a sample is drawn with the reparameterisation
trick (so that gradients flow through it), and the loss is the negative evidence lower bound: the
reconstruction's binary cross-entropy plus the KL divergence of the code from a standard normal. With
``import torch`` in place of ``import adcuda as torch`` the code runs unchanged; only the bundled data
comes from ``adcuda.data``.
"""

import argparse

import adcuda as torch
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.data import load_digits


class VAE(nn.Module):
    def __init__(self, pixels=64, hidden=128, latent=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(pixels, hidden), nn.ReLU())
        self.to_mu = nn.Linear(hidden, latent)
        self.to_logvar = nn.Linear(hidden, latent)
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, pixels))

    def forward(self, x):
        h = self.encoder(x)
        mu, logvar = self.to_mu(h), self.to_logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)  # the reparameterisation trick
        return self.decoder(z), mu, logvar  # decoder gives logits per pixel


def negative_elbo(logits, x, mu, logvar):
    """Per-image loss: reconstruction cross-entropy (pixels are intensities in [0, 1]) + KL(q(z|x) || N(0, I))."""
    reconstruction = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (reconstruction + kl) / len(x)


@torch.no_grad()
def evaluate(model, x):
    model.eval()
    logits, mu, logvar = model(x)
    loss = negative_elbo(logits, x, mu, logvar).item()
    model.train()
    return loss


def ascii_digit(pixels):
    shades = " .:-=+*#%@"
    rows = pixels.view(8, 8).tolist()
    return ["".join(shades[min(int(v * len(shades)), len(shades) - 1)] * 2 for v in row) for row in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="3 epochs: a smoke run of a few seconds")
    args = parser.parse_args()
    if args.quick:
        args.epochs = 3
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    images, _ = load_digits()
    order = torch.randperm(len(images))
    x_test, x_train = images[order[:300]].to(device), images[order[300:]].to(device)

    model = VAE().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    print(f"device {device}, {len(x_train)} training and {len(x_test)} test images")
    print(f"test loss (negative ELBO, nats per image) before training: {evaluate(model, x_test):.2f}")
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(x_train), device=device)
        total = 0.0
        for start in range(0, len(x_train), args.batch_size):
            x = x_train[perm[start : start + args.batch_size]]
            logits, mu, logvar = model(x)
            loss = negative_elbo(logits, x, mu, logvar)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(x)
        if epoch % max(1, args.epochs // 10) == 0:
            print(f"epoch {epoch:3d}  train loss {total / len(x_train):.2f}")
    print(f"test loss (negative ELBO, nats per image): {evaluate(model, x_test):.2f}")

    # new digits: decode codes drawn from the prior
    model.eval()
    with torch.no_grad():
        samples = torch.sigmoid(model.decoder(torch.randn(4, model.to_mu.out_features, device=device))).cpu()
    print("four digits drawn from the prior:")
    for line in zip(*(ascii_digit(s) for s in samples)):
        print("   ".join(line))


if __name__ == "__main__":
    main()
