"""The modules that switch off the other sources of SNAT (docker_ip_masq,
flannel_ip_masq, kubelet_nonmasq), run through ansible-playbook as a user
would, against realistic files as real installs have them.

Every file lives in a temporary tree that the modules see through their
``root`` option (as ``systemctl --root``); the host's /etc, /run and systemd
are never touched.  Every run happens inside a network namespace of its own,
so the rule removal works on real iptables (both backends) there and nowhere
else.  The Docker CLI and kubelet are small stand-in scripts that print what
the real ones print; Docker itself is not needed."""
import json
import os
import stat

import pytest

from ipmasq_lab import netlab

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, 'playbooks', 'other_snat.yml')
FOUR = ['check1', 'apply1', 'check2', 'apply2']


def run(node, module, margs, steps=('apply1',)):
    extra = {'module': module, 'margs': margs, 'steps': list(steps)}
    rc, tasks = netlab.playbook(node.ns, PLAYBOOK, extra_vars=extra, backend=node.backend)
    res = {name.replace('Step ', ''): r for name, r in tasks if not r.get('skipped')}
    assert res, 'no step ran (rc=%d)' % rc
    return res


def four_steps(node, tree, module, margs):
    """check / apply / check / apply: changed, changed, not, not; check mode writes nothing."""
    before = tree.snapshot(), tree.all_files()
    res = run(node, module, margs, ['check1'])
    assert not res['check1'].get('failed'), res['check1'].get('msg')
    assert res['check1']['changed'] is True, res['check1']
    assert (tree.snapshot(), tree.all_files()) == before, 'check mode wrote something'
    res.update(run(node, module, margs, ['apply1', 'check2', 'apply2']))
    for step, want in zip(FOUR, (True, True, False, False)):
        assert not res[step].get('failed'), (step, res[step].get('msg'))
        assert res[step]['changed'] is want, (step, res[step].get('messages'), res[step].get('edited'))
    assert res['check1']['edited'] == res['apply1']['edited']
    assert res['apply2']['edited'] == [] and res['apply2']['backups'] == []
    # One line each: what the run would do (check mode), what it did, then no change.
    msgs = [res[step]['msg'] for step in FOUR]
    assert not any('\n' in m for m in msgs), msgs
    assert msgs[0].startswith(module + ': would ') and msgs[1].startswith(module + ': '), msgs
    assert 'would' not in msgs[1] and msgs[2] == msgs[3] == module + ': no change', msgs
    for path in res['apply1']['edited'][:3]:
        assert path in msgs[0] and path in msgs[1], (path, msgs)
    return res


def absent_restores(node, tree, module, margs, originals):
    """state=absent in four steps puts back every original byte for byte (and the mode)."""
    margs = dict(margs, state='absent')
    res = four_steps(node, tree, module, margs)
    now = tree.snapshot()
    for path, data in originals.items():
        assert now.get(path) == data, path
    assert set(now) == set(originals), set(now) ^ set(originals)
    return res


def fake_bin(tree, name, script):
    tree.put('/bin/' + name, script, mode=0o755)
    return tree.path('/bin/' + name)


# ==========================================================================
# Docker
# ==========================================================================

DAEMON_JSON = '''{
  "registry-mirrors": ["https://mirror.gcr.io", "https://registry.example.org"],
  "log-driver": "json-file",
  "log-opts": {
    "max-size": "100m",
    "max-file": "3"
  },
  "storage-driver": "overlay2",
  "bip": "172.18.0.1/16",
  "exec-opts": ["native.cgroupdriver=systemd"]
}
'''

# docker-ce's unit as packaged (Debian/Ubuntu/EL).
DOCKER_CE_UNIT = '''[Unit]
Description=Docker Application Container Engine
Documentation=https://docs.docker.com
After=network-online.target docker.socket firewalld.service containerd.service time-set.target
Wants=network-online.target containerd.service
Requires=docker.socket

[Service]
Type=notify
# the default is not to use systemd for cgroups because the delegate issues still
# exists and systemd currently does not support the cgroup feature set required
# for containers run by docker
ExecStart=/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock
ExecReload=/bin/kill -s HUP $MAINPID
TimeoutStartSec=0
RestartSec=2
Restart=always

[Install]
WantedBy=multi-user.target
'''

# Debian's docker.io unit reads DOCKER_OPTS from /etc/default/docker.
DOCKER_IO_UNIT = '''[Unit]
Description=Docker Application Container Engine
Documentation=https://docs.docker.com
After=network-online.target docker.socket firewalld.service containerd.service
Wants=network-online.target containerd.service
Requires=docker.socket

[Service]
Type=notify
EnvironmentFile=-/etc/default/docker
ExecStart=/usr/sbin/dockerd -H fd:// $DOCKER_OPTS
ExecReload=/bin/kill -s HUP $MAINPID
LimitNOFILE=1048576
Restart=always

[Install]
WantedBy=multi-user.target
'''

ETC_DEFAULT_DOCKER = '''# Docker Upstart and SysVinit configuration file

#
# THIS FILE DOES NOT APPLY TO SYSTEMD
#
#   Please see the documentation for "systemd drop-ins":
#   https://docs.docker.com/engine/admin/systemd/
#

# Customize location of Docker binary (especially for development testing).
#DOCKERD="/usr/local/bin/dockerd"

# Use DOCKER_OPTS to modify the daemon startup options.
#DOCKER_OPTS="--dns 8.8.8.8 --dns 8.8.4.4"
DOCKER_OPTS="--ip-masq=true --bip=172.18.0.1/16 --log-level=warn"

# If you need Docker to use an HTTP proxy, it can also be specified here.
#export http_proxy="http://127.0.0.1:3128/"
'''

# CentOS 7 docker (1.13) with flannel's drop-in: options from files, some generated at run time.
DOCKER_RHEL_UNIT = '''[Unit]
Description=Docker Application Container Engine
Documentation=http://docs.docker.com
After=network.target rhel-push-plugin.socket registries.service
Wants=docker-storage-setup.service
Requires=docker-cleanup.timer

[Service]
Type=notify
NotifyAccess=main
EnvironmentFile=-/run/containers/registries.conf
EnvironmentFile=-/etc/sysconfig/docker
EnvironmentFile=-/etc/sysconfig/docker-storage
EnvironmentFile=-/etc/sysconfig/docker-network
Environment=GOTRACEBACK=crash
Environment=DOCKER_HTTP_HOST_COMPAT=1
Environment=PATH=/usr/libexec/docker:/usr/bin:/usr/sbin
ExecStart=/usr/bin/dockerd-current \\
          --add-runtime docker-runc=/usr/libexec/docker/docker-runc-current \\
          --default-runtime=docker-runc \\
          --exec-opt native.cgroupdriver=systemd \\
          --userland-proxy-path=/usr/libexec/docker/docker-proxy-current \\
          --init-path=/usr/libexec/docker/docker-init-current \\
          --seccomp-profile=/etc/docker/seccomp.json \\
          $OPTIONS \\
          $DOCKER_STORAGE_OPTIONS \\
          $DOCKER_NETWORK_OPTIONS \\
          $ADD_REGISTRY \\
          $BLOCK_REGISTRY \\
          $INSECURE_REGISTRY \\
          $REGISTRIES
ExecReload=/bin/kill -s HUP $MAINPID
LimitNOFILE=1048576
Restart=on-abnormal

[Install]
WantedBy=multi-user.target
'''

