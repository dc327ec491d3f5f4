"""CHANGELOG.rst cannot drift from changelogs/: it is exactly what
antsibull-changelog generates, and a release made now (in a scratch copy,
never in this tree) would succeed and hold every fragment.

The release itself is cut by a maintainer when every branch is merged
(docs/docsite/rst/releasing.rst): `antsibull-changelog release`."""
import os
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
    """A copy of the scratch tree with `antsibull-changelog release` done (memoised)."""
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


def test_a_released_version_takes_no_new_fragments():
    """After a release, the next change's fragment needs the next version in
    galaxy.yml (and that version's release summary fragment): a release of a
    version already released would fail."""
    version = load(ROOT, 'galaxy.yml')['version']
    releases = load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}
    if version in releases:
        assert fragments() == [], (
            'galaxy.yml says %s, which is released: raise version in galaxy.yml for %s' % (version, fragments()))
        assert releases[version]['changes'].get('release_summary')


def test_a_release_now_would_hold_every_fragment(scratch):
    version = load(ROOT, 'galaxy.yml')['version']
    if version in (load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}):
        pytest.skip('%s is released; test_a_released_version_takes_no_new_fragments checks it' % version)
    done = released(scratch)
    data = load(str(done), 'changelogs', 'changelog.yaml')
    assert version in data['releases']
    release = data['releases'][version]
    names = fragments()
    assert sorted(release.get('fragments', [])) == names
    assert [f for f in os.listdir(done / 'changelogs' / 'fragments') if f.endswith('.yml')] == []
    with open(done / 'CHANGELOG.rst') as handle:
        text = handle.read()
    assert '\nv%s\n' % version in text and 'Release Summary' in text
    for name in names:
        for section, entries in load(ROOT, 'changelogs', 'fragments', name).items():
            if section in ('trivial',):
                continue
            for entry in entries if isinstance(entries, list) else [entries]:
                assert ' '.join(entry.split()[:6]) in ' '.join(text.split()), (name, entry)
