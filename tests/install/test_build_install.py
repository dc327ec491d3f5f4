"""The path a user walks: build the release tarball, install it (from the
tarball, from a git checkout, through a requirements.yml) into an empty
path, and use the installed copy: ansible-doc of every plugin and the role,
and the example site play's syntax check from a fresh clone.

Everything runs on the controller only (no node is contacted) in a scratch
copy of the tracked files, with HOME pointing to an empty folder, so nothing
of this tree (build/collections) or of the machine (~/.ansible) is seen.
The example play itself runs against real nodes in the Molecule scenario
``example`` (extensions/molecule/example), from an installed tarball too.
"""
import fnmatch
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, '.venv', 'bin')
FQCN = 'ipmasq.agent'

# What the release tarball may hold, and nothing else. Everything a user of the
# collection needs: the plugins, the role, the docs (the guides and the
# docsite's extra-docs.yml/links.yml, which antsibull-docs reads from an
# installed collection), the example inventory and site play, the changelog,
# the licence and the execution environment's metadata.
SHIPPED = [
    'MANIFEST.json', 'FILES.json', 'README.md', 'LICENSE', 'CHANGELOG.rst', 'SECURITY.md', 'CONTRIBUTING.md',
    'changelogs/changelog.yaml',
    'meta/runtime.yml', 'meta/execution-environment.yml', 'meta/ee-requirements.txt',
    'docs/docsite/extra-docs.yml', 'docs/docsite/links.yml', 'docs/docsite/rst/*.rst',
    'plugins/modules/*.py', 'plugins/module_utils/*.py', 'plugins/filter/*.py',
    'plugins/test/*.py', 'plugins/plugin_utils/*.py', 'plugins/action/*.py',
    'roles/ip_masq/README.md', 'roles/ip_masq/*/*.yml',
    'roles/ip_masq/files/*',
    'playbooks/site.yml', 'playbooks/audit.yml', 'playbooks/sandbox.yml', 'playbooks/explain.yml',
    'playbooks/templates/*.j2',
    'playbooks/files/sandbox_guard.py',
    'plugins/doc_fragments/*.py',
    'inventories/example/hosts.yml', 'inventories/example/group_vars/*.yml',
    'inventories/example/host_vars/*.yml',
]
# Must be in it (a build_ignore that drops them breaks the collection).
REQUIRED = ['MANIFEST.json', 'FILES.json', 'README.md', 'LICENSE', 'CHANGELOG.rst',
            'meta/runtime.yml', 'meta/execution-environment.yml', 'meta/ee-requirements.txt',
            'plugins/modules/masq_chain.py', 'roles/ip_masq/tasks/main.yml',
            'roles/ip_masq/meta/argument_specs.yml', 'playbooks/site.yml', 'playbooks/explain.yml',
            'inventories/example/hosts.yml', 'docs/docsite/extra-docs.yml']
# What a used tree collects; none of it may reach the tarball.
JUNK = ['.hypothesis/examples/x', '.pytest_cache/v/x', '.ansible/collections/x', 'build/x',
        '.venv/bin/x', '.venv-importer/bin/x', 'tests/output/x', 'plugins/modules/__pycache__/x.cpython-311.pyc',
        'collections/ansible_collections/x', 'ipmasq-agent-0.0.1.tar.gz']

KINDS = {'module': 'modules', 'filter': 'filter', 'test': 'test'}


def galaxy_version():
    with open(os.path.join(ROOT, 'galaxy.yml')) as handle:
        return yaml.safe_load(handle)['version']


def release_version():
    """The release the docs name: 2.0.0 while main's galaxy.yml says 2.0.0-dev0."""
    return galaxy_version().split('-')[0]


def clean_env(home):
    """No ANSIBLE_* from the caller (run-all.sh points ANSIBLE_COLLECTIONS_PATH at this
    tree), HOME empty: ansible sees only what the test installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(HOME=str(home), ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0',
               ANSIBLE_CONFIG=os.path.join(str(home), 'no-ansible.cfg'),
               PATH=BIN + os.pathsep + env.get('PATH', '/usr/bin:/bin'))
    return env


def run(argv, cwd, env, check=True, timeout=300):
    proc = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check:
        assert proc.returncode == 0, '%s failed (rc=%d):\n%s\n%s' % (
            ' '.join(argv), proc.returncode, proc.stdout, proc.stderr)
    return proc


def readme_blocks():
    with open(os.path.join(ROOT, 'README.md')) as handle:
        text = handle.read()
    return re.findall(r'^```(\w*)\n(.*?)^```', text, re.MULTILINE | re.DOTALL)


def readme_commands():
    """Every command line of the README's bash blocks (comments dropped)."""
    lines = []
    for lang, body in readme_blocks():
        if lang == 'bash':
            lines += [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith('#')]
    return lines


