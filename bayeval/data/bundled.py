"""Real score matrices shipped with bayeval (Open LLM Leaderboard v2, HELM Lite, GLUE).

Provenance and the MIT licence of the source are in ``bundled/README.md`` beside the
files.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from bayeval.data.matrix import ScoreMatrix, number_repeated_ids
from bayeval.errors import DataError

_PACKAGE = "bayeval.data"
_FOLDER = "bundled"

# The lm-evaluation-harness task of each bundled matrix that the harness produced, and
# the documents of its subtasks in column order: the leaderboard's MuSR is a group of three
# (250, 256 and 250 documents). ``harness_task`` names it for ``lm_eval --tasks`` and the
# ``--samples`` keys (bayeval.data.lm_eval.harness_samples); HELM and GLUE matrices were not
# made by the harness and name none.
HARNESS_TASKS: dict[str, tuple[str, str]] = {
    "ifeval": ("leaderboard_ifeval", "leaderboard_ifeval:541"),
    "musr": ("leaderboard_musr", "leaderboard_musr_murder_mysteries:250,"
             "leaderboard_musr_object_placements:256,leaderboard_musr_team_allocation:250"),
    "arc_challenge": ("arc_challenge", "arc_challenge:1172"),
}


def list_datasets() -> list[str]:
    """Names of the bundled datasets, sorted."""
    folder = resources.files(_PACKAGE).joinpath(_FOLDER)
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".npz"))


def load_dataset(name: str) -> ScoreMatrix:
    """Load a bundled dataset by name (``ifeval``, ``musr``, ``arc_challenge``, ...).

    ``"a+b+…"`` is a suite: the items of every named dataset side by side, for the models
    they share (in the first dataset's order), e.g. ``ifeval+musr`` (448 × 1297)."""
    if "+" in name:
        return _load_suite(name)
    names = list_datasets()
    if name not in names:
        raise DataError(f"unknown dataset {name!r} (bundled: {', '.join(names)})")
    with resources.as_file(resources.files(_PACKAGE).joinpath(_FOLDER, f"{name}.npz")) as p:
        with np.load(p, allow_pickle=False) as archive:
            arrays = {k: archive[k] for k in archive.files}
    meta = {k: str(v) for k, v in arrays.items() if np.ndim(v) == 0}
    if name in HARNESS_TASKS:
        meta["harness_task"], meta["subtasks"] = HARNESS_TASKS[name]
    return ScoreMatrix(arrays["scores"], number_repeated_ids(arrays["models"]), arrays["items"],
                       name=name, metadata=meta)


def _load_suite(name: str) -> ScoreMatrix:
    parts = [load_dataset(part) for part in name.split("+")]
    models = [m for m in parts[0].models if all(m in set(p.models) for p in parts[1:])]
    if not models:
        raise DataError(f"suite {name!r}: its datasets share no model")
    scores = np.concatenate([p.scores[[p.model_index(m) for m in models]] for p in parts], 1)
    items = np.concatenate([p.items for p in parts])
    return ScoreMatrix(scores, models, items, name=name, metadata={"suite": name})
