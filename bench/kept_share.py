"""What a batched or streaming run keeps of the one-at-a-time saving, with its standard error.

``kept = (I_rs − I_k) / (I_rs − I_1)``: I_1 the items at the stop one at a time, I_k those of
the batched (or K-in-flight) run, I_rs those of RS-Mean at the same ε, each summed over the
runs of a cell of ``bayeval bench validity``. The directories must come from runs on the same
draws of targets, references and seeds (the bench's defaults), so that the three are paired
run by run; the SE resamples whole draws (each a unit of 100 runs: 20 targets × 5 seeds),
which keeps the pairing and the draws' correlation. Reads each directory's ``units/``
(the bench's ``--out``)::

    python bench/kept_share.py ONE_OUT BATCH_OUT [BATCH_OUT ...] [--draws 10] [--out T.md]

The one-at-a-time directory must hold RS-Mean's units (``random``) too. Prints a markdown
table, **bold** below 90% (the share the batch issue asks), and writes the per-draw item
sums beside ``--out`` as CSV.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from bayeval.data.bundled import list_datasets


def draw_items(out: Path, dataset: str, variant: str, method: str, draws: int,
               epsilon: float = 0.05) -> np.ndarray | None:
    """Items at the stop summed per draw, ``draws`` of them (None where fewer are saved):
    the units under ``out/units/validity/DATASET/VARIANT-ε-METHOD*`` (``method``: a prefix
    of the unit's folder, e.g. ``active-pai`` or ``random``)."""
    root = out / "units" / "validity" / dataset
    folders = sorted(root.glob(f"{variant}-{epsilon:g}-{method}*"))
    if len(folders) != 1:
        return None
    files = sorted(folders[0].glob("*.npz"))[:draws]
    if len(files) < draws:
        return None
    return np.array([np.load(f)["rows/items"].astype(np.float64).sum() for f in files])


def kept(rs: np.ndarray, one: np.ndarray, batch: np.ndarray, boots: int = 4000,
         seed: int = 0) -> tuple[float, float]:
    """(kept, its bootstrap SE over draws) for per-draw item sums of RS-Mean, one at a time
    and the batched run (module docstring); NaN where one at a time saves nothing."""
    if rs.sum() - one.sum() <= 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)

    def share(i: np.ndarray) -> float:
        return float((rs[i].sum() - batch[i].sum()) / (rs[i].sum() - one[i].sum()))

    n = rs.size
    return share(np.arange(n)), float(np.std([share(rng.integers(0, n, n))
                                              for _ in range(boots)]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("one", type=Path, help="one-at-a-time --out (with RS-Mean's units)")
    parser.add_argument("batched", type=Path, nargs="+", help="batched or streaming --out")
    parser.add_argument("--method", default="active-pai",
                        help="the method's unit folder prefix (default: active-pai)")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--variants", default="standard,extrapolation")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    names = [b.name for b in args.batched]
    lines = ["| variant | dataset | one at a time: saving | "
             + " | ".join(f"{n}: saving, kept" for n in names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    sums = []
    for variant in args.variants.split(","):
        for dataset in list_datasets():
            rs = draw_items(args.one, dataset, variant, "random", args.draws)
            one = draw_items(args.one, dataset, variant, args.method, args.draws)
            if rs is None or one is None:
                continue
            cells = []
            for name, out in zip(names, args.batched, strict=True):
                batch = draw_items(out, dataset, variant, args.method, args.draws)
                if batch is None:
                    cells.append("–")
                    continue
                share, se = kept(rs, one, batch)
                saving = 1.0 - batch.sum() / rs.sum()
                sums += [{"variant": variant, "dataset": dataset, "run": name, "draw": d,
                          "items": x} for d, x in enumerate(batch)]
                if np.isnan(share):
                    cells.append(f"{100 * saving:.1f}%, –")
                    continue
                text = f"{100 * share:.1f}% ± {100 * se:.1f}"
                cells.append(f"{100 * saving:.1f}%, " + (f"**{text}**" if share < 0.9 else text))
            sums += [{"variant": variant, "dataset": dataset, "run": run, "draw": d,
                      "items": x} for run, arr in (("one", one), ("random", rs))
                     for d, x in enumerate(arr)]
            lines.append(f"| {variant} | {dataset} | {100 * (1 - one.sum() / rs.sum()):.1f}% | "
                         + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    print(table, end="")
    if args.out is not None:
        args.out.write_text(table)
        pd.DataFrame(sums).to_csv(args.out.with_suffix(".csv"), index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
