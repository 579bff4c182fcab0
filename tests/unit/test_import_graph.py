"""No import cycle in pipeline/: its modules form layers, each importing only the ones below it, so any
module can be read, tested and moved with what it imports and nothing that imports it."""
from __future__ import annotations

import textwrap

import yaml
from support.import_graph import REPO, cycles, import_graph, module_file, reachable, strongly_connected


def write_modules(root, sources: dict) -> None:
    for name, source in sources.items():
        path = root / f"{name.replace('.', '/')}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


def test_no_module_of_the_pipeline_imports_itself_through_others():
    graph = import_graph()
    tangled = [", ".join(component) for component in strongly_connected(graph) if len(component) > 1]
    assert not cycles(graph), ("import cycles in pipeline/:\n" + "\n".join(" -> ".join(c) for c in cycles(graph))
                               + "\nmodules that import one another:\n" + "\n".join(tangled))


def test_a_cycle_through_a_function_level_and_a_relative_import_is_found(tmp_path):
    write_modules(tmp_path, {
        "pipeline.__init__": "",
        "pipeline.report.__init__": "",
        "pipeline.config": "from pipeline.report.common import x\n",
        "pipeline.report.common": "from . import tables\nx = 1\n",
        "pipeline.report.tables": """\
            import numpy

            def main():
                from pipeline import config
            """,
        "pipeline.leaf": "import pipeline.config\n",
    })
    assert cycles(import_graph(tmp_path)) == [
        ["pipeline.config", "pipeline.report.common", "pipeline.report.tables", "pipeline.config"]]


def test_a_module_importing_itself_is_a_cycle_and_a_chain_is_not(tmp_path):
    write_modules(tmp_path, {"pipeline.__init__": "", "pipeline.a": "import pipeline.b\n",
                             "pipeline.b": "from pipeline import c\n", "pipeline.c": "from pipeline.c import y\n"})
    assert cycles(import_graph(tmp_path)) == [["pipeline.c", "pipeline.c"]]


def test_a_package_importing_its_own_submodule_is_no_cycle(tmp_path):
    write_modules(tmp_path, {"pipeline.__init__": "", "pipeline.algos.__init__": "from pipeline.algos import common\n",
                             "pipeline.algos.common": "x = 1\n"})
    graph = import_graph(tmp_path)
    assert graph["pipeline.algos"] == {"pipeline.algos.common"} and cycles(graph) == []


def test_the_report_stage_depends_on_every_module_the_report_runs():
    """DVC re-runs the report when one of its deps changes: every module the report imports, directly or
    through others (config, inputs, train's paths...), must lie under one, or a change there leaves a
    stale report that `dvc status` calls clean."""
    graph = import_graph()
    deps = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["report"]["deps"]
    runs = reachable(graph, [name for name in graph if name.startswith("pipeline.report")])
    files = {name: module_file(name).relative_to(REPO).as_posix() for name in runs}
    uncovered = sorted(path for path in files.values()
                       if not any(path == dep or path.startswith(dep.rstrip("/") + "/") for dep in deps))
    assert not uncovered, f"the report imports these, and dvc.yaml's report stage does not depend on them: {uncovered}"


def test_reachable_follows_imports_through_other_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a"}}
    assert reachable(graph, ["a"]) == {"a", "b", "c"}
    assert reachable(graph, ["c"]) == {"c"}
