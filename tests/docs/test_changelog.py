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


def released(scratch):
    """A copy of the scratch tree with `antsibull-changelog release` done (memoised),
    as the version galaxy.yml says."""
    top, dest = scratch
    done = top / 'released' / 'ansible_collections' / 'ipmasq' / 'agent'
    if not done.exists():
        shutil.copytree(dest, done)
        proc = changelog(done, top / 'released', 'release')
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


def vkey(version):
    return tuple(int(p) for p in version.split('.'))


def test_galaxy_version_is_the_next_release_while_fragments_wait():
    """main carries the next version from the commit after a release on
    (docs/docsite/rst/releasing.rst): while fragments wait in
    changelogs/fragments/, galaxy.yml's version is not released yet (so a
    tarball built from main is never named as a release it is not), it is
    above the last release, and high enough for what the fragments hold
    (minor for new features, patch for fixes only)."""
    version = load(ROOT, 'galaxy.yml')['version']
    releases = load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}
    with open(os.path.join(ROOT, 'CHANGELOG.rst')) as handle:
        in_rst = '\nv%s\n' % version in handle.read()
    names = fragments()
    if not names:
        pytest.skip('no fragment waits: galaxy.yml may name the release just cut')
    assert version not in releases and not in_rst, (
        'galaxy.yml says %s, which is released already (changelogs/changelog.yaml, CHANGELOG.rst), while %d '
        'fragments wait: raise it to the next release (docs/docsite/rst/releasing.rst)' % (version, len(names)))
    if releases:
        last = max(releases, key=vkey)
        assert vkey(version) > vkey(last), 'galaxy.yml says %s, not above the last release %s' % (version, last)
        assert vkey(version) >= vkey(next_version(last, names)), (
            'galaxy.yml says %s, but the waiting fragments make the next release at least %s'
            % (version, next_version(last, names)))


def test_docs_name_the_tarball_of_this_version():
    """Where the README and the guides name the tarball or image of this build
    (``ipmasq-agent-X.Y.Z.tar.gz``, ``ipmasq-ee:X.Y.Z``), it is galaxy.yml's
    version, the name ``ansible-galaxy collection build`` gives it."""
    version = load(ROOT, 'galaxy.yml')['version']
    docs = os.path.join(ROOT, 'docs', 'docsite', 'rst')
    paths = [os.path.join(ROOT, 'README.md')] + [os.path.join(docs, n) for n in sorted(os.listdir(docs))]
    wrong = []
    for path in paths:
        with open(path) as handle:
            for found in re.findall(r'ipmasq-(?:agent-(\d+\.\d+\.\d+)\.tar\.gz|ee:(\d+\.\d+\.\d+))', handle.read()):
                if version not in found:
                    wrong.append('%s: %s' % (os.path.relpath(path, ROOT), ''.join(found)))
    assert not wrong, 'these name another version than galaxy.yml (%s): %s' % (version, ', '.join(wrong))


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
    version galaxy.yml says: the next release."""
    version = load(ROOT, 'galaxy.yml')['version']
    names = fragments()
    if not names:
        pytest.skip('no fragment waits for the next release')
    done = released(scratch)
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
