"""scripts/release.sh, run as a maintainer would, on a scratch clone of this
tree (never on this tree): it cuts the notes of the release galaxy.yml names
(2.0.0 for main's 2.0.0-dev0), builds the tarball, has Galaxy's importer
accept it, writes its sha256 and tags the release commit. The tarball then
carries its own version's notes, and the docs and tests of the released tree
agree with its version (tests/docs/test_changelog.py and friends, run on the
clone).
"""
import json
import os
import shutil
import subprocess
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, '.venv', 'bin')
GIT = ['git', '-c', 'user.name=Release Test', '-c', 'user.email=release@example.invalid',
       '-c', 'init.defaultBranch=main', '-c', 'tag.gpgSign=false', '-c', 'commit.gpgSign=false']


def release_version():
    with open(os.path.join(ROOT, 'galaxy.yml')) as handle:
        return yaml.safe_load(handle)['version'].split('-')[0]


def clean_env(home):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('ANSIBLE_', 'GIT_'))}
    env.update(HOME=str(home), PATH=BIN + os.pathsep + env.get('PATH', '/usr/bin:/bin'),
               GIT_AUTHOR_NAME='Release Test', GIT_AUTHOR_EMAIL='release@example.invalid',
               GIT_COMMITTER_NAME='Release Test', GIT_COMMITTER_EMAIL='release@example.invalid')
    return env


def run(argv, cwd, env, check=True, timeout=600):
    proc = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert proc.returncode == 0, '%s (rc=%d)\n%s\n%s' % (' '.join(argv), proc.returncode, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(scope='module')
def origin(tmp_path_factory):
    """A git repository (main) of the tracked and new files of this tree, as
    main will be when they are merged."""
    base = tmp_path_factory.mktemp('release')
    src = base / 'origin'
    src.mkdir()
    files = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                           cwd=ROOT, capture_output=True, check=True).stdout.decode().split('\0')
    for rel in filter(None, files):
        if os.path.exists(os.path.join(ROOT, rel)):
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, rel), src / rel, follow_symlinks=False)
    (base / 'home').mkdir()
    env = clean_env(base / 'home')
    run(GIT + ['init', '-q'], src, env)
    run(GIT + ['add', '-A'], src, env)
    run(GIT + ['commit', '-q', '-m', 'main'], src, env)
    return base, env


def clone(origin, name):
    """A clone of origin with this tree's venvs (scripts/bootstrap.sh's) linked in."""
    base, env = origin
    dest = base / name
    run(GIT + ['clone', '-q', str(base / 'origin'), str(dest)], base, env)
    for venv in ('.venv', '.venv-importer'):
        os.symlink(os.path.realpath(os.path.join(ROOT, venv)), str(dest / venv))
    return dest


