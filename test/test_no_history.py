"""What users and maintainers read says what and why, not when: no issue numbers, dated runs or session
talk in the package, its docs, launch files, configs, scripts and benchmarks, and tests that name the
behaviour they guard, not the report it came from (history goes to CHANGELOG.md)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ('uk_controller', 'docs', 'launch', 'config', 'scripts', 'bench', 'test')
#: recorded data keep their provenance (the date of a snapshot of rosdistro)
SKIP = ('test/data',)
SUFFIXES = {'.py', '.md', '.yaml', '.yml', '.xml', '.urdf', '.xacro', '.sdf', '.txt', '.sh'}
PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r'\bissue\s*#?\d+',
        r'\bdefect\s*#?\d+',
        r'\b(before|until|since|after) issue\b',
        r'\b20\d\d-[01]\d-[0-3]\d\b',
        r'\bthis session\b',
        r'\b(last|previous|next) session\b',
    )
]


def test_no_history_talk_in_code_docs_launch_config_scripts_and_tests():
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob('*')):
            if path.suffix not in SUFFIXES or '__pycache__' in path.parts or not path.is_file():
                continue
            if str(path.relative_to(ROOT)).startswith(SKIP):
                continue
            for number, line in enumerate(path.read_text(encoding='utf-8', errors='replace').splitlines(), 1):
                if any(p.search(line) for p in PATTERNS):
                    found.append(f'{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}')
    assert not found, 'history talk (say what and why; history goes to CHANGELOG.md):\n' + '\n'.join(found)
