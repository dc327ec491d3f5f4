"""CHANGELOG.rst cannot drift from changelogs/: it is exactly what
antsibull-changelog generates, and a release made now (in a scratch copy,
never in this tree) would succeed and hold every fragment.

The release itself is cut by a maintainer when every branch is merged
(docs/docsite/rst/releasing.rst): `antsibull-changelog release`."""
import importlib.util
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
        version = release_of(load(ROOT, 'galaxy.yml')['version'])
        proc = changelog(done, top / 'released', 'release', '--version', version)
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
            head = handle.read().split('\nv%s\n' % release_of(load(ROOT, 'galaxy.yml')['version']))[0] + '\n'
        assert committed == head, 'CHANGELOG.rst is edited by hand: before the first release it holds only the header'


def fragments():
    return sorted(f for f in os.listdir(os.path.join(ROOT, 'changelogs', 'fragments')) if f.endswith('.yml'))


def _release_version():
    """scripts/release_version.py: the semantic-versioning rule the release script applies."""
    spec = importlib.util.spec_from_file_location('release_version', os.path.join(ROOT, 'scripts', 'release_version.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RV = _release_version()


def vkey(version):
    return RV.key(version)


def release_of(version):
    """The release galaxy.yml's version names: 2.0.0 for main's 2.0.0-dev0."""
    return RV.base(version)


def test_galaxy_version_is_the_next_release_while_fragments_wait():
    """main carries the next version from the commit after a release on
    (docs/docsite/rst/releasing.rst): while fragments wait in
    changelogs/fragments/, galaxy.yml's version is not released yet (so a
    tarball built from main is never named as a release it is not), and above
    the last release."""
    version = load(ROOT, 'galaxy.yml')['version']
    releases = load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}
    with open(os.path.join(ROOT, 'CHANGELOG.rst')) as handle:
        in_rst = '\nv%s\n' % release_of(version) in handle.read()
    names = fragments()
    if not names:
        pytest.skip('no fragment waits: galaxy.yml may name the release just cut')
    assert release_of(version) not in releases and not in_rst, (
        'galaxy.yml says %s, which is released already (changelogs/changelog.yaml, CHANGELOG.rst), while %d '
        'fragments wait: raise it to the next release (docs/docsite/rst/releasing.rst)' % (version, len(names)))
    if releases:
        last = max(releases, key=vkey)
        assert vkey(version) > vkey(last), 'galaxy.yml says %s, not above the last release %s' % (version, last)


def test_waiting_fragments_follow_semantic_versioning():
    """The release galaxy.yml names is high enough for what the waiting
    fragments hold: a major release for a ``breaking_changes`` or
    ``removed_features`` fragment (the README promises semantic versioning
    for the role and its variables), a minor one for new features and
    deprecations; every deprecation says the major release it goes in, after
    the next one; and a ``release_summary`` waits with them. Any fragment added
    later is held to the same rule (scripts/release_version.py)."""
    version = load(ROOT, 'galaxy.yml')['version']
    releases = sorted(load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}, key=vkey)
    waiting = RV.fragments(ROOT)
    if not waiting:
        pytest.skip('no fragment waits')
    found = RV.problems(version, releases[-1] if releases else None, waiting)
    assert not found, '\n'.join(found)
    assert RV.summary_problems(version, waiting) == [], 'antsibull-changelog warns a release without one'


@pytest.mark.parametrize('last,sections,version,ok', [
    ('1.1.0', ['breaking_changes'], '1.2.0', False),
    ('1.1.0', ['removed_features'], '1.2.0-dev0', False),
    ('1.1.0', ['breaking_changes', 'bugfixes'], '2.0.0-dev0', True),
    ('1.1.0', ['breaking_changes'], '2.0.0', True),
    ('1.1.0', ['minor_changes'], '1.1.1', False),
    ('1.1.0', ['deprecated_features'], '1.1.1', False),
    ('1.1.0', ['minor_changes'], '1.2.0', True),
    ('1.1.0', ['bugfixes'], '1.1.1', True),
    ('1.1.0', ['bugfixes'], '1.1.0', False),
    ('1.1.0', ['bugfixes'], '1.2', False),
])
def test_the_semantic_versioning_rule(last, sections, version, ok):
    waiting = {'x.yml': dict((s, ['ip_masq role - a change.']) for s in sections)}
    assert (RV.problems(version, last, waiting) == []) is ok, RV.problems(version, last, waiting)


@pytest.mark.parametrize('text,ok', [
    ('ip_masq role - ``set`` is deprecated and will be removed in 3.0.0; use ``auto``.', True),
    ('masq_chain - ``backend`` is deprecated; use ``iptables_flavour``.', False),
    ('ip_masq role - ``set`` is deprecated and will be removed in 2.0.0.', False),
    ('ip_masq role - ``set`` is deprecated and will be removed in 3.1.0.', False),
])
def test_a_deprecation_names_a_major_release_after_the_next(text, ok):
    found = RV.problems('2.0.0-dev0', '1.1.0', {'d.yml': {'deprecated_features': [text]}})
    assert (found == []) is ok, found


def test_deprecations_in_the_code_go_in_a_major_release_after_the_next():
    """The deprecation warnings the role gives (ip_masq_kubelet: set) name the
    same kind of version as their changelog entries."""
    with open(os.path.join(ROOT, 'plugins', 'action', 'ip_masq.py')) as handle:
        until = re.findall(r"^DEPRECATED_UNTIL = '([0-9.]+)'", handle.read(), re.MULTILINE)
    assert until, 'plugins/action/ip_masq.py: DEPRECATED_UNTIL not found'
    nxt = release_of(load(ROOT, 'galaxy.yml')['version'])
    assert vkey(until[0])[1:] == (0, 0) and vkey(until[0])[0] > vkey(nxt)[0], (until[0], nxt)


