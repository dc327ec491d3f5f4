"""CHANGELOG.rst cannot drift from changelogs/: it is exactly what
antsibull-changelog generates, and a release made now (in a scratch copy,
never in this tree) would succeed and hold every fragment.

The release itself is cut by a maintainer when every branch is merged
(docs/docsite/rst/releasing.rst): `antsibull-changelog release`."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHANGELOG = os.path.join(ROOT, '.venv', 'bin', 'antsibull-changelog')


def load(*parts):
    with open(os.path.join(*parts)) as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope='module')
def scratch(tmp_path_factory):
    """The tracked and new files, under ansible_collections/ipmasq/agent."""
    top = tmp_path_factory.mktemp('changelog')
    dest = top / 'ansible_collections' / 'ipmasq' / 'agent'
    files = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                           cwd=ROOT, capture_output=True, check=True).stdout.decode().split('\0')
    for rel in filter(None, files):
        if os.path.exists(os.path.join(ROOT, rel)):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), dest / rel)
    return top, dest


def changelog(dest, top, *args):
    # antsibull-changelog runs ansible-doc (new plugins of a release): this venv's.
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(top), ANSIBLE_HOME=str(top / 'ansible-home'),
               PATH=os.path.dirname(CHANGELOG) + os.pathsep + os.environ.get('PATH', '/usr/bin:/bin'))
    proc = subprocess.run([CHANGELOG] + list(args), cwd=str(dest), env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    return proc


def released(scratch, version=None):
    """A copy of the scratch tree with `antsibull-changelog release` done (memoised),
    as ``version`` when given, else as galaxy.yml says."""
    top, dest = scratch
    done = top / 'released' / 'ansible_collections' / 'ipmasq' / 'agent'
    if not done.exists():
        shutil.copytree(dest, done)
        proc = changelog(done, top / 'released', 'release', *(['--version', version] if version else []))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return done


def test_changelog_rst_is_what_antsibull_changelog_generates(scratch):
    top, dest = scratch
    with open(os.path.join(ROOT, 'CHANGELOG.rst')) as handle:
        committed = handle.read()
    if load(ROOT, 'changelogs', 'changelog.yaml').get('releases'):
        proc = changelog(dest, top, 'generate')
        assert proc.returncode == 0, proc.stdout + proc.stderr
        with open(dest / 'CHANGELOG.rst') as handle:
            assert committed == handle.read(), 'CHANGELOG.rst is edited by hand: run antsibull-changelog generate'
    else:
        # No release yet: antsibull-changelog generates nothing but its header,
        # which is what a release writes before the first version's section.
        with open(released(scratch) / 'CHANGELOG.rst') as handle:
            head = handle.read().split('\nv%s\n' % load(ROOT, 'galaxy.yml')['version'])[0] + '\n'
        assert committed == head, 'CHANGELOG.rst is edited by hand: before the first release it holds only the header'


def fragments():
    return sorted(f for f in os.listdir(os.path.join(ROOT, 'changelogs', 'fragments')) if f.endswith('.yml'))


def next_version(version, names):
    """The version a release of these fragments would be: minor for new features, else patch."""
    major, minor, patch = (int(p) for p in version.split('.'))
    sections = set()
    for name in names:
        sections |= set(load(ROOT, 'changelogs', 'fragments', name))
    if sections & {'major_changes', 'minor_changes', 'breaking_changes', 'removed_features', 'deprecated_features'}:
        return '%d.%d.0' % (major, minor + 1)
    return '%d.%d.%d' % (major, minor, patch + 1)


def test_galaxy_version_has_its_section_in_the_changelog():
    """galaxy.yml names the release the tree is: the version is raised when a
    release is cut (docs/docsite/rst/releasing.rst), so the changelog always
    has its section, and the tarball's release notes match its version."""
    version = load(ROOT, 'galaxy.yml')['version']
    releases = load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}
    assert version in releases, 'galaxy.yml says %s, which changelogs/changelog.yaml has not released' % version
    with open(os.path.join(ROOT, 'CHANGELOG.rst')) as handle:
        assert '\nv%s\n' % version in handle.read(), 'CHANGELOG.rst has no section v%s' % version


def test_the_changelog_names_only_files_that_exist():
    """Every path of the repository that CHANGELOG.rst names (``docs/...``,
    ``playbooks/...``) exists: at the top, or in a role (``meta/main.yml``)."""
    tops = {name for name in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, name)) and not name.startswith('.')}
    tops -= {'build', 'collections'}
    with open(os.path.join(ROOT, 'CHANGELOG.rst')) as handle:
        text = handle.read()
    roles = [os.path.join(ROOT, 'roles', r) for r in os.listdir(os.path.join(ROOT, 'roles'))]
    missing = []
    for path in sorted(set(re.findall(r'``([A-Za-z0-9_.-]+/[^`\s]*)``', text))):
        if path.split('/')[0] not in tops:
            continue
        rel = path.rstrip('/')
        if not any(os.path.exists(os.path.join(base, rel)) for base in [ROOT] + roles):
            missing.append(path)
    assert not missing, 'CHANGELOG.rst names files that do not exist: %s' % ', '.join(missing)


def test_a_release_now_would_hold_every_fragment(scratch):
    """A release made now (in a scratch copy) holds every fragment, under the
    version galaxy.yml will say then: the next one after a release."""
    version = load(ROOT, 'galaxy.yml')['version']
    names = fragments()
    if version in (load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}):
        if not names:
            pytest.skip('%s is released and no fragment waits for the next release' % version)
        version = next_version(version, names)
    done = released(scratch, version)
    data = load(str(done), 'changelogs', 'changelog.yaml')
    assert version in data['releases']
    release = data['releases'][version]
    assert sorted(release.get('fragments', [])) == names
    assert [f for f in os.listdir(done / 'changelogs' / 'fragments') if f.endswith('.yml')] == []
    with open(done / 'CHANGELOG.rst') as handle:
        text = handle.read()
    assert '\nv%s\n' % version in text
    for name in names:
        for section, entries in load(ROOT, 'changelogs', 'fragments', name).items():
            if section in ('trivial',):
                continue
            for entry in entries if isinstance(entries, list) else [entries]:
                assert ' '.join(entry.split()[:6]) in ' '.join(text.split()), (name, entry)
