"""bench/peer_train.py's launchers: DDP jobs started by torchrun put the
hvdtune backend on the Gloo engine, jobs started by mpirun on the MPI
engine, and the table labels each configuration with its launcher."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

SOURCE = os.environ.get(
    "HVDTUNE_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))
PEER_TRAIN = os.path.join(SOURCE, "bench", "peer_train.py")


def load_peer_train():
    spec = importlib.util.spec_from_file_location("peer_train", PEER_TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_dir():
    """The build tree whose python/ holds the hvdtune package under test."""
    import hvdtune
    return os.path.dirname(os.path.dirname(os.path.dirname(hvdtune.__file__)))


def test_each_launcher_gets_its_own_configurations():
    peer = load_peer_train()
    configs = peer.configurations([25], 4, [(False, False)], ddp_hvdtune=True,
                                  horovod_api=False,
                                  hvdtune_bucket_sizes=[5, 25],
                                  hvdtune_launchers=["torchrun", "mpirun"])
    hvd = {label: env for label, mode, _, env in configs
           if mode == "ddp-hvdtune"}
    assert set(hvd) == {
        "ddp-hvdtune default, bucket 5 MB (torchrun)",
        "ddp-hvdtune autotuned, bucket 5 MB (torchrun)",
        "ddp-hvdtune default (torchrun)", "ddp-hvdtune autotuned (torchrun)",
        "ddp-hvdtune default, bucket 5 MB (mpirun)",
        "ddp-hvdtune autotuned, bucket 5 MB (mpirun)",
        "ddp-hvdtune default (mpirun)", "ddp-hvdtune autotuned (mpirun)"
    }
    for label, env in hvd.items():
        assert env[peer.LAUNCHER_KEY] == label.rsplit("(", 1)[1].rstrip(")")
        assert (env.get("HOROVOD_AUTOTUNE") == "1") == ("autotuned" in label)
    # Without --hvdtune-launchers the labels stay as they were.
    plain = peer.ddp_hvdtune_configurations(4)
    assert [c[0] for c in plain] == ["ddp-hvdtune default",
                                     "ddp-hvdtune autotuned"]
    assert peer.LAUNCHER_KEY not in plain[0][3]


@pytest.mark.parametrize("argv, message", [
    (["--launcher", "torchrun"], "--no-horovod-api"),
    (["--no-horovod-api", "--hvdtune-launchers", "srun"],
     "unknown launcher 'srun'"),
])
def test_bad_launcher_arguments_are_refused(argv, message):
    out = subprocess.run([sys.executable, PEER_TRAIN] + argv,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert message in out.stderr


def test_torchrun_runs_the_gloo_engine_and_mpirun_the_mpi_engine(tmp_path):
    result = tmp_path / "peer.json"
    out = subprocess.run([
        sys.executable, PEER_TRAIN, "--build", build_dir(), "--launcher",
        "torchrun", "--hvdtune-launchers", "torchrun,mpirun", "--ranks", "2",
        "--rounds", "1", "--bucket-sizes", "25", "--no-ddp-flags",
        "--no-horovod-api", "--ddp-hvdtune", "--tune-samples", "2",
        "--tune-max-steps", "3", "--model", "squeezenet1_1", "--image-size",
        "32", "--batch-size", "2", "--warmup-steps", "1", "--measure-steps",
        "2", "--timeout", "120", "--json-out",
        str(result)
    ], capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stdout + out.stderr
    runs = json.loads(result.read_text())["runs"]
    expected = {
        "2 ddp-hvdtune default (torchrun)": "gloo",
        "2 ddp-hvdtune autotuned (torchrun)": "gloo",
        "2 ddp-hvdtune default (mpirun)": "mpi",
        "2 ddp-hvdtune autotuned (mpirun)": "mpi",
    }
    for key, engine in expected.items():
        (run,) = runs[key]
        assert not run.get("failed"), run
        assert run["engine"] == engine, (key, run)
        assert run["img_per_sec"] > 0
    (gloo,) = runs["2 ddp bucket 25 MB"]
    assert not gloo.get("failed") and gloo["img_per_sec"] > 0
    assert "| ddp-hvdtune default (torchrun) | " in out.stdout
