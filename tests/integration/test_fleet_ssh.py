"""A real site run: playbooks/site.yml and playbooks/audit.yml over SSH against
a small fleet (3 hosts in 2 clusters, the example inventory's group_vars),
each host a network namespace with its own OpenSSH server
(tests/lab/ipmasq_lab/fleetlab.py). The plays say become: true; Ansible logs in
as root (ansible_user: root, as the README says to write it), so it runs no
sudo, which is not installed on CI machines."""
import json
import os
import re

import pytest

from ipmasq_lab import fleetlab, netlab
from ipmasq_lab.policy_view import CHAIN

LINK_LOCAL = '169.254.0.0/16'
EAST = [LINK_LOCAL, '10.244.0.0/16', '10.30.0.0/16']         # inventories/example/group_vars/cluster_east.yml
WEST_V4 = ['172.18.0.0/16', '10.168.0.0/16']                  # cluster_west.yml (masqLinkLocal: true)
WEST_V6 = ['fe80::/10', 'fd00:18::/48']
DOCKER_RULE = ['-s', '172.17.0.0/16', '!', '-o', 'docker0', '-j', 'MASQUERADE']
FOREIGN_RETURN = ['-d', '198.51.100.0/24', '-j', 'RETURN']
# Our table beside our chain, as a switch of backend left half done would leave it.
HALF_SWITCH = '''table inet ip-masq-agent {
  chain postrouting {
    type nat hook postrouting priority srcnat + 1; policy accept;
    oifname "imq-none" masquerade comment "ip-masq-agent: left by a switch"
  }
}
'''
# A host that stops answering SSH: connections reset at once (also the
# controller's ControlPersist one), so the run sees it unreachable without a timeout.
CUT_SSH = '''table inet imq_cut_ssh {
  chain input {
    type filter hook input priority -10; policy accept;
    tcp dport 22 reject with tcp reset
  }
}
'''
# What the machine itself has at the paths the role writes by default: the
# test hosts must leave them as they were.
MACHINE_PATHS = ['/etc/ip-masq-agent/config', '/etc/systemd/system/ip-masq-agent.service',
                 '/etc/systemd/system/ip-masq-agent.timer', '/etc/systemd/system/ip-masq-agent.path',
                 '/etc/tmpfiles.d/ip-masq-agent.conf', '/usr/local/lib/ipmasq-agent', '/var/lib/ipmasq-agent']
# Node round trips (SSH commands) per host in a run that changes nothing: one
# (the role's one task, ipmasq.agent.ip_masq: files, resync code, chain and
# audit in one node run), with the resync on or off.
NO_CHANGE_BUDGET = {'resync off': 1, 'resync on': 1}
NODE_TASK = "Validate, write the agent's files, apply the policy and audit, in one node run"


def machine_state():
    return {p: (os.stat(p).st_mtime_ns if os.path.lexists(p) else None) for p in MACHINE_PATHS}


def returns(host, family=4):
    """The destinations of our chain's RETURN rules on ``host``, in order."""
    rules = [r for r in netlab.nat_rules(host.nat(family)) if r.startswith('-A %s ' % CHAIN)]
    return [re.search(r' -d (\S+) ', r).group(1) for r in rules if r.endswith('-j RETURN')]


def jumps(host):
    return [r for r in netlab.nat_rules(host.nat()) if r.endswith('-j ' + CHAIN)]


def sessions(host):
    """SSH commands this host's sshd has run so far."""
    with open(host.sshd_log, encoding='utf-8', errors='replace') as handle:
        return handle.read().count('Starting session:')


def read_report(path):
    with open(path + '.json') as handle:
        report = json.load(handle)
    with open(path + '.md') as handle:
        return report, handle.read()


def run_ok(fleet, playbook, *args, **kwargs):
    run = fleet.playbook(playbook, *args, **kwargs)
    assert run.rc == 0, run.explain()
    return run


def recap_changed(run):
    return {host: stats['changed'] for host, stats in run.stats.items()}


def our_sshds(fleet_dir):
    """sshd processes still running with a config below ``fleet_dir``."""
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as handle:
                argv = handle.read().split(b'\0')
        except OSError:
            continue
        if argv and argv[0].endswith(b'sshd') and any(fleet_dir.encode() in a for a in argv):
            found.append(int(pid))
    return found


@pytest.fixture
def fleet():
    with fleetlab.Fleet() as made:
        yield made


