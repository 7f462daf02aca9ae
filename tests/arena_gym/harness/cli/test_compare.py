"""``arena-gym compare --reference``: the paired view of the grid, printed and written."""

from __future__ import annotations

import pandas as pd

from arena_gym.harness.cli import main


def test_compare_with_a_reference_prints_and_writes_the_paired_comparison(tmp_path, capsys) -> None:
    out = tmp_path / "cmp"
    argv = ["compare", "--policies", "fcfs,srtf", "--trace", "synthetic:n_jobs=12", "--seeds", "0,1,2"]
    assert main([*argv, "--cluster", "tiny", "--reference", "fcfs", "--no-plots", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    paired = pd.read_csv(out / "paired.csv").set_index("policy")
    assert list(paired.index) == ["fcfs", "srtf"] and set(paired["workloads"]) == {3}
    board = pd.read_csv(out / "leaderboard.csv").pivot(index="seed", columns="policy", values="padded_avg_jct_s")
    assert paired.loc["srtf", "mean"] == board["srtf"].mean()
    assert "paired against fcfs:" in printed and (out / "paired.md").read_text() in printed
