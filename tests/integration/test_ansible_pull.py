"""A fleet without a controller (docs/docsite/rst/ansible_pull.rst), as the
guide writes it: its repository files (ansible.cfg and the units included), its
install and commit commands, the node's bootstrap commands and the
``ExecStart=`` and ``WorkingDirectory=`` of the two services it installs are
read from the guide, so a wrong step there fails here. No pull may print
Ansible's "Could not match supplied host pattern" (ansible-pull's limit holds
names the inventory does not), nor any other warning.

The node is a network namespace of the test's own, named ``edge-paris-1`` (a
UTS namespace of its own, so that ansible-pull's limit, which is the node's
host names, picks the inventory's entry). The repository is a plain git
repository in tmp_path. The collection reaches it the guide's way: a tarball
built from this tree (``ansible-galaxy collection build``, as a release
tarball is built), named in the guide's requirements.yml, installed with the
guide's command into the repository's ``collections/`` folder and committed;
ANSIBLE_COLLECTIONS_PATH names an empty folder, so the play finds only that
copy. Only what keeps this machine untouched is added to the guide's
commands: the repository's path and the clone's instead of the URL and
/var/lib, the unit directory and the lock file under tmp_path, and ``-e`` with
the role's node paths under tmp_path (netlab.role_node_paths),
``ip_masq_resync_systemctl: false``, no package installs and the daemons' steps
skipped. The bootstrap's virtual environment is the test's own (.venv stands
for /opt/ansible: nothing is installed from the network), and its systemctl
steps are not run: ``systemctl start`` of a service runs that installed
service's command, in its working directory."""
import glob
import json
import os
import re
import shlex
import shutil
import subprocess

import yaml

from ipmasq_lab import netlab, policy_view
from ansible_collections.ipmasq.agent.plugins.module_utils._core.upstream_config.config import parse_config
from test_role_sandbox import service_command

ROOT = netlab.ROOT
GUIDE = os.path.join(ROOT, 'docs', 'docsite', 'rst', 'ansible_pull.rst')
HOST = 'edge-paris-1'
SITE_VARS = 'inventory/group_vars/edge_paris.yml'
GIT = ['git', '-c', 'user.name=Fleet', '-c', 'user.email=fleet@example.invalid', '-c', 'init.defaultBranch=main']
# The node's host name, in a UTS namespace of its own, then the command.
AS_NODE = ['unshare', '--uts', '/usr/bin/python3', '-c',
           'import os, socket, sys; socket.sethostname(sys.argv[1]); os.execv(sys.argv[2], sys.argv[2:])', HOST]
PULL_TIMEOUT = 300
URL = 'https://git.example.internal/fleet/ipmasq-fleet.git'


def guide_blocks():
    """``(language, text)`` of each ``.. code-block::`` of the guide."""
    with open(GUIDE, encoding='utf-8') as handle:
        lines = handle.read().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        match = re.match(r'\.\. code-block:: (\S+)$', line)
        if not match:
            continue
        body = []
        for nxt in lines[i + 2:]:
            if nxt and not nxt.startswith('   '):
                break
            body.append(nxt[3:])
        blocks.append((match.group(1), '\n'.join(body).strip('\n') + '\n'))
    return blocks


def guide_files():
    """The blocks whose first line names a file: ``{path: text}``."""
    files = {}
    for _lang, text in guide_blocks():
        first = text.splitlines()[0]
        if first.startswith('# ') and len(first.split()) == 2:
            files[first[2:]] = text
    return files


def guide_commands(program, prompt='$ '):
    """The console lines of the guide that run ``program`` at ``prompt`` (``$``
    on the workstation, ``#`` as root on a node), as argv lists."""
    return [argv for argv in prompt_commands(prompt) if argv[0] == program]


def prompt_commands(prompt):
    """Every console line of the guide at ``prompt``, in order, as argv lists."""
    out = []
    for lang, text in guide_blocks():
        if lang == 'console':
            out += [shlex.split(line[2:]) for line in text.splitlines() if line.startswith(prompt)]
    return out