SYSCONFIG_DOCKER = '''# /etc/sysconfig/docker

# Modify these options if you want to change the way the docker daemon runs
OPTIONS='--selinux-enabled --log-driver=journald --signature-verification=false'
if [ -z "${DOCKER_CERT_PATH}" ]; then
    DOCKER_CERT_PATH=/etc/docker
fi
'''

FLANNEL_DOCKER_DROPIN = '''[Service]
EnvironmentFile=-/run/flannel/docker
'''


def docker_margs(tree, **kw):
    margs = {'root': tree.root, 'docker_bin': tree.path('/bin/no-docker-cli')}
    margs.update(kw)
    return margs


def test_docker_daemon_json_merge_keeps_every_other_byte(nft_node, tree):
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', DAEMON_JSON, mode=0o600)
    originals = tree.snapshot()
    res = four_steps(nft_node, tree, 'docker', docker_margs(tree))
    after = tree.read('/etc/docker/daemon.json')
    assert after == DAEMON_JSON.replace('"exec-opts": ["native.cgroupdriver=systemd"]\n',
                                        '"exec-opts": ["native.cgroupdriver=systemd"],\n  "ip-masq": false\n')
    data = json.loads(after)
    assert data['ip-masq'] is False
    assert list(data) == ['registry-mirrors', 'log-driver', 'log-opts', 'storage-driver', 'bip', 'exec-opts', 'ip-masq']
    assert stat.S_IMODE(os.stat(tree.path('/etc/docker/daemon.json')).st_mode) == 0o600
    a1 = res['apply1']
    assert a1['installed'] is True and a1['where'] == 'daemon.json'
    assert a1['edited'] == ['/etc/docker/daemon.json'] and a1['restart_required'] is True
    assert a1['diff'][0]['before'] == DAEMON_JSON and a1['diff'][0]['after'] == after
    # A timestamped copy next to the file, and the original in the backup store.
    assert len(a1['backups']) == 1 and a1['backups'][0].startswith('/etc/docker/daemon.json.')
    assert tree.read(a1['backups'][0]) == DAEMON_JSON
    assert tree.read('/var/lib/ipmasq-agent/backup/etc/docker/daemon.json') == DAEMON_JSON
    absent_restores(nft_node, tree, 'docker', docker_margs(tree), originals)
    assert not os.path.exists(tree.path('/var/lib/ipmasq-agent/backup/etc/docker/daemon.json'))


@pytest.mark.parametrize('text,fragment', [
    ('{\n  // mirrors for the office\n  "registry-mirrors": ["https://mirror.gcr.io"]\n}\n', 'line 2, column 3'),
    ('{\n  "debug": true,\n}\n', 'line 3, column 1'),
    ('["not", "an", "object"]\n', 'one JSON object'),
    ('{"a": 1} {"b": 2}\n', 'Extra data'),
])
def test_docker_malformed_daemon_json_is_an_error_and_changes_nothing(nft_node, tree, text, fragment):
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', text)
    before = tree.snapshot()
    res = run(nft_node, 'docker', docker_margs(tree), ['apply1'])['apply1']
    assert res.get('failed')
    assert '/etc/docker/daemon.json' in res['msg'] and fragment in res['msg'], res['msg']
    assert 'Nothing was changed' in res['msg']
    assert tree.snapshot() == before
    assert not os.path.exists(tree.path('/var/lib/ipmasq-agent'))
    assert [p for p in tree.all_files() if p.endswith('~')] == []


@pytest.mark.parametrize('text', ['', '\n', '   \n\n'])
def test_docker_empty_daemon_json_counts_as_empty_object(nft_node, tree, text):
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', text)
    originals = tree.snapshot()
    four_steps(nft_node, tree, 'docker', docker_margs(tree))
    assert json.loads(tree.read('/etc/docker/daemon.json')) == {'ip-masq': False}
    absent_restores(nft_node, tree, 'docker', docker_margs(tree), originals)


def test_docker_missing_daemon_json_is_created_and_absent_deletes_it(nft_node, tree):
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    originals = tree.snapshot()
    four_steps(nft_node, tree, 'docker', docker_margs(tree))
    assert tree.read('/etc/docker/daemon.json') == '{\n    "ip-masq": false\n}\n'
    assert stat.S_IMODE(os.stat(tree.path('/etc/docker/daemon.json')).st_mode) == 0o644
    absent_restores(nft_node, tree, 'docker', docker_margs(tree), originals)
    assert tree.read('/etc/docker/daemon.json') is None


def test_docker_ip_masq_true_becomes_false_in_place(nft_node, tree):
    text = '{\n\t"ip-masq": true,\n\t"iptables": true,\n\t"mtu": 1450\n}'
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', text)
    originals = tree.snapshot()
    four_steps(nft_node, tree, 'docker', docker_margs(tree))
    assert tree.read('/etc/docker/daemon.json') == '{\n\t"ip-masq": false,\n\t"iptables": true,\n\t"mtu": 1450\n}\n'
    absent_restores(nft_node, tree, 'docker', docker_margs(tree), originals)


def test_docker_flag_in_etc_default_docker_is_fixed_there_not_in_daemon_json(nft_node, tree):
    # The trap: --ip-masq on the command line and "ip-masq" in daemon.json
    # makes dockerd refuse to start, so the key must go.
    tree.put('/lib/systemd/system/docker.service', DOCKER_IO_UNIT)
    tree.put('/etc/default/docker', ETC_DEFAULT_DOCKER)
    tree.put('/etc/docker/daemon.json', '{\n  "ip-masq": false,\n  "log-level": "warn"\n}\n')
    originals = tree.snapshot()
    res = four_steps(nft_node, tree, 'docker', docker_margs(tree))
    assert tree.read('/etc/default/docker') == ETC_DEFAULT_DOCKER.replace(
        'DOCKER_OPTS="--ip-masq=true --bip', 'DOCKER_OPTS="--ip-masq=false --bip')
    assert tree.read('/etc/docker/daemon.json') == '{\n  "log-level": "warn"\n}\n'
    a1 = res['apply1']
    assert a1['where'] == 'command line' and a1['default_bridge_masquerade'] is False
    assert sorted(a1['edited']) == ['/etc/default/docker', '/etc/docker/daemon.json']
    assert res['apply2']['flag_sources'] == [{'path': '/etc/default/docker', 'variable': 'DOCKER_OPTS',
                                             'text': '--ip-masq=false', 'runtime': False}]
    absent_restores(nft_node, tree, 'docker', docker_margs(tree), originals)