def test_a_release_cut_by_the_script(origin, tmp_path):
    """One release, every check on it (one test, so that pytest-xdist's workers
    never cut it twice)."""
    repo = clone(origin, 'released')
    proc = run(['bash', 'scripts/release.sh', release_version()], repo, origin[1], check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    released = (repo, proc.stdout + proc.stderr)
    check_the_release_commit_and_its_annotated_tag(released, origin)
    check_the_tarball_its_checksum_and_the_tag_that_names_it(released, origin)
    check_the_tarball_carries_the_notes_of_its_own_version(released)
    check_a_build_from_the_tag_holds_the_same_files(released, origin, tmp_path)
    check_the_released_tree_passes_the_version_and_notes_tests(released, origin)


def tarball_of(repo):
    return repo / 'build' / 'release' / ('ipmasq-agent-%s.tar.gz' % release_version())


def member(path, name):
    with tarfile.open(path) as tar:
        return tar.extractfile(name).read().decode()


def check_the_release_commit_and_its_annotated_tag(released, origin):
    repo, out = released
    version = release_version()
    env = origin[1]
    assert run(['git', 'status', '--porcelain'], repo, env).stdout == ''
    assert run(['git', 'log', '-1', '--format=%s'], repo, env).stdout.strip() == 'Release %s' % version
    assert run(['git', 'cat-file', '-t', version], repo, env).stdout.strip() == 'tag'
    assert run(['git', 'rev-parse', version + '^{commit}'], repo, env).stdout == \
        run(['git', 'rev-parse', 'HEAD'], repo, env).stdout
    with open(repo / 'galaxy.yml') as handle:
        assert yaml.safe_load(handle)['version'] == version
    assert [f for f in os.listdir(repo / 'changelogs' / 'fragments') if f.endswith('.yml')] == []
    assert 'imports cleanly' in out


def check_the_tarball_its_checksum_and_the_tag_that_names_it(released, origin):
    """The sha256 file checks, and the tag's message holds the same sha256:
    how a user maps a tarball to its commit (docs/docsite/rst/releasing.rst)."""
    repo, _out = released
    tarball = tarball_of(repo)
    run(['sha256sum', '-c', tarball.name + '.sha256'], tarball.parent, origin[1])
    digest = run(['sha256sum', tarball.name], tarball.parent, origin[1]).stdout.split()[0]
    message = run(['git', 'tag', '-l', '--format=%(contents)', release_version()], repo, origin[1]).stdout
    assert '%s sha256 %s' % (tarball.name, digest) in message
    found = run(['git', 'for-each-ref', '--contains', 'HEAD', '--format=%(refname:short) %(contents)', 'refs/tags'],
                repo, origin[1]).stdout
    assert digest in found


def check_the_tarball_carries_the_notes_of_its_own_version(released):
    repo, _out = released
    version = release_version()
    tarball = tarball_of(repo)
    info = json.loads(member(tarball, 'MANIFEST.json'))['collection_info']
    assert info['version'] == version
    assert '\nv%s\n' % version in member(tarball, 'CHANGELOG.rst')
    notes = yaml.safe_load(member(tarball, 'changelogs/changelog.yaml'))['releases'][version]
    assert notes['changes']['release_summary'] and notes['changes']['breaking_changes']
    upgrading = member(tarball, 'docs/docsite/rst/upgrading.rst')
    assert 'not released yet' not in upgrading
    assert 'What changes on the node (1.1.0 to %s)' % version in upgrading
    assert '(the next release, %s)' % version not in member(tarball, 'SECURITY.md')


def check_a_build_from_the_tag_holds_the_same_files(released, origin, tmp_path):
    """Rebuilding from the tag gives the same FILES.json (every file's sha256)
    as the released tarball: a tarball maps to a commit by its content too."""
    repo, _out = released
    work = tmp_path / 'rebuild'
    run(GIT + ['clone', '-q', '--branch', release_version(), str(repo), str(work)], tmp_path, origin[1])
    run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', str(tmp_path / 'dist')],
        work, origin[1])
    again = tmp_path / 'dist' / tarball_of(repo).name
    assert member(again, 'FILES.json') == member(tarball_of(repo), 'FILES.json')
    assert member(again, 'MANIFEST.json') == member(tarball_of(repo), 'MANIFEST.json')


def check_the_released_tree_passes_the_version_and_notes_tests(released, origin):
    """The docs and version tests of this tree, run on the released clone."""
    repo, _out = released
    proc = run([os.path.join(BIN, 'python'), '-m', 'pytest', '-p', 'no:cacheprovider', '-q',
                'tests/docs/test_changelog.py', 'tests/docs/test_publishing.py',
                'tests/docs/test_support_matrix.py::test_security_policy_names_the_latest_release_and_main'],
               repo, origin[1], check=False)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


@pytest.mark.parametrize('version,dirty,says', [
    ('1.2.0', False, 'too low for the waiting fragments'),
    ('2.0', False, 'is not a release version'),
    (None, True, 'release from a clean checkout'),
])
def test_the_script_refuses_and_changes_nothing(origin, version, dirty, says):
    repo = clone(origin, 'refused-%s-%s' % (version, dirty))
    env = origin[1]
    if dirty:
        (repo / 'README.md').write_text('edited\n')
    head = run(['git', 'rev-parse', 'HEAD'], repo, env).stdout
    proc = run(['bash', 'scripts/release.sh', version or release_version()], repo, env, check=False)
    assert proc.returncode != 0 and says in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert run(['git', 'rev-parse', 'HEAD'], repo, env).stdout == head
    assert run(['git', 'tag'], repo, env).stdout == ''
    assert run(['git', 'status', '--porcelain'], repo, env).stdout == (' M README.md\n' if dirty else '')
