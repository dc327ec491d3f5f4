"""The core's findings across options (module_utils/_core/model/policy_findings.py),
which the role words on the controller (plugin_utils/_role_args.py; its
messages are held by tests/unit/test_role_args.py). Here: the findings are the
policy's own rules, so where the node's Policy refuses a set of options, the
controller finds something in it too, and where it finds nothing, the Policy
builds."""
import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import policy_findings
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import OPTIONS, POLICY_OPTIONS
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy

DEFAULTS = dict((o.name, o.role_default) for o in OPTIONS if o.role)


def options(**given):
    out = dict(DEFAULTS, **given)
    return out


CASES = [
    ({}, []),
    ({'nonmasquerade_cidrs': ['fd00::/8']}, ['v6_off']),
    ({'masquerade_cidrs': ['169.254.1.0/24']}, ['shadowed_by_link_local']),
    ({'masquerade_cidrs': ['192.0.2.0/24'], 'exception_cidrs': ['10.1.0.0/16']}, ['masquerade_conflict']),
    ({'exception_cidrs': ['192.0.2.0/24']}, ['outside_kept']),
    ({'ipv6': True, 'source_cidrs': ['10.244.0.0/16']}, ['missing_source_family']),
    ({'rule_format': 'upstream', 'source_cidrs': ['10.244.0.0/16']}, ['extensions_upstream']),
    ({'out_interfaces': ['eth+']}, ['not_interface_names']),
    ({'chain': 'POSTROUTING'}, ['core']),
    ({'to_ports': ['70000']}, ['core']),
    ({'nonmasquerade_cidrs': ['10.%d.0.0/16' % i for i in range(5)], 'cidr_limit': 3}, ['over_limit']),
]


@pytest.mark.parametrize('given, kinds', CASES)
def test_each_rule_is_found_and_the_policy_refuses_the_same(given, kinds):
    found = policy_findings.check(options(**given))
    assert [f[0] for f in found] == kinds
    built = dict((k, v) for k, v in options(**given).items() if k in POLICY_OPTIONS)
    if kinds:
        with pytest.raises(MasqError):
            Policy(**built)
    else:
        Policy(**built)


def test_refused_options_are_not_checked_again_and_removal_checks_only_the_chain():
    assert policy_findings.check(options(out_interfaces=['eth+']), bad={'out_interfaces'}) == []
    found = policy_findings.check(options(chain='x y', exception_cidrs=['192.0.2.0/24']), present=False)
    assert [(f[0], f[1]) for f in found] == [('core', 'chain')]
