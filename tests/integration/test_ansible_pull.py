"""A fleet without a controller (docs/docsite/rst/ansible_pull.rst), as the
guide writes it: its repository files, its install and commit commands and
the ``ExecStart=`` commands of its two services are read from the guide, so a
wrong step there fails here.

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
/var/lib, the lock file under tmp_path, and ``-e`` with the role's node paths
under tmp_path (netlab.role_node_paths), ``ip_masq_resync_systemctl: false``,
no package installs and the daemons' steps skipped."""
import json
import os
import re
import shlex
import shutil
import subprocess

import yaml

from ipmasq_lab import netlab, policy_view
from ansible_collections.ipmasq.agent.plugins.module_utils._core.config import parse_config
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


def guide_commands(program):
    """The console lines of the guide that run ``program``, as argv lists."""
    out = []
    for lang, text in guide_blocks():
        if lang == 'console':
            out += [shlex.split(line[2:]) for line in text.splitlines()
                    if line.startswith(('$ ', '# ')) and line[2:].startswith(program + ' ')]
    return out


def exec_start(unit, repo, clone, lock):
    """The unit's ExecStart= from the guide, with the test's repository, clone and lock."""
    text = guide_files()['/etc/systemd/system/' + unit]
    argv = shlex.split([line for line in text.splitlines() if line.startswith('ExecStart=')][0][len('ExecStart='):])
    assert argv[0] == '/usr/bin/flock' and argv[2].endswith('/ansible-pull'), argv
    argv[1] = lock
    argv[2] = os.path.join(netlab.VENV_BIN, 'ansible-pull')
    argv[argv.index('-U') + 1] = repo
    argv[argv.index('-d') + 1] = clone
    return argv


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
    assert tarball == [wanted], 'the guide names %s, the build made %s' % (wanted, tarball)
    shutil.copy(dist / wanted, repo / wanted)
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


def pull(node, argv, values, tmp_path):
    """One ansible-pull as the node: ``(rc, output, the play's JSON or None)``."""
    proc = node.ns.exec(AS_NODE + argv + ['-e', json.dumps(values)], check=False, timeout=PULL_TIMEOUT,
                        env=env_for(tmp_path, node.backend))
    out = proc.stdout + proc.stderr
    plays = [line for line in proc.stdout.splitlines() if line.startswith('{"plays"')]
    return proc.returncode, out, (json.loads(plays[-1]) if plays else None)


def node_task(play):
    tasks = [task for p in play['plays'] for task in p['tasks']
             if task['task']['name'].startswith('ipmasq.agent.ip_masq : Validate')]
    assert len(tasks) == 1, play
    return tasks[0]['hosts'][HOST]


def test_nodes_pull_the_guide_repository_converge_and_follow_its_commits(nft_node, tmp_path):
    node = nft_node
    repo = make_repo(tmp_path)
    clone, lock = str(tmp_path / 'var-lib-ipmasq-pull'), str(tmp_path / 'ipmasq-pull.lock')
    on_commit = exec_start('ipmasq-pull.service', str(repo), clone, lock)
    daily = exec_start('ipmasq-pull-full.service', str(repo), clone, lock)
    assert '--only-if-changed' in on_commit and '--only-if-changed' not in daily
    values = netlab.role_node_paths(tmp_path / 'node')
    values.update(ip_masq_resync_systemctl=False, ip_masq_install_packages=False,
                  ip_masq_docker='skip', ip_masq_flannel='skip', ip_masq_kubelet='skip')
    site = yaml.safe_load((repo / SITE_VARS).read_text())
    cidrs = site['ip_masq_nonmasquerade_cidrs']
    assert site['ip_masq_masq_link_local'] is False

    def converged(want_cidrs):
        assert policy_view.ours(node.rules(4)) == policy_view.ipt_expect(['169.254.0.0/16'] + want_cidrs)
        with open(values['ip_masq_config_path'], encoding='utf-8') as handle:
            assert parse_config(handle.read())[0]['nonmasquerade_cidrs'] == want_cidrs

    # The first pull clones and runs the site play for this node: it converges.
    rc, out, play = pull(node, on_commit, values, tmp_path)
    assert rc == 0 and play, out
    assert node_task(play)['changed'] is True and play['stats'][HOST]['failures'] == 0, out
    converged(cidrs)
    assert sorted(os.listdir(values['ip_masq_unit_dir'])) == [
        'ip-masq-agent.path', 'ip-masq-agent.service', 'ip-masq-agent.timer']

    # The next pull finds no new commit and runs nothing.
    rc, out, play = pull(node, on_commit, values, tmp_path)
    assert rc == 0 and play is None and 'Repository has not changed, quitting' in out, out
    converged(cidrs)

    # The daily run runs the play, which changes nothing.
    rc, out, play = pull(node, daily, values, tmp_path)
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
    rc, out, play = pull(node, on_commit, values, tmp_path)
    assert rc == 0 and play and node_task(play)['changed'] is True, out
    converged(new)


def test_a_node_missing_from_the_inventory_fails_its_pull_and_changes_nothing(nft_node, tmp_path):
    """The guide says so: ansible-pull exits 1, with ansible-playbook's message."""
    node = nft_node
    repo = make_repo(tmp_path)
    argv = exec_start('ipmasq-pull.service', str(repo), str(tmp_path / 'clone'), str(tmp_path / 'lock'))
    values = netlab.role_node_paths(tmp_path / 'node')
    values.update(ip_masq_resync_systemctl=False, ip_masq_install_packages=False,
                  ip_masq_docker='skip', ip_masq_flannel='skip', ip_masq_kubelet='skip')
    stranger = AS_NODE[:-1] + ['edge-nowhere-1']
    proc = node.ns.exec(stranger + argv + ['-e', json.dumps(values)], check=False, timeout=PULL_TIMEOUT,
                        env=env_for(tmp_path, node.backend))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert 'Specified inventory, host pattern and/or --limit leaves us with no hosts to target' in out
    assert policy_view.ours(node.rules(4)) == []
    assert not os.path.exists(values['ip_masq_config_path'])