def test_docker_dropin_overriding_execstart_is_edited_and_the_dead_one_is_not(nft_node, tree):
    dropin = ('[Service]\n# cleared first, as systemd requires\nExecStart=\n'
              'ExecStart=/usr/bin/dockerd -H fd:// \\\n    --containerd=/run/containerd/containerd.sock \\\n'
              '    --ip-masq \\\n    --data-root=/srv/docker\n')
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT.replace('-H fd://', '-H fd:// --ip-masq=true'))
    tree.put('/etc/systemd/system/docker.service.d/override.conf', dropin)
    originals = tree.snapshot()
    res = four_steps(nft_node, tree, 'docker', docker_margs(tree))
    assert tree.read('/etc/systemd/system/docker.service.d/override.conf') == dropin.replace(
        '    --ip-masq \\', '    --ip-masq=false \\')
    # The fragment's ExecStart is reset by the drop-in: not in effect, not edited.
    assert res['apply1']['edited'] == ['/etc/systemd/system/docker.service.d/override.conf']
    assert tree.read('/etc/docker/daemon.json') is None
    absent_restores(nft_node, tree, 'docker', docker_margs(tree), originals)


def test_docker_flag_generated_by_flannel_is_left_and_daemon_json_has_no_key(nft_node, tree):
    tree.put('/usr/lib/systemd/system/docker.service', DOCKER_RHEL_UNIT)
    tree.put('/usr/lib/systemd/system/docker.service.d/flannel.conf', FLANNEL_DOCKER_DROPIN)
    tree.put('/etc/sysconfig/docker', SYSCONFIG_DOCKER)
    tree.put('/run/flannel/docker', 'DOCKER_OPT_BIP="--bip=10.244.1.1/24"\nDOCKER_OPT_IPMASQ="--ip-masq=false"\n'
             'DOCKER_OPT_MTU="--mtu=1450"\nDOCKER_NETWORK_OPTIONS=" --bip=10.244.1.1/24 --ip-masq=false --mtu=1450"\n')
    tree.put('/etc/docker/daemon.json', '{\n    "ip-masq": false\n}\n')
    res = four_steps(nft_node, tree, 'docker', docker_margs(tree))
    assert tree.read('/etc/docker/daemon.json') == '{}\n'
    assert res['apply1']['edited'] == ['/etc/docker/daemon.json']
    assert res['apply1']['where'] == 'command line'
    assert res['apply1']['flag_sources'][0]['runtime'] is True


def test_docker_true_in_a_generated_file_is_a_warning(nft_node, tree):
    tree.put('/usr/lib/systemd/system/docker.service', DOCKER_RHEL_UNIT)
    tree.put('/usr/lib/systemd/system/docker.service.d/flannel.conf', FLANNEL_DOCKER_DROPIN)
    tree.put('/run/flannel/docker', 'DOCKER_NETWORK_OPTIONS=" --bip=10.244.1.1/24 --ip-masq=true --mtu=1450"\n')
    before = tree.snapshot()
    res = run(nft_node, 'docker', docker_margs(tree), ['apply1', 'apply2'])
    assert res['apply1']['changed'] is False and res['apply1']['default_bridge_masquerade'] is True
    assert any('mk-docker-opts.sh' in w for w in res['apply1']['warnings'])
    assert tree.snapshot() == before


def test_docker_not_installed_changes_nothing(nft_node, tree):
    tree.put('/etc/docker/daemon.json', DAEMON_JSON)
    before = tree.snapshot()
    res = run(nft_node, 'docker', docker_margs(tree, remove_stale_rules=True), ['check1', 'apply1'])
    for step in ('check1', 'apply1'):
        assert res[step]['installed'] is False and res[step]['changed'] is False
    assert tree.snapshot() == before


def test_docker_absent_after_the_user_edited_daemon_json_reverts_only_our_key(nft_node, tree):
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', '{\n  "ip-masq": true,\n  "debug": false\n}\n')
    run(nft_node, 'docker', docker_margs(tree))
    edited = tree.read('/etc/docker/daemon.json').replace('"debug": false', '"debug": true,\n  "mtu": 1400')
    tree.put('/etc/docker/daemon.json', edited)
    res = run(nft_node, 'docker', docker_margs(tree, state='absent'), ['apply1', 'apply2'])
    assert res['apply1']['changed'] is True and res['apply2']['changed'] is False
    assert tree.read('/etc/docker/daemon.json') == '{\n  "ip-masq": true,\n  "debug": true,\n  "mtu": 1400\n}\n'


# --------------------------------------------------------------------------
# Docker's rules, on real iptables in the namespace
# --------------------------------------------------------------------------

DOCKER_NAT = [
    ['-N', 'DOCKER'],
    ['-A', 'PREROUTING', '-m', 'addrtype', '--dst-type', 'LOCAL', '-j', 'DOCKER'],
    ['-A', 'OUTPUT', '!', '-d', '127.0.0.0/8', '-m', 'addrtype', '--dst-type', 'LOCAL', '-j', 'DOCKER'],
    ['-A', 'POSTROUTING', '-s', '172.18.0.0/16', '!', '-o', 'docker0', '-j', 'MASQUERADE'],
    ['-A', 'POSTROUTING', '-o', 'docker0', '-m', 'addrtype', '--src-type', 'LOCAL', '-j', 'MASQUERADE'],
    ['-A', 'POSTROUTING', '-s', '172.19.0.0/16', '!', '-o', 'br-0a1b2c3d4e5f', '-j', 'MASQUERADE'],
    ['-A', 'DOCKER', '-i', 'docker0', '-j', 'RETURN'],
    ['-A', 'DOCKER', '-i', 'br-0a1b2c3d4e5f', '-j', 'RETURN'],
]
FOREIGN_NAT = [
    ['-N', 'KUBE-POSTROUTING'],
    ['-A', 'KUBE-POSTROUTING', '-m', 'mark', '--mark', '0x4000/0x4000', '-j', 'MASQUERADE'],
    ['-I', 'POSTROUTING', '1', '-m', 'comment', '--comment', 'kubernetes postrouting rules', '-j', 'KUBE-POSTROUTING'],
    ['-A', 'POSTROUTING', '-s', '172.18.0.0/16', '!', '-o', 'docker0', '-p', 'tcp', '-j', 'MASQUERADE'],
    ['-A', 'POSTROUTING', '-o', 'eth9', '-s', '192.0.2.0/24', '-j', 'SNAT', '--to-source', '198.51.100.7'],
]
DOCKER_DEFAULT_RULES = [
    '-A POSTROUTING -s 172.18.0.0/16 ! -o docker0 -j MASQUERADE',
    '-A POSTROUTING -o docker0 -m addrtype --src-type LOCAL -j MASQUERADE',
]

FAKE_DOCKER = '''#!/usr/bin/python3
# Stand-in for the docker CLI: answers from docker.json next to it.
import json, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'docker.json')) as f:
    nets = json.load(f)
args = sys.argv[1:]
if args[:2] == ['network', 'ls']:
    print('\\n'.join(n['Id'] for n in nets if n['Driver'] == 'bridge'))
elif args[:2] == ['network', 'inspect']:
    want = args[2:]
    found = [n for n in nets if n['Name'] in want or n['Id'] in want]
    if len(found) != len(want):
        sys.stderr.write('Error response from daemon: network not found\\n')
        sys.exit(1)
    print(json.dumps(found, indent=4))
else:
    sys.exit(2)
'''


