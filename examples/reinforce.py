"""REINFORCE (the score-function policy gradient) on a small gridworld written here, no data needed.

    python examples/reinforce.py                  # 150 updates: the agent walks to the goal, a few s on one core
    python examples/reinforce.py --quick          # 40 updates: enough to find the goal, ~2 s on one CPU core
    python examples/reinforce.py --device cpu

A 4x4 grid with two pit cells on its diagonal: the agent starts in the top-left corner, the goal is
the bottom-right one. Each step costs 0.02, the goal pays 1 and ends the episode, a pit costs 1 and
ends it, and an episode stops after 16 steps (standing still against a wall, the trap an agent that
stops exploring falls into, returns -0.32; the shortest path 0.9). The policy (a small network from the one-hot cell to
four logits) acts through ``distributions.Categorical``; each update runs a batch of episodes side by
side, and ascends the mean of log_prob(action) times the return from that step on, minus a baseline,
plus an entropy bonus that keeps it exploring. With ``import torch`` in place of ``import adcuda as
torch`` (and ``torch.distributions``) the program runs unchanged.
"""

import argparse

import adcuda as torch
import adcuda.nn as nn
from adcuda.distributions import Categorical

SIZE = 4
START, GOAL = (0, 0), (SIZE - 1, SIZE - 1)
PIT = [(1, 1), (2, 2)]
MAX_STEPS = 16
ENTROPY_BONUS = 0.1
STEP_COST, GOAL_REWARD, PIT_REWARD = 0.02, 1.0, -1.0
MOVES = [(-1, 0), (1, 0), (0, -1), (0, 1)]  # up, down, left, right


def cells(rows, cols):
    return rows * SIZE + cols


def run_episodes(policy, batch, device, greedy=False):
    """A batch of episodes side by side: each step's log-probabilities, entropies, rewards and whether
    the episode was still running at that step."""
    rows = torch.full((batch,), START[0], dtype=torch.int64, device=device)
    cols = torch.full((batch,), START[1], dtype=torch.int64, device=device)
    running = torch.ones(batch, dtype=torch.bool, device=device)
    moves = torch.tensor(MOVES, dtype=torch.int64, device=device)
    pit = torch.zeros(SIZE * SIZE, dtype=torch.bool, device=device)
    pit[[cells(r, c) for r, c in PIT]] = True
    log_probs, entropies, rewards, alive = [], [], [], []
    for _ in range(MAX_STEPS):
        state = nn.functional.one_hot(cells(rows, cols), SIZE * SIZE).to(torch.float32)
        dist = Categorical(logits=policy(state))
        action = dist.probs.argmax(-1) if greedy else dist.sample()
        log_probs.append(dist.log_prob(action))
        entropies.append(dist.entropy())
        alive.append(running.to(torch.float32))
        step = moves[action]
        rows = torch.where(running, (rows + step[:, 0]).clamp(0, SIZE - 1), rows)
        cols = torch.where(running, (cols + step[:, 1]).clamp(0, SIZE - 1), cols)
        at_goal = (rows == GOAL[0]) & (cols == GOAL[1])
        in_pit = pit[cells(rows, cols)]
        reward = torch.full((batch,), -STEP_COST, device=device)
        reward = torch.where(at_goal, torch.full_like(reward, GOAL_REWARD), reward)
        reward = torch.where(in_pit, torch.full_like(reward, PIT_REWARD), reward)
        rewards.append(reward * running.to(torch.float32))
        running = running & ~at_goal & ~in_pit
    return torch.stack(log_probs), torch.stack(entropies), torch.stack(rewards), torch.stack(alive)


def returns_to_go(rewards):
    """sum of the rewards from each step to the end, per episode (steps along dim 0)."""
    return rewards.flip(0).cumsum(0).flip(0)


def average_return(policy, batch, device, greedy=False):
    with torch.no_grad():
        _, _, rewards, _ = run_episodes(policy, batch, device, greedy)
    return rewards.sum(0).mean().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 updates instead of 150")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=64, help="episodes per update")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    policy = nn.Sequential(nn.Linear(SIZE * SIZE, 32), nn.Tanh(), nn.Linear(32, 4)).to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=0.03)
    print(f"average return before training: {average_return(policy, 256, device):.3f}")
    updates = 40 if args.quick else 150
    for update in range(updates):
        log_probs, entropies, rewards, alive = run_episodes(policy, args.batch, device)
        returns = returns_to_go(rewards)
        advantage = returns - (returns * alive).sum(1, keepdim=True) / alive.sum(1, keepdim=True).clamp(min=1)
        objective = ((log_probs * advantage.detach() + ENTROPY_BONUS * entropies) * alive).sum() / args.batch
        optimizer.zero_grad()
        (-objective).backward()
        optimizer.step()
        if update % 10 == 0 or update == updates - 1:
            print(f"update {update:3d}: batch return {rewards.sum(0).mean().item():+.3f}")
    print(f"average return: {average_return(policy, 256, device):.3f}")
    print(
        f"greedy return: {average_return(policy, 1, device, greedy=True):.3f} (best possible: "
        f"{GOAL_REWARD - STEP_COST * (2 * (SIZE - 1) - 1):.3f})"
    )


if __name__ == "__main__":
    main()
