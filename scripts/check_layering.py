#!/usr/bin/env python3
"""Checks glassbox's #include lines and CMake DEPS against the layering in docs/architecture.md.

    scripts/check_layering.py              # the repository this script lives in
    scripts/check_layering.py --root DIR   # another tree (DIR/glassbox/...)
    scripts/check_layering.py --graph      # print what each module may include, and exit

Rules, for every glassbox/**/*.{h,hpp,cpp,cc}:
  1. `#include "glassbox/<module>/..."` must name the file's own module or one it depends on,
     directly or transitively (GRAPH below). A *_test.cpp file may also include
     glassbox/testing. serve/http and serve/grpc may include a serve/engine header only when that
     header is LibTorch-free all the way down (the engine's torch-free interface).
  2. Public headers (*.h, *.hpp) never include the LibTorch umbrella <torch/torch.h>; the
     precompiled header serves the .cpp files.
  3. base, monitor, serve/net, serve/http and serve/grpc include no LibTorch header at all (torch/, ATen/, c10/, caffe2/).
  4. Each module's CMake library (`gb_add_library(NAME ... DEPS a b ...)` in its CMakeLists.txt)
     depends only on modules the graph lets it use (libraries outside glassbox/, such as the
     benchmarks' `bench`, are not checked).
The graph is read from the fenced block under "## Layering" in docs/architecture.md (lines
`module -> dep, dep`); the built-in GRAPH below is the fallback for a tree without that file.
Prints `file:line: module X may not include Y ...` for each violation and exits 1; exits 0
with a one-line summary when there are none. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
from functools import lru_cache
from pathlib import Path

# Direct dependencies, exactly as docs/architecture.md (and each module's CMake DEPS) lists them.
GRAPH: dict[str, tuple[str, ...]] = {
    "base": (),
    "core": ("base",),
    "data": ("core",),
    "nn": ("core",),
    "metrics": ("core",),
    "dist": ("core",),
    "train": ("data", "nn", "metrics", "dist"),
    "inspect": ("train",),
    "explain": ("nn", "data"),
    "export": ("nn",),
    "report": ("metrics",),
    "monitor": ("base",),
    "serve/engine": ("export", "metrics", "core", "monitor"),
    "serve/net": ("base",),
    "serve/http": ("base", "monitor", "serve/net"),  # + LibTorch-free serve/engine headers (rule 1)
    "serve/grpc": ("base", "monitor", "serve/net"),  # + the same, and export's generated model_config.proto
    "app": ("train", "inspect", "explain", "export", "report", "monitor"),
    "testing": ("base",),  # helpers linked only by tests
    "cli": ("app", "serve/engine", "serve/http", "serve/grpc"),
}

GRAPH_DOC = Path("docs") / "architecture.md"
CMAKE_LIBRARY_RE = re.compile(r"gb_add_library\(\s*(\w+)(.*?)\)", re.S)
# CMake library names that are not their directory's name.
LIBRARY_MODULE = {"serve_api": "serve/engine", "serve_engine": "serve/engine", "serve_http": "serve/http",
                  "serve_grpc": "serve/grpc", "serve_net": "serve/net"}
# The front ends: torch-free, they reach serve/engine only through its LibTorch-free headers.
FRONT_ENDS = ("serve/http", "serve/grpc")


def graph_from_doc(path: Path) -> dict[str, tuple[str, ...]] | None:
    """The `module -> deps` lines of the fenced block under '## Layering', or None."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    m = re.search(r"^## Layering\s*\n+```[^\n]*\n(.*?)```", text, re.S | re.M)
    if not m:
        return None
    pairs: list[tuple[str, str]] = []
    for line in m.group(1).splitlines():
        # Several `a -> b` groups may share a line, separated by 3+ spaces.
        for part in re.split(r"\s{3,}(?=[\w/]+\s*->)", line.strip()):
            mm = re.match(r"([\w/]+)\s*->\s*(.*)", part)
            if mm:
                pairs.append((mm.group(1), mm.group(2)))
    modules = {lhs for lhs, _ in pairs}
    graph: dict[str, tuple[str, ...]] = {}
    for lhs, rhs in pairs:
        rhs = re.sub(r"\([^)]*\)", "", rhs)  # notes in parentheses
        # "serve/engine's torch-free interface header" is a note (rule 1), not a dependency.
        deps = [t for t in re.findall(r"[\w/]+(?![\w/']|'s)", rhs) if t in modules and t != lhs]
        graph[lhs] = tuple(dict.fromkeys(deps))
    return graph or None