def docker_networks(masquerade='false'):
    def net(name, net_id, subnet, opts):
        return {'Name': name, 'Id': net_id, 'Driver': 'bridge', 'Scope': 'local', 'EnableIPv6': False,
                'IPAM': {'Driver': 'default', 'Options': None, 'Config': [{'Subnet': subnet}]},
                'Options': opts, 'Labels': {}}
    return [
        net('bridge', 'f1e2d3c4b5a6' * 5 + 'abcd', '172.18.0.0/16', {
            'com.docker.network.bridge.default_bridge': 'true',
            'com.docker.network.bridge.enable_icc': 'true',
            'com.docker.network.bridge.enable_ip_masquerade': masquerade,
            'com.docker.network.bridge.host_binding_ipv4': '0.0.0.0',
            'com.docker.network.bridge.name': 'docker0',
            'com.docker.network.driver.mtu': '1500'}),
        net('shop_default', '0a1b2c3d4e5f' * 5 + '0123', '172.19.0.0/16', {}),
        net('quiet', '9f8e7d6c5b4a' * 5 + '4567', '172.20.0.0/16', {
            'com.docker.network.bridge.enable_ip_masquerade': 'false'}),
        {'Name': 'host', 'Id': '1111111111112222', 'Driver': 'host', 'IPAM': {'Config': []}, 'Options': {}},
    ]


def with_fake_docker(tree, masquerade='false'):
    fake_bin(tree, 'docker', FAKE_DOCKER)
    tree.put('/bin/docker.json', json.dumps(docker_networks(masquerade)))
    return tree.path('/bin/docker')


def test_docker_stale_rule_removed_after_restart_and_networks_reported(node, tree):
    for args in DOCKER_NAT + FOREIGN_NAT:
        node.ipt(*args)
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', '{\n  "bip": "172.18.0.1/16",\n  "ip-masq": false\n}\n')
    docker = with_fake_docker(tree, masquerade='false')
    rules = node.rules()
    assert all(r in rules for r in DOCKER_DEFAULT_RULES)
    want = [r for r in rules if r not in DOCKER_DEFAULT_RULES]
    before = node.save(4), node.save(6)
    margs = docker_margs(tree, docker_bin=docker, remove_stale_rules=True, report_networks=True)
    res = run(node, 'docker', margs, ['check1'])['check1']
    assert res['changed'] is True and res['removed_rules'] == ['IPv4: ' + r for r in DOCKER_DEFAULT_RULES]
    assert (node.save(4), node.save(6)) == before, 'check mode changed the rules'
    res = run(node, 'docker', margs, ['apply1', 'check2', 'apply2'])
    assert res['apply1']['changed'] is True and res['apply1']['edited'] == []
    assert res['apply1']['removed_rules'] == ['IPv4: ' + r for r in DOCKER_DEFAULT_RULES]
    assert res['apply1']['bridge'] == {'name': 'docker0', 'subnets': ['172.18.0.0/16']}
    assert node.rules() == want
    for step in ('check2', 'apply2'):
        assert res[step]['changed'] is False and res[step]['removed_rules'] == []
    # The user-defined network that masquerades is reported, the one created
    # with enable_ip_masquerade=false and the default bridge are not.
    nets = res['apply2']['masquerading_networks']
    assert [(n['name'], n['bridge'], n['subnets']) for n in nets] == [
        ('shop_default', 'br-0a1b2c3d4e5f', ['172.19.0.0/16'])]
    assert 'com.docker.network.bridge.enable_ip_masquerade=false' in nets[0]['advice']
    assert any('shop_default' in w for w in res['apply2']['warnings'])


def test_docker_rule_kept_while_running_docker_still_masquerades(nft_node, tree):
    for args in DOCKER_NAT:
        nft_node.ipt(*args)
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', '{"ip-masq": false}\n')
    docker = with_fake_docker(tree, masquerade='true')
    before = nft_node.rules()
    res = run(nft_node, 'docker', docker_margs(tree, docker_bin=docker, remove_stale_rules=True))['apply1']
    assert res['changed'] is False and res['removed_rules'] == []
    assert any('restart pending' in m for m in res['messages'])
    assert nft_node.rules() == before


def test_docker_rule_kept_while_the_config_change_is_pending(nft_node, tree):
    for args in DOCKER_NAT:
        nft_node.ipt(*args)
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    before = nft_node.rules()
    res = run(nft_node, 'docker', docker_margs(tree, remove_stale_rules=True))['apply1']
    assert res['changed'] is True and res['edited'] == ['/etc/docker/daemon.json']
    assert res['removed_rules'] == [] and nft_node.rules() == before


def test_docker_rule_found_by_shape_without_the_cli(node, tree):
    for args in DOCKER_NAT + FOREIGN_NAT:
        node.ipt(*args)
    node.ipt('-A', 'POSTROUTING', '-s', 'fd00:17::/64', '!', '-o', 'docker0', '-j', 'MASQUERADE', family=6)
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', '{"ip-masq": false}\n')
    res = run(node, 'docker', docker_margs(tree, remove_stale_rules=True), ['apply1', 'apply2'])
    assert sorted(res['apply1']['removed_rules']) == sorted(
        ['IPv4: ' + r for r in DOCKER_DEFAULT_RULES] + ['IPv6: -A POSTROUTING -s fd00:17::/64 ! -o docker0 -j MASQUERADE'])
    assert res['apply2']['changed'] is False
    rules = node.rules()
    assert not any(r in rules for r in DOCKER_DEFAULT_RULES)
    assert '-A POSTROUTING -s 172.19.0.0/16 ! -o br-0a1b2c3d4e5f -j MASQUERADE' in rules
    assert '-A POSTROUTING -s 172.18.0.0/16 ! -o docker0 -p tcp -j MASQUERADE' in rules
    assert node.rules(6) == [':PREROUTING ACCEPT', ':INPUT ACCEPT', ':OUTPUT ACCEPT', ':POSTROUTING ACCEPT']


# ==========================================================================
# flannel
# ==========================================================================

# Fedora/EL flannel package.
FLANNEL_RPM_UNIT = '''[Unit]
Description=Flanneld overlay address etcd agent
After=network.target
After=network-online.target
Wants=network-online.target
After=etcd.service
Before=docker.service

[Service]
Type=notify
EnvironmentFile=/etc/sysconfig/flanneld
EnvironmentFile=-/etc/sysconfig/docker-network
ExecStart=/usr/bin/flanneld-start $FLANNEL_OPTIONS
ExecStartPost=/usr/libexec/flannel/mk-docker-opts.sh -k DOCKER_NETWORK_OPTIONS -d /run/flannel/docker
Restart=on-failure

[Install]
WantedBy=multi-user.target
WantedBy=docker.service
'''

