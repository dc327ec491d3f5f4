"""What a user reads (issue 33, item 7), byte for byte, from real runs in
network namespaces of the test's own: the role's audit failure (the variable
a role user sets, and what the same node run wrote before the audit failed),
the nftables sandbox's listing, the diff of a run that does not manage IPv6,
and the message of a backend switch (in the order the switch is done)."""
import os
import re
import subprocess

from ipmasq_lab import netlab, policy_view
from test_role_sandbox import PLAYBOOK as ROLE_PLAYBOOK, role_vars
from test_snat_sources import audit, restore

UNKNOWN_LINE = ('[IPv4 iptables-nft nat: POSTROUTING] unknown: -A POSTROUTING -s 192.0.2.0/24 -o eth9 -j SNAT '
                '--to-source 198.51.100.7 -- find the tool that writes this rule and switch its masquerading off, '
                'or allow it (%s: [{chain: POSTROUTING}] or a regex on the rule)')


def role_failure(node, values):
    rc, tasks = netlab.playbook(node.ns, ROLE_PLAYBOOK, extra_vars=values, backend=node.backend)
    failed = [res for _name, res in tasks if res.get('failed')]
    assert rc != 0 and len(failed) == 1, failed
    return failed[0]


def test_the_role_audit_names_its_variable_and_what_the_run_wrote_before_it_failed(nft_node, tmp_path):
    node = nft_node
    restore(node, ['unknown'])
    values = role_vars(str(tmp_path / 'node'))
    first = role_failure(node, values)
    msg = first['msg']
    # A role user sets ip_masq_audit_allow, not the module's allow option.
    assert UNKNOWN_LINE % 'ip_masq_audit_allow' in msg, msg
    assert '(allow: [' not in msg, msg
    # The same node run wrote the chain before the audit failed: the message says so, in the chain's own words.
    tail = re.search(r' \(Before the audit failed, this run changed the node: (.*)\.\)$', msg)
    assert tail, msg
    assert tail.group(1).endswith('; IP-MASQ-AGENT: IPv4 4 rules written (was 0), IPv6 not managed; backend iptables, '
                                  'auto: a node with neither policy yet, where iptables is installed'), msg
    assert first['failed_part'] == 'audit' and first['changed'] is True and first['chain']['changed'] is True
    assert policy_view.ours(node.rules(4)) == policy_view.ipt_expect(['169.254.0.0/16', '10.244.0.0/16',
                                                                     '10.30.0.0/16'])
    # The next run writes nothing: the failure says nothing was written.
    again = role_failure(node, values)['msg']
    assert UNKNOWN_LINE % 'ip_masq_audit_allow' in again and 'Before the audit failed' not in again, again
    assert again.endswith('or a regex on the rule)'), again
    # The module's own audit keeps naming its option.
    rc, res = audit(node, on_offenders='fail')
    assert rc != 0 and UNKNOWN_LINE % 'allow' in res['msg'], res['msg']
    assert 'ip_masq_audit_allow' not in res['msg']


def test_the_nftables_sandbox_shows_the_listing_as_nft_prints_it(tmp_path):
    """``ansible-playbook ipmasq.agent.sandbox -e sandbox_backend=nftables``, as the
    README gives it (the play makes its own namespace and removes it)."""
    env = netlab.ansible_env()
    env.update(ANSIBLE_STDOUT_CALLBACK='default', ANSIBLE_CALLBACK_PLUGINS='')
    proc = subprocess.run([os.path.join(netlab.VENV_BIN, 'ansible-playbook'), 'ipmasq.agent.sandbox',
                           '-e', 'sandbox_backend=nftables'], cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    start = out.index('TASK [Show what a node shows]')
    shown = out[start:out.index('TASK [', start + 1)]
    # No escaped tab: each line indented as nft indents it (a tab is 8 columns).
    assert '\\t' not in shown, shown
    assert '        "table inet ip-masq-agent {",\n' in shown, shown
    assert '        "        set nonmasq-ipv4 {",\n' in shown, shown
    assert '        "                flags interval",\n' in shown, shown
    assert '        "                        \\t' not in shown
    assert '        "                elements = { 10.0.0.0/8, 172.16.0.0/12,",\n' \
           '        "                             192.168.0.0/16 }",\n' in shown, shown
    assert 'ipmasq-sandbox-' not in subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True,
                                                   check=True).stdout


