"""The shape of the code: one package per pipeline stage, imports only towards earlier stages,
no import cycle; and what a class may read: its declared inputs, not attributes a base class
only declares, and no function with more parameters than `MOST_PARAMETERS` (issue 44)."""

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "flowrate"

# The stages in the order a module may depend on them: each imports only from itself and from
# stages before it. Data types come before the stages that make them: results (rows, files,
# summaries, gates) are read by metrics and evaluation, which produce them.
STAGES = [
    "errors",
    "settings",
    "inputs",
    "rubric",
    "judge",
    "scores",
    "results",
    "metrics",
    "evaluation",
    "analysis",
    "reports",
    "review",
    "api",
    "cli",
    "ci",  # the pytest plugin and the GitHub Action's steps: consumers of the library, as the CLI is
]
# The widest signature a function may have, `self` and `cls` not counted, `*args` and `**kwargs`
# counted one each; see `test_no_function_takes_more_parameters_than_the_ceiling`.
MOST_PARAMETERS = 16
# Bases that make a constructor of their annotations: their classes hold their fields themselves.
RECORD_BASES = {"BaseModel", "TypedDict", "NamedTuple", "Protocol", "Enum", "StrEnum", "IntEnum"}


def stage_of(module: str) -> str | None:
    """`flowrate.judge.retry` -> `judge`; the package root (`flowrate`) and `__main__` have no stage."""
    parts = module.split(".")
    if parts[0] != "flowrate" or len(parts) == 1 or parts[1] == "__main__":
        return None
    return parts[1]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """Every flowrate module `path` imports, at the top or inside a function (a lazy import is
    a dependency too)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in known else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("flowrate") and name in known and name != module}


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {module: imports_of(path, module, known) for module, path in found.items()}


def test_every_module_belongs_to_a_stage():
    strays = [
        module for module in modules() if stage_of(module) is None and module not in ("flowrate", "flowrate.__main__")
    ]
    assert not strays
    unknown = sorted({stage_of(module) for module in modules()} - {None, *STAGES})
    assert not unknown, f"modules outside the declared stages: {unknown}"


def test_no_module_imports_a_later_stage():
    order = {stage: n for n, stage in enumerate(STAGES)}
    upward = []
    for module, targets in graph().items():
        here = stage_of(module)
        if here is None:
            continue
        for target in targets:
            there = stage_of(target)
            if there is not None and order[there] > order[here]:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports of a later stage:\n" + "\n".join(sorted(upward))


def test_the_import_graph_has_no_cycle():
    edges = graph()
    state: dict[str, int] = defaultdict(int)  # 0 unseen, 1 on the path, 2 done
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(edges.get(module, ())):
            if state[target] == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif state[target] == 0:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(edges):
        if state[module] == 0:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def sources() -> dict[str, str]:
    """Every flowrate module's text, by module name."""
    return {module: path.read_text() for module, path in modules().items()}


def _declares_only(statement: ast.stmt) -> bool:
    """A docstring, an annotation, `pass`, or a method with no behaviour (a docstring, `...`, a raise)."""
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True
    if isinstance(statement, ast.AnnAssign | ast.Pass):
        return True
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
        return all(_declares_only(inner) or isinstance(inner, ast.Raise) for inner in statement.body)
    return False


def _base_name(base: ast.expr) -> str | None:
    """`Base`, `module.Base` and `Base[T]` -> "Base"."""
    base = base.value if isinstance(base, ast.Subscript) else base
    if isinstance(base, ast.Attribute):
        return base.attr
    return base.id if isinstance(base, ast.Name) else None


def declaring_bases(texts: dict[str, str]) -> list[str]:
    """The classes in `texts` (module name -> source) whose body only declares attributes
    (annotations without a value; methods, if any, without behaviour), neither a record (a
    dataclass or any decorated class, a pydantic model, a TypedDict, a NamedTuple, a Protocol, an
    Enum) nor holding a constructor, that a class of `texts` subclasses (at any depth) and reads
    the declared attributes of through `self`: a mixin stack's shared state, which its parts
    should be given as declared inputs instead. Classes are matched by name."""
    classes: dict[str, list[tuple[str, ast.ClassDef]]] = defaultdict(list)
    for module, text in texts.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                classes[node.name].append((module, node))

    def ancestors(node: ast.ClassDef, seen: frozenset[str] = frozenset()) -> set[str]:
        names = {name for name in map(_base_name, node.bases) if name is not None and name not in seen}
        return names.union(*(ancestors(parent, seen | names) for name in names for _, parent in classes[name]))

    found = []
    for name, definitions in list(classes.items()):
        for module, node in definitions:
            declared = {
                statement.target.id
                for statement in node.body
                if isinstance(statement, ast.AnnAssign) and statement.value is None
                if isinstance(statement.target, ast.Name)
            }
            record = bool(node.decorator_list) or bool(ancestors(node) & RECORD_BASES)
            if record or not declared or not all(_declares_only(statement) for statement in node.body):
                continue
            readers = [
                f"{reader_module}.{reader.name} ({', '.join(sorted(read))})"
                for reader_module, reader in (pair for pairs in list(classes.values()) for pair in pairs)
                if reader is not node and name in ancestors(reader)
                for read in [declared & _read_through_self(reader)]
                if read
            ]
            if readers:
                found.append(f"{module}.{name}, read by " + "; ".join(readers))
    return found


def _read_through_self(node: ast.ClassDef) -> set[str]:
    """The attributes `node`'s methods reach as `self.name`."""
    return {
        inner.attr
        for inner in ast.walk(node)
        if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id == "self"
    }