SYSCONFIG_FLANNELD = '''# Flanneld configuration options

# etcd url location.  Point this to the server where etcd runs
FLANNEL_ETCD_ENDPOINTS="http://127.0.0.1:2379"

# etcd config key.  This is the configuration key that flannel queries
# For address range assignment
FLANNEL_ETCD_PREFIX="/atomic.io/network"

# Any additional options that you want to pass
FLANNEL_OPTIONS="-ip-masq -iface=eth1"
'''

# flannel's dist/mk-docker-opts.sh (the top part that matters).
MK_DOCKER_OPTS = '''#!/bin/bash

usage() {
\techo "$0 [-f FLANNEL-ENV-FILE] [-d DOCKER-ENV-FILE] [-i] [-c] [-m] [-k COMBINED-KEY]

Generate Docker daemon options based on flannel env file
OPTIONS:
\t-m\tDo not output --ip-masq (useful for older Docker version)
" >/dev/stderr

\texit 1
}

flannel_env="/run/flannel/subnet.env"
docker_env="/run/docker_opts.env"
combined_opts_key="DOCKER_OPTS"
indiv_opts=false
combined_opts=false
ipmasq=true
val=""

while getopts "f:d:icmk:" opt; do
\tcase $opt in
\t\tm)
\t\t\tipmasq=false
\t\t\t;;
\tesac
done

if [ "$FLANNEL_IPMASQ" = true ] && [ $ipmasq = true ] ; then
\tDOCKER_OPT_IPMASQ="--ip-masq=false"
fi
'''

# A binary install (CoreOS-style / kubernetes-the-hard-way).
FLANNEL_BINARY_UNIT = '''[Unit]
Description=Flanneld overlay address etcd agent
After=network.target
Before=docker.service

[Service]
Type=notify
ExecStart=/opt/bin/flanneld \\
  -etcd-cafile=/etc/kubernetes/ssl/ca.pem \\
  -etcd-certfile=/etc/kubernetes/ssl/flanneld.pem \\
  -etcd-keyfile=/etc/kubernetes/ssl/flanneld-key.pem \\
  -etcd-endpoints=https://192.0.2.10:2379 \\
  -etcd-prefix=/kubernetes/network \\
  -iface=eth0 \\
  -ip-masq
ExecStartPost=/opt/bin/mk-docker-opts.sh -k DOCKER_NETWORK_OPTIONS -d /run/flannel/docker
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
RequiredBy=docker.service
'''


def flannel_margs(tree, **kw):
    margs = {'root': tree.root}
    margs.update(kw)
    return margs


def test_flannel_rpm_options_in_sysconfig_and_mk_docker_opts(nft_node, tree):
    tree.put('/usr/lib/systemd/system/flanneld.service', FLANNEL_RPM_UNIT)
    tree.put('/etc/sysconfig/flanneld', SYSCONFIG_FLANNELD)
    tree.put('/usr/libexec/flannel/mk-docker-opts.sh', MK_DOCKER_OPTS, mode=0o755)
    originals = tree.snapshot()
    res = four_steps(nft_node, tree, 'flannel', flannel_margs(tree, remove_stale_rules=False))
    assert tree.read('/etc/sysconfig/flanneld') == SYSCONFIG_FLANNELD.replace(
        'FLANNEL_OPTIONS="-ip-masq -iface=eth1"', 'FLANNEL_OPTIONS="-iface=eth1"')
    assert tree.read('/usr/libexec/flannel/mk-docker-opts.sh') == MK_DOCKER_OPTS.replace(
        'combined_opts=false\nipmasq=true\n', 'combined_opts=false\nipmasq=false\n')
    assert stat.S_IMODE(os.stat(tree.path('/usr/libexec/flannel/mk-docker-opts.sh')).st_mode) == 0o755
    a1 = res['apply1']
    assert sorted(a1['edited']) == ['/etc/sysconfig/flanneld', '/usr/libexec/flannel/mk-docker-opts.sh']
    assert a1['restart_required'] is True and a1['ip_masq'] is False
    absent_restores(nft_node, tree, 'flannel', flannel_margs(tree, remove_stale_rules=False), originals)


def test_flannel_binary_unit_with_continued_execstart(nft_node, tree):
    tree.put('/etc/systemd/system/flanneld.service', FLANNEL_BINARY_UNIT)
    tree.put('/opt/bin/mk-docker-opts.sh', MK_DOCKER_OPTS, mode=0o755)
    originals = tree.snapshot()
    four_steps(nft_node, tree, 'flannel', flannel_margs(tree, remove_stale_rules=False))
    assert tree.read('/etc/systemd/system/flanneld.service') == FLANNEL_BINARY_UNIT.replace(
        '  -iface=eth0 \\\n  -ip-masq\n', '  -iface=eth0\n')
    absent_restores(nft_node, tree, 'flannel', flannel_margs(tree, remove_stale_rules=False), originals)


def test_flannel_dropin_overrides_execstart_and_environment(nft_node, tree):
    tree.put('/lib/systemd/system/flanneld.service',
             '[Service]\nExecStart=/usr/bin/flanneld --ip-masq --kube-subnet-mgr\n')
    dropin = ('[Service]\nEnvironment="FLANNELD_IFACE=eth1"\nExecStart=\n'
              'ExecStart=/usr/local/bin/flanneld --ip-masq=true --kube-subnet-mgr --iface=eth1 --ip-masq\n')
    tree.put('/etc/systemd/system/flanneld.service.d/10-options.conf', dropin)
    tree.put('/etc/systemd/system/flanneld.service.d/20-env.conf',
             '[Service]\nEnvironment=FLANNELD_IP_MASQ=true\n')
    originals = tree.snapshot()
    res = four_steps(nft_node, tree, 'flannel', flannel_margs(tree, remove_stale_rules=False))
    assert tree.read('/etc/systemd/system/flanneld.service.d/10-options.conf') == dropin.replace(
        '--ip-masq=true --kube-subnet-mgr --iface=eth1 --ip-masq\n', '--kube-subnet-mgr --iface=eth1\n')
    # With no flag left, flanneld would read FLANNELD_IP_MASQ: set to false.
    assert tree.read('/etc/systemd/system/flanneld.service.d/20-env.conf') == \
        '[Service]\nEnvironment=FLANNELD_IP_MASQ=false\n'
    # The fragment's ExecStart is reset by the drop-in, but the flag goes from there too: removing
    # the drop-in must not bring masquerading back.
    assert '/lib/systemd/system/flanneld.service' in res['apply1']['edited']
    assert tree.read('/lib/systemd/system/flanneld.service') == \
        '[Service]\nExecStart=/usr/bin/flanneld --kube-subnet-mgr\n'
    absent_restores(nft_node, tree, 'flannel', flannel_margs(tree, remove_stale_rules=False), originals)