def test_site_run_over_ssh_then_no_change_check_mode_and_tags(fleet):
    before = machine_state()
    east1, east2, west1 = fleet.host('east-1'), fleet.host('east-2'), fleet.host('west-1')

    # Check mode on fresh hosts: every host would change, nothing is written.
    run = run_ok(fleet, 'site.yml', check=True)
    assert sorted(run.changed_hosts()) == ['east-1', 'east-2', 'west-1']
    assert all(jumps(h) == [] for h in fleet.hosts)
    assert all(not os.path.exists(h.path('etc')) for h in fleet.hosts)

    # The site run, as root over SSH: each cluster gets its own group_vars.
    run = run_ok(fleet, 'site.yml')
    assert recap_changed(run) and all(recap_changed(run).values()), run.stats
    assert returns(east1) == EAST and returns(east2) == EAST
    assert returns(west1) == WEST_V4 and returns(west1, 6) == WEST_V6
    assert '--random-fully' in west1.nat() and '--random-fully' not in east1.nat()
    for host in fleet.hosts:
        with open(host.path('etc', 'ip-masq-agent', 'config')) as handle:
            config = handle.read()
        assert ('10.244.0.0/16' in config) == (host.cluster == 'cluster_east')
        assert sorted(os.listdir(host.path('etc', 'systemd', 'system'))) == [
            'ip-masq-agent.path', 'ip-masq-agent.service', 'ip-masq-agent.timer']

    # Again: nothing changes on any host, and few commands reach a node.
    counts = {h.name: sessions(h) for h in fleet.hosts}
    run = run_ok(fleet, 'site.yml')
    assert recap_changed(run) == {'east-1': 0, 'east-2': 0, 'west-1': 0}
    for host in fleet.hosts:
        assert sessions(host) - counts[host.name] <= NO_CHANGE_BUDGET['resync on'], host.name

    # Check mode and diff mode of a converged fleet: nothing to change.
    run = run_ok(fleet, 'site.yml', check=True, diff=True)
    assert run.changed_hosts() == []

    # The resync off: the units and code go (once), then three commands per host.
    off = {'ip_masq_resync_enabled': False}
    run = run_ok(fleet, 'site.yml', extra_vars=off)
    assert all(not os.path.exists(h.path('usr', 'local', 'lib', 'ipmasq-agent')) for h in fleet.hosts)
    assert all(os.listdir(h.path('etc', 'systemd', 'system')) == [] for h in fleet.hosts)
    counts = {h.name: sessions(h) for h in fleet.hosts}
    run = run_ok(fleet, 'site.yml', extra_vars=off)
    assert run.changed_hosts() == []
    for host in fleet.hosts:
        assert sessions(host) - counts[host.name] == NO_CHANGE_BUDGET['resync off'], host.name

    # --tags still picks steps: only the chain part of the node run (and the validation) runs.
    west1.ipt('-F', CHAIN)
    with open(west1.path('etc', 'ip-masq-agent', 'config'), 'a') as handle:
        handle.write('# edited by hand\n')
    run = run_ok(fleet, 'site.yml', '--tags', 'ip_masq_chain', extra_vars=off)
    ran = [name.split(' : ', 1)[-1] for name, hosts in run.tasks if any(not r.get('skipped') for r in hosts.values())]
    assert ran[-1] == NODE_TASK and not [n for n in ran if n.startswith('Apply the SNAT policy')], ran
    node_runs = run.results(NODE_TASK)
    assert {h: (res.get('parts'), res.get('files'), res.get('audit')) for h, res in node_runs.items()} == {
        h.name: (['chain'], None, None) for h in fleet.hosts}
    assert run.changed_hosts() == ['west-1'] and returns(west1) == WEST_V4
    with open(west1.path('etc', 'ip-masq-agent', 'config')) as handle:
        assert handle.read().endswith('# edited by hand\n'), 'the files part ran under --tags ip_masq_chain'

    assert machine_state() == before, 'a test host wrote to the machine itself'
    fleet_dir = fleet.dir
    fleet.down()
    assert our_sshds(fleet_dir) == []


def test_a_no_change_role_run_is_one_ssh_command_per_host():
    """Issue 20's goal: a site run of the role that changes nothing reaches
    each node with one SSH command (sshd's session lines, as bench/fleet_ssh.py
    counts them), with the resync on and off, in check mode too; with the
    role's defaults for flannel, Docker and kubelet (auto, auto, report: none
    of them is installed on the test hosts), whose settings that one command
    reads too."""
    defaults = {'ip_masq_flannel': 'auto', 'ip_masq_docker': 'auto', 'ip_masq_kubelet': 'report'}
    with fleetlab.Fleet(clusters=(('cluster_east', 1), ('cluster_west', 1)), host_vars=defaults) as fleet:
        for extra in ({}, {'ip_masq_resync_enabled': False}):
            run_ok(fleet, 'site.yml', extra_vars=extra)
            for check in (False, True):
                counts = {h.name: sessions(h) for h in fleet.hosts}
                run = run_ok(fleet, 'site.yml', extra_vars=extra, check=check)
                assert run.changed_hosts() == [], (extra, check, run.stats)
                used = {h.name: sessions(h) - counts[h.name] for h in fleet.hosts}
                assert all(n <= 1 for n in used.values()), (extra, check, used)


