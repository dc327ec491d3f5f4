"""Issue 32, items 5 and 6, with real ansible-playbook runs of the whole role
against a namespace node (as test_role_inputs.py does), in every form users
give a variable: typed YAML (``-e @file.yml``), ``-e name=value``, JSON,
Jinja and group_vars.

- A relative path (``ip_masq_cni_conf_dirs``, ``ip_masq_backup_dir``, ...)
  passed the controller at eaef342: the node wrote the config file, the units
  and the chain, then failed ("conf_dirs: ... is not an absolute path").
- A misspelt variable (``ip_masq_cni_conf_dir``, ``ip_masq_enable_ip6``, ...)
  was ignored and the defaults applied: the CNI network file was edited.

Now both are refused on the controller, naming the variable and the host,
before the first write: every file under the test's root (the node's file
system, with a masquerading CNI network in it) and the namespace's nat and
nft tables are the same after the refusal as before."""
import json
import os

import pytest
import yaml

from ipmasq_lab import netlab, policy_view

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, 'playbooks', 'role_sandbox.yml')
NODE_TASK = "Validate, write the agent's files, apply the policy and audit, in one node run"
CONFLIST = {'cniVersion': '1.0.0', 'name': 'imqnet', 'plugins': [
    {'type': 'bridge', 'bridge': 'imqbr0', 'isGateway': True, 'ipMasq': True,
     'ipam': {'type': 'host-local', 'ranges': [[{'subnet': '10.244.7.0/24'}]]}},
    {'type': 'portmap', 'capabilities': {'portMappings': True}}]}


def node_root(tmp_path):
    """The node's file system: the role's paths, and a CNI network that masquerades."""
    root = tmp_path / 'node'
    values = netlab.role_node_paths(root)
    values.update(ip_masq_install_packages=False, ip_masq_docker='skip', ip_masq_flannel='skip',
                  ip_masq_kubelet='skip', ip_masq_audit='skip', ip_masq_resync_systemctl=False,
                  ip_masq_resync_enabled=True, ip_masq_cni='auto')
    conf_dir = values['ip_masq_cni_conf_dirs'][0]
    os.makedirs(conf_dir)
    with open(os.path.join(conf_dir, '10-imqnet.conflist'), 'w', encoding='utf-8') as handle:
        json.dump(CONFLIST, handle, indent=2)
    return root, values


def snapshot(node, root):
    """Every directory and file under ``root`` (with its bytes), and the namespace's nat and nft tables."""
    tree = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            tree[os.path.relpath(os.path.join(directory, name), root)] = None
        for name in files:
            with open(os.path.join(directory, name), 'rb') as handle:
                tree[os.path.relpath(os.path.join(directory, name), root)] = handle.read()
    return tree, node.save(4), node.save(6), node.nft('list', 'ruleset').stdout


def given(form, tmp_path, name, value, values):
    """``(extra vars, command-line arguments)`` that give ``name: value`` in ``form``."""
    extra = dict(values)
    if form == 'yaml':          # typed YAML: -e @file.yml
        path = tmp_path / 'given.yml'
        path.write_text(yaml.safe_dump({name: value}), encoding='utf-8')
        return extra, ['-e', '@%s' % path]
    if form == 'kv':            # what a user types: the value arrives as a string
        text = ','.join(value) if isinstance(value, list) else str(value).lower() if isinstance(value, bool) else value
        return extra, ['-e', '%s=%s' % (name, text)]
    if form == 'json':
        return extra, ['-e', json.dumps({name: value})]
    if form == 'jinja':
        return extra, ['-e', json.dumps({name: '{{ %s }}' % json.dumps(value)})]
    assert form == 'group_vars'
    # Extra vars win over group_vars: the variable is given there alone.
    extra.pop(name, None)
    inventory = tmp_path / 'inventory'
    (inventory / 'group_vars').mkdir(parents=True)
    (inventory / 'hosts.yml').write_text(yaml.safe_dump(
        {'all': {'hosts': {'localhost': {'ansible_connection': 'local'}}}}), encoding='utf-8')
    (inventory / 'group_vars' / 'all.yml').write_text(yaml.safe_dump({name: value}), encoding='utf-8')
    return extra, ['-i', str(inventory)]


def role(node, values, args):
    rc, tasks = netlab.playbook(node.ns, PLAYBOOK, extra_vars=values, backend=node.backend, args=args)
    one = [res for name, res in tasks if name.endswith(NODE_TASK)]
    return rc, (one[0] if one else {}), [name for name, _res in tasks]


def refused_before_the_first_write(node, tmp_path, form, name, value):
    root, values = node_root(tmp_path)
    extra, args = given(form, tmp_path, name, value, values)
    before = snapshot(node, root)
    rc, one, names = role(node, extra, args)
    assert rc != 0 and one.get('failed'), (rc, one)
    assert snapshot(node, root) == before
    assert not os.path.exists(values['ip_masq_config_path'])
    assert not any('Run the steps' in task for task in names)
    return one['msg']


# ------------------------------------------------------------------ item 5: paths