def test_flannel_options_sourced_by_a_wrapper_script(nft_node, tree):
    tree.put('/etc/systemd/system/flanneld.service', '[Service]\nExecStart=/usr/local/bin/start-flanneld\n')
    tree.put('/etc/default/flanneld', '# options for start-flanneld\nFLANNEL_OPTIONS="--iface=eth0 \\\n'
             '  --ip-masq \\\n  --kube-subnet-mgr"\n')
    originals = tree.snapshot()
    margs = flannel_margs(tree, env_files=['/etc/default/flanneld'], remove_stale_rules=False)
    four_steps(nft_node, tree, 'flannel', margs)
    assert tree.read('/etc/default/flanneld') == ('# options for start-flanneld\n'
                                                  'FLANNEL_OPTIONS="--iface=eth0 \\\n  --kube-subnet-mgr"\n')
    absent_restores(nft_node, tree, 'flannel', margs, originals)


def test_flannel_not_installed(nft_node, tree):
    tree.put('/usr/libexec/flannel/mk-docker-opts.sh', MK_DOCKER_OPTS)
    before = tree.snapshot()
    res = run(nft_node, 'flannel', flannel_margs(tree), ['check1', 'apply1'])
    assert res['apply1']['installed'] is False and res['apply1']['changed'] is False
    assert tree.snapshot() == before


# --------------------------------------------------------------------------
# flannel's rules, on real iptables in the namespace
# --------------------------------------------------------------------------

def flannel_nat(family=4):
    if family == 4:
        net, lease, mcast = '10.244.0.0/16', '10.244.1.0/24', '224.0.0.0/4'
    else:
        net, lease, mcast = 'fd00:10:244::/56', 'fd00:10:244:1::/64', 'ff00::/8'
    c = ['-m', 'comment', '--comment', 'flanneld masq']
    return [
        ['-N', 'FLANNEL-POSTRTG'],
        ['-A', 'POSTROUTING'] + c + ['-j', 'FLANNEL-POSTRTG'],
        ['-A', 'FLANNEL-POSTRTG', '-m', 'mark', '--mark', '0x4000/0x4000'] + c + ['-j', 'RETURN'],
        ['-A', 'FLANNEL-POSTRTG', '-s', lease, '-d', net] + c + ['-j', 'RETURN'],
        ['-A', 'FLANNEL-POSTRTG', '-s', net, '-d', lease] + c + ['-j', 'RETURN'],
        ['-A', 'FLANNEL-POSTRTG', '!', '-s', net, '-d', lease] + c + ['-j', 'RETURN'],
        ['-A', 'FLANNEL-POSTRTG', '-s', net, '!', '-d', mcast] + c + ['-j', 'MASQUERADE', '--random-fully'],
        ['-A', 'FLANNEL-POSTRTG', '!', '-s', net, '-d', net] + c + ['-j', 'MASQUERADE', '--random-fully'],
    ]


def flannel_node(node, tree, ipmasq):
    for family in (4, 6):
        for args in FOREIGN_NAT if family == 4 else []:
            node.ipt(*args)
        for args in flannel_nat(family):
            node.ipt(*args, family=family)
    node.ipt('-N', 'IP-MASQ-AGENT')
    node.ipt('-A', 'POSTROUTING', '-m', 'addrtype', '!', '--dst-type', 'LOCAL', '-j', 'IP-MASQ-AGENT')
    unit = FLANNEL_BINARY_UNIT.replace('  -iface=eth0 \\\n  -ip-masq\n', '  -iface=eth0\n')
    tree.put('/etc/systemd/system/flanneld.service', unit)
    tree.put('/run/flannel/subnet.env', 'FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\n'
             'FLANNEL_MTU=1450\nFLANNEL_IPMASQ=%s\n' % ipmasq)


def not_flannel(rules):
    return [r for r in rules if 'FLANNEL-POSTRTG' not in r and 'flanneld masq' not in r]


def test_flannel_stale_chain_removed_both_families_foreign_rules_stay(node, tree):
    flannel_node(node, tree, 'false')
    want4, want6 = not_flannel(node.rules(4)), not_flannel(node.rules(6))
    assert want4 != node.rules(4) and want6 != node.rules(6)
    before = node.save(4), node.save(6)
    res = run(node, 'flannel', flannel_margs(tree), ['check1'])['check1']
    assert res['changed'] is True and (node.save(4), node.save(6)) == before
    assert 'IPv4: chain FLANNEL-POSTRTG' in res['removed_rules'] and 'IPv6: chain FLANNEL-POSTRTG' in res['removed_rules']
    res = run(node, 'flannel', flannel_margs(tree), ['apply1', 'check2', 'apply2'])
    assert res['apply1']['changed'] is True and res['apply1']['edited'] == []
    assert res['apply1']['removed_rules'] == [
        'IPv4: -A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG',
        'IPv4: chain FLANNEL-POSTRTG',
        'IPv6: -A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG',
        'IPv6: chain FLANNEL-POSTRTG']
    assert node.rules(4) == want4 and node.rules(6) == want6
    for step in ('check2', 'apply2'):
        assert res[step]['changed'] is False and res[step]['removed_rules'] == []


def test_flannel_rules_kept_while_running_flanneld_masquerades(nft_node, tree):
    flannel_node(nft_node, tree, 'true')
    before = nft_node.save(4), nft_node.save(6)
    res = run(nft_node, 'flannel', flannel_margs(tree))['apply1']
    assert res['changed'] is False and res['removed_rules'] == [] and len(res['stale_rules']) == 4
    assert any('FLANNEL_IPMASQ=true' in m for m in res['messages'])
    assert (nft_node.save(4), nft_node.save(6)) == before


def test_flannel_rules_kept_while_the_option_change_is_pending(nft_node, tree):
    flannel_node(nft_node, tree, 'false')
    tree.put('/etc/systemd/system/flanneld.service', FLANNEL_BINARY_UNIT)
    before = nft_node.save(4)
    res = run(nft_node, 'flannel', flannel_margs(tree))['apply1']
    assert res['changed'] is True and res['edited'] == ['/etc/systemd/system/flanneld.service']
    assert res['removed_rules'] == [] and nft_node.save(4) == before


def test_flannel_foreign_jump_to_its_chain_is_an_error_and_nothing_changes(nft_node, tree):
    flannel_node(nft_node, tree, 'false')
    nft_node.ipt('-N', 'MY-SNAT')
    nft_node.ipt('-A', 'MY-SNAT', '-j', 'FLANNEL-POSTRTG')
    before = nft_node.save(4), nft_node.save(6)
    res = run(nft_node, 'flannel', flannel_margs(tree))['apply1']
    assert res.get('failed') and '-A MY-SNAT -j FLANNEL-POSTRTG' in res['msg'], res.get('msg')
    assert (nft_node.save(4), nft_node.save(6)) == before


# ==========================================================================
# kubelet
# ==========================================================================

KUBELET_UNIT = '''[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
'''

KUBEADM_DROPIN = '''# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
'''

KUBEADM_FLAGS = ('KUBELET_KUBEADM_ARGS="--container-runtime=remote '
                 '--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock '
                 '--pod-infra-container-image=registry.k8s.io/pause:3.6"\n')


