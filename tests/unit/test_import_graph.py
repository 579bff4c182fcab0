"""No import cycle in pipeline/: its modules form layers, each importing only the ones below it, so any
module can be read, tested and moved with what it imports and nothing that imports it."""

from __future__ import annotations

import textwrap

from support.import_graph import REPO, cycles, import_graph, reachable, strongly_connected


def write_modules(root, sources: dict) -> None:
    for name, source in sources.items():
        path = root / f"{name.replace('.', '/')}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


def test_no_module_of_the_pipeline_imports_itself_through_others():
    graph = import_graph()
    tangled = [", ".join(component) for component in strongly_connected(graph) if len(component) > 1]
    assert not cycles(graph), (
        "import cycles in pipeline/:\n"
        + "\n".join(" -> ".join(c) for c in cycles(graph))
        + "\nmodules that import one another:\n"
        + "\n".join(tangled)
    )


def test_a_cycle_through_a_function_level_and_a_relative_import_is_found(tmp_path):
    write_modules(
        tmp_path,
        {
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
        },
    )
    assert cycles(import_graph(tmp_path)) == [
        ["pipeline.config", "pipeline.report.common", "pipeline.report.tables", "pipeline.config"]
    ]


def test_a_module_importing_itself_is_a_cycle_and_a_chain_is_not(tmp_path):
    write_modules(
        tmp_path,
        {
            "pipeline.__init__": "",
            "pipeline.a": "import pipeline.b\n",
            "pipeline.b": "from pipeline import c\n",
            "pipeline.c": "from pipeline.c import y\n",
        },
    )
    assert cycles(import_graph(tmp_path)) == [["pipeline.c", "pipeline.c"]]


def test_a_package_importing_its_own_submodule_is_no_cycle(tmp_path):
    write_modules(
        tmp_path,
        {
            "pipeline.__init__": "",
            "pipeline.algos.__init__": "from pipeline.algos import common\n",
            "pipeline.algos.common": "x = 1\n",
        },
    )
    graph = import_graph(tmp_path)
    assert graph["pipeline.algos"] == {"pipeline.algos.common"} and cycles(graph) == []


def test_reachable_follows_imports_through_other_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a"}}
    assert reachable(graph, ["a"]) == {"a", "b", "c"}
    assert reachable(graph, ["c"]) == {"c"}


# The package's layers, lowest first: a module imports from its own layer or the ones below it, never above
# (docs/architecture.md lists every module under its layer). Validation sits above the engine because it
# reads each algorithm's hyperparameters; the report above validation (it reads runs' settings); the stage
# commands on top.
LAYERS = {
    "foundation": {
        "pipeline",
        "pipeline.errors",
        "pipeline.io",
        "pipeline.paths",
        "pipeline.papers",
        "pipeline.checks",
        "pipeline.yamlfile",
        "pipeline.options",
        "pipeline.settings",
        "pipeline.fingerprint",
    },
    "data": {
        "pipeline.inputs",
        "pipeline.sources",
        "pipeline.partitioners",
        "pipeline.partition_sizes",
        "pipeline.clientdata",
    },
    "engine": {
        "pipeline.models",
        "pipeline.losses",
        "pipeline.metrics",
        "pipeline.forgetting",
        "pipeline.optimizers",
        "pipeline.cohort_mlp",
        "pipeline.cohort",
        "pipeline.fisher",
        "pipeline.path_score",
        "pipeline.distributed",
        "pipeline.rounds",
        "pipeline.training",
        "pipeline.results",
        "pipeline.probe_files",
        "pipeline.algorithms",
    },
    "validation": {"pipeline.runs", "pipeline.config"},
    "report": {"pipeline.report"},
    "commands": {
        "pipeline.download",
        "pipeline.partition",
        "pipeline.resolve",
        "pipeline.profile",
        "pipeline.plan",
        "pipeline.cost",
        "pipeline.train",
        "pipeline.launch",
        "pipeline.outputs",
        "pipeline.verify",
    },
}
ORDER = list(LAYERS)


def layer_of(module: str) -> str:
    """A module's layer: the most specific name listed (pipeline.algorithms covers its modules)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        for layer, members in LAYERS.items():
            if name in members:
                return layer
    raise AssertionError(f"{module} is in no layer: add it to LAYERS and to docs/architecture.md")


def test_imports_only_go_down_the_layers():
    upward = [
        f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})"
        for module, targets in import_graph().items()
        for target in targets
        if ORDER.index(layer_of(target)) > ORDER.index(layer_of(module))
    ]
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)


def test_every_module_has_a_layer_and_docs_architecture_lists_it():
    text = (REPO / "docs" / "architecture.md").read_text()
    for module in import_graph():
        layer_of(module)
        if module != "pipeline":
            path = module.replace("pipeline.", "").replace(".", "/")
            assert f"{path}.py" in text or f"{path}/" in text, f"docs/architecture.md does not list {module}"
