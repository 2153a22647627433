"""Tests a documentation page names (``test/test_x.py::name``) checked against the test files."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def missing_tests(refs):
    """The ``file::name`` of each ``(file, name)`` in `refs` that is not a top-level test function."""
    defined = {}
    missing = []
    for path, name in refs:
        if path not in defined:
            file = ROOT / path
            defined[path] = (
                {n.name for n in ast.parse(file.read_text()).body if isinstance(n, ast.FunctionDef)}
                if file.exists()
                else set()
            )
        if name not in defined[path]:
            missing.append(f'{path}::{name}')
    return missing
