"""The one tokenizer of an iptables-save rule (issue 35): ``save.rule_matches``
splits a rule's words into its matches and its target, for the audit
(``iptables_backend.audit.IptRule``) and the SNAT explanation
(``iptables_backend.explain``) alike.  Odd lines: quotes, escaped quotes,
comments with spaces, negations, modules, a rule with no target."""
import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.audit import IptRule
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend.save import Rule, rule_matches, split_rule
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError


def matches(line):
    return Rule('POSTROUTING', 0, line).matches


@pytest.mark.parametrize('line, want', [
    ('-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE',
     ([(False, None, '-s', ['172.17.0.0/16']), (True, None, '-o', ['docker0'])], ['-j', 'MASQUERADE'])),
    # A comment with spaces, then a negated addrtype match of its module.
    ('-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" '
     '-m addrtype ! --dst-type LOCAL -d 10.0.0.0/8 -j RETURN',
     ([(False, 'comment', '--comment', ['ip-masq-agent: local traffic is not subject to MASQUERADE']),
       (True, 'addrtype', '--dst-type', ['LOCAL']), (False, 'addrtype', '-d', ['10.0.0.0/8'])], ['-j', 'RETURN'])),
    # Escaped quotes inside a quoted comment; a comment that looks like an option or a negation.
    (r'-A POSTROUTING -m comment --comment "name: \"cbr0\" id: \"abc\"" -j CNI-1',
     ([(False, 'comment', '--comment', ['name: "cbr0" id: "abc"'])], ['-j', 'CNI-1'])),
    ('-A POSTROUTING -m comment --comment "-j MASQUERADE" -m comment --comment ! -j RETURN',
     ([(False, 'comment', '--comment', ['-j MASQUERADE']), (False, 'comment', '--comment', ['!'])],
      ['-j', 'RETURN'])),
    ("-A POSTROUTING -m comment --comment 'single quoted words' -j ACCEPT",
     ([(False, 'comment', '--comment', ['single quoted words'])], ['-j', 'ACCEPT'])),
    # -p ends the module before it: its --dport is the protocol's.
    ('-A KUBE-SVC -m mark ! --mark 0x4000/0x4000 -p tcp -m tcp --dport 80 -j MARK --set-xmark 0x4000/0x4000',
     ([(True, 'mark', '--mark', ['0x4000/0x4000']), (False, None, '-p', ['tcp']), (False, 'tcp', '--dport', ['80'])],
      ['-j', 'MARK', '--set-xmark', '0x4000/0x4000'])),
    ('-A POSTROUTING ! -s 10.0.0.0/8 ! -d 10.0.0.0/8 -g CNI-2',
     ([(True, None, '-s', ['10.0.0.0/8']), (True, None, '-d', ['10.0.0.0/8'])], ['-g', 'CNI-2'])),
    # Options with several values, a counter-only rule (no target), an empty rule.
    ('-A POSTROUTING -m set --match-set KUBE-LOOP-BACK dst,dst,src -m multiport --dports 80,443',
     ([(False, 'set', '--match-set', ['KUBE-LOOP-BACK', 'dst,dst,src']),
       (False, 'multiport', '--dports', ['80,443'])], [])),
    ('-A POSTROUTING', ([], [])),
])
def test_rule_matches_on_odd_lines(line, want):
    assert matches(line) == want
    assert rule_matches(Rule('X', 0, line).words) == want


@pytest.mark.parametrize('line, want', [
    # The common lines (quoted words standing alone, \" the only escape) and every other form.
    (r'-A X -m comment --comment "name: \"cbr0\" id: \"ab\"" -j CNI-1',
     ['-A', 'X', '-m', 'comment', '--comment', 'name: "cbr0" id: "ab"', '-j', 'CNI-1']),
    ('-A X --comment "a  b"\t"c"', ['-A', 'X', '--comment', 'a  b', 'c']),
    ('"" x ""', ['', 'x', '']),
    ('a"b c"d', ['ab cd']),
    ('"a""b" c', ['ab', 'c']),
    (r'x\"y "z"', ['x"y', 'z']),
    (r'"a\\" b', ['a\\', 'b']),
    (r'"it\'s" \x', ["it's", 'x']),
    ("'single \"quoted\"' w", ['single "quoted"', 'w']),
    ('a\\', ['a\\']),
    ('x\n"y"', ['x\ny']),
])
def test_split_rule_on_odd_lines(line, want):
    assert split_rule(line) == want


@pytest.mark.parametrize('line', ['"open', 'a "b" "c', r'"a\"', "'x", r'"a\\\" b'])
def test_split_rule_refuses_an_unterminated_quote(line):
    with pytest.raises(ValueError, match='unterminated quote'):
        split_rule(line)


def test_the_matches_are_read_once_per_rule():
    rule = Rule('POSTROUTING', 0, '-A POSTROUTING -o eth0 -j MASQUERADE')
    assert rule.matches is rule.matches


def test_an_unterminated_quote_is_an_error_naming_the_rule():
    with pytest.raises(MasqError, match='unterminated quote.*--comment "open'):
        matches('-A POSTROUTING -m comment --comment "open -j MASQUERADE')


def test_the_audit_reads_its_conditions_through_the_same_matches():
    rule = IptRule(Rule('POSTROUTING', 0, r'-A POSTROUTING -s 10.244.0.0/16 ! -d 10.244.0.0/16 -o eth0 '
                                          r'-m comment --comment "name: \"cbr0\" x" -m mark ! --mark 0x4000/0x4000 '
                                          r'-m addrtype --src-type LOCAL -j RETURN'))
    assert rule.cond.sources == [(False, '10.244.0.0/16')] and rule.cond.dests == [(True, '10.244.0.0/16')]
    assert rule.cond.ifaces == ['eth0'] and rule.cond.comments == ['name: "cbr0" x']
    assert rule.cond.local_src and not rule.cond.mark
    assert rule.target == 'RETURN' and not rule.goto and not rule.gate_return
    gate = IptRule(Rule('KUBE-POSTROUTING', 0, '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN'))
    assert gate.gate_return