def test_a_diff_shows_no_empty_ipv6_section_when_ipv6_is_not_managed(node):
    jump = ('-A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL '
            'destination traffic to our custom IP-MASQ-AGENT chain" -m addrtype ! --dst-type LOCAL -j IP-MASQ-AGENT')
    res = node.module(steps=['check1', 'apply1'], nonmasquerade_cidrs=['10.0.0.0/8'])
    for step in ('check1', 'apply1'):
        diff = res[step]['diff']
        assert diff['before'] == '# iptables nat (IPv4)\n', diff
        assert diff['after'].startswith('# iptables nat (IPv4)\n%s\n:IP-MASQ-AGENT - [0:0]\n' % jump), diff
        assert 'ip6tables' not in diff['before'] + diff['after'], diff
    # Nothing changes, nothing to show: both sides empty.
    res = node.module(steps=['check2'], nonmasquerade_cidrs=['10.0.0.0/8'])
    assert res['check2']['changed'] is False
    assert 'ip6tables' not in res['check2']['diff']['before'] + res['check2']['diff']['after']
    # IPv6 managed: its section is there.
    res = node.module(steps=['check1'], nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'], ipv6=True)
    assert '\n# ip6tables nat (IPv6)\n-A POSTROUTING ' in res['check1']['diff']['after']
    assert res['check1']['diff']['before'].endswith('-j MASQUERADE\n# ip6tables nat (IPv6)\n'), res['check1']['diff']
    # IPv6 no longer managed: its rules leave, under its heading.
    node.module(steps=['apply1'], nonmasquerade_cidrs=['10.0.0.0/8', 'fd00::/8'], ipv6=True)
    res = node.module(steps=['check1'], nonmasquerade_cidrs=['10.0.0.0/8'])
    diff = res['check1']['diff']
    assert '# ip6tables nat (IPv6)\n-A POSTROUTING ' in diff['before'] and diff['after'].endswith(
        '-j MASQUERADE\n# ip6tables nat (IPv6)\n'), diff


def test_a_backend_switch_says_write_then_remove_as_it_does(make_node):
    """backends.rst, "Switching a node": the new backend is written first, then ours is removed from the old one."""
    for kind in ('iptables-nft', 'iptables-legacy'):
        node = make_node(kind)
        node.module(nonmasquerade_cidrs=['10.0.0.0/8'])
        res = node.module(steps=['check1', 'apply1'], nonmasquerade_cidrs=['10.0.0.0/8'], backend='nftables')
        assert res['check1']['msg'] == ('IP-MASQ-AGENT: would write nftables table inet ip-masq-agent, '
                                        'would remove IPv4 chain; backend nftables, asked for (backend=nftables)'
                                        ), res['check1']['msg']
        assert res['apply1']['msg'] == ('IP-MASQ-AGENT: nftables table inet ip-masq-agent written, '
                                        'IPv4 chain removed; backend nftables, asked for (backend=nftables)'
                                        ), res['apply1']['msg']
        # And back: the chain is written, then the table removed (unchanged words).
        res = node.module(steps=['apply1'], nonmasquerade_cidrs=['10.0.0.0/8'], backend='iptables')
        assert res['apply1']['msg'] == ('IP-MASQ-AGENT: IPv4 3 rules written (was 0), nftables table inet '
                                        'ip-masq-agent removed, IPv6 not managed; backend iptables, asked for '
                                        '(backend=iptables)'), res['apply1']['msg']


def test_the_role_doc_command_of_the_readme_renders_the_entry_point():
    """The role's entry point is ip_masq (not main): the command the docs give names it and renders."""
    root = netlab.ROOT
    commands = set()
    for path in ('README.md', 'roles/ip_masq/README.md', 'docs/docsite/rst/quickstart.rst'):
        with open(os.path.join(root, path), encoding='utf-8') as handle:
            commands |= set(re.findall(r'ansible-doc -t role ipmasq\.agent\.ip_masq(?: -e \w+)?', handle.read()))
    assert commands == {'ansible-doc -t role ipmasq.agent.ip_masq -e ip_masq'}, commands
    doc = os.path.join(netlab.VENV_BIN, 'ansible-doc')
    proc = subprocess.run([doc, '-t', 'role', 'ipmasq.agent.ip_masq', '-e', 'ip_masq'], capture_output=True,
                          text=True, env=netlab.ansible_env({'ANSIBLE_NOCOLOR': '1'}), timeout=120, check=False)
    assert proc.returncode == 0 and re.search(r'^ENTRY POINT: \*?ip_masq\*? - One source of SNAT on a node',
                                              proc.stdout, re.M), proc
    assert 'ip_masq_audit_allow' in proc.stdout
