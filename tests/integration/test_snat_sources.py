"""ipmasq.agent.snat_sources against the rule sets Docker, flannel,
kube-proxy, the CNI plugins, netavark and libvirt write, loaded with the real
iptables-restore (nf_tables and legacy backends) and nft -f into network
namespaces, run through ansible-playbook as a user would.  Every test also
proves the module changed nothing."""
import collections
import json
import os
import re
import types

import pytest

from ipmasq_lab import netlab, policy_view

HERE = os.path.dirname(os.path.abspath(__file__))
PLAYBOOK = os.path.join(HERE, 'playbooks', 'snat_sources.yml')
DATA = os.path.join(netlab.ROOT, 'tests', 'unit', 'plugins', 'module_utils', 'snat_audit_data')
IPT_SETS = ('kube_proxy', 'flannel', 'docker', 'cni', 'netavark', 'libvirt', 'unknown')
NFT_SETS = ('docker_bridges', 'flannel', 'netavark', 'kube_proxy', 'cni', 'libvirt', 'egress_vmap')
READ_ONLY = re.compile(r'^\S*/(ip6?tables(-nft|-legacy)?-save -t nat|ip6?tables(-nft|-legacy)? --version'
                       r'|nft -j list ruleset)$')
LEGACY_RESTORE = {4: '/usr/sbin/iptables-legacy-restore', 6: '/usr/sbin/ip6tables-legacy-restore'}


def path(name):
    return os.path.join(DATA, name)


def read(name):
    with open(path(name)) as f:
        return f.read()


def restore(node, names, family=4, tool=None):
    """Load tool rule sets (iptables-save form) with the node's own iptables-restore."""
    tool = tool or node.backend.tool('iptables-restore' if family == 4 else 'ip6tables-restore')
    for name in names:
        node.ns.exec([tool, '--noflush'], input=read(name + '.save'))


def nft_load(node, names):
    for name in names:
        node.ns.exec(['nft', '-f', path(name + '.nft')])


def legacy_tables(node, family=4):
    f = '/proc/net/ip_tables_names' if family == 4 else '/proc/net/ip6_tables_names'
    return node.ns.exec(['cat', f], check=False).stdout.split()


def snapshot(node, ipv6=False):
    """Everything the module could change: the nat tables it reads, the nft
    ruleset, and which legacy tables the kernel has instantiated."""
    snap = [node.save(4), node.ns.exec(['nft', 'list', 'ruleset']).stdout,
            legacy_tables(node, 4), legacy_tables(node, 6)]
    if ipv6:
        snap.append(node.save(6))
    return snap


def audit(node, check_mode=False, **args):
    rc, tasks = netlab.playbook(node.ns, PLAYBOOK, extra_vars={'audit_args': args}, backend=node.backend,
                                check_mode=check_mode)
    ((name, result),) = [(n, r) for n, r in tasks if not r.get('skipped')]
    assert name == 'Audit'
    return rc, result


def role_audit(node, check_mode=False, **role_vars):
    """The role's tasks/audit.yml, as the role runs it at the end."""
    rc, tasks = netlab.playbook(node.ns, PLAYBOOK, extra_vars={'via_role': True, 'role_vars': role_vars},
                                backend=node.backend, check_mode=check_mode)
    results = [(n, r) for n, r in tasks if not r.get('skipped') and n != 'Audit through the role'
               and not n.endswith('Validate the settings on the controller')]
    ((name, result),) = results
    assert name.endswith('Check that our chain is the only SNAT source for pod traffic')
    return rc, result


def audit_unchanged(node, **args):
    ipv6 = bool(args.get('ipv6'))
    before = snapshot(node, ipv6)
    rc, res = audit(node, **args)
    assert snapshot(node, ipv6) == before, 'the audit changed the node'
    assert res['changed'] is False
    assert res.get('commands') and all(READ_ONLY.match(c) for c in res['commands']), res.get('commands')
    return rc, res


def counts(sources, key=lambda s: (s['backend'], s['owner'], s['allowed'])):
    return dict(collections.Counter(key(s) for s in sources))