def kubelet_tree(tree, version='v1.23.17', dropin=True, default_kubelet='KUBELET_EXTRA_ARGS=\n'):
    tree.put('/lib/systemd/system/kubelet.service', KUBELET_UNIT)
    if dropin:
        tree.put('/etc/systemd/system/kubelet.service.d/10-kubeadm.conf', KUBEADM_DROPIN)
        tree.put('/var/lib/kubelet/kubeadm-flags.env', KUBEADM_FLAGS)
    if default_kubelet is not None:
        tree.put('/etc/default/kubelet', default_kubelet)
    tree.put('/usr/bin/kubelet', '#!/bin/sh\necho "Kubernetes %s"\n' % version, mode=0o755)


def kubelet_margs(tree, **kw):
    margs = {'root': tree.root}
    margs.update(kw)
    return margs


def test_kubelet_kubeadm_extra_args_in_etc_default_kubelet(nft_node, tree):
    kubelet_tree(tree)
    originals = tree.snapshot()
    res = four_steps(nft_node, tree, 'kubelet', kubelet_margs(tree))
    assert tree.read('/etc/default/kubelet') == 'KUBELET_EXTRA_ARGS=--non-masquerade-cidr=0.0.0.0/0\n'
    assert res['apply1']['version'] == 'Kubernetes v1.23.17' and res['apply1']['current'] is None
    assert res['apply1']['edited'] == ['/etc/default/kubelet'] and res['apply1']['restart_required'] is True
    absent_restores(nft_node, tree, 'kubelet', kubelet_margs(tree), originals)


def test_kubelet_extra_args_with_other_flags_keeps_them(nft_node, tree):
    kubelet_tree(tree, default_kubelet='# extra flags\nKUBELET_EXTRA_ARGS="--node-ip=192.0.2.21 --max-pods=60"\n')
    originals = tree.snapshot()
    four_steps(nft_node, tree, 'kubelet', kubelet_margs(tree))
    assert tree.read('/etc/default/kubelet') == (
        '# extra flags\nKUBELET_EXTRA_ARGS="--node-ip=192.0.2.21 --max-pods=60 --non-masquerade-cidr=0.0.0.0/0"\n')
    absent_restores(nft_node, tree, 'kubelet', kubelet_margs(tree), originals)


def test_kubelet_without_etc_default_kubelet_gets_our_dropin(nft_node, tree):
    kubelet_tree(tree, default_kubelet=None)
    originals = tree.snapshot()
    res = four_steps(nft_node, tree, 'kubelet', kubelet_margs(tree))
    ours = '/etc/systemd/system/kubelet.service.d/90-ipmasq-agent.conf'
    assert res['apply1']['edited'] == [ours]
    assert tree.read(ours).endswith('[Service]\nEnvironment=KUBELET_EXTRA_ARGS=--non-masquerade-cidr=0.0.0.0/0\n')
    absent_restores(nft_node, tree, 'kubelet', kubelet_margs(tree), originals)
    assert tree.read(ours) is None


def test_kubelet_plain_unit_gets_execstart_dropin(nft_node, tree):
    kubelet_tree(tree, dropin=False, default_kubelet=None)
    tree.put('/lib/systemd/system/kubelet.service', KUBELET_UNIT.replace(
        'ExecStart=/usr/bin/kubelet\n',
        'ExecStart=/usr/bin/kubelet \\\n  --kubeconfig=/etc/kubernetes/kubelet.conf \\\n  --pod-cidr=10.244.1.0/24\n'))
    originals = tree.snapshot()
    four_steps(nft_node, tree, 'kubelet', kubelet_margs(tree))
    text = tree.read('/etc/systemd/system/kubelet.service.d/90-ipmasq-agent.conf')
    assert text.endswith('[Service]\nExecStart=\nExecStart=/usr/bin/kubelet --kubeconfig=/etc/kubernetes/kubelet.conf'
                         ' --pod-cidr=10.244.1.0/24 --non-masquerade-cidr=0.0.0.0/0\n')
    absent_restores(nft_node, tree, 'kubelet', kubelet_margs(tree), originals)
    assert not os.path.exists(tree.path('/etc/systemd/system/kubelet.service.d'))


def test_kubelet_existing_flag_set_where_it_is(nft_node, tree):
    kubelet_tree(tree)
    tree.put('/var/lib/kubelet/kubeadm-flags.env', KUBEADM_FLAGS.replace(
        '--container-runtime=remote', '--container-runtime=remote --non-masquerade-cidr 10.0.0.0/8'))
    originals = tree.snapshot()
    res = four_steps(nft_node, tree, 'kubelet', kubelet_margs(tree))
    assert tree.read('/var/lib/kubelet/kubeadm-flags.env') == KUBEADM_FLAGS.replace(
        '--container-runtime=remote', '--container-runtime=remote --non-masquerade-cidr=0.0.0.0/0')
    assert res['apply1']['current'] == '10.0.0.0/8' and res['apply1']['edited'] == ['/var/lib/kubelet/kubeadm-flags.env']
    absent_restores(nft_node, tree, 'kubelet', kubelet_margs(tree), originals)


def test_kubelet_report_mode_changes_nothing(nft_node, tree):
    kubelet_tree(tree)
    before = tree.snapshot()
    res = run(nft_node, 'kubelet', kubelet_margs(tree, mode='report'), ['check1', 'apply1'])
    for step in ('check1', 'apply1'):
        assert res[step]['changed'] is False and res[step]['would_change'] is True
        assert any('--non-masquerade-cidr=0.0.0.0/0' in w for w in res[step]['warnings'])
    assert tree.snapshot() == before


@pytest.mark.parametrize('version', ['v1.24.0', 'v1.28.15'])
def test_kubelet_124_and_later_is_left_alone(nft_node, tree, version):
    kubelet_tree(tree, version=version)
    before = tree.snapshot()
    res = run(nft_node, 'kubelet', kubelet_margs(tree), ['check1', 'apply1'])
    assert res['apply1']['changed'] is False and res['apply1']['would_change'] is False
    assert tree.snapshot() == before


def test_kubelet_unknown_version_changes_nothing(nft_node, tree):
    kubelet_tree(tree)
    tree.put('/usr/bin/kubelet', '#!/bin/sh\necho "segmentation fault" >&2\nexit 139\n', mode=0o755)
    before = tree.snapshot()
    res = run(nft_node, 'kubelet', kubelet_margs(tree))['apply1']
    assert res['changed'] is False and any('version' in w for w in res['warnings'])
    assert tree.snapshot() == before


# ==========================================================================
# The role's task files, with handlers that do what a restart does
# ==========================================================================

ROLE_PLAYBOOK = os.path.join(HERE, 'playbooks', 'other_snat_role.yml')
# What the playbook's "Restart a daemon" handler writes for each service, in the registry's order.
RESTARTS = ('/run/flannel/subnet.env', '/bin/docker.json', '/kubelet.restarted')


def run_role(node, tree, check_mode=False, **extra):
    # Docker's daemon.json below the tree (the modules' root): given here, since
    # the lab's HOST_SAFE_VARS (-e) move it out of reach and win over play vars.
    extra_vars = {'test_root': tree.root, 'ip_masq_docker_daemon_json': '/etc/docker/daemon.json'}
    extra_vars.update(extra)
    rc, tasks = netlab.playbook(node.ns, ROLE_PLAYBOOK, extra_vars=extra_vars, backend=node.backend,
                                check_mode=check_mode)
    failed = [(name, r.get('msg')) for name, r in tasks if r.get('failed')]
    assert rc == 0 and not failed, failed
    changed = [name for name, r in tasks if r.get('changed')]
    handlers = [r['dest'][len(tree.root):] for name, r in tasks
                if name == 'Restart a daemon' and not r.get('skipped') and not check_mode]
    return changed, handlers, tasks


