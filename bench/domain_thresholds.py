"""The domain check of model-based intervals (bayeval.estimators.domain) read at other
thresholds, from the runs a `bayeval bench validity` wrote: for each share of the
half-width that the bias beyond its noise must pass (``SHIFT_SHARE``; a target outside
the references' range is flagged at every threshold), the misses flagged on the
extrapolation split and the covering runs flagged (false alarms) on the standard split.

    python bench/domain_thresholds.py OUT [OUT ...] [--shares 0.5,0.25,0.125,0]

OUT: a folder `bench validity --variants standard,extrapolation` wrote (its runs/*.csv
hold, per run, ``domain_outside`` and ``domain_bias_share``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def read_runs(folders: list[Path]) -> pd.DataFrame:
    """Every model-based run of the folders that carries the check's parts."""
    frames = [pd.read_csv(f) for folder in folders for f in sorted((folder / "runs").glob("*.csv"))]
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if "domain_bias_share" not in runs:
        raise SystemExit("no run holds domain_bias_share: rerun the bench with this version")
    return runs.dropna(subset=["domain_bias_share"])


def table(runs: pd.DataFrame, shares: list[float]) -> pd.DataFrame:
    """Per method and threshold: misses and misses flagged on the extrapolation split,
    covering runs and covering runs flagged on the standard split."""
    rows = []
    for method, part in runs.groupby("method", sort=False):
        for share in shares:
            flagged = part.domain_outside.astype(bool) | (part.domain_bias_share > share)
            extra = part.variant == "extrapolation"
            standard = part.variant == "standard"
            missed, covered = ~part.covered.astype(bool), part.covered.astype(bool)
            rows.append({
                "method": method, "share": share,
                "extrapolation misses": int((extra & missed).sum()),
                "flagged": int((extra & missed & flagged).sum()),
                "standard covering runs": int((standard & covered).sum()),
                "false alarms": int((standard & covered & flagged).sum()),
                "standard misses": int((standard & missed).sum()),
                "standard misses flagged": int((standard & missed & flagged).sum()),
            })
    out = pd.DataFrame(rows)
    out["false alarm rate"] = out["false alarms"] / out["standard covering runs"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--shares", default="0.5,0.25,0.125,0.0")
    args = parser.parse_args()
    shares = [float(x) for x in args.shares.split(",")]
    print(table(read_runs(args.folders), shares).to_markdown(index=False, floatfmt=".3f"))


if __name__ == "__main__":
    main()
