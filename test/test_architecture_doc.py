"""docs/architecture.md stays true to the code: the paths it names exist, every compiled twin's test
exists, every module of the package is on its map, and every "seed 00N" the code cites resolves to a
full citation there."""

import ast
import re
from pathlib import Path

from doc_refs import missing_tests

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / 'docs' / 'architecture.md'
TEXT = DOC.read_text()
PATH = re.compile(r'\b((?:uk_controller|test|bench|scripts|launch|config|docs)/[\w./<>-]*\w/?)')
TEST_REF = re.compile(r'\b(test/test_\w+\.py)::(\w+)')
SEEDS = re.compile(r'\b[Ss]eeds?\s+(0\d\d(?:\s*(?:,|and)\s*0\d\d)*)')


def section(title):
    """The text of the ``## title`` section."""
    start = TEXT.index(f'\n## {title}')
    end = TEXT.find('\n## ', start + 1)
    return TEXT[start : end if end >= 0 else len(TEXT)]


def test_every_path_the_doc_names_exists():
    missing = sorted({p for p in PATH.findall(TEXT) if '<' not in p and not (ROOT / p).exists()})
    assert not missing, f'docs/architecture.md names paths that do not exist: {missing}'


def test_every_test_the_doc_names_exists():
    refs = TEST_REF.findall(TEXT)
    assert refs
    missing = missing_tests(refs)
    assert not missing, f'docs/architecture.md names tests that do not exist: {missing}'


def test_every_twin_has_a_test():
    rows = [
        line
        for line in section('Compiled twins and the tests that keep them equal').splitlines()
        if line.startswith('| ') and not line.startswith('| reference')
    ]
    assert len(rows) >= 10
    untested = [row for row in rows if not TEST_REF.search(row.rsplit('|', 2)[-2])]
    assert not untested, f'twins without the test that keeps them equal: {untested}'


def test_every_twin_the_table_names_is_defined_where_it_says():
    """ "`name`, `other` (`uk_controller/x.py`)" in the compiled-twin column: each name is defined in x.py."""
    rows = section('Compiled twins and the tests that keep them equal').splitlines()
    named = []
    for row in rows:
        cells = row.split('|')
        if len(cells) > 3 and row.startswith('| ') and not row.startswith('| reference'):
            for names, path in re.findall(r'((?:`\w+`(?:, )?)+)[^`(]*\(`(uk_controller/[\w/]+\.py)`\)', cells[2]):
                file = ROOT / path
                tree = ast.parse(file.read_text()) if file.exists() else ast.Module(body=[], type_ignores=[])
                defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
                named += [(name, path, name in defined) for name in re.findall(r'`(\w+)`', names)]
    assert len(named) >= 10, named
    assert all(ok for *_, ok in named), [f'{name} in {path}' for name, path, ok in named if not ok]


def test_every_module_of_the_package_is_on_the_map():
    layers = section('Module map by layer')
    package = ROOT / 'uk_controller'
    entries = [
        p
        for p in sorted(package.iterdir())
        if (p.suffix == '.py' and p.name != '__init__.py') or (p / '__init__.py').exists()
    ]
    unlisted = [p.name for p in entries if f'`uk_controller/{p.name}{"/" if p.is_dir() else ""}`' not in layers]
    assert not unlisted, f'modules missing from the module map of docs/architecture.md: {unlisted}'


def test_every_seed_cited_in_the_code_has_a_full_citation():
    cited = set()
    for path in (ROOT / 'uk_controller').rglob('*.py'):
        for group in SEEDS.findall(path.read_text()):
            cited.update(re.findall(r'0\d\d', group))
    assert cited >= {'000', '004'}, cited
    papers = section('Source papers ("seed 00N")')
    entries = dict(re.findall(r'^- \*\*seed (0\d\d)\*\* — (.+?)(?=^- \*\*|\Z)', papers, re.M | re.S))
    assert cited <= set(entries), f'seeds cited in uk_controller/ without a citation: {sorted(cited - set(entries))}'
    for key, entry in entries.items():
        # authors, a quoted title, a venue in italics and a year
        assert re.match(r'[^"]+, "[^"]+".*\*[^*]+\*', entry, re.S) and re.search(r'\b(19|20)\d\d\b', entry), (
            key,
            entry,
        )
