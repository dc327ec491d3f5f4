"""The collection is Python 3 only (tests/config.yml): no Python file carries
Python 2's boilerplate, ``from __future__ import absolute_import, division,
print_function`` or ``__metaclass__ = type``."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = {'.git', '.venv', '.venv-importer', 'build', 'output', '__pycache__'}
BOILERPLATE = ('from __future__ import absolute_import', '__metaclass__ = type')


def python_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP]
        for name in files:
            if name.endswith('.py'):
                yield os.path.join(top, name)


def test_no_python2_boilerplate():
    found = []
    for path in python_files():
        with open(path, encoding='utf-8') as handle:
            for number, line in enumerate(handle, 1):
                if line.startswith(BOILERPLATE):
                    found.append('%s:%d: %s' % (os.path.relpath(path, ROOT), number, line.strip()))
    assert not found, '\n'.join(found)


def test_the_walk_sees_the_plugins():
    assert sum(1 for path in python_files() if os.sep + 'plugins' + os.sep in path) > 50
