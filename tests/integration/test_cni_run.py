"""The CNI networks' editor at its edges (cni_ip_masq, and the role's CNI
step): ``absent`` after the network's owner edited the file, a container
torn down between the read and the write of the rules, the emptied
``CNI-<hash>`` chains of containers that are gone, the words of report and
check mode, a full backup store, and what the first run tells the user.

Real plugins where a network runs: Debian's containernetworking-plugins
(bridge, host-local) run with CNI_COMMAND=ADD/DEL inside a node namespace
the test made (lab: ipmasq_lab/cni.py); every file below a temporary root
(the module's ``root``, the role's node paths).  Needs root; nothing happens
in the root network namespace.
"""
import json
import os
import shutil

import pytest

from ipmasq_lab import cni, netlab

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)'),
    pytest.mark.skipif(not cni.installed(), reason='needs Debian\'s %s (scripts/bootstrap.sh)' % cni.PACKAGE),
]

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, 'playbooks', 'cni_ip_masq.yml')
ROLE_PLAYBOOK = os.path.join(HERE, 'playbooks', 'role_sandbox.yml')
CONF_DIR = '/etc/cni/net.d'
STORE = '/var/lib/ipmasq-agent/backup'
NET = 'imqnet'
CONF = CONF_DIR + '/10-imqnet.conflist'


def run(node, backend, margs, steps=('apply1',), env_extra=None):
    """The steps of playbooks/cni_ip_masq.yml; ``warnings`` of each: the module's (not Ansible's about ``args``)."""
    _rc, tasks = netlab.playbook(node, PLAYBOOK, extra_vars={'margs': margs, 'steps': list(steps)}, backend=backend,
                                 env_extra=env_extra)
    res = {name.replace('Step ', ''): r for name, r in tasks if not r.get('skipped')}
    assert res, 'no step ran'
    for r in res.values():
        r['warnings'] = [w for w in r.get('warnings') or [] if not w.startswith('Using a template for task args')]
    return res


def masq_lines(backend, node, family=4):
    """The nat rules and chains the bridge plugin wrote (commented ``name: "..." id: "..."``, not portmap's)."""
    return [line for line in netlab.nat_rules(backend.save(node, family)) if 'name: \\"' in line]


def chains(backend, node, family=4):
    return [line.split()[0][1:] for line in netlab.nat_rules(backend.save(node, family))
            if line.startswith(':CNI-')]


@pytest.fixture
def lab(tree):
    """A node and a pod namespace, nft iptables, the network imqnet (bridge, IPv4) in the tree's conf dir."""
    conf_dir = tree.path(CONF_DIR)
    os.makedirs(conf_dir)
    backend = netlab.Backend('nft')
    node, pod = netlab.Netns('node'), netlab.Netns('pod')
    net = cni.Network(node, conf_dir, NET, backend=backend, subnet6=None)
    try:
        yield node, pod, backend, net
    finally:
        node.delete()
        pod.delete()
        net.remove()
        backend.remove()


# --------------------------------------------------------------------------
# absent after the owner edited the file
# --------------------------------------------------------------------------

def test_absent_after_the_owner_edited_the_file_puts_our_key_back(tree, lab):
    """The owner adds an MTU after our run: absent sets ipMasq true again
    and keeps the MTU; the next ADD masquerades again (the real plugin).
    Without the owner's edit, absent restores byte for byte."""
    node, pod, backend, net = lab
    original = open(net.path).read()
    res = run(node, backend, {'root': tree.root})['apply1']
    assert not res.get('failed') and res['edited'] == [CONF], res
    edited = open(net.path).read()
    assert edited == original.replace('"ipMasq": true', '"ipMasq": false')
    owners = edited.replace('"isGateway": true,', '"isGateway": true,\n      "mtu": 1400,')
    assert owners != edited
    with open(net.path, 'w') as handle:
        handle.write(owners)

    res = run(node, backend, {'root': tree.root, 'state': 'absent'}, ['check1', 'apply1', 'apply2'])
    assert res['check1']['changed'] is True and res['check1']['warnings'] == [], res['check1']
    assert res['apply1']['changed'] is True and res['apply1']['warnings'] == [], res['apply1']
    assert res['apply2']['changed'] is False, res['apply2']
    assert open(net.path).read() == owners.replace('"ipMasq": false', '"ipMasq": true')
    assert json.loads(open(net.path).read())['plugins'][0]['mtu'] == 1400
    net.add(pod, 'c1')
    assert len(masq_lines(backend, node)) == 3, 'the restored network does not masquerade'
    net.delete(pod, 'c1')

    # Nothing else changed: byte for byte.
    restored = open(net.path).read()
    run(node, backend, {'root': tree.root})
    res = run(node, backend, {'root': tree.root, 'state': 'absent'})['apply1']
    assert res['changed'] is True and res['warnings'] == [], res
    assert open(net.path).read() == restored