def wide_functions(texts: dict[str, str], most: int) -> list[str]:
    """The functions in `texts` (module name -> source) with more than `most` parameters: `self`
    or `cls` first in a method not counted, `*args` and `**kwargs` one each. A CLI command
    (decorated with `cli.common.command`) is left out: Typer reads a command's options from its
    signature, so its parameters are its options, one each (docs/cli.md lists them)."""
    wide = []
    for module, text in texts.items():
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if any(_base_name(getattr(d, "func", d)) == "command" for d in node.decorator_list):
                continue
            arguments = node.args
            named = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            if named and named[0].arg in ("self", "cls"):
                named = named[1:]
            count = len(named) + (arguments.vararg is not None) + (arguments.kwarg is not None)
            if count > most:
                wide.append(f"{module}.{node.name} (line {node.lineno}): {count} parameters (at most {most})")
    return wide


def test_no_base_class_only_declares_the_attributes_its_subclasses_read():
    """A class's parts are collaborators it holds, each given what it reads (as
    `metrics.rubric_metric.RubricMetric`'s and `judge.served.ServedJudge`'s are), not mixins
    reading attributes a base only declares and another class sets (issue 44: `ServedFacts`)."""
    found = declaring_bases(sources())
    assert not found, "base classes that only declare what their subclasses read:\n" + "\n".join(found)


def test_no_function_takes_more_parameters_than_the_ceiling():
    """At most `MOST_PARAMETERS` (16), the widest signature when the rule came (issue 44).
    Measured then, CLI commands aside: of 1,485 functions, 1,437 take 0-5 parameters and 7 take
    more than 8; the widest is `RubricMetric.__init__` with 16 (eval_lib's signature with
    flowrate's options), then `align_rubric` with 14 and `complete_with_retries` with 11. Issue
    44 item 5 gives the metric its settings group: lower the ceiling then to the widest left. A
    function past the ceiling takes a settings group or a declared record of its inputs."""
    wide = wide_functions(sources(), MOST_PARAMETERS)
    assert not wide, "\n".join(wide)


PLANTED_MIXINS = {
    "plant.base": (
        "class Facts:\n"
        '    """What the parts read."""\n'
        "    address: str\n"
        "    def window(self) -> int:\n"
        '        """Told by a subclass."""\n'
        "        raise NotImplementedError\n"
    ),
    "plant.parts": (
        "from plant.base import Facts\n"
        "class Forms(Facts):\n"
        "    def form(self):\n"
        "        return self.address\n"
        "class Judge(Forms):\n"
        "    def __init__(self, address):\n"
        "        self.address = address\n"
    ),
}


def test_the_declaration_rule_finds_a_base_that_only_declares_what_its_subclasses_read():
    assert declaring_bases(PLANTED_MIXINS) == [
        "plant.base.Facts, read by plant.parts.Forms (address); plant.parts.Judge (address)"
    ]


def test_the_declaration_rule_leaves_records_interfaces_and_unread_declarations_alone():
    reader = "\nclass Judge(Facts):\n    def form(self):\n        return self.address\n"
    kept = {
        "a dataclass": "from dataclasses import dataclass\n@dataclass\nclass Facts:\n    address: str\n" + reader,
        "a pydantic model": "from pydantic import BaseModel\nclass Facts(BaseModel):\n    address: str\n" + reader,
        "an interface": "class Facts:\n    def address(self) -> str:\n        raise NotImplementedError\n" + reader,
        "a class with behaviour": "class Facts:\n    address: str\n    def shown(self):\n        return self.address\n"
        + reader,
        "a declaration nobody reads": "class Facts:\n    address: str\nclass Judge(Facts):\n    pass\n",
    }
    assert {kind: declaring_bases({"plant": text}) for kind, text in kept.items()} == dict.fromkeys(kept, [])
    assert declaring_bases({"plant": "class Facts:\n    address: str\n" + reader}) == [
        "plant.Facts, read by plant.Judge (address)"
    ]


def test_the_parameter_ceiling_counts_every_parameter_but_self_and_leaves_commands_alone():
    names = ", ".join(f"p{n}" for n in range(15))
    texts = {
        "plant.wide": f"def wide({names}, *more, **options): pass\n",
        "plant.method": f"class Metric:\n    def __init__(self, {names}, last=None): pass\n",
        "plant.command": f"@command(app, 'eval')\ndef eval_command({names}, a, b, c): pass\n",
    }
    assert wide_functions(texts, 16) == ["plant.wide.wide (line 1): 17 parameters (at most 16)"]
    assert wide_functions(texts, 15) == [
        "plant.wide.wide (line 1): 17 parameters (at most 15)",
        "plant.method.__init__ (line 2): 16 parameters (at most 15)",
    ]


def test_data_only_analysis_modules_import_no_judge():
    """Analysis is data only, apart from `analysis.judged` (judge-bench, align, naming the top
    issues): no other analysis module reaches `flowrate.judge`, at the top or in a function."""
    reaching = [
        f"{module} -> {target}"
        for module, targets in graph().items()
        if stage_of(module) == "analysis" and not module.startswith("flowrate.analysis.judged")
        for target in targets
        if stage_of(target) == "judge"
    ]
    assert not reaching, "data-only analysis modules importing the judge:\n" + "\n".join(sorted(reaching))


def test_the_cli_only_translates_it_imports_no_judge_and_no_duckdb():
    """A command calls the library: no `flowrate.cli` module reaches `flowrate.judge` or
    DuckDB itself (nor `flowrate.analysis.history`, which opens it), at the top or in a function."""
    reaching = []
    for module, path in modules().items():
        if stage_of(module) != "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            reaching += [
                f"{module} -> {name}"
                for name in names
                if name == "duckdb" or name.startswith("flowrate.judge") or name == "flowrate.analysis.history"
            ]
    assert not reaching, "\n".join(sorted(reaching))
