"""A property of the role's variables in every form users give them (typed
YAML, an ``-e name=value`` string, a JSON value, a Jinja expression): the
policy the controller checked (plugin_utils/_role_args.py), the policy the
node applies (ip_masq_node's chain part: masq_chain's own spec, after the
module arguments' JSON trip) and the policy the resync builds from the config
file the role writes and the flags of the service unit it renders are one and
the same policy. tests/integration/test_role_forms.py applies such policies
on a node, twice."""
import json
import os
import shlex

from hypothesis import HealthCheck, given, settings
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ipmasq_lab.role_forms import given_forms
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import layout as iptables_layout, rules as iptables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import POLICY_OPTIONS
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import resync_root
from ansible_collections.ipmasq.agent.plugins.module_utils._masq_chain import chain_params
from ansible_collections.ipmasq.agent.plugins.plugin_utils._config_file import config_text
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import role_args
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_vars import read
from ansible_collections.ipmasq.agent.plugins.plugin_utils._units import SERVICE, units

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, 'roles', 'ip_masq')
with open(os.path.join(ROLE, 'defaults', 'main.yml'), encoding='utf-8') as _f:
    DEFAULTS = yaml.safe_load(_f)
TEMPLAR = Templar(loader=DataLoader())


def fingerprint(policy):
    return {'chain': policy.chain, 'jump_position': policy.jump_position, 'ipv6': policy.ipv6,
            'rule_format': policy.rule_format, 'require_local': policy.snat_to_require_local,
            'rules': {family: iptables_rules.chain_rules(policy, family, iptables_layout.random_fully(policy, (1, 8, 9)))
                      for family in policy.families()}}


def controller(values):
    """What the action does: template each value, then role_args."""
    templated = dict((name, TEMPLAR.template(value)) for name, value in values.items())
    return role_args(read(templated, 'h'))


def node_policy(masq_chain, allow_catch_all):
    return chain_params(json.loads(json.dumps(masq_chain)), allow_catch_all)[1]     # the module arguments' trip


def resync_policy(checked_args):
    """The resync's policy, from the config file and the service's flags the role writes."""
    values, facts = checked_args['values'], checked_args['facts']
    text = config_text(values, facts, 'Ansible managed')
    unit = units(values, checked_args['timer'], resync_root(values['ip_masq_lib_dir']), 'm')[SERVICE]
    exec_line = [line for line in unit.replace('\\\n', ' ').splitlines() if line.startswith('ExecStart=')][0]
    argv = [a.replace('$$', '$').replace('%%', '%') for a in shlex.split(exec_line[len('ExecStart='):])]
    opts = resync.parse_args(argv[argv.index('-c') + 2:])
    return resync._settings(text, opts)[2]  # pylint: disable=protected-access


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(given_forms())
def test_the_checked_the_applied_and_the_resynced_policy_are_one(case):
    typed, given_values, forms = case
    values = dict(DEFAULTS, **given_values)
    result = controller(values)
    # Whatever form each value came in, the controller read the typed value.
    for name, value in typed.items():
        assert result['values'][name] == value, (name, forms[name], given_values[name])
    args = result['masq_chain']
    checked_policy = Policy(**dict((key, args[key]) for key in POLICY_OPTIONS if key in args))
    want = fingerprint(checked_policy)
    assert fingerprint(node_policy(args, result['values']['ip_masq_allow_catch_all'])) == want
    assert fingerprint(resync_policy(result)) == want


def test_the_node_never_reads_a_string_as_a_boolean():
    """The chain part types every option with masq_chain's spec: "false" is false."""
    given = {'masq_link_local': 'false', 'ipv6': 'no', 'random_fully': 'False', 'cidr_limit': '64',
             'to_ports': '1024,2000'}
    params, _policy = chain_params(given)
    assert params['masq_link_local'] is False and params['ipv6'] is False and params['random_fully'] is False
    assert params['cidr_limit'] == 64 and params['to_ports'] == ['1024', '2000']
