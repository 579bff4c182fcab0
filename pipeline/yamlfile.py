"""Reading YAML (params.yaml, grid.yaml) without PyYAML's silent cases, every problem one line.

`yaml.safe_load` keeps the later of two equal keys in one mapping without a word: a run defined twice
under `runs:` silently replaces the first. Here the document is composed into nodes first, every
mapping is searched for a repeated key (both line numbers go into the message), and only then is it
constructed. Anchors, aliases and merge keys (`<<: *base`) stay allowed: a key a mapping merges in and
then sets itself is an override, which is what `<<` is for, not a duplicate. Checking the composed
nodes, before PyYAML flattens the merges into them, keeps the two apart.

A syntax error names the line, the column and PyYAML's reason (its own text spans several lines and
quotes the source).
"""

from __future__ import annotations

import re

import yaml

from pipeline.errors import UserError

MERGE_TAG = "tag:yaml.org,2002:merge"


class SafeLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (libyaml's parser where PyYAML was built with it: five times faster on params.yaml,
    0.07 s against 0.39 s, which every stage reads), reading numbers as YAML 1.2 does: `1e-2` is the number
    0.01, as DVC (ruamel, YAML 1.2) and a reader take it, where YAML 1.1 needs a dot (`1.0e-2`) and makes
    `1e-2` a string."""


# YAML 1.2's float without a dot (1e-2, -3E5, +2e+3): after 1.1's own float and int patterns, which do not
# match these.
SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"), list("-+0123456789")
)
SAFE_LOADER = SafeLoader


def load_yaml(text: str, source: str):
    """The document in `text`, refused with one line per problem naming `source` (a file name)."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:  # an empty document, as safe_load gives it
            return None
        duplicates = duplicate_keys(loader, node)
        if duplicates:
            raise UserError("\n".join(f"{source}: {line}" for line in duplicates))
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise UserError(f"{source}: {describe_yaml_error(error)}") from None
    finally:
        loader.dispose()


def describe_yaml_error(error: yaml.YAMLError) -> str:
    """'not valid YAML at line L, column C: <reason>' on one line."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    reason = getattr(error, "problem", None) or str(error)
    context, context_mark = getattr(error, "context", None), getattr(error, "context_mark", None)
    if context:  # e.g. "while parsing a flow sequence", which may have started lines earlier
        earlier = context_mark is not None and (mark is None or context_mark.line != mark.line)
        reason += f" ({context} started at line {context_mark.line + 1})" if earlier else f" ({context})"
    return f"not valid YAML{where}: {' '.join(reason.split())}"


def duplicate_keys(loader, root: yaml.Node) -> list[str]:
    """One line for every key given twice in one mapping, anywhere in the document, in file order."""
    found: list[str] = []
    visited: set[int] = set()  # an aliased node is searched once (and a recursive alias ends)

    def search(node: yaml.Node, path: str) -> None:
        if id(node) in visited:
            return
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                search(item, f"{path}[{index}]")
        elif isinstance(node, yaml.MappingNode):
            first_line: dict = {}
            for key_node, value_node in node.value:
                key = "<<" if key_node.tag == MERGE_TAG else key_value(loader, key_node)
                if key_node.tag != MERGE_TAG and key is not None:
                    line = key_node.start_mark.line + 1
                    if key in first_line:
                        found.append(duplicate_message(key, path, first_line[key], line))
                    first_line.setdefault(key, line)
                search(value_node, f"{path}.{key}" if path else str(key))

    search(root, "")
    return found


def key_value(loader, key_node: yaml.Node):
    """A scalar key as Python sees it (so `1` and `0x1`, `true` and `True` are the same key); None
    for a complex key (a list as a key), which safe_load refuses on its own."""
    if not isinstance(key_node, yaml.ScalarNode):
        return None
    return loader.construct_object(key_node)


def duplicate_message(key, path: str, first: int, second: int) -> str:
    where = f"under {path}" if path else "at the top level"
    return (
        f"line {second}: key {key!r} {where} is defined twice (lines {first} and {second}); YAML would "
        "keep only the later one without a word: remove or rename one"
    )
