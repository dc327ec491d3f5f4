"""The support matrix (docs/docsite/rst/support.rst, the README's table, the
FAQ) says what the tests run, from the files that decide it: the ansible-core
ranges of tests/versions/*.txt and tests/requirements.txt, meta/runtime.yml,
netaddr's minimum in meta/ee-requirements.txt, the node Python minimum in
tests/config.yml, and the Debian suites of the Molecule scenarios and of the
role's meta/main.yml. A pure read of files, well under a second."""
import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITES = {'bookworm': 'Debian 12', 'trixie': 'Debian 13'}


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding='utf-8') as handle:
        return handle.read()


def flat(text):
    return ' '.join(text.split())


def core_minor(path):
    """'2.16' from a requirements file's ansible-core>=2.16,<2.17."""
    found = re.findall(r'^ansible-core>=(\d+\.\d+)', read(path), re.MULTILINE)
    assert len(found) == 1, path
    return found[0]


def rows(text):
    """The rows of the list-tables of ``text``: lists of cell texts."""
    out = []
    for block in re.findall(r'\.\. list-table::\n(?:   :.*\n)*\n((?:   .*\n|\n)+)', text):
        for row in re.split(r'\n   \* - ', '\n' + block)[1:]:
            out.append([flat(c) for c in re.split(r'\n     - ', row)])
    return out


def test_controller_rows_are_what_ci_runs():
    support = read('docs', 'docsite', 'rst', 'support.rst')
    table = rows(support)
    tested = {'oldest': core_minor('tests/versions/oldest.txt'), 'newest': core_minor('tests/versions/newest.txt'),
              'ci': core_minor('tests/requirements.txt')}
    for name, minor in tested.items():
        row = [r for r in table if r[0].split()[0] == minor]
        assert row, 'support.rst has no row for ansible-core %s (%s)' % (minor, name)
        assert 'untested' not in row[0][2], row
    assert '(the oldest supported)' in [r for r in table if r[0].startswith(tested['oldest'])][0][0]
    assert '(the newest release)' in [r for r in table if r[0].startswith(tested['newest'])][0][0]
    # Every minor between the oldest and the newest that CI does not run is marked untested.
    lo, hi = (int(tested[k].split('.')[1]) for k in ('oldest', 'newest'))
    untested = [r for r in table if r[-1] == 'untested' and r[0][0].isdigit()]
    for minor in range(lo + 1, hi):
        version = '2.%d' % minor
        if version not in tested.values():
            assert any(version in r[0] for r in untested), '%s is neither tested nor marked untested' % version
    runtime = yaml.safe_load(read('meta', 'runtime.yml'))['requires_ansible']
    assert runtime == '>=%s.0' % tested['oldest']
    assert 'ansible-core %s or later' % tested['oldest'] in flat(support)


def test_netaddr_and_node_python_minimums():
    netaddr = re.findall(r'^netaddr>=([\d.]+)', read('meta', 'ee-requirements.txt'), re.MULTILINE)[0]
    python = yaml.safe_load(read('tests', 'config.yml'))['modules']['python_requires'].lstrip('>=')
    readme = flat(read('README.md'))
    for name, text in (('support.rst', flat(read('docs', 'docsite', 'rst', 'support.rst'))),
                       ('quickstart.rst', flat(read('docs', 'docsite', 'rst', 'quickstart.rst'))),
                       ('README.md', readme)):
        assert 'netaddr`` %s or later' % netaddr in text or '`netaddr` %s or later' % netaddr in text \
            or 'netaddr %s or later' % netaddr in text, name
        assert 'Python %s or later' % python in text, name
    # Every pip command that installs netaddr asks for the minimum.
    docs = [read(p) for p in ['README.md'] + glob.glob(os.path.join(ROOT, 'docs', 'docsite', 'rst', '*.rst'))]
    for text in docs:
        for line in re.findall(r'pip install[^\n]*', text):
            if 'netaddr' in line:
                assert "'netaddr>=%s'" % netaddr in line, line


def molecule_suites():
    """{scenario: {suite}} from the scenarios' node images (ipmasq-node:SUITE[-variant])."""
    out = {}
    for path in glob.glob(os.path.join(ROOT, 'extensions', 'molecule', '*', 'molecule.yml')):
        images = re.findall(r'image:\s*\S*ipmasq-node:([a-z]+)', open(path).read())
        out[os.path.basename(os.path.dirname(path))] = set(images)
    return out


def test_node_rows_name_the_scenarios_that_run_there():
    table = rows(read('docs', 'docsite', 'rst', 'support.rst'))
    suites = molecule_suites()
    assert suites
    meta = yaml.safe_load(read('roles', 'ip_masq', 'meta', 'main.yml'))['galaxy_info']['platforms']
    assert {v for p in meta for v in p['versions']} == set().union(*suites.values())
    for suite, name in SUITES.items():
        row = [r for r in table if r[0].startswith(name) and suite in r[0]]
        assert row, 'support.rst has no row for %s (%s)' % (name, suite)
        named = set(re.findall(r'\b([a-z0-9]+)\b', row[0][2].split('Molecule:')[1].split(')')[0])) & set(suites)
        assert named == {s for s, used in suites.items() if suite in used}, (suite, named)
    for text in (read('docs', 'docsite', 'rst', 'faq.rst'), read('docs', 'docsite', 'rst', 'support.rst')):
        assert 'expected to work' not in text
    assert any(r[0] == 'EL 8' and r[2].startswith('untested') and '3.6' in r[2] for r in table)


def test_security_policy_names_the_latest_release_and_main():
    """SECURITY.md's supported versions: the latest release's line (from
    changelogs/changelog.yaml) and main, the next release (galaxy.yml)."""
    releases = yaml.safe_load(read('changelogs', 'changelog.yaml')).get('releases') or {}
    latest = max(releases, key=lambda v: tuple(int(p) for p in v.split('.')))
    line = '.'.join(latest.split('.')[:2]) + '.x'
    version = yaml.safe_load(read('galaxy.yml'))['version'].split('-')[0]  # 2.0.0 for main's 2.0.0-dev0
    table = [r for r in read('SECURITY.md').splitlines() if r.startswith('| ')]
    assert any(r.startswith('| %s, the latest release | yes' % line) for r in table), table
    if version not in releases:
        assert any(r.startswith('| `main` (the next release, %s) | yes' % version) for r in table), table
