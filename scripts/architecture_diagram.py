"""Draw the import graph between hms_txn's layers and the other packages into
docs/architecture.md (between its ``<!-- diagram:start -->`` and ``<!-- diagram:end -->``
markers), as a Mermaid flowchart; and, for every other ``layers`` contract (the parts of
``hms_txn.domain`` and ``hms_txn.service``), the graph between its layers (between
``<!-- diagram:CONTAINER:start -->`` and ``<!-- diagram:CONTAINER:end -->``).

    python scripts/architecture_diagram.py           # rewrite the diagrams
    python scripts/architecture_diagram.py --check   # exit 1 if a committed one is stale

The nodes come from the import contracts in pyproject.toml: the layers of a ``layers``
contract, and, in hms_txn's diagram, the other root packages. The arrows are the imports
the code has now (grimp, every import statement, lazy ones included), one arrow per pair of
nodes that has at least one; an arrow that a ``layers`` or ``forbidden`` contract does not
allow is drawn dashed and red and named after the contract it breaks.
tests/test_architecture_doc.py fails when the committed diagrams are not what this script
draws now; ``lint-imports`` is the check of the rules themselves.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:                       # Python 3.10: import-linter depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
TOP = "hms_txn"                           # the container of the page's main diagram


def config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def containers(config: dict) -> list[str]:
    """The container of every ``layers`` contract: hms_txn first, then the others in the
    order of pyproject.toml."""
    found = [c["containers"][0] for c in config["contracts"] if c["type"] == "layers"]
    return sorted(found, key=lambda c: c != TOP)


def markers(container: str) -> tuple[str, str]:
    if container == TOP:
        return "<!-- diagram:start -->", "<!-- diagram:end -->"
    return f"<!-- diagram:{container}:start -->", f"<!-- diagram:{container}:end -->"


def nodes_and_rules(config: dict, container: str = TOP
                    ) -> tuple[list[str], list[str], list[tuple[str, str, str]]]:
    """(the layer nodes of ``container``'s layers contract, top first; the other nodes;
    (importer, imported, contract id) pairs of nodes that a contract forbids)."""
    [layers] = [c for c in config["contracts"]
                if c["type"] == "layers" and c["containers"] == [container]]
    # a layer "a | b" is two independent siblings: neither imports the other
    levels = [[f"{container}.{name.strip()}" for name in layer.split("|")]
              for layer in layers["layers"]]
    layer_nodes = [n for level in levels for n in level]
    others = (sorted(p for p in config["root_packages"] if p != container)
              if container == TOP else [])
    nodes = layer_nodes + others
    forbidden = []
    for i, upper_level in enumerate(levels):
        for lower_level in levels[i + 1:]:
            forbidden += [(lower, upper, layers["id"]) for upper in upper_level
                          for lower in lower_level]
        forbidden += [(a, b, layers["id"]) for a in upper_level for b in upper_level if a != b]
    for contract in config["contracts"]:
        if contract["type"] != "forbidden":
            continue
        for source in contract["source_modules"]:
            for target in contract["forbidden_modules"]:
                # A node wholly inside the source may not import a node wholly inside the
                # target (a rule on a part of a node, e.g. wire.thrift_gen, is not drawn).
                forbidden += [(a, b, contract["id"]) for a in nodes for b in nodes
                              if a != b and _within(a, source) and _within(b, target)]
    return layer_nodes, others, forbidden


def actual_edges(config: dict, nodes: list[str]) -> set[tuple[str, str]]:
    """Pairs of nodes with at least one import from the first into the second."""
    import grimp

    sys.path.insert(0, str(ROOT))          # this checkout's packages, not an installed copy
    graph = grimp.build_graph(*config["root_packages"])
    by_length = sorted(nodes, key=len, reverse=True)

    def node_of(module: str) -> str | None:
        return next((n for n in by_length if _within(module, n)), None)

    edges = set()
    for module in graph.modules:
        importer = node_of(module)
        if importer is None:               # a root package's __init__ (hms_txn.__version__)
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            target = node_of(imported)
            if target is not None and target != importer:
                edges.add((importer, target))
    return edges


def render(container: str = TOP) -> str:
    contracts = config()
    layer_nodes, others, forbidden = nodes_and_rules(contracts, container)
    nodes = layer_nodes + others
    edges = actual_edges(contracts, nodes)
    broken = {}
    for a, b, contract in forbidden:
        if (a, b) in edges:
            broken.setdefault((a, b), []).append(contract)
    ident = {n: n.replace(".", "_") for n in nodes}
    lines = ["```mermaid", "flowchart TD",
             f'    subgraph {container.replace(".", "_")}'
             f'["{container}: layers, top to bottom"]']
    lines += [f'        {ident[n]}["{n.rsplit(".", 1)[1]}"]' for n in layer_nodes]
    lines.append("    end")
    lines += [f'    {ident[n]}["{n}"]' for n in others]
    order = {n: i for i, n in enumerate(nodes)}
    red = []
    for i, (a, b) in enumerate(sorted(edges, key=lambda e: (order[e[0]], order[e[1]]))):
        if (a, b) in broken:
            label = ", ".join(sorted(set(broken[(a, b)])))
            lines.append(f'    {ident[a]} -. "breaks {label}" .-> {ident[b]}')
            red.append(str(i))
        else:
            lines.append(f"    {ident[a]} --> {ident[b]}")
    if red:
        lines.append(f"    linkStyle {','.join(red)} stroke:#d00,stroke-width:2px")
    lines.append("```")
    lines.append("")
    lines.append("An arrow: at least one module of one imports a module of the other, as the "
                 "code is now. Dashed red: the import breaks the named contract of "
                 "`pyproject.toml`.")
    return "\n".join(lines)


def splice(doc: str, diagram: str, container: str = TOP) -> str:
    start, end = markers(container)
    head, found, rest = doc.partition(start)
    _, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise SystemExit(f"{DOC} has no {start} ... {end} markers")
    return f"{head}{start}\n{diagram}\n{end}{tail}"


def committed(container: str = TOP) -> str:
    start, end = markers(container)
    doc = DOC.read_text()
    return doc.partition(start)[2].partition(end)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a diagram of docs/architecture.md is not the current one")
    args = parser.parse_args(argv)
    diagrams = {container: render(container) for container in containers(config())}
    if args.check:
        stale = [c for c, diagram in diagrams.items() if committed(c) != diagram]
        if stale:
            print(f"{DOC.relative_to(ROOT)}: the diagram of {', '.join(stale)} is out of date; "
                  f"run python scripts/architecture_diagram.py", file=sys.stderr)
            return 1
        return 0
    doc = DOC.read_text()
    for container, diagram in diagrams.items():
        doc = splice(doc, diagram, container)
    DOC.write_text(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