@pytest.mark.parametrize('form,name,value,shown', [
    ('yaml', 'ip_masq_cni_conf_dirs', ['etc/cni/net.d'], '[0] "etc/cni/net.d"'),
    ('kv', 'ip_masq_cni_conf_dirs', ['etc/cni/net.d'], '[0] "etc/cni/net.d"'),
    ('kv', 'ip_masq_backup_dir', 'var/lib/ipmasq-agent/backup', '"var/lib/ipmasq-agent/backup"'),
    ('json', 'ip_masq_backup_dir', 'backup', '"backup"'),
    ('json', 'ip_masq_docker_daemon_json', 'daemon.json', '"daemon.json"'),
    ('jinja', 'ip_masq_cni_conf_dirs', ['/etc/cni/net.d', 'net.d'], '[1] "net.d"'),
    ('group_vars', 'ip_masq_backup_dir', 'var/backup', '"var/backup"'),
], ids=['yaml-cni', 'kv-cni', 'kv-backup', 'json-backup', 'json-docker', 'jinja-cni', 'group_vars-backup'])
def test_a_relative_path_is_refused_before_the_first_write(nft_node, tmp_path, form, name, value, shown):
    msg = refused_before_the_first_write(nft_node, tmp_path, form, name, value)
    assert msg.startswith('%s of localhost: %s is not an absolute path' % (name, shown)), msg
    assert len(msg.splitlines()) == 1, msg


def test_paths_are_normalised(nft_node, tmp_path):
    """/x//etc/./cni/net.d/ is the directory /x/etc/cni/net.d for the node (its
    network is switched off there)."""
    root, values = node_root(tmp_path)
    conf_dir = values['ip_masq_cni_conf_dirs'][0]
    values['ip_masq_cni_conf_dirs'] = [str(root) + '//etc/./cni/net.d/']
    values['ip_masq_config_path'] = str(root) + '/etc//ip-masq-agent/./config'
    rc, one, _names = role(nft_node, values, ())
    assert rc == 0, one.get('msg')
    assert one['settings']['ip_masq_cni_conf_dirs'] == [conf_dir]
    assert one['settings']['ip_masq_config_path'] == str(root) + '/etc/ip-masq-agent/config'
    with open(os.path.join(conf_dir, '10-imqnet.conflist'), encoding='utf-8') as handle:
        assert json.load(handle)['plugins'][0]['ipMasq'] is False
    assert policy_view.ours(nft_node.rules(4))


def test_an_empty_cni_list_is_no_directory(nft_node, tmp_path):
    """ip_masq_cni_conf_dirs: [] is no directory: the CNI part does nothing (at
    eaef342 the node failed: "conf_dirs: give at least one directory.")."""
    _root, values = node_root(tmp_path)
    before = open(os.path.join(values['ip_masq_cni_conf_dirs'][0], '10-imqnet.conflist'), encoding='utf-8').read()
    values['ip_masq_cni_conf_dirs'] = []
    rc, one, _names = role(nft_node, values, ())
    assert rc == 0, one.get('msg')
    assert one['settings']['ip_masq_cni_conf_dirs'] == []
    assert 'give at least one directory' not in json.dumps(one)
    after = open(os.path.join(_root, 'etc', 'cni', 'net.d', '10-imqnet.conflist'), encoding='utf-8').read()
    assert after == before


# ------------------------------------------------------------------ item 6: misspelt variables

@pytest.mark.parametrize('form,name,value,meant', [
    ('group_vars', 'ip_masq_cni_conf_dir', ['/srv/cni/net.d'], 'ip_masq_cni_conf_dirs'),
    ('kv', 'ip_masq_enable_ip6', True, 'ip_masq_enable_ipv6'),
    ('json', 'ip_masq_nonmasquerade_cidr', ['10.244.0.0/16'], 'ip_masq_nonmasquerade_cidrs'),
    ('yaml', 'ip_masq_non_masquerade_cidrs', ['10.244.0.0/16'], 'ip_masq_nonmasquerade_cidrs'),
    ('jinja', 'ip_masq_cni_conf_dir', ['/srv/cni/net.d'], 'ip_masq_cni_conf_dirs'),
], ids=['group_vars-cni', 'kv-ipv6', 'json-cidr', 'yaml-cidrs', 'jinja-cni'])
def test_a_misspelt_variable_is_refused_before_the_first_write(nft_node, tmp_path, form, name, value, meant):
    msg = refused_before_the_first_write(nft_node, tmp_path, form, name, value)
    assert msg.startswith('%s of localhost: not a variable of the ipmasq.agent.ip_masq role (did you mean %s?)'
                          % (name, meant)), msg
    assert len(msg.splitlines()) == 1, msg


def test_every_problem_is_one_failure(nft_node, tmp_path):
    """A misspelt name, a relative path and a bad type: one failure, a line each."""
    msg = refused_before_the_first_write(nft_node, tmp_path, 'json', 'ip_masq_enable_ip6', True)
    assert len(msg.splitlines()) == 1
    root, values = node_root(tmp_path / 'more')
    before = snapshot(nft_node, root)
    rc, one, _names = role(nft_node, dict(values, ip_masq_backup_dir='backup'),
                           ['-e', 'ip_masq_enable_ip6=true', '-e', 'ip_masq_cidr_limit=many'])
    assert rc != 0 and sorted(line.split(' of localhost: ')[0] for line in one['msg'].splitlines()) == [
        'ip_masq_backup_dir', 'ip_masq_cidr_limit', 'ip_masq_enable_ip6'], one.get('msg')
    assert snapshot(nft_node, root) == before


def test_own_and_the_collection_s_variables_pass(nft_node, tmp_path):
    """A variable of the user's own listed in ip_masq_user_vars, the audit and
    site plays' variables (declared by the collection), and internal
    __ip_masq_* names: the role applies."""
    _root, values = node_root(tmp_path)
    values.update(ip_masq_user_vars=['ip_masq_site_owner'], ip_masq_site_owner='team-a',
                  ip_masq_report_groups=['cluster_east'], ip_masq_report_fail=True)
    rc, one, _names = role(nft_node, values, ['-e', 'ip_masq_serial=1', '-e', 'ip_masq_max_fail_percentage=0',
                                              '-e', '__ip_masq_scratch=1'])
    assert rc == 0, one.get('msg')
    assert policy_view.ours(nft_node.rules(4))