def ipt_label(node):
    return 'iptables-nft' if node.backend.name == 'nft' else 'iptables-legacy'


def busy(node):
    """A node that runs everything at once, and ours."""
    restore(node, IPT_SETS)
    node.module()
    nft_load(node, NFT_SETS)


# --------------------------------------------------------------------------
# Attribution on a busy node, both backends
# --------------------------------------------------------------------------

def test_busy_node_every_source_attributed(node):
    busy(node)
    rc, res = audit_unchanged(node)
    assert rc == 0 and not res.get('failed')
    label = ipt_label(node)
    assert counts(res['sources']) == {
        (label, 'ip-masq-agent', True): 1,
        (label, 'kube-proxy', True): 1,
        (label, 'flannel', False): 2,
        (label, 'docker', False): 2, (label, 'docker', True): 2,
        (label, 'cni', False): 1, (label, 'cni', True): 1,
        (label, 'netavark', False): 1, (label, 'netavark', True): 1,
        (label, 'libvirt', False): 3,
        (label, 'unknown', False): 4,
        ('nft', 'docker', False): 2, ('nft', 'docker', True): 3,
        ('nft', 'flannel', False): 2,
        ('nft', 'netavark', False): 1, ('nft', 'netavark', True): 1,
        ('nft', 'kube-proxy', True): 2,
        ('nft', 'cni', False): 1,
        ('nft', 'libvirt', False): 3,
        ('nft', 'unknown', False): 1,
    }
    assert res['ours_present'] and not res['only_ours']
    assert counts(res['offenders'], key=lambda s: s['owner']) == {
        'flannel': 4, 'docker': 4, 'cni': 2, 'netavark': 2, 'libvirt': 6, 'unknown': 4}
    # The unreachable OLD-SNAT chain is listed and is no offender.
    (old,) = [s for s in res['sources'] if not s['reachable']]
    assert old['chain'] == 'OLD-SNAT' and old not in res['offenders']
    # Paths through jumps, gotos and nft verdict maps.
    by_chain = {s['chain']: s for s in res['sources']}
    assert by_chain['EGRESS-GW-SNAT']['path'] == ['POSTROUTING', 'EGRESS-GW', 'EGRESS-GW-SNAT']
    assert by_chain['nat-postrouting-out__docker0']['path'] == ['nat-POSTROUTING', 'nat-postrouting-out__docker0']
    assert by_chain['masq_checks']['path'] == ['postrouting', 'masq_checks']
    assert by_chain['IP-MASQ-AGENT']['ours'] and by_chain['IP-MASQ-AGENT']['allowed_by'] == 'ours'
    assert by_chain['KUBE-POSTROUTING']['scope'] == 'service'
    # iptables-nft's own nft table is not reported a second time; ip6 tables only with ipv6.
    assert not any(s['table'] in ('ip nat', 'ip6 flannel-ipv6') for s in res['sources'])
    assert res['audited'][0] == 'IPv4 nat table (%s)' % label
    assert res['summary'].startswith('22 other SNAT rules would act on pod traffic')


def test_allow_list_fail_and_warn(node):
    busy(node)
    rc, res = audit_unchanged(node, on_offenders='fail')
    assert rc != 0 and res['failed']
    assert res['msg'].startswith('SNAT audit: 22 other SNAT rules would act on pod traffic')
    assert 'flannel: -A FLANNEL-POSTRTG' in res['msg'] and 'FLANNEL-POSTRTG' in res['msg']
    assert '"ip-masq": false' in res['msg']
    assert len(res['offenders']) == 22
    rc, res = audit_unchanged(node, on_offenders='warn')
    assert rc == 0 and not res.get('failed')
    assert len(res['warnings']) == 23 and res['warnings'][0].startswith('SNAT audit: 22 other')
    allow = ['docker', 'flannel', 'cni', 'netavark', 'libvirt',
             {'chain': 'EGRESS-GW', 'reason': 'egress gateway'},
             {'regex': '-o eth9 -j SNAT', 'reason': 'the lab uplink'},
             {'table': 'egress'}]
    rc, res = audit_unchanged(node, on_offenders='fail', allow=allow)
    assert rc == 0 and res['only_ours'] and res['offenders'] == [], res.get('msg')
    assert not res.get('warnings')


