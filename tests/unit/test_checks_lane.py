"""tests/checks-lane.txt: the test files tests/run-all.sh runs in its checks
lane (pytest -m checks_lane), every other test once either lane has ended
(-m "not checks_lane"). A listed file that no longer exists would silently shrink the
lane's part; run-all.sh running only one of the two parts would lose tests."""
import importlib.util
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _conftest():
    spec = importlib.util.spec_from_file_location('imq_tests_conftest', os.path.join(ROOT, 'tests', 'conftest.py'))
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    return conftest


def _lane_files():
    return _conftest().checks_lane_files()


def _is_test_file(path):
    return os.path.basename(path).startswith('test_') and path.endswith('.py')


def _test_files_below(directory):
    return [os.path.join(d, n) for d, _dirs, names in os.walk(os.path.join(ROOT, directory))
            for n in names if _is_test_file(n)]


def test_every_checks_lane_file_is_a_test_file_of_this_tree():
    files = _lane_files()
    assert files, 'tests/checks-lane.txt names no test file'
    bad = sorted(f for f in files if not f.startswith('tests/') or not (
        (os.path.isfile(os.path.join(ROOT, f)) and _is_test_file(f))
        or (f.endswith('/') and os.path.isdir(os.path.join(ROOT, f)) and _test_files_below(f))))
    assert bad == []


def test_a_directory_entry_covers_every_test_file_below_it_and_nothing_else():
    in_lane = _conftest().in_checks_lane
    entries = {'tests/unit/', 'tests/install/test_release.py'}
    assert in_lane('tests/unit/test_options.py', entries)
    assert in_lane('tests/unit/plugins/filter/test_cidr_list.py', entries)
    assert in_lane('tests/install/test_release.py', entries)
    assert not in_lane('tests/install/test_build_install.py', entries)
    assert not in_lane('tests/unit_other/test_x.py', entries)
    assert not in_lane('tests/integration/test_resync.py', entries)
    # A file entry is a file, not a prefix.
    assert not in_lane('tests/install/test_release.py.orig', {'tests/install/test_release'})


def test_run_all_runs_both_parts_of_pytest():
    with open(os.path.join(ROOT, 'tests', 'run-all.sh'), encoding='utf-8') as f:
        text = f.read()
    runs = re.findall(r'^\s*(?:step "[^"]+" )?pytest (.*)$', text, re.M)
    assert any('-m checks_lane tests' in r for r in runs), runs
    assert any('-m "not checks_lane" tests' in r for r in runs), runs