class EdgeNode:
    """The node's places (the guide's paths) under tmp_path, and its runs."""

    def __init__(self, node, repo, tmp_path, host=HOST):
        self.node, self.tmp_path, self.host = node, tmp_path, host
        self.clone = str(tmp_path / 'var-lib-ipmasq-pull')
        self.units = str(tmp_path / 'etc-systemd-system')
        os.makedirs(self.units)
        self.places = {URL: str(repo), '/var/lib/ipmasq-pull': self.clone, '/etc/systemd/system': self.units,
                       '/run/ipmasq-pull.lock': str(tmp_path / 'ipmasq-pull.lock'),
                       '/opt/ansible/bin/': netlab.VENV_BIN + '/'}
        self.values = netlab.role_node_paths(tmp_path / 'node')
        self.values.update(ip_masq_resync_systemctl=False, ip_masq_install_packages=False,
                           ip_masq_docker='skip', ip_masq_flannel='skip', ip_masq_kubelet='skip')

    def mapped(self, arg):
        for guide, ours in sorted(self.places.items(), key=lambda item: -len(item[0])):
            arg = arg.replace(guide, ours)
        return arg

    def bootstrap(self):
        """The guide's commands for a fresh node, in order; the result of the first run."""
        first = None
        for argv in prompt_commands('# '):
            if argv[:3] == ['python3', '-m', 'venv']:
                assert argv[3:] == ['/opt/ansible'], argv
            elif argv[0] == '/opt/ansible/bin/pip':
                assert argv[1] == 'install' and [a.split('>=')[0] for a in argv[2:]] == ['ansible-core', 'netaddr'], argv
            elif argv[0] in ('git', 'install'):
                argv = [self.mapped(a) for a in argv]
                for i, arg in enumerate(argv):
                    if '*' in arg:
                        argv[i:i + 1] = sorted(glob.glob(arg))
                self.node.ns.exec(argv, timeout=120)
            elif argv[:2] == ['systemctl', 'start']:
                (unit,) = argv[2:]
                assert first is None, 'one first run'
                first = self.run_unit(unit)
            else:
                assert argv[0] == 'systemctl' and argv[1] in ('daemon-reload', 'enable'), argv
        assert first is not None, 'the bootstrap runs no first pull'
        return first

    def unit(self, name):
        """``(argv, cwd)`` of an installed service: ExecStart= and WorkingDirectory=, in the test's places."""
        with open(os.path.join(self.units, name), encoding='utf-8') as handle:
            lines = handle.read().splitlines()
        (start,) = [line[len('ExecStart='):] for line in lines if line.startswith('ExecStart=')]
        (cwd,) = [line[len('WorkingDirectory='):] for line in lines if line.startswith('WorkingDirectory=')]
        argv = shlex.split(start)
        assert argv[0] == '/usr/bin/flock' and argv[2] == '/opt/ansible/bin/ansible-pull', argv
        assert '-U' in argv and '-d' in argv and '-i' not in argv, argv
        return [self.mapped(a) for a in argv], self.mapped(cwd)

    def run_unit(self, name):
        """One run of the installed service, as the node: ``(rc, output, the play's JSON or None)``."""
        argv, cwd = self.unit(name)
        return self.pull(argv, cwd)

    def pull(self, argv, cwd):
        proc = subprocess.run(self.node.ns.argv(AS_NODE[:-1] + [self.host] + argv + ['-e', json.dumps(self.values)]),
                              cwd=cwd, capture_output=True, text=True, check=False, timeout=PULL_TIMEOUT,
                              env=env_for(self.tmp_path, self.node.backend))
        out = proc.stdout + proc.stderr
        # ansible-pull's --limit names the node's names: the guide's ansible.cfg keeps that quiet.
        assert 'Could not match supplied host pattern' not in out, out
        assert '[WARNING]' not in out, out
        plays = [line for line in proc.stdout.splitlines() if line.startswith('{"plays"')]
        return proc.returncode, out, (json.loads(plays[-1]) if plays else None)


