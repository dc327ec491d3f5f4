"""The test tree itself: pytest imports test files by their basename (the
directories have no __init__.py), so two test files of the same name make
the second one an import error that only a whole run shows."""
import collections
import os

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_test_file_has_a_basename_of_its_own():
    seen = collections.defaultdict(list)
    for directory, _dirs, files in os.walk(TESTS):
        if 'output' in directory.split(os.sep):
            continue
        for name in files:
            if name.startswith('test_') and name.endswith('.py'):
                seen[name].append(os.path.relpath(os.path.join(directory, name), TESTS))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