def test_a_build_of_this_tree_carries_the_notes_of_its_version():
    """A tarball built from this tree ships CHANGELOG.rst and
    changelogs/changelog.yaml: either galaxy.yml names a released version and
    both hold its section (the release commit), or it names a pre-release of
    the next one (``X.Y.Z-dev0``), which a build of main is, never a release
    whose notes it does not carry."""
    version = load(ROOT, 'galaxy.yml')['version']
    releases = load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}
    with open(os.path.join(ROOT, 'CHANGELOG.rst')) as handle:
        rst = handle.read()
    if RV.parse(version)[3] is None:
        assert version in releases and '\nv%s\n' % version in rst, (
            'galaxy.yml says %s, a release, but changelogs/changelog.yaml and CHANGELOG.rst stop at %s: between '
            'releases main names the next release as a pre-release (%s-dev0; scripts/release.sh cuts the notes '
            'with the version)' % (version, max(releases, key=vkey) if releases else 'none', version))
    else:
        assert release_of(version) not in releases, version


def upgrading_text():
    with open(os.path.join(ROOT, 'docs', 'docsite', 'rst', 'upgrading.rst')) as handle:
        return handle.read()


def test_the_upgrading_guide_agrees_with_the_version():
    """upgrading.rst's newest section is about galaxy.yml's release; it says
    that release is not released yet exactly while galaxy.yml names a
    pre-release of it (scripts/release.sh drops that line when it cuts it)."""
    version = load(ROOT, 'galaxy.yml')['version']
    text = upgrading_text()
    heads = re.findall(r'^What changes on the node \((\d+\.\d+\.\d+) to (\d+\.\d+\.\d+)\)$', text, re.MULTILINE)
    assert heads and heads[0][1] == release_of(version), (heads, version)
    pending = re.findall(r'not released yet', text)
    if RV.parse(version)[3] is None:
        assert not pending, 'galaxy.yml says %s, a release, but upgrading.rst says "not released yet"' % version
    else:
        assert text.count('%s is not released yet' % release_of(version)) == 1 and len(pending) == 1, pending


# What a user of 1.1.0 changes for the next release, each in the waiting
# breaking_changes fragments (the changelog's "Breaking Changes / Porting
# Guide") and in upgrading.rst.
PORTING = {
    'the entry point': ['-e ip_masq', 'ipmasq.agent.ip_masq_args'],
    'the kubelet set': ['ip_masq_kubelet: auto'],
    'the daemon restarts that moved': ['restart'],
    'CNI networks switched off by default': ['ip_masq_cni: skip', 'ip_masq_cni_conf_dirs', '87-podman-bridge.conflist',
                                             '10.88.', '192.168.0.0/16', '/etc/cni/net.d'],
}


@pytest.mark.parametrize('what', sorted(PORTING))
def test_the_porting_notes_say_what_to_change(what):
    """Each breaking change and each new default that changes what a node does
    has a line on what the user changes, in the changelog's porting guide and
    in the upgrading guide."""
    version = load(ROOT, 'galaxy.yml')['version']
    releases = load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {}
    if release_of(version) in releases:
        notes = releases[release_of(version)].get('changes', {}).get('breaking_changes', [])
    else:
        notes = []
        for content in RV.fragments(ROOT).values():
            notes += RV.entries(content, 'breaking_changes')
    porting = ' '.join(' '.join(notes).split())
    guide = ' '.join(upgrading_text().split())
    for needle in PORTING[what]:
        assert needle in porting, 'the porting notes (breaking_changes) do not say %r (%s)' % (needle, what)
        assert needle in guide, 'upgrading.rst does not say %r (%s)' % (needle, what)


def test_docs_name_the_tarball_of_this_version():
    """Where the README and the guides name the tarball or image of this build
    (``ipmasq-agent-X.Y.Z.tar.gz``, ``ipmasq-ee:X.Y.Z``), it is the release
    galaxy.yml names: its version, the name ``ansible-galaxy collection build``
    gives the release tarball (2.0.0 while main's galaxy.yml says 2.0.0-dev0)."""
    version = release_of(load(ROOT, 'galaxy.yml')['version'])
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
    version = release_of(load(ROOT, 'galaxy.yml')['version'])
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


def test_version_added_names_a_release_or_the_next_one():
    """Every ``version_added`` of the plugins' and the role's docs names a
    released version or the release galaxy.yml names (2.0.0, never the 1.2.0
    that was never cut)."""
    allowed = set(load(ROOT, 'changelogs', 'changelog.yaml').get('releases') or {})
    allowed.add(release_of(load(ROOT, 'galaxy.yml')['version']))
    wrong = []
    for top in ('plugins', 'roles'):
        for folder, _dirs, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if not name.endswith(('.py', '.yml')):
                    continue
                with open(os.path.join(folder, name)) as handle:
                    for found in re.findall(r'version_added: *[\'"]?([0-9][0-9.]*)', handle.read()):
                        if found not in allowed:
                            wrong.append('%s: %s' % (os.path.relpath(os.path.join(folder, name), ROOT), found))
    assert not wrong, 'version_added names a version that is neither released nor next (%s): %s' % (
        ', '.join(sorted(allowed, key=vkey)), ', '.join(wrong))
