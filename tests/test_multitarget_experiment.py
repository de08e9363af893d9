"""The bookkeeping of `bayeval bench multitarget` on hand-made runs."""

from __future__ import annotations

import numpy as np
import pytest

from bayeval.experiments.multitarget import cost_table, summarize_seed


def _runs():
    T, N = 2, 40
    truth = np.array([0.3, 0.6])
    # single target 0 settles at step 35 (n = 36) with a narrow interval; target 1 never
    single = np.vstack([np.r_[np.linspace(0.0, 0.29, 34), np.full(6, 0.31)],
                        np.linspace(0.0, 0.6, N)])
    s_lower, s_upper = single - 0.5, single + 0.5
    s_lower[0, 34:], s_upper[0, 34:] = 0.305, 0.325  # width 0.02 from step 34, misses 0.3
    E = 50  # the joint run stopped after 50 evaluations
    joint = np.tile(truth, (E, 1)) + 0.01 * np.arange(E)[::-1, None]  # error shrinks to 0
    runs = {"single_estimate": single, "single_lower": s_lower, "single_upper": s_upper,
            "joint_estimate": joint, "joint_lower": joint - 0.005, "joint_upper": joint + 0.005,
            "joint_stopped_at": np.array([45, 50]), "joint_refits": np.asarray(3),
            "truth": truth, "seconds": np.array([1.0, 2.0])}
    return runs, T, N, E


def test_seed_summary_counts_and_errors():
    runs, T, N, E = _runs()
    row, joint_err, single_err = summarize_seed(runs, epsilon2=0.03, epsilon1=0.005, window=1)
    # target 0 stops at step 35 (window 1: two equal estimates, width 0.02); target 1 never
    # (its last step counts: N)
    assert row["single_total"] == 36 + N
    assert row["joint_total"] == E and row["joint_sq_err"] == pytest.approx(0.0)
    assert row["single_sq_err"] == pytest.approx(np.mean([0.01**2, 0.0]))
    assert row["single_all_stopped"] == 0.0 and row["joint_all_stopped"] == 1.0
    assert row["joint_cover"] == 1.0 and row["single_cover"] == 0.5
    # RMSE against total evaluations: joint after E = T·n evaluations, frozen after its end
    assert joint_err.shape == single_err.shape == (N, T)
    np.testing.assert_allclose(joint_err[0], 0.01 * (E - 2))  # E = 2: step index 1
    np.testing.assert_allclose(joint_err[30], 0.0)  # T·31 = 62 > 50: the final estimate
    np.testing.assert_allclose(single_err[:, 1], np.linspace(0.0, 0.6, N) - 0.6)


def test_cost_table_means_over_seeds():
    import pandas as pd

    costs = pd.DataFrame([{"dataset": "d", "regime": "r", "seed": s, "joint_total": 10.0 + s,
                           "single_total": 20.0, "joint_sq_err": 0.0004, "single_sq_err": 0.0001,
                           "joint_cover": 1.0, "single_cover": 0.0, "joint_all_stopped": 1.0,
                           "single_all_stopped": 1.0, "joint_seconds": 1.0} for s in range(2)])
    row = cost_table(costs).iloc[0]
    assert row.seeds == 2 and row.joint_total == 10.5 and row.total_ratio == 10.5 / 20
    assert row.joint_rmse == pytest.approx(0.02) and row.single_rmse == pytest.approx(0.01)