@pytest.fixture(scope='module')
def scratch(tmp_path_factory):
    """A git repository (branch main) holding the tracked and new files of this
    tree, as a clone would; then the junk of a used tree on top, untracked."""
    base = tmp_path_factory.mktemp('install')
    src = base / 'src'
    src.mkdir()
    files = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                           cwd=ROOT, capture_output=True, check=True).stdout.decode().split('\0')
    for rel in filter(None, files):
        if not os.path.exists(os.path.join(ROOT, rel)):
            continue  # deleted in the work tree, not committed yet
        dest = src / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), dest, follow_symlinks=False)
    git = ['git', '-c', 'user.name=t', '-c', 'user.email=t@example.invalid', '-c', 'init.defaultBranch=main']
    subprocess.run(git + ['init', '-q'], cwd=src, check=True)
    subprocess.run(git + ['add', '-A'], cwd=src, check=True)
    subprocess.run(git + ['commit', '-q', '-m', 'snapshot'], cwd=src, check=True)
    for rel in JUNK:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text('junk\n')
    return base


@pytest.fixture(scope='module')
def tarball(scratch):
    """The tarball exactly as the README says to make it: `ansible-galaxy collection build`."""
    home = scratch / 'home-build'
    home.mkdir()
    run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', str(scratch / 'dist')],
        scratch / 'src', clean_env(home))
    path = scratch / 'dist' / ('ipmasq-agent-%s.tar.gz' % galaxy_version())
    assert path.exists(), os.listdir(scratch / 'dist')
    return path


def tar_files(path):
    with tarfile.open(path) as tar:
        return sorted(m.name for m in tar.getmembers() if m.isfile())


def shipped(name):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in SHIPPED)


# --------------------------------------------------------------- the tarball

def test_tarball_holds_only_what_users_need(tarball):
    files = tar_files(tarball)
    extra = [f for f in files if not shipped(f)]
    assert not extra, 'not on the list of what the tarball may hold: %s' % extra
    missing = [f for f in REQUIRED if f not in files]
    assert not missing, missing


def test_tarball_holds_every_tracked_file_of_the_shipped_kinds(tarball, scratch):
    """The other direction: build_ignore drops nothing a user needs."""
    tracked = subprocess.run(['git', 'ls-files'], cwd=scratch / 'src', capture_output=True, text=True,
                             check=True).stdout.split()
    want = sorted(f for f in tracked if shipped(f))
    have = [f for f in tar_files(tarball) if f not in ('MANIFEST.json', 'FILES.json')]
    assert have == want


def test_tarball_leaves_out_the_junk_of_a_used_tree(tarball):
    files = tar_files(tarball)
    for junk in JUNK:
        assert junk not in files
    for top in ('.hypothesis', '.pytest_cache', '.ansible', 'build', '.venv', '.venv-importer', 'tests', 'collections'):
        assert not [f for f in files if f.startswith(top + '/')], top
    assert not [f for f in files if '__pycache__' in f or f.endswith('.pyc')]


def test_manifest_names_the_version_and_the_addresses_of_galaxy_yml(tarball):
    with tarfile.open(tarball) as tar:
        info = json.load(tar.extractfile('MANIFEST.json'))['collection_info']
    with open(os.path.join(ROOT, 'galaxy.yml')) as handle:
        meta = yaml.safe_load(handle)
    assert info['version'] == galaxy_version()
    assert (info['namespace'], info['name']) == ('ipmasq', 'agent')
    for key in ('repository', 'documentation', 'issues'):
        assert info[key] == meta[key] and info[key].startswith('https://'), (key, info[key])
    assert info['dependencies'] == {}


# The one licence header of every Python file the collection ships (after a
# '#!/usr/bin/python' and a coding line, where a module has them).
HEADER = ('# Copyright (c) 2026, ipmasq.agent contributors\n'
          '# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)\n'
          '# SPDX-License-Identifier: GPL-3.0-or-later\n')