def make_repo(tmp_path):
    """The guide's repository: its files, the collection installed and committed by its commands."""
    dist = tmp_path / 'dist'
    netlab.run([os.path.join(netlab.VENV_BIN, 'ansible-galaxy'), 'collection', 'build', '--output-path', str(dist), ROOT],
               timeout=120)
    tarball = os.listdir(dist)
    repo = tmp_path / 'ipmasq-fleet'
    for path, text in guide_files().items():
        if not path.startswith('/'):
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
    wanted = yaml.safe_load((repo / 'requirements.yml').read_text())['collections'][0]['name']
    # main's builds are pre-releases of the version the guide names (2.0.0-dev0 for 2.0.0: releasing.rst).
    assert [re.sub(r'-[0-9A-Za-z.]+(?=\.tar\.gz$)', '', name) for name in tarball] == [wanted], (
        'the guide names %s, the build made %s' % (wanted, tarball))
    shutil.copy(dist / tarball[0], repo / wanted)
    env = env_for(tmp_path)
    netlab.run(GIT + ['init', '-q', str(repo)])
    installs = guide_commands('ansible-galaxy')
    gits = guide_commands('git')
    assert installs and gits, 'no ansible-galaxy or git commands in the guide'
    for argv in installs:
        proc = subprocess.run([os.path.join(netlab.VENV_BIN, argv[0])] + argv[1:], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    for argv in gits:
        netlab.run(GIT[:1] + ['-C', str(repo)] + GIT[1:] + argv[1:], timeout=60)
    assert (repo / 'collections/ansible_collections/ipmasq/agent/MANIFEST.json').exists()
    tracked = netlab.run(['git', '-C', str(repo), 'ls-files'], timeout=60).stdout.split()
    assert 'collections/ansible_collections/ipmasq/agent/MANIFEST.json' in tracked and 'local.yml' in tracked
    assert 'ansible.cfg' in tracked and 'systemd/ipmasq-pull.service' in tracked, tracked
    return repo


def env_for(tmp_path, backend=None):
    """Ansible's environment: no collection but the repository's, a home of the test's own."""
    empty = tmp_path / 'no-collections'
    empty.mkdir(exist_ok=True)
    env = netlab.ansible_env({'ANSIBLE_COLLECTIONS_PATH': str(empty), 'ANSIBLE_HOME': str(tmp_path / 'home')},
                             backend=backend)
    # The guide's group_vars/all.yml names the interpreter.
    env.pop('ANSIBLE_PYTHON_INTERPRETER', None)
    return env


def node_task(play):
    tasks = [task for p in play['plays'] for task in p['tasks']
             if task['task']['name'].startswith('ipmasq.agent.ip_masq : Validate')]
    assert len(tasks) == 1, play
    return tasks[0]['hosts'][HOST]


def test_nodes_pull_the_guide_repository_converge_and_follow_its_commits(nft_node, tmp_path):
    repo = make_repo(tmp_path)
    edge = EdgeNode(nft_node, repo, tmp_path)
    node, values = nft_node, edge.values
    site = yaml.safe_load((repo / SITE_VARS).read_text())
    cidrs = site['ip_masq_nonmasquerade_cidrs']
    assert site['ip_masq_masq_link_local'] is False

    def converged(want_cidrs):
        assert policy_view.ours(node.rules(4)) == policy_view.ipt_expect(['169.254.0.0/16'] + want_cidrs)
        with open(values['ip_masq_config_path'], encoding='utf-8') as handle:
            assert parse_config(handle.read())[0]['nonmasquerade_cidrs'] == want_cidrs

    # The bootstrap clones, installs the repository's units and runs the full one first: it converges.
    # The play's hosts come from the clone's ansible.cfg (the services give no -i).
    rc, out, play = edge.bootstrap()
    assert rc == 0 and play, out
    assert node_task(play)['changed'] is True and play['stats'][HOST]['failures'] == 0, out
    converged(cidrs)
    assert sorted(os.listdir(values['ip_masq_unit_dir'])) == [
        'ip-masq-agent.path', 'ip-masq-agent.service', 'ip-masq-agent.timer']
    assert sorted(os.listdir(edge.units)) == sorted(os.listdir(repo / 'systemd'))
    on_commit, cwd = edge.unit('ipmasq-pull.service')
    daily, daily_cwd = edge.unit('ipmasq-pull-full.service')
    assert '--only-if-changed' in on_commit and '--only-if-changed' not in daily
    assert cwd == daily_cwd == edge.clone

    # The next pull finds no new commit and runs nothing.
    rc, out, play = edge.pull(on_commit, cwd)
    assert rc == 0 and play is None and 'Repository has not changed, quitting' in out, out
    converged(cidrs)

    # The daily run runs the play, which changes nothing.
    rc, out, play = edge.pull(daily, cwd)
    assert rc == 0 and play, out
    assert play['stats'][HOST]['changed'] == 0 and node_task(play)['changed'] is False, out
    converged(cidrs)

    # Between pulls, the resync (the rendered service's command, as its timer runs it) repairs drift.
    node.ipt('-F', 'IP-MASQ-AGENT')
    argv, env = service_command(values['ip_masq_unit_dir'])
    proc = node.ns.exec(argv, check=False, env=dict(node.backend.env(), **env), timeout=120)
    assert proc.returncode == 0, proc.stderr
    converged(cidrs)

    # A commit that changes a CIDR of the site: the next pull applies it.
    text = (repo / SITE_VARS).read_text()
    assert '10.30.0.0/16' in text
    (repo / SITE_VARS).write_text(text.replace('10.30.0.0/16', '10.40.0.0/16'))
    netlab.run(GIT[:1] + ['-C', str(repo)] + GIT[1:] + ['commit', '-q', '-am', 'edge_paris: VPC 10.40.0.0/16'])
    new = [c.replace('10.30.0.0/16', '10.40.0.0/16') for c in cidrs]
    rc, out, play = edge.pull(on_commit, cwd)
    assert rc == 0 and play and node_task(play)['changed'] is True, out
    converged(new)


def test_a_node_missing_from_the_inventory_fails_its_pull_and_changes_nothing(nft_node, tmp_path):
    """The guide says so: ansible-pull exits 1, with ansible-playbook's message."""
    repo = make_repo(tmp_path)
    stranger = EdgeNode(nft_node, repo, tmp_path, host='edge-nowhere-1')
    rc, out, _play = stranger.bootstrap()
    assert rc == 1, out
    assert 'Specified inventory, host pattern and/or --limit leaves us with no hosts to target' in out
    assert policy_view.ours(nft_node.rules(4)) == []
    assert not os.path.exists(stranger.values['ip_masq_config_path'])


def test_the_guide_pairs_a_private_key_with_an_ssh_url():
    """``--private-key`` is an SSH key: the guide gives it with an SSH URL, never an https one."""
    with open(GUIDE, encoding='utf-8') as handle:
        paragraphs = handle.read().split('\n\n')
    keyed = [p for p in paragraphs if '--private-key' in p]
    assert keyed
    for paragraph in keyed:
        assert 'git@' in paragraph or 'ssh://' in paragraph, paragraph
    # No command of the guide gives a key with an https URL.
    for _lang, text in guide_blocks():
        for line in text.splitlines():
            assert not ('--private-key' in line and 'https://' in line), line