def test_fleet_report_names_the_off_policy_hosts_and_can_gate(fleet):
    east1, east2, west1 = fleet.host('east-1'), fleet.host('east-2'), fleet.host('west-1')
    fleet.write_host_vars(east1, ip_masq_backend='nftables')   # one host's policy in nftables
    run_ok(fleet, 'site.yml')
    east2.ipt('-I', 'POSTROUTING', *DOCKER_RULE)      # Docker's default-bridge rule
    west1.ipt('-F', CHAIN)                             # our chain emptied, and a rule of someone else's in it
    west1.ipt('-A', CHAIN, *FOREIGN_RETURN)
    west1.ns.exec(['nft', '-f', '-'], input=HALF_SWITCH)   # ours in nftables too: a switch left half done
    nat_before = {h.name: (h.nat(4), h.nat(6)) for h in fleet.hosts}
    out = os.path.join(fleet.dir, 'report')

    files_before = {h.name: sorted(os.walk(h.root)) for h in fleet.hosts}
    run_ok(fleet, 'audit.yml', extra_vars={'ip_masq_report_path': out})
    # It only reads (a drifted chain shows as "changed", as in check mode).
    assert {h.name: (h.nat(4), h.nat(6)) for h in fleet.hosts} == nat_before
    assert {h.name: sorted(os.walk(h.root)) for h in fleet.hosts} == files_before
    report, markdown = read_report(out)

    assert report['off_policy_hosts'] == ['east-2', 'west-1'] and report['unreachable_hosts'] == []
    hosts = report['hosts']
    assert hosts['east-1']['policy'] == 'ok' and hosts['east-1']['findings'] == []
    assert hosts['east-1']['chain'] == 'in place' and hosts['east-2']['chain'] == 'in place'
    assert hosts['west-1']['chain'] == 'drifted'
    assert any('rewrite chain IP-MASQ-AGENT' in a for a in hosts['west-1']['chain_actions'])
    docker = [f for f in hosts['east-2']['findings'] if f['severity'] == 'off-policy']
    assert len(docker) == 1 and 'docker SNAT rule' in docker[0]['what'] and '172.17.0.0/16' in docker[0]['what']
    assert '"ip-masq": false' in docker[0]['do']
    # Which backend holds the policy: nftables on east-1 (whose iptables is not even read), iptables elsewhere.
    assert (hosts['east-1']['policy_backend'], hosts['east-1']['policy_in'], hosts['east-1']['ours_backends']) == (
        'nftables', ['nftables'], ['nftables'])
    assert hosts['east-1']['only_ours'] is True and re.match(r'^\d+\.\d+\.\d+', hosts['east-1']['nft'])
    assert hosts['east-2']['policy_backend'] == 'iptables' and hosts['east-2']['policy_in'] == ['iptables-nft']
    for name in ('east-2', 'west-1'):
        assert hosts[name]['backend'] == 'nf_tables' and re.match(r'^\d+\.\d+\.\d+$', hosts[name]['iptables'])
    for host in hosts.values():
        assert host['kernel'] == os.uname().release
        assert host['resync'] == 'not checked'   # ip_masq_resync_systemctl: false on the test hosts
    # Ours in both backends on west-1: a finding with what to do.
    assert hosts['west-1']['ours_backends'] == ['iptables', 'nftables'] and hosts['west-1']['only_ours'] is False
    both = [f for f in hosts['west-1']['findings'] if f['what'].startswith('our policy is in both')]
    assert len(both) == 1 and both[0]['severity'] == 'off-policy'
    assert '(iptables-nft, nftables)' in both[0]['what'] and 'nft delete table inet ip-masq-agent' in both[0]['do']
    # The drift names the rules: the ones a run puts back, and the one it takes out.
    drift = hosts['west-1']['chain_drift']['ipv4']
    assert drift['extra'] == ['-A %s %s' % (CHAIN, ' '.join(FOREIGN_RETURN))]
    assert [r for r in drift['missing'] if ' -d 172.18.0.0/16 ' in r] and drift['missing'][-1].endswith('--random-fully')
    (drifted,) = [f for f in hosts['west-1']['findings'] if f['what'].startswith('our chain has drifted')]
    assert 'IPv4 chain: missing `-A %s -d 172.18.0.0/16' % CHAIN in drifted['what']
    assert 'extra `-A %s -d 198.51.100.0/24 -j RETURN`' % CHAIN in drifted['what']
    assert report['groups'] == {
        'cluster_east': dict(hosts=2, off_policy=1, chain_missing=0, chain_drifted=0, foreign_snat=1, offenders=1,
                             resync_not_active=0, unreadable=0, unreachable=0, in_both_backends=0),
        'cluster_west': dict(hosts=1, off_policy=1, chain_missing=0, chain_drifted=1, foreign_snat=0, offenders=0,
                             resync_not_active=0, unreadable=0, unreachable=0, in_both_backends=1)}
    assert report['totals']['off_policy'] == 2
    assert report['gate'] == {'off_policy': 'report', 'unreachable': 'fail'}
    assert '**2 off-policy** (east-2, west-1), 0 unreachable' in markdown
    assert '### east-2' in markdown and '### west-1' in markdown and '### east-1' not in markdown
    assert '| cluster_west | 1 | 1 | 0 | 1 |' in markdown
    assert '| **iptables-nft and nftables** |' in markdown

    # The gate: the same report, the off-policy hosts fail the run, exit
    # status 2. east-1 has stopped answering SSH: it is ignored here as asked,
    # still counts in its cluster, and the exit status tells it apart.
    east1.ns.exec(['nft', '-f', '-'], input=CUT_SSH)
    run = fleet.playbook('audit.yml', extra_vars={'ip_masq_report_path': out, 'ip_masq_report_fail': True,
                                                  'ip_masq_report_unreachable': 'ignore'})
    failed = sorted({h for _n, hosts in run.tasks for h, r in hosts.items() if r.get('failed') and not r.get('unreachable')})
    assert run.rc == 2 and failed == ['east-2', 'west-1'], run.explain()
    assert run.stats['east-1']['unreachable'] == 0 and run.stats['east-1']['ignored'] == 1, run.stats
    report, markdown = read_report(out)
    assert report['unreachable_hosts'] == ['east-1'] and report['off_policy_hosts'] == ['east-2', 'west-1']
    assert report['hosts']['east-1']['policy'] == 'unreachable'
    assert [f['severity'] for f in report['hosts']['east-1']['findings']] == ['warning']
    assert report['groups']['cluster_east']['hosts'] == 2 and report['groups']['cluster_east']['unreachable'] == 1
    assert sum(g['hosts'] for g in report['groups'].values()) == report['totals']['hosts'] == 3
    assert report['gate'] == {'off_policy': 'fail', 'unreachable': 'ignore'}
    assert 'unreachable hosts are reported only (ip_masq_report_unreachable=ignore)' in markdown
    # The default: an unreachable host fails the run with Ansible's own 4, gate or not.
    run = fleet.playbook('audit.yml', extra_vars={'ip_masq_report_path': out})
    assert run.rc == 4 and run.stats['east-1']['unreachable'] == 1, run.explain()
    report, _markdown = read_report(out)
    assert report['unreachable_hosts'] == ['east-1'] and report['off_policy_hosts'] == ['east-1', 'east-2', 'west-1']
    assert report['groups']['cluster_east']['hosts'] == 2 and report['groups']['cluster_east']['off_policy'] == 2
    east1.ns.exec(['nft', 'delete', 'table', 'inet', 'imq_cut_ssh'])

    # Repaired: the chain back by a site run, Docker's rule removed by hand.
    east2.ipt('-D', 'POSTROUTING', *DOCKER_RULE)
    run_ok(fleet, 'site.yml')
    run = run_ok(fleet, 'audit.yml', extra_vars={'ip_masq_report_path': out, 'ip_masq_report_fail': True})
    with open(out + '.json') as handle:
        assert json.load(handle)['off_policy_hosts'] == []