def test_every_shipped_python_file_has_the_licence_header(tarball):
    """Every .py in the built tarball opens with the collection's one header."""
    wrong = []
    with tarfile.open(tarball) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile() and m.name.endswith('.py')]
        assert len(names) > 50, names
        for name in names:
            lines = tar.extractfile(name).read().decode('utf-8').splitlines(True)
            while lines and (lines[0].startswith('#!') or lines[0].startswith('# -*- coding')):
                lines.pop(0)
            if ''.join(lines[:3]) != HEADER:
                wrong.append(name)
    assert not wrong, 'these shipped files lack the licence header (tests/install/test_build_install.py HEADER): %s' % (
        ', '.join(wrong))


# ----------------------------------------------------- installing, three ways

def installed(home, env):
    out = run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'list', FQCN, '--format', 'json'],
              home, env).stdout
    found = {path: cols[FQCN]['version'] for path, cols in json.loads(out).items() if FQCN in cols}
    assert list(found.values()) == [galaxy_version()], found
    path = list(found)[0]
    assert path.startswith(str(home)), path
    return os.path.join(path, 'ipmasq', 'agent')


def installed_files(path):
    out = []
    for top, _dirs, names in os.walk(path):
        out += [os.path.relpath(os.path.join(top, n), path) for n in names]
    return sorted(out)


def test_install_from_the_tarball_as_the_readme_says(tarball, scratch):
    """`ansible-galaxy collection install ipmasq-agent-X.tar.gz`, in the folder that
    holds it, into an empty ~/.ansible; then verify it against its FILES.json."""
    assert 'ansible-galaxy collection install ipmasq-agent-%s.tar.gz' % release_version() in readme_commands()
    home = scratch / 'home-tarball'
    home.mkdir()
    env = clean_env(home)
    run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', tarball.name], tarball.parent, env)
    path = installed(home, env)
    assert installed_files(path) == tar_files(tarball)
    run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'verify', '--offline', FQCN], home, env)


def test_a_fresh_clone_runs_the_example_after_the_one_documented_command(tarball, scratch):
    """In a fresh clone the example play cannot find the role; the README's command
    for a git checkout (`ansible-galaxy collection install .`) fixes that."""
    assert 'ansible-galaxy collection install .' in readme_commands()
    home = scratch / 'home-clone'
    home.mkdir()
    env = clean_env(home)
    clone = scratch / 'clone'
    run(['git', 'clone', '-q', str(scratch / 'src'), str(clone)], scratch, env)
    check = [os.path.join(BIN, 'ansible-playbook'), '-i', 'inventories/example', 'playbooks/site.yml', '--syntax-check']
    assert 'ansible-playbook -i inventories/example playbooks/site.yml' in readme_commands()
    before = run(check, clone, env, check=False)
    assert before.returncode != 0 and 'ipmasq.agent.ip_masq' in before.stdout + before.stderr

    run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', '.'], clone, env)
    path = installed(home, env)
    assert installed_files(path) == tar_files(tarball)
    run(check, clone, env)
    hosts = run([os.path.join(BIN, 'ansible-playbook'), '-i', 'inventories/example', 'playbooks/site.yml',
                 '--list-hosts'], clone, env).stdout
    for host in ('east-node-1.example.internal', 'west-bootstrap.example.internal'):
        assert host in hosts


def test_install_through_the_readmes_requirements_yml(tarball, scratch):
    """The README's requirements.yml, its git URL pointed at a local repository
    (the same form, git+file://), then the commented tarball entry as well."""
    assert 'ansible-galaxy collection install -r requirements.yml' in readme_commands()
    blocks = [body for lang, body in readme_blocks() if lang == 'yaml' and 'requirements.yml' in body]
    assert len(blocks) == 1, blocks
    text = blocks[0]
    reqs = yaml.safe_load(text)
    entry = reqs['collections'][0]
    assert entry['type'] == 'git' and entry['name'].startswith('git+https://')
    assert entry['version'] == 'main'
    entry['name'] = 'git+file://%s' % (scratch / 'src')
    home = scratch / 'home-reqs'
    home.mkdir()
    env = clean_env(home)
    project = scratch / 'project'
    project.mkdir()
    (project / 'requirements.yml').write_text(yaml.safe_dump(reqs))
    run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', '-r', 'requirements.yml'], project, env)
    assert installed_files(installed(home, env)) == tar_files(tarball)

    # The tarball form given in the comment.
    commented = [ln.strip()[2:] for ln in text.splitlines() if ln.strip().startswith('# - name:')
                 or ln.strip().startswith('#   type:')]
    alt = yaml.safe_load('\n'.join(commented))
    assert alt[0]['type'] == 'file' and alt[0]['name'].endswith('ipmasq-agent-%s.tar.gz' % release_version())
    alt[0]['name'] = str(tarball)
    home2 = scratch / 'home-reqs-file'
    home2.mkdir()
    (project / 'requirements-file.yml').write_text(yaml.safe_dump({'collections': alt}))
    run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', '-r', 'requirements-file.yml'],
        project, clean_env(home2))
    assert installed_files(installed(home2, clean_env(home2))) == tar_files(tarball)


