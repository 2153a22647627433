"""The import graph of uk_controller has no cycles, and every hardware module imports on its own.

The graph is read from the source with :mod:`ast` (not by importing): an edge A -> B for every
``import``/``from ... import`` in module A that names module B, wherever it stands (a cycle
hidden inside a function is still a cycle), plus A -> each package above B that does not contain A
(importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``; a package containing A is
already being initialised when A runs). Imports under ``if TYPE_CHECKING:`` are
left out (they never run). Cycles are the strongly connected components with more than one
module (Tarjan's algorithm).

The isolation test imports each ``uk_controller.hardware`` module in a fresh interpreter, first
thing: a module that only works when something else was imported before it (the symptom of a
cycle broken by import order) fails there.
"""
import ast
from pathlib import Path
import subprocess
import sys

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
        or (isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'))


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


def _contains(package, module):
    """True when `module` is `package` or inside it: its own packages are already in sys.modules
    (being initialised) when it runs, so importing them again is no edge."""
    return module == package or module.startswith(package + '.')


def import_graph():
    """{module: set of modules of the package it imports}."""
    files = module_files()
    graph = {}
    for name, path in files.items():
        is_package = path.name == '__init__.py'
        here = name.split('.') if is_package else name.split('.')[:-1]
        targets = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = here[:len(here) - (node.level - 1)]
                    prefix = '.'.join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module
                candidates = [prefix] + [f'{prefix}.{alias.name}' for alias in node.names]
            for target in candidates:
                if target in files:
                    parts = target.split('.')
                    targets.update(parent for parent in ('.'.join(parts[:k]) for k in range(1, len(parts) + 1))
                                   if parent in files and not _contains(parent, name))
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


def test_cycle_finder_finds_a_planted_cycle():
    """The checker can fail: a two-module cycle and a three-module one are found, a chain is not."""
    graph = {'a': {'b'}, 'b': {'a'}, 'c': {'d'}, 'd': {'e'}, 'e': {'c'}, 'f': {'g'}, 'g': set()}
    assert cycles(graph) == [['a', 'b'], ['c', 'd', 'e']]


def test_graph_sees_function_level_and_relative_imports():
    """The edges the old hardware cycles were made of (a relative import inside a function) are read."""
    graph = import_graph()
    assert 'uk_controller.hardware.bus' in graph['uk_controller.hardware.protocols.uk_binary.bus']
    assert 'uk_controller.hardware.protocols.uk_binary.codec' in graph['uk_controller.hardware.protocols.uk_binary.bus']
    assert 'uk_controller.controller' in graph['uk_controller.hardware.run_command']      # inside run()
    assert 'uk_controller.hardware' in graph['uk_controller.ros.serial_bridge_node']     # parent package
    assert 'uk_controller.hardware' not in graph['uk_controller.hardware.bus']           # its own package


def test_no_import_cycles_in_the_package():
    found = cycles(import_graph())
    assert not found, 'import cycles: ' + '; '.join(' <-> '.join(c) for c in found)


def test_hardware_imports_no_protocol_module_statically():
    """The registry finds protocols by name; nothing in hardware/ outside protocols/<name>/ imports one."""
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith('uk_controller.hardware.') and '.protocols' not in name:
            assert not {t for t in targets if t.startswith('uk_controller.hardware.protocols.')}, name


HARDWARE = sorted(m for m in module_files() if m.startswith('uk_controller.hardware'))


@pytest.mark.parametrize('module', HARDWARE)
def test_hardware_module_imports_alone_without_pyserial_or_dynamixel_sdk(module):
    """Each module imports first thing in a fresh interpreter in which `serial` and `dynamixel_sdk`
    cannot be imported (pyserial and the SDK are optional: imported where a port is opened)."""
    code = ('import sys\n'
            'class Block:\n'
            '    def find_spec(self, name, path=None, target=None):\n'
            '        if name.split(".")[0] in ("serial", "dynamixel_sdk"):\n'
            '            raise ImportError(f"{name} blocked by the test")\n'
            'sys.meta_path.insert(0, Block())\n'
            f'import {module}\n')
    proc = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
