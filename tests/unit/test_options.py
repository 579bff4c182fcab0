"""The runtime options (pipeline.options): read once from the environment, every bad value refused in one
line naming the variable, what was wrong and what is allowed, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import UserError
from pipeline.options import RuntimeOptions, available_cpus


def test_the_defaults_are_one_thread_a_worker_and_a_worker_a_cpu():
    options = RuntimeOptions.from_environment({})
    assert (options.threads, options.workers) == (1, available_cpus())
    assert (options.chunk, options.compile, options.foreach, options.device) == ("mmap", "off", "off", None)
    assert options.checkpoints == Path(".checkpoints") and options.data_mirror is None and options.progress


def test_set_values_are_read(tmp_path):
    options = RuntimeOptions.from_environment(
        {
            "FEDFORGET_WORKERS": "3",
            "FEDFORGET_THREADS": "2",
            "FEDFORGET_DEVICE": "cpu",
            "FEDFORGET_CHUNK": "device",
            "FEDFORGET_COMPILE": "cudagraphs",
            "FEDFORGET_FOREACH": "on",
            "FEDFORGET_DIST_TIMEOUT": "12.5",
            "FEDFORGET_CHECKPOINTS": str(tmp_path / "ck"),
            "FEDFORGET_DATA_MIRROR": str(tmp_path),
            "CI": "1",
            "FEDFORGET_DETERMINISTIC": "1",
            "FEDFORGET_DIST_BACKEND": "gloo",
            "FEDFORGET_TORCHRUN": " --nproc-per-node 2 ",
        }
    )
    assert (options.workers, options.threads, options.device, options.chunk) == (3, 2, "cpu", "device")
    assert (options.compile, options.foreach, options.dist_timeout, options.deterministic) == (
        "cudagraphs",
        "on",
        12.5,
        True,
    )
    assert options.checkpoints == tmp_path / "ck" and options.data_mirror == tmp_path and not options.progress
    assert (options.dist_backend, options.torchrun) == ("gloo", "--nproc-per-node 2")


@pytest.mark.parametrize(
    "variable, value, says",
    [
        ("FEDFORGET_THREADS", "0", "FEDFORGET_THREADS: '0' is not allowed; expected an integer >= 1"),
        ("FEDFORGET_THREADS", "two", "FEDFORGET_THREADS: 'two' is not allowed; expected an integer >= 1"),
        ("FEDFORGET_WORKERS", "-1", "FEDFORGET_WORKERS: '-1' is not allowed; expected an integer >= 1"),
        ("FEDFORGET_DEVICE", "tpu", "FEDFORGET_DEVICE: 'tpu' is not allowed; expected one of cpu, cuda"),
        ("FEDFORGET_CHUNK", "biggest", "FEDFORGET_CHUNK: 'biggest' is not allowed; expected one of mmap, device"),
        ("FEDFORGET_COMPILE", "fast", "FEDFORGET_COMPILE: 'fast' is not allowed; expected one of off, on, cudagraphs"),
        ("FEDFORGET_FOREACH", "yes", "FEDFORGET_FOREACH: 'yes' is not allowed; expected one of off, on"),
        ("FEDFORGET_DETERMINISTIC", "true", "FEDFORGET_DETERMINISTIC: 'true' is not allowed; expected 0 or 1"),
        ("FEDFORGET_DIST_BACKEND", "mpi", "FEDFORGET_DIST_BACKEND: 'mpi' is not allowed; expected one of gloo, nccl"),
        (
            "FEDFORGET_DIST_TIMEOUT",
            "soon",
            "FEDFORGET_DIST_TIMEOUT: 'soon' is not allowed; expected a number of seconds > 0",
        ),
        (
            "FEDFORGET_DIST_TIMEOUT",
            "inf",
            "FEDFORGET_DIST_TIMEOUT: 'inf' is not allowed; expected a number of seconds > 0",
        ),
        (
            "FEDFORGET_DIST_TIMEOUT",
            "nan",
            "FEDFORGET_DIST_TIMEOUT: 'nan' is not allowed; expected a number of seconds > 0",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("FEDFORGET") else None,
)
def test_a_bad_value_is_one_line_naming_the_variable_and_what_is_allowed(variable, value, says):
    with pytest.raises(UserError) as refused:
        RuntimeOptions.from_environment({variable: value})
    assert str(refused.value) == says


def test_a_file_where_a_folder_is_asked_is_refused(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    for variable in ("FEDFORGET_CHECKPOINTS", "FEDFORGET_CACHE", "FEDFORGET_DATA_MIRROR"):
        with pytest.raises(UserError, match=f"^{variable}: '.*file' is a file; expected a folder$"):
            RuntimeOptions.from_environment({variable: str(file)})


def test_every_problem_is_said_at_once():
    with pytest.raises(UserError) as refused:
        RuntimeOptions.from_environment({"FEDFORGET_THREADS": "0", "FEDFORGET_COMPILE": "fast"})
    assert len(str(refused.value).splitlines()) == 2