# ------------------------------------------------ using the installed copy

@pytest.fixture(scope='module')
def from_tarball(tarball, scratch):
    home = scratch / 'home-doc'
    home.mkdir()
    env = clean_env(home)
    run([os.path.join(BIN, 'ansible-galaxy'), 'collection', 'install', str(tarball)], home, env)
    return installed(home, env), env


def plugin_names(path):
    found = []
    for kind, folder in KINDS.items():
        for name in sorted(os.listdir(os.path.join(path, 'plugins', folder))):
            if name.endswith('.py') and not name.startswith('_'):
                found.append((kind, name[:-3]))
    return found


def test_ansible_doc_renders_every_plugin_and_the_role_from_the_installed_copy(from_tarball):
    path, env = from_tarball
    names = plugin_names(path)
    assert ('module', 'masq_chain') in names and ('filter', 'nonmasq_guard') in names
    doc = os.path.join(BIN, 'ansible-doc')
    for kind in sorted({k for k, _name in names} | {"role"}):
        wanted = ['%s.%s' % (FQCN, n) for k, n in names if k == kind] if kind != 'role' else ['%s.ip_masq' % FQCN]
        proc = run([doc, '-t', kind, '--json'] + wanted, path, env)
        assert 'WARNING' not in proc.stderr and 'ERROR' not in proc.stderr, proc.stderr
        data = json.loads(proc.stdout)
        assert sorted(data) == sorted(wanted)
        for name in wanted:
            entry = data[name]
            if kind == 'role':
                spec = entry['entry_points']['ip_masq']
                assert spec['short_description'] and spec['options']
                assert entry['path'].startswith(path), entry['path']
            else:
                assert entry['doc']['short_description']
                assert entry['doc']['filename'].startswith(path), entry['doc']['filename']
        text = run([doc, '-t', kind] + wanted, path, env)
        assert 'WARNING' not in text.stderr, text.stderr
        for name in wanted:
            assert name in text.stdout


# ------------------------------------------------- root, no sudo (Debian 12)

DOCS = ['README.md', 'roles/ip_masq/README.md', 'tests/molecule/README.md', 'bench/README.md']


