"""The library's layout is its architecture: layers import only from below, no module imports in a circle,
and no module changes another module's objects.

Static checks over the source (``ast``), so they cover every import: top-level, inside functions and
under ``TYPE_CHECKING`` alike (a type-level import of an upper layer is the same dependency).
"""

from __future__ import annotations

from helpers import ROOT_DIR

import ast
import pathlib
from typing import Iterator, Optional


ROOT = pathlib.Path(ROOT_DIR) / "xla_ckpt"

# Bottom to top. A module may import its own layer (without a cycle) and every layer below. "": the
# public modules (``xla_ckpt``, ``policies``, the example models); ``_cli`` (``python -m xla_ckpt``)
# runs the example models, so it sits above them.
LAYERS = ("_base", "_ops", "_record", "_policy", "_hooks", "_compile", "_engine", "_api", "_estimate", "", "_cli")
PUBLIC = {"xla_ckpt", "xla_ckpt.policies", "xla_ckpt.models", "xla_ckpt.hf_models"}
CLI = {"xla_ckpt.__main__"}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = ("xla_ckpt",) + p.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts).removesuffix(".__init__")
        out[name] = p
    return out


MODULES = _modules()


def _imports(name: str, path: pathlib.Path) -> Iterator[tuple[str, int]]:
    """Every library module ``name`` imports, with the line (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "xla_ckpt" and not target.startswith("xla_ckpt."):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in MODULES else target), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "xla_ckpt" or alias.name.startswith("xla_ckpt."):
                    yield alias.name, node.lineno


def graph() -> dict[str, set[str]]:
    return {m: {t for t, _ in _imports(m, p) if t != m and t in MODULES} for m, p in MODULES.items()}


def layer(module: str) -> int:
    if module in CLI:
        return LAYERS.index("_cli")
    if module in PUBLIC:
        return LAYERS.index("")
    return LAYERS.index(module.split(".")[1])


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
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
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_every_module_is_in_a_layer() -> None:
    outside = [m for m in MODULES if m not in PUBLIC | CLI and m.split(".")[1] not in LAYERS]
    assert not outside, f"modules outside the layer packages (put them in one of {LAYERS}): {outside}"


def test_no_import_cycle() -> None:
    found = cycles(graph())
    assert not found, "import cycles in xla_ckpt/: " + "; ".join(" <-> ".join(c) for c in found)


def test_layers_import_only_from_below() -> None:
    bad = []
    for m, p in MODULES.items():
        for target, line in _imports(m, p):
            if target in MODULES and target != m and layer(target) > layer(m):
                bad.append(f"{p.relative_to(ROOT.parent)}:{line} {m} imports {target} (a layer above)")
    assert not bad, "\n".join(bad)


def test_the_checks_can_fail() -> None:
    """The checks themselves: a made-up cycle and an upward import are found."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("xla_ckpt._base.compat") < layer("xla_ckpt._engine.region") < layer("xla_ckpt.policies")


# -- state is changed only by the object that owns it --------------------------------------------------

# Attributes of objects the library does not define, that it writes by design (and owns a same-named
# attribute of its own elsewhere): each with why.
FOREIGN = {
    "forward": "nn.Module.forward of the user's module: checkpointed/apply/patch_linear replace it on the "
               "instance (uncheckpointed/unpatch_linear put the class's back); signatures stay the same",
    "meta": "torch.fx.Node.meta: graph passes mark nodes there (torch's selective-checkpoint API)",
}

# Single sites, each with why (file, code).
ALLOWED = {
    ("xla_ckpt/_ops/linear.py", "ctx.dtype"): "torch.autograd.Function's ctx: forward leaves backward its state "
                                                 "there (torch's API)",
    ("xla_ckpt/_ops/linear.py", "new.bias"): "Linear.from_linear: the instance it just built of its own class "
                                                "takes the module's parameter objects",
    ("xla_ckpt/_api/scan_weights.py", "p.grad"): "stack/unstack: the Parameter it just built takes the grads the "
                                                 "layers' parameters had (torch's .grad, not the engine's)",
}

MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault", "add",
                      "discard", "remove", "sort", "reverse"})


def _owned(tree: ast.Module) -> set[str]:
    """Attributes the module's classes own: assigned on ``self`` in a method, a field of the class
    body, or named in ``__slots__``."""
    owned: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        owned.update(n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))
        for node in ast.walk(cls):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) and el.value.id == "self":
                        owned.add(el.attr)
                    if isinstance(el, ast.Name) and el.id == "__slots__" and isinstance(node, ast.Assign):
                        owned.update(c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                                     and isinstance(c.value, str))
    return owned


def _module_names(tree: ast.Module) -> set[str]:
    """The module's own objects: names bound at module level (a thread-local, a registry), and every
    function or class it defines (a function attribute set where the function is made)."""
    names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for node in tree.body:
        for t in (node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]):
            if isinstance(t, ast.Name):
                names.add(t.id)
    return names


def _foreign_writes(tree: ast.Module) -> Iterator[tuple[int, str, str]]:
    """``(line, attribute, code)`` for every write through an attribute of an object that is not ``self``.

    A write is a store or ``del`` of ``obj.attr``, a store into ``obj.attr[...]``, or a mutating method
    called on ``obj.attr`` (``obj.attr.append(...)``), where ``obj`` is not ``self``/``cls`` or a
    module-level name of the same file.
    """
    own = _module_names(tree) | {"self", "cls"}

    def through(node: ast.AST) -> Optional[ast.Attribute]:
        if isinstance(node, ast.Subscript):
            node = node.value
        if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id in own):
            return node
        return None

    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = [el for t in node.targets for el in (t.elts if isinstance(t, ast.Tuple) else [t])]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS):
            targets = [node.func.value]
        for t in targets:
            attr = through(t)
            if attr is not None:
                yield node.lineno, attr.attr, ast.unparse(t)


def foreign_state_writes() -> list[str]:
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in MODULES.items()}
    owners: dict[str, set[str]] = {}
    for m, tree in trees.items():
        for attr in _owned(tree):
            owners.setdefault(attr, set()).add(m)
    bad = []
    for m, tree in trees.items():
        for line, attr, code in _foreign_writes(tree):
            others = owners.get(attr, set()) - {m}
            where = str(MODULES[m].relative_to(ROOT.parent))
            if others and m not in owners.get(attr, set()) and attr not in FOREIGN and (where, code) not in ALLOWED:
                bad.append(f"{where}:{line} writes {code} "
                           f"(owned by {', '.join(sorted(others))})")
    return bad


def test_no_module_writes_another_modules_objects() -> None:
    """Each object's state is changed by its own methods: ``region.cache[p] = ...`` from another
    module fails here."""
    bad = foreign_state_writes()
    assert not bad, "\n".join(bad)


def test_the_write_check_can_fail() -> None:
    tree = ast.parse("def f(region, x):\n    region.cache[1] = x\n    region.records.append(x)\n"
                     "    self.ok = 1\n    region.inputs = []\n")
    assert [(a, c) for _, a, c in sorted(_foreign_writes(tree))] == [
        ("cache", "region.cache[1]"), ("records", "region.records"), ("inputs", "region.inputs")]


def test_test_file_names_are_unique():
    """pytest imports each test file by its basename (no ``__init__.py`` in the tree, its folder put on
    sys.path): two files of one name in different folders stop the run at collection."""
    seen: dict[str, pathlib.Path] = {}
    clashes = []
    for p in sorted((pathlib.Path(ROOT_DIR) / "tests").rglob("*.py")):
        if p.name in seen and p.name != "__init__.py":
            clashes.append(f"{p} and {seen[p.name]}")
        seen.setdefault(p.name, p)
    assert not clashes, "\n".join(clashes)
