"""benchmarks.collect_gpus on the CPU: one collect per GPU on its own seed and device, exports and
records merged into one folder, per-GPU folders removed, a failing GPU reported in the exit code."""
import gzip
import json

from benchmarks import collect_gpus


def _fake_collect(fail_gpu=None):
    """A Popen stand-in that does what one GPU's collect leaves behind: a record, an export, a log."""
    class Proc:
        def __init__(self, cmd, env, stdout, stderr):
            out = cmd[cmd.index("--out") + 1]
            seed = int(cmd[cmd.index("--seed") + 1])
            gpu = int(env["CUDA_VISIBLE_DEVICES"])
            self.code = 1 if gpu == fail_gpu else 0
            from pathlib import Path
            folder = Path(out)
            rows = [{"kernel_key": f"k{seed}_{j}", "device": f"cuda{gpu}", "features": {"graph": f"g{seed}"},
                     "stats": {"median_us": 1.0 + j}} for j in range(seed % 3 + 1)]
            with gzip.open(folder / "measurements.jsonl.gz", "wt") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
            (folder / "collect.json").write_text(json.dumps(
                {"counts": {"measurements": len(rows)}, "programs_done": 1, "programs_failed": 0, "seed": seed}))
            stdout.write(f"collect on gpu {gpu}, seed {seed}\n")
            stdout.flush()

        def wait(self):
            return self.code
    return Proc


def test_one_collect_per_gpu_merged(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_gpus.subprocess, "Popen", _fake_collect())
    out = tmp_path / "c"
    assert collect_gpus.main(["--out", str(out), "--gpus", "3", "--first-seed", "7", "--programs", "5"]) == 0
    with gzip.open(out / "measurements.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    assert [r["kernel_key"] for r in rows] == ["k7_0", "k7_1", "k8_0", "k8_1", "k8_2", "k9_0"]
    assert {r["device"] for r in rows} == {"cuda0", "cuda1", "cuda2"}
    rec = json.loads((out / "collect.json").read_text())
    assert rec["measurements"] == 6 and rec["programs_done"] == 3
    assert [p["seed"] for p in rec["parts"]] == [7, 8, 9]
    log = (out / "log.txt").read_text()
    assert "== gpu2 (exit 0)" in log and "seed 9" in log
    assert sorted(p.name for p in out.iterdir()) == ["collect.json", "log.txt", "measurements.jsonl.gz"]


def test_commands_pass_the_collect_arguments_through():
    cmds = collect_gpus.commands(collect_gpus.Path("/o"), 2, 3, ["--budget", "500"])
    assert [env for env, _, _ in cmds] == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    _, argv, folder = cmds[1]
    assert argv[1:] == ["-m", "benchmarks.collect", "--out", "/o/gpu1", "--seed", "4", "--budget", "500"]
    assert folder.name == "gpu1"


def test_a_failed_gpu_keeps_the_others_and_fails_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_gpus.subprocess, "Popen", _fake_collect(fail_gpu=1))
    out = tmp_path / "c"
    assert collect_gpus.main(["--out", str(out), "--gpus", "2", "--keep-dbs"]) == 1
    rec = json.loads((out / "collect.json").read_text())
    assert rec["measurements"] == sum(p["counts"]["measurements"] for p in rec["parts"]) > 0
    assert (out / "gpu0" / "collect.json").exists()   # --keep-dbs
    assert "== gpu1 (exit 1)" in (out / "log.txt").read_text()
