"""role_args refuses, on the controller and before any node is touched, an
``ip_masq_*`` variable the role does not declare (naming the closest real one)
and a path variable that is not an absolute path; it normalises the paths it
accepts (issue 32, items 5 and 6). The pure rules (closest name, path
normalisation) are plugins/plugin_utils/_role_vars.py's.

The role's path variables are found from its argument spec (type path, or a
list of paths), never listed here by hand."""
import os
import re

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.action import ip_masq as action
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry
from ansible_collections.ipmasq.agent.plugins.plugin_utils import _role_vars
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import RoleArgsError, role_args
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_vars import play_variables, read, role_spec
from ipmasq_lab import netlab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml'), encoding='utf-8') as _f:
    DEFAULTS = yaml.safe_load(_f)
SPEC = role_spec()
PATHS = sorted(name for name, entry in SPEC.items()
               if entry.get('type') == 'path' or (entry.get('type') == 'list' and entry.get('elements') == 'path'))


def refusal(values, host='h', state='present', names=()):
    with pytest.raises(RoleArgsError) as info:
        role_args(read(dict(DEFAULTS, ip_masq_state=state, **values), host, names=names))
    return info.value.message


# ------------------------------------------------------------------ misspelt variables

@pytest.mark.parametrize('given,meant', [
    ('ip_masq_nonmasquerade_cidr', 'ip_masq_nonmasquerade_cidrs'),
    ('ip_masq_non_masquerade_cidrs', 'ip_masq_nonmasquerade_cidrs'),
    ('ip_masq_enable_ip6', 'ip_masq_enable_ipv6'),
    ('ip_masq_cni_conf_dir', 'ip_masq_cni_conf_dirs'),
    ('ip_masq_reprot_path', 'ip_masq_report_path'),      # a variable of the collection's audit play
])
@pytest.mark.parametrize('state', ['present', 'absent'])
def test_a_misspelt_variable_is_refused_naming_the_closest_real_one(given, meant, state):
    """At eaef342 these were ignored and the defaults applied (the last one
    meant that the machine's /etc/cni/net.d was edited)."""
    msg = refusal({given: ['/srv/cni'] if given.endswith('dir') else 'x'}, state=state)
    assert msg.splitlines()[0].startswith('%s of h: not a variable of the ipmasq.agent.ip_masq role' % given), msg
    assert 'did you mean %s?' % meant in msg and 'ip_masq_user_vars' in msg


def test_a_misspelt_variable_only_the_host_has_is_refused_too():
    """The action passes every name the host has (task_vars): one that is no role variable is in names only."""
    msg = refusal({}, names=['inventory_hostname', 'ip_masq_enable_ip6', 'hostvars', 'group_names'])
    assert msg.startswith('ip_masq_enable_ip6 of h: ') and 'did you mean ip_masq_enable_ipv6?' in msg


def test_a_name_like_none_gets_no_suggestion():
    msg = refusal({'ip_masq_zzzzzz': 1})
    assert msg.startswith('ip_masq_zzzzzz of h: not a variable of the ipmasq.agent.ip_masq role') and 'did you mean' not in msg


def test_every_problem_in_one_failure():
    msg = refusal({'ip_masq_enable_ip6': True, 'ip_masq_cidr_limit': 'many', 'ip_masq_backup_dir': 'var/backup'})
    assert sorted(line.split(' of h:')[0] for line in msg.splitlines()) == [
        'ip_masq_backup_dir', 'ip_masq_cidr_limit', 'ip_masq_enable_ip6'], msg


def test_own_variables_are_kept_when_listed_and_refused_when_they_are_the_role_s():
    values = dict(DEFAULTS, ip_masq_my_thing='x', ip_masq_user_vars=['ip_masq_my_thing'])
    assert role_args(read(values, 'h'))['state'] == 'present'
    msg = refusal({'ip_masq_user_vars': ['ip_masq_chain', 'my_thing', 'ip_masq_my_thing']})
    lines = msg.splitlines()
    assert len(lines) == 1 and lines[0].startswith('ip_masq_user_vars of h: '), msg
    assert '"ip_masq_chain" is a variable of the role' in msg and '"my_thing" does not start with ip_masq_' in msg


def test_the_collection_s_own_names_pass():
    """The playbooks' variables (declared), the role's internal __ip_masq_* names,
    magic variables and other prefixes are no user variables of the role."""
    names = list(play_variables()) + ['__ip_masq_run', '__ip_masq_anything', 'hostvars', 'groups', 'vars',
                                      'ansible_facts', 'sandbox_ns', 'my_ip_masq_x', 'ip_masq']
    assert role_args(read(dict(DEFAULTS), 'h', names=names))['state'] == 'present'
    assert set(play_variables()) >= {'ip_masq_serial', 'ip_masq_max_fail_percentage', 'ip_masq_report_path',
                                     'ip_masq_report_fail', 'ip_masq_report_unreachable', 'ip_masq_report_groups'}
    assert not set(play_variables()) & set(SPEC)


