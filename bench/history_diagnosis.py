"""Why HI-SySRs (docs/methods.md §10) gains little on the bundled data: how much of each
candidate's score, and of the score *difference* between the two best candidates, the
factor model of the reference models predicts.

For one reference/candidate split per dataset (share 0.5, split 0 of ``bench selection
--history-share``) and 30 item orders, at n = 5%, 20% and 40% of the items:

* MSE ratio (all arms): E(μ̂_n − μ)² of the control-variate estimate over that of the
  plain mean ȳ_n, averaged over candidates;
* MSE ratio (top pairs): the same for the difference between the best candidate and each
  of the next four, which is what decides SySRs' last eliminations;
* ρ: the correlation over items between y_a − y_b and f_a − f_b for those pairs, with f
  the predictions after all items (an upper bound: the control variate can remove at
  most a share ρ² of the variance of a difference).

    python bench/history_diagnosis.py --datasets mmlu,ifeval
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from bayeval.data import list_datasets, load_dataset  # noqa: E402
from bayeval.experiments.selection import history_split, split_history  # noqa: E402
from bayeval.inference.factor_laplace import item_probabilities  # noqa: E402
from bayeval.selection.history import arm_start, arm_step, corrected_sums  # noqa: E402


def diagnose(name: str, orders: int = 30) -> list[str]:
    scores = np.asarray(load_dataset(name).scores)
    refs, cands = history_split(scores.shape[0], 0.5, 0)
    history = split_history(scores, refs, 0)
    c = scores[cands]
    K, L = c.shape
    perms = jnp.stack([jax.random.permutation(jax.random.key(r), L) for r in range(orders)])
    sums = np.asarray(jax.jit(jax.vmap(lambda o: corrected_sums(jnp.asarray(c), o, history)
                                       ))(perms))
    plain = np.cumsum(np.take_along_axis(np.broadcast_to(c, (orders, K, L)),
                                         np.asarray(perms)[:, None, :], 2), 2)
    n = np.arange(1, L + 1)
    mu = c.mean(1)
    err_h, err_p = sums / n - mu[None, :, None], plain / n - mu[None, :, None]
    top = np.argsort(-mu)[:5]
    # each top candidate's predictions after all its items (the first order)
    step = jax.jit(arm_step)
    final = []
    for a in top:
        state = arm_start(history)
        for j in np.asarray(perms[0]):
            state = step(state, history.item_factors, jnp.asarray(j), jnp.asarray(c[a, j]))
        final.append(np.asarray(item_probabilities(state.mean, history.item_factors)))
    rho = [np.corrcoef(c[top[0]] - c[b], final[0] - final[i])[0, 1]
           for i, b in enumerate(top[1:], start=1)]
    rows = []
    for f in (0.05, 0.2, 0.4):
        i = int(f * L) - 1
        ratio_all = (err_h[:, :, i] ** 2).mean() / (err_p[:, :, i] ** 2).mean()
        dh = err_h[:, top[:1], i] - err_h[:, top[1:], i]
        dp = err_p[:, top[:1], i] - err_p[:, top[1:], i]
        rows.append(f"| {name} | k={history.item_factors.shape[1]} | {f:.0%} | "
                    f"{ratio_all:.3f} | {(dh ** 2).mean() / (dp ** 2).mean():.3f} | "
                    f"{np.mean(rho):.2f} ({min(rho):.2f}–{max(rho):.2f}) |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="all")
    parser.add_argument("--orders", type=int, default=30)
    args = parser.parse_args()
    names = list_datasets() if args.datasets == "all" else args.datasets.split(",")
    print("| dataset | factor rank | n / L | MSE ratio, all arms | MSE ratio, top pairs | "
          "ρ top pairs, mean (range) |")
    print("|---|---|---|---|---|---|")
    for name in names:
        for row in diagnose(name, args.orders):
            print(row, flush=True)


if __name__ == "__main__":
    main()