def load_graph(root: Path) -> None:
    """Replaces GRAPH with the documented one (the tree's docs, else this script's repository's)."""
    for candidate in (root / GRAPH_DOC, Path(__file__).resolve().parent.parent / GRAPH_DOC):
        g = graph_from_doc(candidate)
        if g:
            GRAPH.clear()
            GRAPH.update(g)
            closure.cache_clear()
            return


TORCH_FREE_MODULES = ("base", "monitor", "serve/net", "serve/http", "serve/grpc")
TORCH_UMBRELLAS = ("torch/torch.h", "torch/all.h", "torch/extension.h")
TORCH_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/")
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc")
HEADER_SUFFIXES = (".h", ".hpp")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


@lru_cache(maxsize=None)
def closure(module: str) -> frozenset[str]:
    seen: set[str] = set()
    todo = list(GRAPH.get(module, ()))
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(GRAPH.get(m, ()))
    return frozenset(seen)


def module_of(rel: str) -> str | None:
    """'glassbox/serve/engine/x.h' -> 'serve/engine'; 'glassbox/train/y.cpp' -> 'train'."""
    parts = rel.split("/")
    if len(parts) < 3 or parts[0] != "glassbox":
        return None
    if parts[1] == "serve" and len(parts) >= 4:
        return "serve/" + parts[2]
    return parts[1]


