"""The package layout is the architecture: each layer imports only the layers below it.

    engine.errors                     base: imports nothing from the project
    engine.network   (+ asr_kernels)  the network: config, weights, features, encoder, decoder
    engine.audio                      audio in: decoding, live sources, VAD, chunking
    engine.text                       text out: prompts, words, transcript types, cues, exports
    engine.serving                    the step loop over the network
    engine.pipelines                  file jobs, live streams, the aligner, over all of the above
    engine.api, engine (package)      the public API
    modelhub                          checkpoint downloads (no engine)
    cli                               the command line: engine (its audio headers too) + modelhub
    server                            the HTTP server over one engine (server.client: its stdlib client)
    app                               the Qt UI: engine's public modules, modelhub, server.client, app
    cluster                           Ray jobs and Serve replicas: engine, modelhub, server (cli calls it)

Every import counts, also those inside functions (lazy imports still couple modules).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "asr_kernels", "modelhub", "cli", "app", "server", "cluster")

# layer -> the layers (besides itself) it may import
ALLOWED = {
    "engine.errors": set(),
    "asr_kernels": set(),
    "engine.network": {"engine.errors", "asr_kernels"},
    "engine.audio": {"engine.errors"},
    "engine.text": {"engine.errors"},
    "engine.serving": {"engine.errors", "engine.network", "asr_kernels"},
    "engine.pipelines": {"engine.errors", "engine.network", "engine.audio", "engine.text", "engine.serving",
                         "asr_kernels"},
    "engine.api": {"engine.errors", "engine.network", "engine.audio", "engine.text", "engine.serving",
                   "engine.pipelines", "engine"},
    "engine": {"engine.errors", "engine.text", "engine.api", "engine.serving", "engine.pipelines"},
    "modelhub": set(),
    "server.client": {"engine.text", "engine.errors"},
    "server": {"engine", "engine.api", "engine.errors", "engine.text", "engine.audio", "engine.network",
               "server.client"},
    "cli": {"engine", "engine.api", "engine.errors", "engine.text", "engine.audio", "engine.network", "modelhub",
            "server", "server.client", "cluster"},
    # Ray jobs and Serve replicas: engines, the server's app, the CLI's exporter; never the UI
    "cluster": {"engine", "engine.api", "engine.errors", "engine.text", "engine.audio", "engine.network", "modelhub",
                "server", "server.client"},
    "app": {"engine", "engine.errors", "engine.text", "engine.audio", "engine.network", "modelhub",
            "server.client"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """Project modules that ``module`` imports anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            # the longest project module the name refers to (a submodule, else its package)
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {m: imports_of(m, p, known) for m, p in modules.items()}


def test_no_installed_distribution_ships_a_top_level_package_of_ours():
    """Our top-level packages share one import namespace with every dependency: a dependency that
    ships a package of the same name (transformers 5.25 pulls Hugging Face's ``kernels``, which our
    Triton kernels were once called) gets ours on import, and fails there."""
    import importlib.metadata as metadata
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    name = project["project"]["name"]
    ours = {name, name.replace("-", "_")}
    top_level = {package.split(".")[0] for package in project["tool"]["setuptools"]["packages"]}
    provided = metadata.packages_distributions()
    clashes = {package: sorted(set(provided.get(package, [])) - ours) for package in sorted(top_level)}
    assert {package: dists for package, dists in clashes.items() if dists} == {}


def test_every_module_has_a_layer():
    assert [m for m in project_modules() if layer_of(m) is None] == []


def test_no_layer_imports_a_layer_above_it():
    bad = []
    for module, deps in import_graph().items():
        layer = layer_of(module)
        for dep in deps:
            dep_layer = layer_of(dep)
            if dep_layer != layer and dep_layer not in ALLOWED[layer]:
                bad.append(f"{module} imports {dep}")
    assert bad == []


def test_engine_imports_no_ui_and_no_downloads():
    for module, path in project_modules().items():
        if not module.startswith("engine"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(n.split(".")[0] in ("PySide6", "PyQt6", "app", "cli", "modelhub", "ray", "cluster") for n in names), module


def test_no_import_cycles():
    graph = import_graph()
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    # a package's __init__ importing its own submodules lazily is not a cycle between files
    cycles = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") or c[0].startswith(m + ".")
                                           for m in c)]
    assert cycles == []


