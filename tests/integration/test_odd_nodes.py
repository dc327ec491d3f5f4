"""masq_chain on nodes in odd states (issue: a core that stays exact under
odd nodes): a nat table iptables cannot show whole, output that cannot be
understood, 0.0.0.0/0 and ::/0 in the list, an IPv6 write failing after the
IPv4 one, chain names that must be refused, a chain that was never ours.
Real iptables in network namespaces, through ansible-playbook."""
import pytest

from ipmasq_lab import netlab
from ipmasq_lab.policy_view import CHAIN, JUMP, chain_lines, ours

DEFAULT_RULES = chain_lines(['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])


def ruleset(node):
    return node.ns.exec(['nft', 'list', 'ruleset']).stdout


# --------------------------------------------------------------------------
# a nat table iptables cannot read whole
# --------------------------------------------------------------------------

def test_a_nat_table_with_native_nft_rules_is_refused_and_nothing_is_written(nft_node):
    # A native nft rule in "ip nat" that iptables-nft cannot express: its save
    # prints "# Table `nat' is incompatible, use 'nft' tool." and exits 0.
    nft_node.ipt('-N', 'NATIVE')
    nft_node.ns.exec(['nft', 'add', 'rule', 'ip', 'nat', 'NATIVE', 'fib', 'daddr', 'type', 'local', 'return'])
    save = nft_node.ns.exec([nft_node.backend.tool('iptables-save'), '-t', 'nat'])
    assert save.returncode == 0 and 'incompatible' in save.stdout
    before = ruleset(nft_node)
    for _run in range(2):                     # a second run does not append a jump either
        res = nft_node.module(steps=['apply1'])['apply1']
        assert res.get('failed') is True and res.get('changed') is not True
        for fragment in ('cannot show the whole IPv4 nat table', 'incompatible', 'nft list table ip nat',
                         'Nothing was changed'):
            assert fragment in res['msg'], res['msg']
        assert ruleset(nft_node) == before
    # check mode says the same and writes nothing
    res = nft_node.module(steps=['check1'])['check1']
    assert res.get('failed') is True and 'incompatible' in res['msg']
    # state=absent refuses too: it cannot tell what it would delete
    res = nft_node.module(steps=['apply1'], state='absent')['apply1']
    assert res.get('failed') is True and 'incompatible' in res['msg']
    assert ruleset(nft_node) == before


def test_a_line_that_cannot_be_understood_is_refused(node):
    # iptables-save printing something this module does not know (a future
    # notice, a corrupt line): refuse rather than plan from a partial read.
    real = node.backend.tool('iptables-save')
    source = ('import subprocess, sys\n'
              'out = subprocess.run([%r] + sys.argv[1:], capture_output=True, text=True).stdout\n'
              'sys.stdout.write(out.replace("COMMIT", "# Notice: 3 rules hidden by policy\\nCOMMIT"))\n' % real)
    with netlab.tool_dir({'iptables-save': source}) as path:
        res = node.module(path_prefix=path)['apply1']
    assert res.get('failed') is True
    assert 'cannot be understood' in res['msg'] and '# Notice: 3 rules hidden by policy' in res['msg']
    assert ours(node.rules()) == []


# --------------------------------------------------------------------------
# the catch-all ranges converge
# --------------------------------------------------------------------------

def test_catch_all_ipv4_converges(node):
    node.four_steps(nonmasquerade_cidrs=['0.0.0.0/0'])
    rules = node.rules()
    want = chain_lines(['169.254.0.0/16', '0.0.0.0/0'])
    want[2] = want[2].replace(' -d 0.0.0.0/0', '')      # iptables-save prints no -d for 0.0.0.0/0
    assert ours(rules) == [want[0], JUMP % (CHAIN, CHAIN)] + want[1:]


def test_catch_all_ipv6_converges(node):
    node.four_steps(nonmasquerade_cidrs=['0.0.0.0/0', '::/0'], ipv6=True)
    six = [r for r in ours(node.rules(6)) if r.startswith('-A %s ' % CHAIN)]
    assert six[1] == chain_lines(['::/0'])[1].replace(' -d ::/0', '')


# --------------------------------------------------------------------------
# IPv4 written, then the IPv6 write fails
# --------------------------------------------------------------------------

def test_ipv6_failing_after_ipv4_reports_what_was_applied(node):
    source = 'import sys\nsys.stdin.read()\nsys.stderr.write("ip6tables-restore: line 3 failed\\n")\nsys.exit(1)\n'
    with netlab.tool_dir({'ip6tables-restore': source}) as path:
        res = node.module(path_prefix=path, ipv6=True)['apply1']
    assert res.get('failed') is True and res['changed'] is True
    assert 'line 3 failed' in res['msg']
    assert 'IPv4 was already applied and is kept' in res['msg'], res['msg']
    assert res['applied'] == ['IPv4: create chain %s' % CHAIN, 'IPv4: append the POSTROUTING jump to %s' % CHAIN]
    assert ours(node.rules()) == [DEFAULT_RULES[0], JUMP % (CHAIN, CHAIN)] + DEFAULT_RULES[1:]
    assert ours(node.rules(6)) == []
    # Run again without the fault: it finishes the job (IPv6 only).
    res = node.module(ipv6=True)['apply1']
    assert res['changed'] is True and all(a.startswith('IPv6: ') for a in res['actions'])


# --------------------------------------------------------------------------
# names and chains that must be refused
# --------------------------------------------------------------------------

@pytest.mark.parametrize('chain,fragment', [
    ('IP-MASQ-AGENT\n', 'not a valid chain name'),
    ('standard', 'name of an iptables target'),
    ('SNAT', 'name of an iptables target'),
    ('TEE', 'name of an iptables target'),
])
def test_chain_names_iptables_cannot_take_are_refused(node, chain, fragment):
    before = node.save(4)
    res = node.module(chain=chain)['apply1']
    assert res.get('failed') is True and fragment in res['msg'] and repr(chain) in res['msg'], res['msg']
    assert node.save(4) == before


def foreign_docker_chain(node):
    node.ipt('-N', 'DOCKER')
    node.ipt('-A', 'DOCKER', '-i', 'docker0', '-j', 'RETURN')
    node.ipt('-A', 'PREROUTING', '-m', 'addrtype', '--dst-type', 'LOCAL', '-j', 'DOCKER')


def test_a_chain_that_was_never_ours_is_not_taken_over(node):
    foreign_docker_chain(node)
    before = node.save(4)
    for state in ('present', 'absent'):
        res = node.module(chain='DOCKER', state=state)['apply1']
        assert res.get('failed') is True, state
        assert 'chain DOCKER (IPv4) already exists and is not ours' in res['msg']
        assert '-A DOCKER -i docker0 -j RETURN' in res['msg'] and 'adopt_chain' in res['msg']
        assert node.save(4) == before


def test_adopt_chain_takes_a_foreign_chain_over(node):
    node.ipt('-N', 'MY-SNAT')
    node.ipt('-A', 'MY-SNAT', '-j', 'MASQUERADE')
    res = node.module(chain='MY-SNAT', adopt_chain=True)['apply1']
    assert res['changed'] is True
    want = chain_lines(['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'], chain='MY-SNAT')
    assert [r for r in node.rules() if r.startswith('-A MY-SNAT ')] == want[1:]
    # Now it is ours: a rule added to it is drift, repaired without adopt_chain.
    node.ipt('-I', 'MY-SNAT', '1', '-d', '198.51.100.0/24', '-j', 'RETURN')
    res = node.module(chain='MY-SNAT')['apply1']
    assert res['changed'] is True and [r for r in node.rules() if r.startswith('-A MY-SNAT ')] == want[1:]
