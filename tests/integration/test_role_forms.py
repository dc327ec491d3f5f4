"""The role run for generated variables in every form users give them
(tests/lab/ipmasq_lab/role_forms.py: typed and JSON values and Jinja
expressions as extra vars, ``-e name=value`` strings on the command line),
each on a namespace of its own: the node gets the policy the controller
checked (its rules are those of the checked policy), the resync, reading the
config file the role wrote, finds nothing to repair, and a second run changes
nothing. tests/unit/test_role_forms_one_policy.py holds the same property in-process
for many more examples."""
from hypothesis import HealthCheck, given, settings

from ipmasq_lab import netlab, policy_view
from ipmasq_lab.role_forms import given_forms
from test_role_inputs import base_vars, resync_cycle, role


@settings(max_examples=6, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=given_forms())
def test_a_role_run_applies_the_checked_policy_and_a_second_changes_nothing(backends, tmp_path_factory, case):
    typed, given_values, forms = case
    root = tmp_path_factory.mktemp('forms')
    extra = base_vars(root, ip_masq_resync_enabled=True)
    args = []
    for name, value in given_values.items():
        if forms[name] == 'kv':
            args += ['-e', '%s=%s' % (name, value)]
        else:
            extra[name] = value
    with netlab.Netns('node') as ns:
        from conftest import Node  # pylint: disable=import-outside-toplevel
        node = Node(ns, backends['nft'])
        rc, one, _names = role(node, extra, args)
        assert rc == 0, (forms, one.get('msg'))
        assert {name: one['settings'][name] for name in typed} == typed, forms
        chain = typed['ip_masq_chain']
        rules = policy_view.ours(node.rules(4), chain), policy_view.ours(node.rules(6), chain)
        assert any('MASQUERADE' in line for line in rules[0])
        assert bool(rules[1]) == typed['ip_masq_enable_ipv6']
        rc, out = resync_cycle(node, extra)
        assert rc == 0 and 'repaired' not in out, out
        assert (policy_view.ours(node.rules(4), chain), policy_view.ours(node.rules(6), chain)) == rules
        rc, one, _names = role(node, extra, args)
        assert rc == 0 and one['changed'] is False, (forms, one.get('changed_parts'))