def test_the_checker_sees_a_violation(tmp_path):
    """The walk finds imports inside functions and resolves relative ones."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from ..serving import core\n    import engine.pipelines.aligner\n")
    known = {"engine.serving", "engine.serving.core", "engine.pipelines.aligner"}
    assert imports_of("engine.network.m", src, known) == {"engine.serving", "engine.serving.core",
                                                         "engine.pipelines.aligner"}


APP_SCREENS = ("queue", "watch", "transcript", "export", "live", "history", "models", "settings", "backend", "widgets")


def _public_modules(screen: str) -> tuple[str, ...]:
    """A screen's ``PUBLIC`` tuple (module names other screens may import), read without importing."""
    tree = ast.parse((ROOT / "app" / screen / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PUBLIC" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def test_a_screen_imports_no_other_screens_internals():
    """app/ is grouped by screen; a screen may import another screen's package and the modules it
    lists as PUBLIC, never the rest (main_window and the other top-level modules assemble them)."""
    public = {s: _public_modules(s) for s in APP_SCREENS}

    def screen_of(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[0] == "app" and parts[1] in APP_SCREENS else None

    bad = []
    for module, deps in import_graph().items():
        mine = screen_of(module)
        if mine is None:
            continue
        for dep in deps:
            theirs = screen_of(dep)
            if theirs is None or theirs == mine or dep == f"app.{theirs}":
                continue
            if "*" not in public[theirs] and dep.rsplit(".", 1)[1] not in public[theirs]:
                bad.append(f"{module} imports {dep}")
    assert bad == []
    assert all((ROOT / "app" / s / "__init__.py").is_file() for s in APP_SCREENS)


# ------------------------------------------------------------------ run time: what imports cannot show
# Pipelines and text reach the engine only through what it declares for them (the port,
# engine.pipelines.port); they never read private state of another object, and never
# probe another layer's objects with getattr/hasattr (a probe means an undeclared contract).
RUNTIME_GUARDED = ("engine/pipelines", "engine/text")
# Names that hold another layer's objects in these files: the engine (or its port), its core
# parts, requests, the aligner, audio's chunkers, jobs.
FOREIGN = {"engine", "port", "core", "scheduler", "runner", "cache", "allocator", "request", "req", "aligner",
           "chunker", "job", "other", "stream", "update"}
# Probes of another layer's objects that remain; each is a debt, not a pattern to copy.
KNOWN_PROBES = {
    ("engine/pipelines/diarize.py", "getattr(chunker, 'regions', None)"),
}
# Files whose ``self.port``/``self.engine``/``engine`` may use the port's members only.
PORT_USERS = ("engine/pipelines/file_job.py", "engine/pipelines/jobs.py")


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def runtime_violations(rel: str, source: str) -> list[str]:
    """Private attributes of other objects, getattr/hasattr probes of another layer's objects, and
    (in PORT_USERS) engine members outside the port, found in one file's source."""
    from engine.pipelines.port import PORT_MEMBERS

    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                bad.append(f"{rel}:{node.lineno}: private {ast.unparse(node)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and node.args and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            if _names_in(node.args[0]) & FOREIGN and (rel, ast.unparse(node)) not in KNOWN_PROBES:
                bad.append(f"{rel}:{node.lineno}: probe {ast.unparse(node)}")
        if rel in PORT_USERS and isinstance(node, ast.Attribute):
            holder = node.value
            is_port = (isinstance(holder, ast.Name) and holder.id in ("engine", "port")) or (
                isinstance(holder, ast.Attribute) and holder.attr in ("engine", "port")
                and isinstance(holder.value, ast.Name) and holder.value.id == "self")
            if is_port and node.attr not in PORT_MEMBERS:
                bad.append(f"{rel}:{node.lineno}: {ast.unparse(node)} is not a port member")
    return bad


def test_pipelines_and_text_touch_no_private_state_and_probe_no_other_layer():
    bad = []
    for folder in RUNTIME_GUARDED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            bad += runtime_violations(rel, path.read_text(encoding="utf-8"))
    assert bad == []


def test_the_core_duck_types_nothing():
    """The closed core knows requests only: no getattr/hasattr on what it is handed."""
    tree = ast.parse((ROOT / "engine/serving/core.py").read_text(encoding="utf-8"))
    probes = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id in ("getattr", "hasattr")]
    assert probes == []


def test_the_runtime_checker_sees_violations():
    src = ("def f(self, engine, req):\n"
           "    engine._jobs.append(1)\n"
           "    if hasattr(req, 'retry_gate'):\n"
           "        return self.engine.admission\n"
           "    return self._mine, getattr(self.tokenizer, 'x', None)\n")
    found = runtime_violations("engine/pipelines/file_job.py", src)
    assert sorted(f.split(": ", 1)[1] for f in found) == [
        "engine._jobs is not a port member", "private engine._jobs", "probe hasattr(req, 'retry_gate')",
        "self.engine.admission is not a port member"]