def test_absent_with_the_backup_store_gone_warns_naming_the_file(tree, lab):
    """The backup store removed after our run: absent cannot tell whether
    the false is ours; it leaves it and warns, naming the file."""
    node, _pod, backend, net = lab
    restored = open(net.path).read()
    run(node, backend, {'root': tree.root})
    shutil.rmtree(tree.path(STORE))
    res = run(node, backend, {'root': tree.root, 'state': 'absent'})['apply1']
    assert res['changed'] is False
    assert len(res['warnings']) == 1 and res['warnings'][0].startswith(CONF + ': "ipMasq" is false'), res['warnings']
    assert 'set it to true yourself' in res['warnings'][0]
    assert open(net.path).read() == restored.replace('"ipMasq": true', '"ipMasq": false')


# --------------------------------------------------------------------------
# a full backup store
# --------------------------------------------------------------------------

def test_a_full_backup_store_names_the_backup_not_the_network_file(tree, lab):
    """The backup store on a full tmpfs (mounted in a mount namespace of the
    test's own: it never reaches this machine's mounts): the error names the
    store's copy, whose disk is full, and not the network file; nothing changed."""
    node, _pod, backend, net = lab
    store = tree.path(STORE)
    os.makedirs(store)
    original = open(net.path).read()
    env = netlab.ansible_env(None, backend)
    argv = [os.path.join(netlab.VENV_BIN, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local', PLAYBOOK,
            '-e', json.dumps({'margs': {'root': tree.root}, 'steps': ['apply1']})]
    # Mount a 64 KiB tmpfs at the store, fill it, run the module: all in a mount namespace that ends with it.
    fill = ('import os\nf = open(os.path.join(%r, "ballast"), "wb")\ntry:\n    f.write(bytes(1 << 20))\n'
            'except OSError:\n    pass\nf.close()\n' % store)
    script = ('set -e; mount -t tmpfs -o size=64k,mode=0700 imq-test-store "$1"; shift; '
              '/usr/bin/python3 -c "$1"; shift; exec "$@"')
    proc = node.exec(['unshare', '--mount', '--propagation', 'private', '/bin/sh', '-c', script, 'sh', store, fill]
                     + argv, check=False, env=env, timeout=300)
    data = json.loads(proc.stdout[proc.stdout.index('{'):])
    (res,) = [t['hosts']['localhost'] for p in data['plays'] for t in p['tasks'] if t['task']['name'] == 'Step apply1']
    assert res.get('failed'), res
    stored = os.path.join(store, CONF.lstrip('/'))
    assert res['msg'].startswith('cannot keep the original of %s: cannot write %s' % (CONF, os.path.dirname(stored))), \
        res['msg']
    assert 'No space left on device' in res['msg'] and res['msg'].endswith('Nothing was changed.'), res['msg']
    assert open(net.path).read() == original
    assert os.listdir(store) == [], 'the tmpfs reached this machine\'s mounts'


# --------------------------------------------------------------------------
# report mode, and what the first run of the role tells
# --------------------------------------------------------------------------

def role_values(tree, **more):
    values = netlab.role_node_paths(tree.path('/node'))
    values.update(ip_masq_cni_conf_dirs=[tree.path(CONF_DIR)], ip_masq_install_packages=False,
                  ip_masq_resync_systemctl=False, ip_masq_docker='skip', ip_masq_flannel='skip',
                  ip_masq_kubelet='skip', ip_masq_audit='skip')
    values.update(more)
    return values


def role_text(node, backend, values, args=()):
    """The role run as a user sees it (ansible-playbook's default output): ``(rc, stdout)``."""
    env = netlab.ansible_env({'ANSIBLE_STDOUT_CALLBACK': 'default'}, backend)
    argv = [os.path.join(netlab.VENV_BIN, 'ansible-playbook'), '-i', 'localhost,', '-c', 'local', ROLE_PLAYBOOK,
            '-e', json.dumps(netlab.HOST_SAFE_VARS), '-e', json.dumps(values)] + list(args)
    proc = node.exec(argv, check=False, env=env, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_report_mode_speaks_in_the_conditional(tree, lab):
    """ip_masq_cni: report with a running container: the role's warning says
    what would be done ("would be set to false", "Would remove"), never that
    it was; the file and the rules are as they were."""
    node, pod, backend, net = lab
    net.add(pod, 'c1')
    original, rules = open(net.path).read(), masq_lines(backend, node)
    _rc, tasks = netlab.playbook(node, ROLE_PLAYBOOK, extra_vars=role_values(tree, ip_masq_cni='report'),
                                 backend=backend)
    assert not [name for name, r in tasks if r.get('failed')], [(name, r.get('msg')) for name, r in tasks]
    warnings = [w for _name, r in tasks for w in r.get('warnings') or [] if 'cni' in w]
    assert len(warnings) == 1, warnings
    assert '"ipMasq": true would be set to false in bridge (network imqnet)' in warnings[0], warnings[0]
    assert 'Would remove the masquerade rules' in warnings[0], warnings[0]
    assert ' set to false in' not in warnings[0].replace('would be set to false in', ''), warnings[0]
    assert 'Removed' not in warnings[0], warnings[0]
    assert open(net.path).read() == original and masq_lines(backend, node) == rules
    net.delete(pod, 'c1')


def test_the_first_role_run_names_each_network_file_it_switches_off(tree, lab):
    """Two network files: --check --diff shows a diff of each; the real
    run warns, naming each file (ansible-playbook's default output, as a
    user sees it); a second run says nothing of them."""
    node, _pod, backend, net = lab
    second = tree.path(CONF_DIR + '/20-single.conf')
    with open(second, 'w') as handle:
        handle.write('{"cniVersion": "0.4.0", "name": "single", "type": "ptp", "ipMasq": true,\n "ipam": {"type": "host-local", "subnet": "10.99.0.0/24"}}\n')
    values = role_values(tree)
    rc, out = role_text(node, backend, values, ['--check', '--diff'])
    assert rc == 0, out
    first, second_path = tree.path(CONF), tree.path(CONF_DIR + '/20-single.conf')
    for path in (first, second_path):
        assert '--- before: %s' % path in out and '+++ after: %s' % path in out, out
    assert '-      "ipMasq": true,' in out and '+      "ipMasq": false,' in out, out
    assert open(second).read().count('"ipMasq": true') == 1

    rc, out = role_text(node, backend, values)
    assert rc == 0, out
    flat = ' '.join(out.split())
    for path, name in ((first, 'imqnet'), (second_path, 'single')):
        assert '[WARNING]: %s: "ipMasq": true set to false in' % path in flat, out
        assert '(network %s): the plugin no longer masquerades its containers' % name in flat, out
    rc, out = role_text(node, backend, values)
    assert rc == 0 and 'ipMasq' not in out, out


# --------------------------------------------------------------------------
# a container torn down between the read and the write
# --------------------------------------------------------------------------

def raced_run(tree, lab, hooks):
    """Two containers of imqnet; cni_ip_masq run with ``hooks`` (per
    iptables-restore call: the real bridge DEL of a container, with the
    runtime's cached configuration, ipMasq still true) before the restore."""
    node, pod, backend, net = lab
    pod2 = netlab.Netns('pod2')
    cached = tree.path('/var/lib/cni/cache-imqnet.conflist')
    os.makedirs(os.path.dirname(cached))
    shutil.copy(net.path, cached)
    net.add(pod, 'c1')
    net.add(pod2, 'c2')
    assert len(masq_lines(backend, node)) == 6
    argv = {'c1': net.delete_argv(pod, 'c1', cached), 'c2': net.delete_argv(pod2, 'c2', cached)}
    with cni.before_restore([argv[c] if c else None for c in hooks]) as shim:
        env = {'PATH': shim + os.pathsep + backend.env()['PATH']}
        res = run(node, backend, {'root': tree.root}, env_extra=env)['apply1']
        calls = open(os.path.join(shim, 'calls')).read().splitlines()
    return res, calls, pod2


def test_a_container_deleted_between_read_and_write_is_read_again(tree, lab):
    """The real bridge DEL of c1 between the run's read and its
    iptables-restore: the restore fails (c1's rules are gone), the run
    reads again once and removes c2's; nothing fails, and a rerun changes
    nothing."""
    node, _pod, backend, net = lab
    res, calls, pod2 = raced_run(tree, lab, ['c1'])
    try:
        assert not res.get('failed'), res['msg']
        assert len(calls) == 2, calls
        assert res['changed'] is True and res['edited'] == [CONF], res
        assert len(res['removed_rules']) == 3 and all('id: \\"c2\\"' in r for r in res['removed_rules']), \
            res['removed_rules']
        assert masq_lines(backend, node) == []
        again = run(node, backend, {'root': tree.root})['apply1']
        assert again['changed'] is False and again['msg'] == 'cni: no change', again
    finally:
        pod2.delete()


def test_a_second_race_fails_in_one_line_saying_what_the_run_changed(tree, lab):
    """A DEL before each of the two tries: the run fails with one line that
    says it changed the network file (``changed``, ``edited``), not the raw
    iptables-restore text; the rerun converges."""
    node, pod, backend, net = lab
    res, calls, pod2 = raced_run(tree, lab, ['c1', 'c2'])
    try:
        assert len(calls) == 2, calls
        assert res.get('failed') is True and res['changed'] is True, res
        assert '\n' not in res['msg'], res['msg']
        assert res['edited'] == [CONF] and CONF in res['msg'] and 'set to false' in res['msg'], res['msg']
        assert res['msg'].endswith('Run again to finish.'), res['msg']
        net.add(pod, 'c3')
        net.delete(pod, 'c3')
        again = run(node, backend, {'root': tree.root})['apply1']
        assert not again.get('failed') and again['edited'] == [], again
        assert masq_lines(backend, node) == []
    finally:
        pod2.delete()


# --------------------------------------------------------------------------
# the emptied CNI-<hash> chains of containers that are gone
# --------------------------------------------------------------------------

def cache(tree, container, present=True):
    """libcni's cache entry of ``container`` (as containerd, CRI-O, podman keep it) below the tree's root."""
    path = tree.path('/var/lib/cni/results/%s-%s-eth0' % (NET, container))
    if present:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as handle:
            handle.write('{"kind": "cniCacheV1"}\n')
    elif os.path.exists(path):
        os.unlink(path)


def test_emptied_chains_go_once_their_containers_are_gone(tree, lab):
    """Two containers: our run empties both CNI-<hash> chains.  c2 is then
    torn down with the edited file (ipMasq false: the plugin leaves the
    chain) and leaves the runtime's cache: the next run deletes its chain,
    and keeps c1's (still in the cache).  c1's DEL with the runtime's cached
    configuration (ipMasq true) still succeeds on the emptied chain; a run
    after it changes nothing and leaves no record."""
    node, pod, backend, net = lab
    pod2 = netlab.Netns('pod2')
    cached = tree.path('/var/lib/cni/cache-imqnet.conflist')
    os.makedirs(os.path.dirname(cached))
    shutil.copy(net.path, cached)
    try:
        net.add(pod, 'c1')
        cache(tree, 'c1')
        net.add(pod2, 'c2')
        cache(tree, 'c2')
        both = chains(backend, node)
        assert len(both) == 2, both
        res = run(node, backend, {'root': tree.root})['apply1']
        assert not res.get('failed') and len(res['removed_rules']) == 6, res
        assert masq_lines(backend, node) == [] and chains(backend, node) == both

        net.delete(pod2, 'c2')          # with the edited file: the plugin leaves the empty chain
        cache(tree, 'c2', present=False)
        assert chains(backend, node) == both
        res = run(node, backend, {'root': tree.root}, ['check1', 'apply1', 'apply2'])
        for step in ('check1', 'apply1'):
            assert res[step]['changed'] is True, res[step]
            assert [m for m in res[step]['messages'] if 'emptied CNI-* chains of containers that are gone' in m], \
                res[step]['messages']
        assert res['apply2']['changed'] is False, res['apply2']
        (left,) = chains(backend, node)
        c1_chain = [c for c in both if c == left]
        assert c1_chain, (both, left)

        # c1's DEL with the runtime's cached configuration (ipMasq true) succeeds on the emptied chain.
        cached_net = cni.Network.load(node, cached, backend=backend)
        cached_net.delete(pod, 'c1')
        cache(tree, 'c1', present=False)
        assert chains(backend, node) == []
        res = run(node, backend, {'root': tree.root})['apply1']
        assert res['changed'] is False, res
        assert not os.path.exists(tree.path(STORE + '/cni-emptied-chains.json'))
    finally:
        pod2.delete()
