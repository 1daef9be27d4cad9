"""A two-layer graph convolutional network (Kipf & Welling) classifying the nodes of a Cora-sized graph.

    python examples/gcn.py                  # 200 epochs, a few seconds on one CPU core
    python examples/gcn.py --quick          # 40 epochs
    python examples/gcn.py --device cpu

The graph is synthetic, made from a seed with Cora's sizes: 2708 nodes in 7 classes, about 5300
undirected edges (mostly between nodes of one class) and 1433 binary bag-of-words features per node,
whose words depend only weakly on the class; 20 labelled nodes per class train, 1000 others test. Each
layer multiplies by the normalised adjacency D^-1/2 (A + I) D^-1/2, kept as a sparse COO tensor
(``sparse_coo_tensor`` then ``torch.sparse.mm``): the dense 2708 x 2708 matrix is never made. With
``import torch`` in place of ``import adcuda as torch`` the code runs unchanged.
"""

import argparse

import numpy as np

import adcuda as torch
import adcuda.nn as nn
import adcuda.nn.functional as F

NODES, CLASSES, FEATURES, EDGES = 2708, 7, 1433, 5278


def make_graph(seed=0):
    """(features (N, F) float32, labels (N,) int64, edges (2, E) int64, undirected, no self loops)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, NODES)
    # edges: 80% join two nodes of one class, the rest any two nodes
    same = rng.random(EDGES) < 0.8
    source = rng.integers(0, NODES, EDGES)
    by_class = [np.flatnonzero(labels == c) for c in range(CLASSES)]
    target = np.where(
        same,
        [rng.choice(by_class[labels[s]]) for s in source],
        rng.integers(0, NODES, EDGES),
    )
    keep = source != target
    edges = np.concatenate([np.stack([source[keep], target[keep]]), np.stack([target[keep], source[keep]])], 1)
    # words: each class prefers its own 30 of the 1433, a node uses about 18 words, a third of them preferred
    preferred = rng.permutation(FEATURES)[: CLASSES * 30].reshape(CLASSES, 30)
    features = (rng.random((NODES, FEATURES)) < 12 / FEATURES).astype(np.float32)
    picks = preferred[labels[:, None], rng.integers(0, 30, (NODES, 6))]
    features[np.arange(NODES)[:, None], picks] = 1.0
    return features, labels.astype(np.int64), edges.astype(np.int64)


def normalized_adjacency(edges, n, device):
    """D^-1/2 (A + I) D^-1/2 as a sparse (n, n) tensor, from its entries only."""
    loops = torch.arange(n, device=device)
    row = torch.cat([edges[0], loops])
    col = torch.cat([edges[1], loops])
    degree = torch.zeros(n, device=device).index_add_(0, row, torch.ones(row.shape[0], device=device))
    values = degree[row].rsqrt() * degree[col].rsqrt()
    return torch.sparse_coo_tensor(torch.stack([row, col]), values, (n, n)).coalesce()


class GCN(nn.Module):
    def __init__(self, features, hidden, classes, dropout=0.5):
        super().__init__()
        self.layer1 = nn.Linear(features, hidden)
        self.layer2 = nn.Linear(hidden, classes)
        self.dropout = dropout

    def forward(self, x, adjacency):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(torch.sparse.mm(adjacency, self.layer1(x)))
        x = F.dropout(x, self.dropout, self.training)
        return torch.sparse.mm(adjacency, self.layer2(x))


@torch.no_grad()
def accuracy(model, x, adjacency, labels, nodes):
    model.eval()
    predicted = model(x, adjacency)[nodes].argmax(1)
    model.train()
    return (predicted == labels[nodes]).float().mean().item()


def split(labels, seed=0):
    """20 training nodes per class and 1000 test nodes, as Cora's standard split."""
    rng = np.random.default_rng(seed + 1)
    train = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:20] for c in range(CLASSES)])
    rest = np.setdiff1d(np.arange(len(labels)), train)
    return train, rng.permutation(rest)[:1000]


def train(epochs, device, seed=0, log=print):
    torch.manual_seed(seed)
    features, labels, edges = make_graph(seed)
    train_nodes, test_nodes = (torch.tensor(n, device=device) for n in split(labels, seed))
    x = torch.tensor(features, device=device)
    y = torch.tensor(labels, device=device)
    adjacency = normalized_adjacency(torch.tensor(edges, device=device), NODES, device)
    log(f"device {device}: {NODES} nodes, {edges.shape[1] // 2} edges, {FEATURES} features, {CLASSES} classes")
    log(f"adjacency: {adjacency._nnz()} stored entries of {NODES * NODES} ({adjacency.layout})")

    model = GCN(FEATURES, 16, CLASSES).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    before = accuracy(model, x, adjacency, y, test_nodes)
    log(f"test accuracy before training: {before:.3f}")
    for epoch in range(1, epochs + 1):
        loss = F.cross_entropy(model(x, adjacency)[train_nodes], y[train_nodes])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if epoch % max(1, epochs // 5) == 0:
            log(f"epoch {epoch:3d}  train loss {loss.item():.4f}")
    after = accuracy(model, x, adjacency, y, test_nodes)
    log(f"test accuracy: {after:.3f}")
    return before, after


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="40 epochs: a smoke run of a few seconds")
    args = parser.parse_args()
    train(40 if args.quick else args.epochs, torch.device(args.device), args.seed)


if __name__ == "__main__":
    main()