# Words in the playbooks and role files that look like variables and are not:
# the inventory group the plays run on, the tags (the action's and the daemons'),
# the node module's name and the metric names' prefix.
_NOT_VARIABLES = {'ip_masq_nodes', 'ip_masq_agent'}


def _tags():
    tags = set(t for tags in action.PART_TAGS.values() for t in tags)
    tags |= set(t for step in action.STEP_TAGS for t in action.step_tags(step))
    return tags


def test_every_ip_masq_name_the_shipped_playbooks_and_role_use_is_declared():
    words = set()
    for top in ('playbooks', os.path.join('roles', 'ip_masq')):
        for directory, _dirs, files in os.walk(os.path.join(ROOT, top)):
            if os.path.basename(directory) == 'meta':      # the declarations themselves
                continue
            for name in files:
                if name.endswith(('.yml', '.j2')):
                    with open(os.path.join(directory, name), encoding='utf-8') as handle:
                        words |= set(re.findall(r'(?<![\w.])ip_masq_\w+', handle.read()))
    declared = set(SPEC) | set(play_variables())
    assert sorted(words - declared - _tags() - _NOT_VARIABLES) == []


# ------------------------------------------------------------------ paths

def test_the_path_variables_are_the_spec_s():
    """Found from the spec: a new path variable is checked without a line here."""
    assert set(PATHS) >= {'ip_masq_cni_conf_dirs', 'ip_masq_backup_dir', 'ip_masq_config_path',
                          'ip_masq_docker_daemon_json', 'ip_masq_metrics_dir'}
    assert _role_vars.path_variables(SPEC) == PATHS


@pytest.mark.parametrize('name', PATHS)
@pytest.mark.parametrize('state', ['present', 'absent'])
def test_every_relative_path_is_refused_naming_the_variable_and_the_host(name, state):
    value = ['etc/x'] if SPEC[name]['type'] == 'list' else 'etc/x'
    msg = refusal({name: value}, host='node-7', state=state)
    assert msg.startswith('%s of node-7: ' % name) and '"etc/x" is not an absolute path' in msg, msg
    assert len(msg.splitlines()) == 1


@pytest.mark.parametrize('name', PATHS)
def test_every_path_is_normalised(name):
    given = '/etc//cni/./net.d/'
    value = [given, '/srv/b'] if SPEC[name]['type'] == 'list' else given
    if name == 'ip_masq_metrics_dir':
        value = given
    typed = role_args(read(dict(DEFAULTS, **{name: value}), 'h'))['values'][name]
    assert typed == (['/etc/cni/net.d', '/srv/b'] if SPEC[name]['type'] == 'list' else '/etc/cni/net.d')


@pytest.mark.parametrize('given,normal', [
    ('/etc//cni/./net.d/', '/etc/cni/net.d'),
    ('//etc/cni', '/etc/cni'),
    ('/', '/'),
    ('/etc/cni/net.d', '/etc/cni/net.d'),
    ('/a/.b/c.', '/a/.b/c.'),
])
def test_normal_path(given, normal):
    assert _role_vars.normal_path(given) == normal


@pytest.mark.parametrize('given,why', [
    ('etc/cni', 'is not an absolute path'),
    ('./etc', 'is not an absolute path'),
    ('', 'is not an absolute path'),
    ('/etc/cni/../x', 'has a .. component'),
    ('/etc/..', 'has a .. component'),
    ('/etc/\x00x', 'a NUL character'),
])
def test_normal_path_refuses(given, why):
    with pytest.raises(ValueError) as info:
        _role_vars.normal_path(given)
    assert why in str(info.value), info.value


def test_a_list_names_each_bad_entry_by_index():
    msg = refusal({'ip_masq_cni_conf_dirs': ['/etc/cni/net.d', 'etc/crio', '/a/../b']})
    assert msg.startswith('ip_masq_cni_conf_dirs of h: [1] "etc/crio" is not an absolute path'), msg
    assert '[2] "/a/../b" has a .. component' in msg and len(msg.splitlines()) == 1


def test_null_is_no_path_except_where_null_is_the_default():
    assert refusal({'ip_masq_backup_dir': None}).startswith('ip_masq_backup_dir of h: must be an absolute path, got null')
    assert refusal({'ip_masq_cni_conf_dirs': None}).startswith('ip_masq_cni_conf_dirs of h: must be a list')
    assert role_args(read(dict(DEFAULTS, ip_masq_metrics_dir=None), 'h'))['values']['ip_masq_metrics_dir'] is None