def role_tree(node, tree):
    """A node with flanneld (binary install, --ip-masq), Docker (docker-ce,
    daemon.json with other keys) and a kubeadm kubelet 1.23, and the rules
    flanneld and Docker wrote while masquerading."""
    tree.put('/etc/systemd/system/flanneld.service', FLANNEL_BINARY_UNIT)
    tree.put('/opt/bin/mk-docker-opts.sh', MK_DOCKER_OPTS, mode=0o755)
    env = 'FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=%s\n'
    tree.put('/run/flannel/subnet.env', env % 'true')
    tree.put('/run/flannel/subnet.env.present', env % 'false')
    tree.put('/run/flannel/subnet.env.absent', env % 'true')
    tree.put('/lib/systemd/system/docker.service', DOCKER_CE_UNIT)
    tree.put('/etc/docker/daemon.json', DAEMON_JSON)
    with_fake_docker(tree, masquerade='true')
    tree.put('/bin/docker.json.present', json.dumps(docker_networks('false')))
    tree.put('/bin/docker.json.absent', json.dumps(docker_networks('true')))
    kubelet_tree(tree)
    for args in flannel_nat(4) + DOCKER_NAT + FOREIGN_NAT:
        node.ipt(*args)
    for args in flannel_nat(6):
        node.ipt(*args, family=6)


def test_role_task_files_end_to_end(node, tree):
    role_tree(node, tree)
    originals = tree.snapshot()
    rules4, rules6 = node.rules(4), node.rules(6)

    # Check mode: reports changes, writes nothing, removes no rule.
    changed, _handlers, _tasks = run_role(node, tree, check_mode=True)
    assert changed
    assert tree.snapshot() == originals and (node.rules(4), node.rules(6)) == (rules4, rules6)

    changed, handlers, tasks = run_role(node, tree)
    assert handlers == list(RESTARTS)
    # flanneld lost --ip-masq, mk-docker-opts.sh says ipmasq=false, and after
    # the (simulated) restart its chain and jump are gone in both families.
    assert '-ip-masq' not in tree.read('/etc/systemd/system/flanneld.service')
    assert '\nipmasq=false\n' in tree.read('/opt/bin/mk-docker-opts.sh')
    assert not [r for r in node.rules(4) + node.rules(6) if 'FLANNEL-POSTRTG' in r or 'flanneld masq' in r]
    # Docker: daemon.json merged, its default-bridge rules removed after the
    # restart, the user network's rule left and reported.
    assert json.loads(tree.read('/etc/docker/daemon.json'))['ip-masq'] is False
    assert not any(r in node.rules(4) for r in DOCKER_DEFAULT_RULES)
    assert '-A POSTROUTING -s 172.19.0.0/16 ! -o br-0a1b2c3d4e5f -j MASQUERADE' in node.rules(4)
    report = [r['daemon'] for name, r in tasks if name == 'Remove the rules the daemon left behind: docker']
    assert [n['name'] for n in report[0]['masquerading_networks']] == ['shop_default']
    # kubelet 1.23 got the flag.
    assert tree.read('/etc/default/kubelet') == 'KUBELET_EXTRA_ARGS=--non-masquerade-cidr=0.0.0.0/0\n'
    # Everything else in the nat table is as it was.
    assert node.rules(4) == [r for r in not_flannel(rules4) if r not in DOCKER_DEFAULT_RULES]
    assert node.rules(6) == not_flannel(rules6)

    # A second run changes nothing and restarts nothing.
    changed, handlers, _tasks = run_role(node, tree)
    assert changed == [] and handlers == []

    # absent puts every file back byte for byte, with restarts.
    changed, handlers, _tasks = run_role(node, tree, ip_masq_state='absent')
    assert handlers == list(RESTARTS)
    now = tree.snapshot()
    for path, data in originals.items():
        if not path.startswith('/run/flannel/subnet.env'):
            assert now.get(path) == data, path
    changed, handlers, _tasks = run_role(node, tree, ip_masq_state='absent')
    assert changed == [] and handlers == []


NODE_PLAYBOOK = os.path.join(HERE, 'playbooks', 'node_daemons.yml')


def node_daemons(node, tree, **more):
    """ip_masq_node's daemons part with the options the role's action gives (and root, docker_bin)."""
    daemons = {
        'flannel': {'root': tree.root, 'state': 'present', 'remove_stale_rules': True},
        'docker': {'root': tree.root, 'state': 'present', 'docker_bin': tree.path('/bin/docker'),
                   'remove_stale_rules': True, 'report_networks': True},
        'kubelet': {'root': tree.root, 'state': 'present', 'mode': 'set'},
    }
    daemons.update(more)
    rc, tasks = netlab.playbook(node.ns, NODE_PLAYBOOK, extra_vars={'daemons': daemons}, backend=node.backend)
    res = dict(tasks)['Node run']
    assert rc == 0 and not res.get('failed'), res.get('msg')
    return res


def test_role_node_run_reads_the_daemons_and_says_when_their_steps_are_needed(node, tree):
    """The role's one node run reads the daemons with their modules' code in
    check mode: it writes nothing and removes no rule, names the daemons
    whose step must run (then leaves the audit to after them); once nothing
    would change, it audits and passes on the modules' warnings."""
    role_tree(node, tree)
    originals, rules = tree.snapshot(), (node.rules(4), node.rules(6))
    res = node_daemons(node, tree)
    assert res['daemons_needed'] == ['flannel', 'docker', 'kubelet'], res['daemons']
    assert all(d['would_change'] and d['installed'] and d['error'] is None for d in res['daemons'].values())
    assert res['audit'] is None and res['changed'] is False
    assert tree.snapshot() == originals and (node.rules(4), node.rules(6)) == rules

    run_role(node, tree)
    res = node_daemons(node, tree)
    assert res['daemons_needed'] == [], res['daemons']
    assert res['audit'] is not None
    warned = [w for w in res['warnings'] if w.startswith('Docker network shop_default ')]
    assert warned and warned == res['daemons']['docker']['warnings'], res['warnings']

    # A daemon the role manages but that is not installed: its step must run (and fail there).
    res = node_daemons(node, tree, flannel={'root': tree.root, 'unit_name': 'nosuch.service'}, required=['flannel'])
    assert res['daemons_needed'] == ['flannel'] and res['daemons']['flannel']['installed'] is False
    assert res['audit'] is None
    # Settings that cannot be read: its step must run, and says why.
    res = node_daemons(node, tree, kubelet={'root': tree.root, 'mode': 'sometimes'})
    assert res['daemons_needed'] == ['kubelet'] and 'mode' in res['daemons']['kubelet']['error']