def test_documented_commands_and_scripts_need_no_sudo():
    """CI and a fresh Debian 12 machine are root without sudo installed: no command
    in the READMEs or the guides starts with sudo, and no script calls it."""
    found = []
    for rel in DOCS + ['docs/docsite/rst/' + f for f in os.listdir(os.path.join(ROOT, 'docs/docsite/rst'))]:
        with open(os.path.join(ROOT, rel)) as handle:
            for number, line in enumerate(handle, 1):
                if re.match(r'^\s*(\$ |# )?sudo\s', line):
                    found.append('%s:%d: %s' % (rel, number, line.strip()))
    scripts = subprocess.run(['git', 'ls-files', '*.sh', 'bench/run', '.ci/run'], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    for rel in scripts:
        with open(os.path.join(ROOT, rel)) as handle:
            for number, line in enumerate(handle, 1):
                if re.search(r'(^|[;&|(]\s*)sudo\s', line.split('#')[0]):
                    found.append('%s:%d: %s' % (rel, number, line.strip()))
    assert found == []
    assert 'bash scripts/demo.sh' in readme_commands() and 'bash tests/run-all.sh' in readme_commands()


# ----------------------------------------- execution environment (ansible-builder)

def test_ansible_builder_reads_the_controller_dependency_from_the_installed_copy(from_tarball):
    """AWX / Automation Platform users build an execution environment with ansible-builder:
    it must find netaddr through meta/execution-environment.yml of the installed collection,
    with the same pin the tests run with."""
    path, env = from_tarball
    collections = os.path.dirname(os.path.dirname(os.path.dirname(path)))  # .../collections
    proc = run([os.path.join(BIN, 'ansible-builder'), 'introspect', '--sanitize', collections], path, env)
    data = yaml.safe_load(proc.stdout)
    with open(os.path.join(ROOT, 'meta', 'ee-requirements.txt')) as handle:
        declared = [ln.strip() for ln in handle if ln.strip() and not ln.startswith('#')]
    assert [d.split('>')[0].split('=')[0] for d in declared] == ['netaddr']
    assert data['python'] == ['%s  # from collection ipmasq.agent' % d for d in declared], proc.stdout
    assert data['system'] == []
    with open(os.path.join(ROOT, 'tests', 'requirements.txt')) as handle:
        assert '-r ../meta/ee-requirements.txt' in handle.read().splitlines()


def test_the_quick_start_runs_from_the_installed_copy(from_tarball, scratch):
    """The quick start for a user who installed the collection: copy the installed
    example inventory, run the playbooks by name (no checkout, no playbooks/ folder)."""
    path, env = from_tarball
    quick = open(os.path.join(ROOT, 'docs', 'docsite', 'rst', 'quickstart.rst')).read()
    for text in ('\n'.join(readme_commands()), quick):
        assert 'ansible-playbook -i inventories/prod ipmasq.agent.site --check --diff' in text
        assert 'ansible-playbook -i inventories/prod ipmasq.agent.audit' in text
        assert 'ansible_collections/ipmasq/agent/inventories/example inventories/prod' in text
    assert 'gather_facts: true' not in quick
    project = scratch / 'project-installed'
    (project / 'inventories').mkdir(parents=True)
    shutil.copytree(os.path.join(path, 'inventories', 'example'), str(project / 'inventories' / 'prod'))
    for play in ('ipmasq.agent.site', 'ipmasq.agent.audit'):
        run([os.path.join(BIN, 'ansible-playbook'), '-i', 'inventories/prod', play, '--syntax-check'], project, env)
    hosts = run([os.path.join(BIN, 'ansible-playbook'), '-i', 'inventories/prod', 'ipmasq.agent.site', '--list-hosts'],
                project, env).stdout
    for host in ('east-node-1.example.internal', 'west-bootstrap.example.internal'):
        assert host in hosts
    # The literal checkout form is what fails for such a user.
    bad = run([os.path.join(BIN, 'ansible-playbook'), '-i', 'inventories/prod', 'playbooks/site.yml', '--syntax-check'],
              project, env, check=False)
    assert bad.returncode != 0


@pytest.mark.parametrize('backend', ['iptables', 'nftables'])
def test_the_sandbox_play_tries_it_in_a_namespace_and_cleans_up(from_tarball, scratch, backend):
    """`ansible-playbook ipmasq.agent.sandbox` from the installed copy: the policy in a
    network namespace of the play's own, its listing shown, a second run unchanged,
    removed again, and the namespace and temporary folder gone afterwards. This
    machine's own nat table is read (never written) before and after."""
    path, env = from_tarball
    assert 'ansible-playbook ipmasq.agent.sandbox -e sandbox_backend=nftables' in '\n'.join(readme_commands())
    env = dict(env, ANSIBLE_LOCALHOST_WARNING='false', ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    root_nat = subprocess.run(['iptables-save', '-t', 'nat'], capture_output=True, text=True, check=False).stdout
    out = run([os.path.join(BIN, 'ansible-playbook'), 'ipmasq.agent.sandbox', '-e', 'sandbox_backend=%s' % backend],
              scratch, env).stdout
    if backend == 'iptables':
        assert 'Chain IP-MASQ-AGENT (1 references)' in out
        assert '192.168.0.0/16       /* ip-masq-agent: cluster-local traffic' in out
        # The line above the listing counts the rules it lists (not the module's actions).
        header = re.search(r'iptables -t nat -L IP-MASQ-AGENT \(IP-MASQ-AGENT: IPv4 (\d+) rules written \(was 0\), '
                           r'IPv6 not managed; backend iptables, asked for \(backend=iptables\)\)', out)
        listed = re.findall(r'^\s*"(?:RETURN|MASQUERADE)\s', out, re.M)
        assert header and int(header.group(1)) == len(listed), out
    else:
        assert 'table inet ip-masq-agent {' in out and 'masquerade' in out
        assert ('nft list table inet ip-masq-agent (IP-MASQ-AGENT: nftables table inet ip-masq-agent written; backend '
                'nftables, asked for (backend=nftables))') in out, out
    assert re.search(r'localhost\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0', out), out
    after_ns = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, check=True).stdout
    assert 'ipmasq-sandbox-' not in after_ns
    assert subprocess.run(['iptables-save', '-t', 'nat'], capture_output=True, text=True,
                          check=False).stdout.count('IP-MASQ-AGENT') == root_nat.count('IP-MASQ-AGENT')