def test_rolling_run_stops_before_the_remaining_hosts_are_touched(fleet):
    east1, east2, west1 = fleet.host('east-1'), fleet.host('east-2'), fleet.host('west-1')
    # east-2 fails on the node: its config file cannot be written there.
    fleet.write_host_vars(east2, ip_masq_config_path='/proc/imq-no-such-dir/config')
    before = {h.name: sessions(h) for h in fleet.hosts}

    # Two hosts per batch: east-1 and east-2, then west-1. One failure in the
    # first batch is over 0 %, so the second batch never starts.
    run = fleet.playbook('site.yml', extra_vars={'ip_masq_serial': 2, 'ip_masq_max_fail_percentage': 0})
    assert run.rc != 0
    assert run.failed_hosts() == ['east-2'], run.explain()
    assert jumps(east2) == []
    # east-1, in the same batch, stopped after that task too: the role's one
    # task (files and chain in one node run) was done there, no later step;
    # the third host was never touched: no SSH session, no rule, not in the recap.
    assert os.path.exists(east1.path('etc', 'ip-masq-agent', 'config')) and len(jumps(east1)) == 1
    assert sessions(west1) == before['west-1']
    assert jumps(west1) == [] and 'west-1' not in run.stats
    assert run.touched_hosts() == ['east-1', 'east-2']