def test_check_mode_returns_the_same(node):
    busy(node)
    _rc, real = audit_unchanged(node)
    before = snapshot(node)
    rc, checked = audit(node, check_mode=True)
    assert snapshot(node) == before
    assert rc == 0 and checked['changed'] is False
    assert checked['sources'] == real['sources'] and checked['summary'] == real['summary']


def test_only_ours_and_kube_proxy(node):
    restore(node, ['kube_proxy'])
    nft_load(node, ['kube_proxy'])
    rc, res = audit_unchanged(node, on_offenders='fail')
    assert rc != 0 and not res['ours_present']
    assert 'no MASQUERADE of IP-MASQ-AGENT is reached from POSTROUTING; run ipmasq.agent.masq_chain.' in res['msg']
    node.module()
    rc, res = audit_unchanged(node, on_offenders='fail')
    assert rc == 0 and res['only_ours']
    assert res['summary'] == 'IP-MASQ-AGENT is the only SNAT source for pod traffic; 3 other rules allowed: kube-proxy (3).'
    assert res['msg'] == 'SNAT audit: ' + res['summary']


def test_our_chain_under_another_name_and_a_leftover(node):
    node.module(chain='SNAT-PODS')
    # A leftover of ours under the old name, as a run before issue 26 left it
    # (a rename now removes it): written by hand.
    lines = policy_view.ipt_expect(['10.0.0.0/8'])
    node.ns.exec([node.backend.tool('iptables-restore'), '--noflush'], input='*nat\n%s\nCOMMIT\n' % '\n'.join(
        line + ' [0:0]' if line.startswith(':') else line for line in lines))
    rc, res = audit_unchanged(node, chain='SNAT-PODS')
    (stale,) = res['offenders']
    assert stale['chain'] == 'IP-MASQ-AGENT' and stale['owner'] == 'ip-masq-agent'
    assert 'the next run of ipmasq.agent.masq_chain removes IP-MASQ-AGENT' in stale['hint']
    node.module(chain='SNAT-PODS')      # any run of ours removes it
    rc, res = audit_unchanged(node, chain='SNAT-PODS')
    assert res['only_ours']


