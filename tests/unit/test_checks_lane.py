"""tests/checks-lane.txt: the test files tests/run-all.sh runs in its checks
lane (pytest -m checks_lane), every other test after both lanes (-m "not
checks_lane"). A listed file that no longer exists would silently shrink the
lane's part; run-all.sh running only one of the two parts would lose tests."""
import importlib.util
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _lane_files():
    spec = importlib.util.spec_from_file_location('imq_tests_conftest', os.path.join(ROOT, 'tests', 'conftest.py'))
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    return conftest.checks_lane_files()


def test_every_checks_lane_file_is_a_test_file_of_this_tree():
    files = _lane_files()
    assert files, 'tests/checks-lane.txt names no test file'
    bad = sorted(f for f in files
                 if not (os.path.isfile(os.path.join(ROOT, f)) and f.startswith('tests/')
                         and os.path.basename(f).startswith('test_') and f.endswith('.py')))
    assert bad == []


def test_run_all_runs_both_parts_of_pytest():
    with open(os.path.join(ROOT, 'tests', 'run-all.sh'), encoding='utf-8') as f:
        text = f.read()
    runs = re.findall(r'^\s*(?:step "[^"]+" )?pytest (.*)$', text, re.M)
    assert any('-m checks_lane tests' in r for r in runs), runs
    assert any('-m "not checks_lane" tests' in r for r in runs), runs
