"""The one-line msg of each module's result (module_utils/_msg.py) and the
audit's advice by who applies the policy (module, role, role in check mode)."""
from ansible_collections.ipmasq.agent.plugins.module_utils import _msg
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.report import offender_lines


def chain_result(**kw):
    result = {'chain': 'IP-MASQ-AGENT', 'state': 'present', 'other_iptables': [],
              'ipv4': {'managed': True, 'changed': True, 'before': {'rules': []}, 'rules': ['r'] * 5},
              'ipv6': {'managed': False, 'changed': False, 'before': {'rules': []}, 'rules': []},
              'nftables': {'managed': False, 'changed': False, 'table': 'table inet ip-masq-agent'}}
    result.update(kw)
    return result


def test_masq_chain_msg_per_family_and_in_check_mode():
    assert _msg.chain_msg(chain_result(), False) == 'IP-MASQ-AGENT: IPv4 5 rules written (was 0), IPv6 not managed'
    assert _msg.chain_msg(chain_result(), True) == 'IP-MASQ-AGENT: would write IPv4 5 rules (was 0), IPv6 not managed'
    same = chain_result(ipv4={'managed': True, 'changed': False, 'before': {'rules': ['r'] * 5}, 'rules': ['r'] * 5})
    assert _msg.chain_msg(same, False) == 'IP-MASQ-AGENT: no change (IPv4 5 rules, IPv6 not managed)'
    moved = chain_result(ipv4={'managed': False, 'changed': True, 'rules': []},
                         nftables={'managed': True, 'changed': True, 'table': 'table inet ip-masq-agent'})
    # A switch says it in the order it does it: the new backend written, then ours removed from the old one.
    assert _msg.chain_msg(moved, True) == ('IP-MASQ-AGENT: would write nftables table inet ip-masq-agent, '
                                           'would remove IPv4 chain')
    renamed = chain_result(chain='NEW-SNAT')
    renamed['ipv4']['others'] = [{'chain': 'IP-MASQ-AGENT', 'chain_exists': True, 'rules': [], 'jumps': []}]
    assert _msg.chain_msg(renamed, False) == ('NEW-SNAT: IPv4 5 rules written (was 0), '
                                              'IPv4 old chain IP-MASQ-AGENT removed, IPv6 not managed')


def test_daemon_and_role_msgs():
    edited = {'installed': True, 'changed': True, 'edited': ['/etc/docker/daemon.json'], 'restart_required': True}
    assert _msg.daemon_msg('docker', edited, False) == 'docker: 1 file edited (/etc/docker/daemon.json), restart required'
    assert _msg.daemon_msg('docker', edited, True).startswith('docker: would edit 1 file')
    assert _msg.daemon_msg('kubelet', {'installed': False}, False) == 'kubelet: not installed, no change'
    assert _msg.role_msg({'msg': 'no change'}, [], False) == 'no change'
    assert _msg.role_msg({'msg': 'no change'}, ['resync', 'audit'], True) == (
        'no change; the role would then run: resync, audit')


def missing_ipv4():
    return {'chain': 'IP-MASQ-AGENT', 'ours_by_family': {'ipv4': False}, 'ours_backends': [], 'sources': [],
            'offenders': [], 'notes': []}


def test_the_audit_advice_says_what_applies_the_policy():
    module, = offender_lines(missing_ipv4())
    assert module.endswith('; run ipmasq.agent.masq_chain.')
    role, = offender_lines(missing_ipv4(), 'role', False)
    assert "the role's policy step (tag ip_masq_chain) applies it" in role and 'masq_chain.' not in role
    check, = offender_lines(missing_ipv4(), 'role', True)
    assert check == ('IPv4: no MASQUERADE of IP-MASQ-AGENT is reached from POSTROUTING; this run would apply it '
                     '(check mode: nothing was written yet).')


def test_a_change_names_the_backend_and_why_it_was_chosen():
    """Ad hoc (ansible node -m ipmasq.agent.ip_masq, or masq_chain) the one line is all a person reads: a run
    that changes (or would change) something says in which backend and why that one; no change stays short."""
    auto = chain_result(selected_backend='iptables',
                        selected_backend_reason='auto: a node with neither policy yet, where iptables is installed')
    assert _msg.chain_msg(auto, False) == ('IP-MASQ-AGENT: IPv4 5 rules written (was 0), IPv6 not managed; backend '
                                           'iptables, auto: a node with neither policy yet, where iptables is installed')
    asked = chain_result(ipv4={'managed': False, 'changed': True, 'rules': []}, selected_backend='nftables',
                         selected_backend_reason='asked for (backend=nftables)',
                         nftables={'managed': True, 'changed': True, 'table': 'table inet ip-masq-agent'})
    assert _msg.chain_msg(asked, True) == ('IP-MASQ-AGENT: would write nftables table inet ip-masq-agent, would remove '
                                           'IPv4 chain; backend nftables, asked for (backend=nftables)')
    same = dict(auto, ipv4={'managed': True, 'changed': False, 'before': {'rules': ['r'] * 5}, 'rules': ['r'] * 5})
    assert _msg.chain_msg(same, False) == 'IP-MASQ-AGENT: no change (IPv4 5 rules, IPv6 not managed)'
    # state absent: ours removed wherever it was, no backend chosen.
    gone = chain_result(state='absent', selected_backend=None, selected_backend_reason=None,
                        ipv4={'managed': False, 'changed': True, 'rules': []})
    assert _msg.chain_msg(gone, False) == 'IP-MASQ-AGENT: IPv4 chain removed'
    # The role's action says the node's line as it is.
    assert _msg.role_msg({'msg': _msg.chain_msg(auto, False)}, ['resync'], False).endswith(
        'where iptables is installed; the role then runs: resync')
