"""``arena-gym trace info | convert`` report and keep where deadlines come from."""

from __future__ import annotations

import json

from arena_gym.harness.cli import main

ITP = "job_id,submission_time,duration,num_gpu\na,100,3600,1\nb,160,7200,2\nc,400,900,1\n"
CANON = "job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s"


def info(capsys, spec: str) -> dict:
    assert main(["trace", "info", spec, "--cluster", "tiny"]) == 0
    return json.loads(capsys.readouterr().out)


def test_info_shows_the_deadline_sources(tmp_path, capsys) -> None:
    itp = tmp_path / "itp.csv"
    itp.write_text(ITP)
    summary = info(capsys, str(itp))
    assert (summary["with_deadline"], summary["deadline_sources"]) == (3, "derived")
    assert info(capsys, f"{itp}?deadline_factor=none")["deadline_sources"] == "none"
    declared = tmp_path / "declared.csv"
    declared.write_text(CANON + "\na,0,gpt__1.3B,128,10,a40,2,500\nb,10,gpt__1.3B,128,10,a40,2,\n")
    summary = info(capsys, str(declared))
    assert (summary["with_deadline"], summary["deadline_sources"]) == (1, "declared")
    mixed = tmp_path / "mixed.csv"
    mixed.write_text(
        CANON + ",deadline_source\na,0,gpt__1.3B,128,10,a40,2,500,derived\nb,10,gpt__1.3B,128,10,a40,2,90,declared\n"
    )
    assert info(capsys, str(mixed))["deadline_sources"] == "mixed"
    assert info(capsys, "synthetic:n_jobs=5,deadline_factor=2")["deadline_sources"] == "derived"


def test_convert_keeps_an_itp_trace_derived(tmp_path, capsys) -> None:
    itp = tmp_path / "itp.csv"
    itp.write_text(ITP)
    out = tmp_path / "canonical.csv"
    assert main(["trace", "convert", str(itp), "--cluster", "tiny", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 3 jobs to {out} (deadlines: derived)"
    lines = out.read_text().splitlines()
    assert lines[0] == CANON + ",deadline_source"
    assert [line.rsplit(",", 1)[1] for line in lines[1:]] == ["derived"] * 3
    assert info(capsys, str(out))["deadline_sources"] == "derived"


def test_a_bad_deadline_source_is_one_line(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(CANON + ",deadline_source\na,0,gpt__1.3B,128,10,a40,2,500,maybe\n")
    assert main(["trace", "info", str(bad), "--cluster", "tiny"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.endswith(
        f"{bad}:2: column 'deadline_source': 'maybe' is not a deadline source (valid: declared, derived)"
    )
