#!/usr/bin/env python3
"""The import graph of a package, read from its source (the AST, nothing is
imported): its longest chain of imports and its cycles.

Every `import` and `from ... import` counts, at module level or inside a
function (a lazy import is still a dependency; import-linter counts it too),
except those under `if TYPE_CHECKING:`, which only the type checker reads
(they never run, so they order nothing at import time).
`from pkg import name` is an import of `pkg.name` when that is a module of
the package, else of `pkg`; an import names the module itself, not the
packages above it (as import-linter's graph does).

    python3 tools/import_depth.py [SRC_DIR [PACKAGE]]     # default: src opcost

prints the depth (the number of modules on the longest chain), that chain,
and every cycle; exit 1 when there is a cycle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def modules(src: Path, package: str) -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, level: int, module: str, is_package: bool) -> str:
    if level == 0:
        return name
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def graph(src: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of the package it imports."""
    mods = modules(src, package)
    out: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        typing_only = {id(n) for top in ast.walk(tree) if isinstance(top, ast.If) and _type_checking(top.test)
                       for stmt in top.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            found: list[str] = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", node.level, mod, is_package)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    found.append(sub if sub in mods else base)
            for name in found:
                # `import opcost.x.y` names opcost.x.y (or its nearest module)
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if name and name != mod:
                    out[mod].add(name)
    return out


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(1000, 10 * len(g)))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def longest_chain(g: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports (modules, the importer first); the graph
    must have no cycle."""
    memo: dict[str, list[str]] = {}

    def chain(v: str) -> list[str]:
        if v not in memo:
            best: list[str] = []
            for w in sorted(g[v]):
                c = chain(w)
                if len(c) > len(best):
                    best = c
            memo[v] = [v, *best]
        return memo[v]

    return max((chain(v) for v in sorted(g)), key=len, default=[])


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "src"
    package = argv[1] if len(argv) > 1 else "opcost"
    g = graph(src, package)
    cyc = cycles(g)
    if cyc:
        for c in cyc:
            print("cycle: " + " <-> ".join(c))
        return 1
    c = longest_chain(g)
    print(f"{len(g)} modules, {sum(map(len, g.values()))} imports; depth {len(c)} (longest chain):")
    print("  " + " -> ".join(c))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