class Checker:
    def __init__(self, root: Path):
        self.root = root
        self.violations: list[str] = []
        self.files = 0
        self.includes = 0

    def includes_of(self, path: Path) -> list[tuple[int, str, str]]:
        """(line number, '<' or '"', target) for each #include line, block comments skipped."""
        out = []
        in_comment = False
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return out
        for n, line in enumerate(text.splitlines(), 1):
            if in_comment:
                if "*/" not in line:
                    continue
                line = line.split("*/", 1)[1]
                in_comment = False
            m = INCLUDE_RE.match(line)
            if m:
                out.append((n, m.group(1), m.group(2).strip()))
            elif line.lstrip().startswith("/*") and "*/" not in line:
                in_comment = True
        return out

    def resolve(self, src: Path, kind: str, target: str) -> str | None:
        """The include as a path relative to the root when it names a file of ours."""
        if target.startswith("glassbox/"):
            return target
        if kind == '"':
            cand = (src.parent / target).resolve()
            try:
                rel = cand.relative_to(self.root.resolve()).as_posix()
            except ValueError:
                return None
            if rel.startswith("glassbox/") and cand.exists():
                return rel
        return None

    @lru_cache(maxsize=None)
    def torch_free(self, rel: str) -> bool:
        """Whether this header and everything of ours it includes avoid LibTorch."""
        path = self.root / rel
        if not path.exists():
            return True  # the compiler reports a missing file better than we can
        for _, kind, target in self.includes_of(path):
            if target.startswith(TORCH_PREFIXES):
                return False
            inc = self.resolve(path, kind, target)
            if inc is None:
                continue
            mod = module_of(inc)
            if mod in TORCH_FREE_MODULES:
                continue  # rule 3 keeps them free of LibTorch
            if mod != "serve/engine" or not self.torch_free(inc):
                return False
        return True

    def report(self, rel: str, line: int, message: str) -> None:
        self.violations.append(f"{rel}:{line}: {message}")

    def check_file(self, path: Path) -> None:
        rel = path.relative_to(self.root).as_posix()
        module = module_of(rel)
        self.files += 1
        if module not in GRAPH:
            self.report(rel, 1, f"module {module or '(none)'} is not in the layering graph "
                        "(add it to GRAPH in scripts/check_layering.py and to docs/architecture.md)")
            return
        is_header = path.suffix in HEADER_SUFFIXES
        is_test = path.stem.endswith("_test")
        allowed = closure(module) | {module}
        if is_test:
            allowed |= {"testing"}
        for line, kind, target in self.includes_of(path):
            self.includes += 1
            if is_header and target in TORCH_UMBRELLAS:
                self.report(rel, line, f"module {module} may not include <{target}> in a public header "
                            "(include the specific LibTorch headers; the PCH serves .cpp files)")
            if module in TORCH_FREE_MODULES and target.startswith(TORCH_PREFIXES):
                self.report(rel, line, f"module {module} may not include <{target}> "
                            f"({module} is LibTorch-free)")
            inc = self.resolve(path, kind, target)
            if inc is None:
                continue
            dep = module_of(inc)
            if dep in allowed:
                continue
            if module in FRONT_ENDS and dep == "serve/engine" and self.torch_free(inc):
                continue
            if dep not in GRAPH:
                self.report(rel, line, f"module {module} may not include {inc}: "
                            f"{dep or '(none)'} is not a module of the layering graph")
                continue
            why = ", ".join(sorted(allowed)) or "nothing of ours"
            extra = ""
            if module in FRONT_ENDS and dep == "serve/engine":
                extra = f" (that header reaches LibTorch; {module} may use only torch-free engine headers)"
            self.report(rel, line, f"module {module} may not include {dep} ({inc}){extra}; "
                        f"{module} may use: {why}")

    def check_cmake(self, path: Path) -> None:
        rel = path.relative_to(self.root).as_posix()
        module = module_of(rel.rsplit("/", 1)[0] + "/x")
        if module not in GRAPH:
            return
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in CMAKE_LIBRARY_RE.finditer(text):
            words = m.group(2).split()
            if "DEPS" not in words:
                continue
            deps = []
            for w in words[words.index("DEPS") + 1:]:
                if w.isupper():  # the next keyword (EXTERNAL, SOURCES, ...)
                    break
                deps.append(w)
            line = text.count("\n", 0, m.start()) + 1
            allowed = closure(module) | {module}
            for d in deps:
                dep = LIBRARY_MODULE.get(d, d)
                if dep not in GRAPH:
                    continue  # a library outside glassbox/ (bench)
                if module in FRONT_ENDS and d == "serve_api":
                    continue  # the engine's torch-free interface library (rule 1)
                if dep not in allowed:
                    self.report(rel, line, f"library {m.group(1)} of module {module} may not depend on {d} "
                                f"({dep}); {module} may use: {', '.join(sorted(allowed))}")

    def run(self) -> int:
        base = self.root / "glassbox"
        if not base.is_dir():
            print(f"check_layering: no glassbox/ under {self.root}", file=sys.stderr)
            return 2
        load_graph(self.root)
        for path in sorted(base.rglob("*")):
            if path.is_file() and path.suffix in SOURCE_SUFFIXES:
                self.check_file(path)
            elif path.name == "CMakeLists.txt":
                self.check_cmake(path)
        for v in self.violations:
            print(v)
        n = len(self.violations)
        print(f"layering: {self.files} files, {self.includes} includes, {n} violation{'s' if n != 1 else ''}",
              file=sys.stderr if n else sys.stdout)
        return 1 if n else 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="repository root (default: this script's repository)")
    ap.add_argument("--graph", action="store_true", help="print each module's allowed includes and exit")
    args = ap.parse_args(argv)
    if args.graph:
        load_graph(args.root.resolve())
        for m in GRAPH:
            print(f"{m:13} -> {', '.join(sorted(closure(m))) or '(std, Debian libs)'}")
        return 0
    return Checker(args.root.resolve()).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
