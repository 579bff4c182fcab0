"""Real `dvc repro` of the download and partition stages in a temporary git repository, on a tiny
generated MNIST mirror: outputs appear, a second repro does nothing, and a changed partition param
reruns that partition's stage only (also through `dvc exp run -S`)."""

from __future__ import annotations

import pytest
import yaml

from support.helpers import REPO, STAGE_LINE, Repo

pytestmark = pytest.mark.e2e

PARTITION_FILES = ("clients.npz", "label_counts.json", "meta.json", "label_mix.png")
PARTITIONS = {
    "shards": {"dataset": "mnist", "scheme": "shards", "clients": 10, "shards_per_client": 2, "seed": 0},
    "dirichlet": {
        "dataset": "mnist",
        "scheme": "dirichlet",
        "clients": 6,
        "alpha": 0.3,
        "equal_size": True,
        "val_fraction": 0.1,
        "seed": 0,
    },
    "clusters": {
        "dataset": "mnist",
        "scheme": "clusters",
        "cluster_sizes": [2, 3],
        "classes_per_cluster": 2,
        "samples_per_client": 40,
        "seed": 0,
    },
}


DATA_STAGES = ("fingerprint", "download", "partition")


def data_stages_only(dvc_yaml: dict) -> dict:
    """dvc.yaml with only the download and partition stages, and the fingerprint stage that writes the
    fingerprints of their code they depend on (fingerprint/commands/); later stages need training code
    and runs."""
    stages = {name: stage for name, stage in dvc_yaml["stages"].items() if name in DATA_STAGES}
    assert set(stages) == set(DATA_STAGES), f"dvc.yaml lacks a data stage: {sorted(stages)}"
    return {**dvc_yaml, "stages": stages}


# params.yaml must list a run (an empty `runs` is refused: a profile without runs would delete every run's
# results); this one is never trained, since dvc.yaml here has the data stages only.
RUNS = {
    "unused": {
        "partition": "shards",
        "model": "mlp_200",
        "rounds": 1,
        "client_fraction": 1.0,
        "local_epochs": 1,
        "batch_size": 32,
        "lr": 0.05,
        "seeds": [0],
        "algorithm": {"name": "fedavg"},
    }
}


@pytest.fixture
def repo(pipeline_repo) -> Repo:
    return pipeline_repo(
        {
            "profile": "default",
            "datasets": {"mnist": {"train_size": 600, "test_size": 100}},
            "partitions": PARTITIONS,
            "runs": RUNS,
        },
        dvc_yaml=data_stages_only(yaml.safe_load((REPO / "dvc.yaml").read_text())),
    )


def test_dvc_repro_builds_partitions_and_reruns_only_what_changed(repo):
    first = repo.stages_run("dvc", "repro")
    assert first == {"fingerprint", "download@mnist"} | {f"partition@{name}" for name in PARTITIONS}
    assert (repo.root / "data" / "prepared" / "mnist.npz").is_file()
    assert (repo.root / "reports" / "datasets" / "mnist.json").is_file()  # its record, in git
    for name in PARTITIONS:
        # the arrays under data/ (DVC's cache), the record under reports/ (git)
        assert [p.name for p in (repo.root / "data" / "partitions" / name).iterdir()] == ["clients.npz"], name
        record = repo.root / "reports" / "partitions" / name
        assert sorted(p.name for p in record.iterdir()) == sorted(PARTITION_FILES[1:]), name
    repo.run("git", "add", "-A")
    repo.run("git", "commit", "-q", "-m", "first repro")

    # Nothing changed: nothing runs.
    output = repo.run("dvc", "repro")
    assert not STAGE_LINE.search(output), output
    assert "didn't change" in output or "up to date" in output, output

    # One partition's seed changed: only its stage runs, and its clients change.
    before = (repo.root / "data" / "partitions" / "shards" / "clients.npz").read_bytes()
    untouched = (repo.root / "data" / "partitions" / "clusters" / "clients.npz").read_bytes()
    params = repo.params()
    params["partitions"]["shards"]["seed"] = 1
    repo.write_params(params)
    assert repo.stages_run("dvc", "repro") == {"partition@shards"}
    assert (repo.root / "data" / "partitions" / "shards" / "clients.npz").read_bytes() != before
    assert (repo.root / "data" / "partitions" / "clusters" / "clients.npz").read_bytes() == untouched
    repo.run("git", "add", "-A")
    repo.run("git", "commit", "-q", "-m", "new seed")

    # An experiment on one partition's param reruns that partition only.
    assert repo.stages_run("dvc", "exp", "run", "-S", "partitions.dirichlet.alpha=0.5") == {"partition@dirichlet"}
    assert repo.params()["partitions"]["dirichlet"]["alpha"] == 0.5
    meta = (repo.root / "reports" / "partitions" / "dirichlet" / "meta.json").read_text()
    assert '"alpha": 0.5' in meta