def test_an_empty_cni_list_is_no_directory_and_manage_of_none_is_refused():
    typed = role_args(read(dict(DEFAULTS, ip_masq_cni_conf_dirs=[]), 'h'))['values']
    assert typed['ip_masq_cni_conf_dirs'] == []
    msg = refusal({'ip_masq_cni_conf_dirs': [], 'ip_masq_cni': 'manage'})
    assert msg.startswith('ip_masq_cni of h: manage') and 'ip_masq_cni_conf_dirs' in msg


def test_a_path_that_goes_into_the_units_keeps_its_character_rule_per_variable():
    msg = refusal({'ip_masq_unit_dir': '/etc/sys temd', 'ip_masq_metrics_dir': '/var/x y'})
    assert msg.splitlines() == [
        'ip_masq_unit_dir of h: "/etc/sys temd" is written into the resync\'s systemd units: only letters, digits '
        'and _ . + @ - / (no spaces, quotes or other characters systemd would need quoted).',
        'ip_masq_metrics_dir of h: "/var/x y" is written into the resync\'s systemd units: only letters, digits '
        'and _ . + @ - / (no spaces, quotes or other characters systemd would need quoted).'], msg


# ------------------------------------------------------------------ the lab keeps this machine's files out of reach

def test_the_lab_moves_every_daemon_path_away_from_this_machine():
    """HOST_SAFE_VARS (every lab playbook run) and role_node_paths (a test host's
    root) cover every path variable a daemon of the registry has (the CNI
    directories, Docker's daemon.json, and any daemon's added later)."""
    daemon_paths = set(name for d in registry.DAEMONS for name in d.variables if name in PATHS)
    assert daemon_paths >= {'ip_masq_cni_conf_dirs', 'ip_masq_docker_daemon_json'}
    assert set(netlab.HOST_SAFE_VARS) >= daemon_paths
    for name in daemon_paths:
        for path in netlab.HOST_SAFE_VARS[name] if isinstance(netlab.HOST_SAFE_VARS[name], list) else [netlab.HOST_SAFE_VARS[name]]:
            assert path.startswith('/nonexistent/'), (name, path)
    paths = netlab.role_node_paths('/tmp/imq-lab-root', make=())
    # Every path the role writes, under the host's root: all the spec's but the interpreter (only read)
    # and the metrics directory (null: nothing written).
    assert set(PATHS) - set(paths) == {'ip_masq_python', 'ip_masq_metrics_dir'}
    for name in set(PATHS) & set(paths):
        for path in paths[name] if isinstance(paths[name], list) else [paths[name]]:
            assert path.startswith('/tmp/imq-lab-root/'), (name, path)


# ------------------------------------------------------------------ the node agrees: [] is no directory

@pytest.mark.parametrize('state', ['present', 'absent'])
def test_the_cni_editor_takes_an_empty_list_as_no_directory(tmp_path, state):
    """At eaef342 the node raised "conf_dirs: give at least one directory." for
    what the controller let through (ip_masq_cni_conf_dirs: [])."""
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni import cni_sync

    def never(*_args, **_kwargs):
        raise AssertionError('nothing is run or written for no directory')

    params = {'root': str(tmp_path), 'conf_dirs': [], 'backup_dir': '/var/lib/ipmasq-agent/backup', 'state': state,
              'remove_stale_rules': True, 'backup': True}
    result = cni_sync(params, never, never, never, check_mode=False).module_result()
    assert result['installed'] is False and result['changed'] is False and result['edited'] == []
    assert 'nothing to do' in ' '.join(result['messages'])
    assert os.listdir(str(tmp_path)) == []


def test_read_types_and_names_then_role_args_reports_its_problems_first():
    """_role_vars.read: the host's variables typed by the role's spec, names
    and paths checked, its problems kept (not raised); role_args reports
    them first, with its own after them, in one RoleArgsError."""
    given = read(dict(DEFAULTS, ip_masq_cidr_limit='12', ip_masq_lib_dir='/a/../b',
                      ip_masq_nonmasquerade_cidrs=['10.0.0.0/33']), 'n1', names=['ip_masq_chian'])
    assert given.typed['ip_masq_cidr_limit'] == 12 and given.problems.host == 'n1'
    assert [line.split(' ')[0] for line in given.problems] == ['ip_masq_chian', 'ip_masq_lib_dir']
    with pytest.raises(RoleArgsError) as info:
        role_args(given)
    lines = info.value.message.splitlines()
    assert lines[:2] == list(given.problems) and lines[2].startswith('ip_masq_nonmasquerade_cidrs of n1: ')
    assert len(given.problems) == 2, 'role_args added to what read gave'