def test_ipv6(node):
    restore(node, ['flannel6'], family=6)
    node.module(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/48'])
    nft_load(node, ['flannel'])
    rc, res = audit_unchanged(node, ipv6=True)
    assert res['ours_by_family'] == {'ipv4': True, 'ipv6': True}
    assert counts(res['offenders'], key=lambda s: (s['family'], s['backend'], s['owner'])) == {
        ('ipv6', ipt_label(node), 'flannel'): 2, ('ipv4', 'nft', 'flannel'): 2, ('ipv6', 'nft', 'flannel'): 2}
    # Without ipv6 the IPv6 side is not read at all.
    rc, res = audit_unchanged(node)
    assert {s['family'] for s in res['sources']} == {'ipv4'}
    assert not any('ip6tables' in c for c in res['commands'])


# --------------------------------------------------------------------------
# Backends: which tables are read, and that none is created
# --------------------------------------------------------------------------

def test_a_legacy_table_the_kernel_has_not_loaded_is_not_created(nft_node):
    nft_node.module()
    assert legacy_tables(nft_node) == []
    rc, res = audit_unchanged(nft_node)
    assert legacy_tables(nft_node) == [] and legacy_tables(nft_node, 6) == []
    assert any('legacy nat table is not loaded' in n for n in res['notes'])
    assert not any('legacy' in c for c in res['commands'])
    assert res['only_ours']


def test_legacy_backend_without_any_nat_table(backends):
    backend = backends['legacy']
    with netlab.Netns('node') as ns:
        node = types.SimpleNamespace(ns=ns, backend=backend)
        rc, res = audit(node)
        assert legacy_tables(node) == [] and legacy_tables(node, 6) == []
        assert rc == 0 and res['sources'] == [] and not res['ours_present']
        assert res['commands'][0] == os.path.join(backend.path_dir, 'iptables') + ' --version'
        assert not any(c.startswith(os.path.join(backend.path_dir, 'iptables-save')) for c in res['commands'])
        assert any('legacy nat table is not loaded' in n for n in res['notes'])


def test_both_backends_at_once(nft_node):
    """Docker on iptables-legacy, kube-proxy and ours on iptables-nft: both are active in the kernel."""
    restore(nft_node, ['docker'], tool=LEGACY_RESTORE[4])
    restore(nft_node, ['kube_proxy'])
    nft_node.module()
    before = legacy_tables(nft_node)
    assert before == ['nat']
    rc, res = audit_unchanged(nft_node)
    assert counts(res['sources']) == {
        ('iptables-nft', 'ip-masq-agent', True): 1, ('iptables-nft', 'kube-proxy', True): 1,
        ('iptables-legacy', 'docker', False): 2, ('iptables-legacy', 'docker', True): 2}
    assert res['audited'] == ['IPv4 nat table (iptables-nft)', 'IPv4 nat table (iptables-legacy)',
                              'nft ruleset (no other nat tables)']


def test_ours_in_both_iptables_flavours_is_not_only_ours(nft_node):
    """Our chain in iptables-nft's nat table (the run) and in the legacy one
    (left behind when the node's iptables moved): packets pass both."""
    nft_node.module()
    rc, res = audit_unchanged(nft_node)
    assert res['ours_in'] == ['iptables-nft'] and res['only_ours'] is True
    nft_node.ns.exec([LEGACY_RESTORE[4], '--noflush'], input=nft_node.save(4))
    rc, res = audit_unchanged(nft_node)
    assert res['ours_backends'] == ['iptables'] and res['ours_in'] == ['iptables-legacy', 'iptables-nft']
    assert res['only_ours'] is False and 'in both the iptables-legacy and the iptables-nft nat table' in res['summary']


def test_ours_in_a_legacy_nat_table_without_the_legacy_tools_is_named(nft_node):
    """iptables-legacy-save is not installed: the kernel says which chains
    its legacy nat table holds, and ours there is not only ours."""
    nft_node.module()
    nft_node.ns.exec([LEGACY_RESTORE[4], '--noflush'], input=nft_node.save(4))
    before = snapshot(nft_node)
    rc, tasks = netlab.playbook(nft_node.ns, PLAYBOOK, extra_vars={'audit_args': {}}, backend=nft_node.backend,
                                hide=['/usr/sbin/xtables-legacy-multi'])
    ((_name, res),) = [(n, r) for n, r in tasks if not r.get('skipped')]
    assert snapshot(nft_node) == before and not any('legacy' in c for c in res['commands']), res['commands']
    assert res['ours_in'] == ['iptables-nft'] and res['only_ours'] is False, res
    assert any(n.startswith('IPv4: our chain IP-MASQ-AGENT is in the legacy nat table') for n in res['notes']), res['notes']


def test_iptables_nft_table_with_native_nft_chains_is_read_from_nft(nft_node):
    restore(nft_node, ['docker'])
    nft_load(nft_node, ['user_nat'])
    assert 'incompatible' in nft_node.save(4) or nft_node.save(4).strip() == ''
    rc, res = audit_unchanged(nft_node)
    assert any('incompatible' in n for n in res['notes'])
    assert counts(res['offenders'], key=lambda s: (s['table'], s['owner'])) == {
        ('ip nat', 'docker'): 3, ('ip nat', 'unknown'): 2}
    assert [s['chain'] for s in res['sources'] if not s['reachable']] == ['unused']


def test_include_nft_never(node):
    busy(node)
    rc, res = audit_unchanged(node, include_nft='never')
    assert {s['backend'] for s in res['sources']} == {ipt_label(node)}
    assert not any('nft -j' in c for c in res['commands'])


def test_bad_allow_entry_fails_before_reading(node):
    rc, res = audit(node, allow=[{'owner': 'dockerd'}])
    assert rc != 0 and res['failed']
    assert "allow: allow[0].owner 'dockerd' is not one of" in res['msg']
    assert 'commands' not in res


# --------------------------------------------------------------------------
# The unit tests' files are what the real tools print
# --------------------------------------------------------------------------

@pytest.mark.parametrize('name', [f[:-4] for f in sorted(os.listdir(DATA)) if f.endswith('.nft')])
def test_nft_fixture_is_real_nft_output(nft_node, name):
    nft_load(nft_node, [name])
    got = json.loads(nft_node.ns.exec(['nft', '-j', 'list', 'ruleset']).stdout)['nftables']
    want = json.loads(read(name + '.json'))['nftables']
    assert [o for o in got if 'metainfo' not in o] == [o for o in want if 'metainfo' not in o]


@pytest.mark.parametrize('name', [f[:-5] for f in sorted(os.listdir(DATA))
                                  if f.endswith('.save') and f not in ('compat.save', 'incompatible.save')])
def test_iptables_fixture_is_real_iptables_save_output(node, name):
    family = 6 if name.endswith('6') else 4
    restore(node, [name], family=family)
    got = netlab.nat_rules(node.save(family))
    want = netlab.nat_rules(read(name + '.save'))
    assert got == want if node.backend.name == 'nft' else sorted(got) == sorted(want)


# --------------------------------------------------------------------------
# The role's audit step
# --------------------------------------------------------------------------

def test_role_audit_step_fail_warn_and_check_mode(nft_node):
    restore(nft_node, ['docker', 'kube_proxy'])
    nft_node.module()
    before = snapshot(nft_node)
    rc, res = role_audit(nft_node, ip_masq_audit='fail')
    assert rc != 0 and res['failed']
    assert res['msg'].startswith('SNAT audit: 2 other SNAT rules would act on pod traffic: docker (2)')
    # warn (the role's default): the play goes on, with one warning per problem.
    rc, res = role_audit(nft_node)
    assert rc == 0 and not res.get('failed') and len(res['warnings']) == 3
    # Check mode: earlier tasks changed nothing, so even fail only warns.
    rc, res = role_audit(nft_node, check_mode=True, ip_masq_audit='fail')
    assert rc == 0 and not res.get('failed') and len(res['warnings']) == 3
    # The role's allow list and chain name reach the module.
    rc, res = role_audit(nft_node, ip_masq_audit='fail', ip_masq_audit_allow=['docker'])
    assert rc == 0 and res['only_ours'] and res['chain'] == 'IP-MASQ-AGENT'
    rc, res = role_audit(nft_node, ip_masq_audit='fail', ip_masq_audit_allow=['docker'], ip_masq_chain='OTHER')
    assert rc != 0 and not res['ours_present']
    # The role's audit says what the role does (in check mode: what the run would do), never which module to run.
    assert "IPv4: no MASQUERADE of OTHER is reached from POSTROUTING; the role's policy step (tag ip_masq_chain) " \
        'applies it' in res['msg'], res['msg']
    rc, res = role_audit(nft_node, check_mode=True, ip_masq_audit='fail', ip_masq_audit_allow=['docker'],
                         ip_masq_chain='OTHER')
    assert rc == 0 and res['warnings'][1] == (
        'IPv4: no MASQUERADE of OTHER is reached from POSTROUTING; this run would apply it (check mode: nothing was '
        'written yet).'), res['warnings']
    assert 'run ipmasq.agent.masq_chain' not in res['msg'] + ' '.join(res['warnings'])
    assert snapshot(nft_node) == before


def test_role_audit_step_ipv6(nft_node):
    restore(nft_node, ['flannel6'], family=6)
    nft_node.module(ipv6=True, nonmasquerade_cidrs=['10.0.0.0/8', 'fd00:10::/48'])
    rc, res = role_audit(nft_node, ip_masq_audit='fail', ip_masq_enable_ipv6=True)
    assert rc != 0 and [s['family'] for s in res['offenders']] == ['ipv6', 'ipv6']
    rc, res = role_audit(nft_node, ip_masq_audit='fail')
    assert rc == 0 and res['only_ours']
