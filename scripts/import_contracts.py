"""An import-linter contract type of this project's: no import circle between modules.

import-linter's own ``acyclic_siblings`` forbids circles between the sibling packages
of a package; this one forbids any circle of modules, imports inside functions and
under ``TYPE_CHECKING`` included, and a submodule importing its own package's
``__init__`` counts (that package imports it back, or will). Registered in
pyproject.toml (``contract_types``); scripts/layers.sh puts this folder on the path.
"""

from __future__ import annotations

from typing import Any

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The circles of a directed graph: its strongly connected components of two or more.

    Tarjan's algorithm, iterative (a deep import chain must not hit the recursion limit).
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


class AcyclicModulesContract(Contract):
    """No module of ``containers`` reaches itself through imports of modules in them."""

    type_name = "acyclic_modules"

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        """Broken when the module graph inside the containers has a circle."""
        modules: set[str] = set()
        for container in self.containers:  # type: ignore[attr-defined]
            modules |= {container, *graph.find_descendants(container)}
        edges = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
        circles = strongly_connected(edges)
        found = [
            {
                "modules": circle,
                "imports": [[a, b] for a in circle for b in sorted(edges[a]) if b in circle],
            }
            for circle in circles
        ]
        return ContractCheck(kept=not circles, metadata={"circles": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        """Each circle: its modules and the imports that tie them."""
        circles: list[dict[str, Any]] = check.metadata["circles"]
        for circle in circles:
            output.print_error(f"A circle of {len(circle['modules'])} modules:")
            output.new_line()
            for importer, imported in circle["imports"]:
                output.indent_cursor()
                output.print(f"{importer} -> {imported}")
            output.new_line()
