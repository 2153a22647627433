"""The import graph of uk_controller has no cycles, follows the layers of docs/architecture.md, and
every hardware module imports on its own.

The graph is read from the source with :mod:`ast` (not by importing): an edge A -> B for every
``import``/``from ... import`` in module A that names module B, wherever it stands (a cycle
hidden inside a function is still a cycle), and for every module B named by a literal string
that A imports when it runs (``importlib.import_module('uk_controller.b')``, ``import_module('.b',
__package__)``, the schema's ``RegistryNames('uk_controller.b', TABLE)``), plus A -> each package
above B that does not contain A (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``; a
package containing A is already being initialised when A runs). Imports under ``if TYPE_CHECKING:``
are left out (they never run). Cycles are the strongly connected components with more than one
module (Tarjan's algorithm).

The layers are the rows of the table "Module map by layer" of docs/architecture.md, read in order:
the first row is the bottom layer (it imports nothing of the package), the last the console commands.
A module belongs to the row naming the longest path that contains it (``uk_controller/ros/`` holds
``uk_controller.ros.params``); it may import its own row and the rows above it in the table, never a
row below (an arrow back up the layers), except the imports by name listed in :data:`READ_BY_NAME`
(docs/architecture.md, "Tables read by name").

The isolation test imports each ``uk_controller.hardware`` module in a fresh interpreter, first
thing: a module that only works when something else was imported before it (the symptom of a
cycle broken by import order) fails there.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = 'uk_controller'


def module_files():
    """{dotted module name: path} of every module of the package."""
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob('*.py')):
        parts = list(path.relative_to(ROOT).with_suffix('').parts)
        if parts[-1] == '__init__':
            parts = parts[:-1]
        out['.'.join(parts)] = path
    return out


def _type_checking_block(node):
    test = getattr(node, 'test', None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING')
        or (isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING')
    )


def _imports(tree):
    """Every Import/ImportFrom node outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _type_checking_block(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


#: calls that import the module named by their first argument when they run: ``importlib.import_module``, and
#: the schema's :class:`~uk_controller.settings.setting.RegistryNames` (imports its module on first use)
STRING_IMPORTS = ('import_module', 'RegistryNames')


def _string_imports(tree, module, package):
    """The modules named by a literal string in a call of :data:`STRING_IMPORTS`; a relative name
    (``import_module('.x', __package__)``, or ``__name__``) is read against `package` (or `module`), as
    importlib does. An f-string or a variable names no module that can be read here."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ''
        first = node.args[0]
        if name not in STRING_IMPORTS or not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        text = first.value
        if text.startswith('.'):
            anchor = (
                node.args[1]
                if len(node.args) > 1
                else next((k.value for k in node.keywords if k.arg == 'package'), None)
            )
            anchor = module if isinstance(anchor, ast.Name) and anchor.id == '__name__' else package
            level = len(text) - len(text.lstrip('.'))
            base = anchor[: len(anchor) - (level - 1)]
            text = '.'.join(base + ([text.lstrip('.')] if text.lstrip('.') else []))
        yield text


def _contains(package, module):
    """True when `module` is `package` or inside it: its own packages are already in sys.modules
    (being initialised) when it runs, so importing them again is no edge."""
    return module == package or module.startswith(package + '.')


def import_graph(named_by_string=True):
    """{module: set of modules of the package it imports} (`named_by_string` False: the ``import``
    statements only)."""
    files = module_files()
    graph = {}
    for name, path in files.items():
        is_package = path.name == '__init__.py'
        here = name.split('.') if is_package else name.split('.')[:-1]
        targets = set()
        tree = ast.parse(path.read_text(), str(path))
        for node in _imports(tree):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = here[: len(here) - (node.level - 1)]
                    prefix = '.'.join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module
                candidates = [prefix] + [f'{prefix}.{alias.name}' for alias in node.names]
            for target in candidates:
                if target in files:
                    parts = target.split('.')
                    targets.update(
                        parent
                        for parent in ('.'.join(parts[:k]) for k in range(1, len(parts) + 1))
                        if parent in files and not _contains(parent, name)
                    )
        for target in _string_imports(tree, name.split('.'), here) if named_by_string else ():
            if target in files:
                parts = target.split('.')
                targets.update(
                    parent
                    for parent in ('.'.join(parts[:k]) for k in range(1, len(parts) + 1))
                    if parent in files and not _contains(parent, name)
                )
        graph[name] = targets
    return graph


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan), sorted."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def layer_table(text=None):
    """[(layer name, [dotted module or package prefixes])] from the module map of docs/architecture.md,
    bottom layer first (the table's order)."""
    text = (ROOT / 'docs' / 'architecture.md').read_text() if text is None else text
    start = text.index('\n## Module map by layer')
    end = text.find('\n## ', start + 1)
    rows = []
    for line in text[start : end if end >= 0 else len(text)].splitlines():
        cells = [c.strip() for c in line.split('|')]
        if len(cells) < 4 or not line.startswith('| ') or cells[1] == 'layer':
            continue
        paths = re.findall(r'`(uk_controller/[\w/]+?)(?:\.py|/)?`', cells[2])
        rows.append((cells[1], [p.replace('/', '.') for p in paths]))
    return rows


def layer_of(module, table):
    """Index of the row of `table` naming the longest prefix of `module`, or None."""
    best, found = -1, None
    for index, (_, prefixes) in enumerate(table):
        for prefix in prefixes:
            if _contains(prefix, module) and len(prefix) > best:
                best, found = len(prefix), index
    return found


def upward_imports(graph, table):
    """['a (layer) -> b (layer)'] for every import of a module from a row below its own, sorted."""
    out = []
    for name, targets in graph.items():
        here = layer_of(name, table)
        for target in targets:
            there = layer_of(target, table)
            if here is not None and there is not None and there > here:
                out.append(f'{name} ({table[here][0]}) -> {target} ({table[there][0]})')
    return sorted(out)


def test_cycle_finder_finds_a_planted_cycle():
    """The checker can fail: a two-module cycle and a three-module one are found, a chain is not."""
    graph = {'a': {'b'}, 'b': {'a'}, 'c': {'d'}, 'd': {'e'}, 'e': {'c'}, 'f': {'g'}, 'g': set()}
    assert cycles(graph) == [['a', 'b'], ['c', 'd', 'e']]


def test_graph_sees_function_level_and_relative_imports():
    """The edges the old hardware cycles were made of (a relative import inside a function) are read."""
    graph = import_graph()
    assert 'uk_controller.hardware.bus' in graph['uk_controller.hardware.protocols.uk_binary.bus']
    assert 'uk_controller.hardware.protocols.uk_binary.codec' in graph['uk_controller.hardware.protocols.uk_binary.bus']
    assert 'uk_controller.control.controller' in graph['uk_controller.hardware.run_command']  # inside run()
    assert 'uk_controller.hardware' in graph['uk_controller.ros.serial_bridge_node']  # parent package
    assert 'uk_controller.hardware' not in graph['uk_controller.hardware.bus']  # its own package


def test_graph_reads_modules_named_by_a_string():
    """A literal module name handed to import_module (absolute, or relative to __package__ / __name__) or
    to RegistryNames is an edge; an f-string is not (nothing to read), nor a call of another name."""
    tree = ast.parse(
        "import importlib\n"
        "from importlib import import_module\n"
        "importlib.import_module('uk_controller.a')\n"
        "import_module('.b', __package__)\n"
        "import_module('..c', package=__package__)\n"
        "import_module('.d', __name__)\n"
        "RegistryNames('uk_controller.e', 'TABLE')\n"
        "import_module(f'uk_controller.{name}')\n"
        "load('uk_controller.f')\n"
    )
    found = list(_string_imports(tree, ['uk_controller', 'p', 'm'], ['uk_controller', 'p']))
    assert found == [
        'uk_controller.a',
        'uk_controller.p.b',
        'uk_controller.c',
        'uk_controller.p.m.d',
        'uk_controller.e',
    ]
    graph = import_graph()
    assert 'uk_controller.core.pinv.reference' in graph['uk_controller.settings.schema']  # RegistryNames
    assert 'uk_controller.sim.plants' in graph['uk_controller.settings.schema']  # RegistryNames
    assert 'uk_controller.sim.plants' not in import_graph(False)['uk_controller.settings.schema']


def test_the_settings_never_import_the_hardware_layer():
    """The motor protocols reach the schema registered from the hardware side (uk_controller/settings/
    protocols.py; the package imports the registry first), not by an import of uk_controller.hardware, by
    statement or by name, from any module of the settings."""
    graph = import_graph()
    settings = [m for m in graph if m == 'uk_controller.settings' or m.startswith('uk_controller.settings.')]
    assert 'uk_controller.settings.schema' in settings
    found = sorted(f'{m} -> {t}' for m in settings for t in graph[m] if t.startswith('uk_controller.hardware'))
    assert not found, found
    assert 'uk_controller.hardware.registry' in graph['uk_controller']  # the package registers the protocols


def test_no_import_cycles_in_the_package():
    found = cycles(import_graph())
    assert not found, 'import cycles: ' + '; '.join(' <-> '.join(c) for c in found)


def test_layer_checker_finds_a_planted_upward_import():
    """The checker can fail: with a three-row table, an import of a higher row is reported, imports of
    the own row and of lower rows are not, and the longest prefix decides the row."""
    text = (
        '\n## Module map by layer\n\n| layer | modules |\n|---|---|\n'
        '| low | `uk_controller/a.py`, `uk_controller/p/` |\n'
        '| middle | `uk_controller/p/q.py` (note `x`) |\n'
        '| high | `uk_controller/h/` |\n\n## Next\n'
    )
    table = layer_table(text)
    assert [name for name, _ in table] == ['low', 'middle', 'high']
    assert layer_of('uk_controller.p.q', table) == 1 and layer_of('uk_controller.p.r', table) == 0
    graph = {
        'uk_controller.a': {'uk_controller.p.r'},
        'uk_controller.p.q': {'uk_controller.a'},
        'uk_controller.h.x': {'uk_controller.p.q', 'uk_controller.a'},
        'uk_controller.p.r': {'uk_controller.p.q'},
        'uk_controller.a2': set(),
    }
    assert upward_imports(graph, table) == ['uk_controller.p.r (low) -> uk_controller.p.q (middle)']


def test_every_module_has_a_layer():
    table = layer_table()
    assert len(table) >= 8, table
    unplaced = sorted(m for m in module_files() if m != PACKAGE and layer_of(m, table) is None)
    assert not unplaced, f'modules on no row of the module map of docs/architecture.md: {unplaced}'


#: Imports back up the layers that are made on purpose, by name only (never an ``import`` statement), each
#: with its reason; docs/architecture.md, "Tables read by name", says the same. The schema declares every
#: key once, and the names a key accepts come from the table that implements them, where that table lives.
READ_BY_NAME = {
    (
        'uk_controller.settings.schema',
        'uk_controller.sim.plants',
    ): "the plant and integrator names (simulation.plant, simulation.integrator), read on first use "
    "(RegistryNames): the table never imports MuJoCo or numba",
}


def _read_by_name_edges():
    """READ_BY_NAME with the packages above each target (importing a module runs their __init__)."""
    files = module_files()
    edges = {}
    for source, target in READ_BY_NAME:
        parts = target.split('.')
        edges.setdefault(source, set()).update(
            parent
            for parent in ('.'.join(parts[:k]) for k in range(1, len(parts) + 1))
            if parent in files and not _contains(parent, source)
        )
    return edges


def test_imports_follow_the_layers_of_the_module_map():
    """No module imports from a layer drawn above its own (the table's later rows), by an ``import``
    statement or by a module name in a string, except the tables read by name (:data:`READ_BY_NAME`)."""
    table = layer_table()
    excused = set(upward_imports(_read_by_name_edges(), table))
    found = [edge for edge in upward_imports(import_graph(), table) if edge not in excused]
    assert not found, 'imports back up the layers of docs/architecture.md:\n' + '\n'.join(found)


def test_tables_read_by_name_are_read_by_name_only():
    """Each entry of READ_BY_NAME is still made, only by a string (an ``import`` of the module would run it
    at once and for every importer), and docs/architecture.md lists it."""
    graph, statements = import_graph(), import_graph(named_by_string=False)
    doc = (ROOT / 'docs' / 'architecture.md').read_text()
    assert '### Tables read by name' in doc
    for source, target in READ_BY_NAME:
        assert target in graph[source], f'{source} no longer reads {target}: remove it from READ_BY_NAME'
        assert target not in statements[source], f'{source} imports {target} by an import statement'
        assert f'`{target.replace(".", "/")}.py`' in doc.split('### Tables read by name')[-1], target


NODES = ('uk_controller.ros.controller_node', 'uk_controller.ros.sim_node', 'uk_controller.ros.serial_bridge_node')


def test_nodes_do_not_import_each_other():
    """The nodes share their start-up through uk_controller.ros.node_setup; none imports another node."""
    graph = import_graph()
    assert all(node in graph for node in NODES), NODES
    crossing = sorted(f'{a} -> {b}' for a in NODES for b in NODES if a != b and b in graph[a])
    assert not crossing, crossing
    assert all('uk_controller.ros.node_setup' in graph[node] for node in NODES)


def test_hardware_imports_no_protocol_module_statically():
    """The registry finds protocols by name; nothing in hardware/ outside protocols/<name>/ imports one."""
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith('uk_controller.hardware.') and '.protocols' not in name:
            assert not {t for t in targets if t.startswith('uk_controller.hardware.protocols.')}, name


HARDWARE = sorted(m for m in module_files() if m.startswith('uk_controller.hardware'))


@pytest.mark.parametrize('module', HARDWARE)
@pytest.mark.slow
def test_hardware_module_imports_alone_without_pyserial_or_dynamixel_sdk(module):
    """Each module imports first thing in a fresh interpreter in which `serial` and `dynamixel_sdk`
    cannot be imported (pyserial and the SDK are optional: imported where a port is opened)."""
    code = (
        'import sys\n'
        'class Block:\n'
        '    def find_spec(self, name, path=None, target=None):\n'
        '        if name.split(".")[0] in ("serial", "dynamixel_sdk"):\n'
        '            raise ImportError(f"{name} blocked by the test")\n'
        'sys.meta_path.insert(0, Block())\n'
        f'import {module}\n'
    )
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
