"""A test daemon, in tests only: "probe", a made-up program that masquerades
when its config file says ``masquerade: true`` (``/etc/probe/probe.conf``
below the run's ``root``), with a nat rule of its own: the chain
``PROBE-POSTRTG`` (a MASQUERADE rule) and a jump to it from POSTROUTING
carrying the comment ``probe masq``.

It is one descriptor-and-editor file, as the daemon registry
(``_daemons/registry.py``) asks of a daemon; a test registers it by adding
:data:`DAEMON` to ``registry.DAEMONS`` (monkeypatch, or in the subprocess
that runs the node's code) and nothing under plugins/ changes.
"""
import re

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.daemon import Daemon
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.owner import Owner

NAME = 'probe'
CONFIG = '/etc/probe/probe.conf'
PROBE_CHAIN = 'PROBE-POSTRTG'
PROBE_COMMENT = 'probe masq'
_MASQ = re.compile(r'^masquerade:[ \t]*true[ \t]*$', re.M)

OPTIONS = dict(
    config=dict(type='path', default=CONFIG),
    remove_stale_rules=dict(type='bool', default=False),
)


def probe_rules(table, family):
    """``(rules, chains)`` of probe's in a nat table (``iptables_save.NatTable``):
    the jumps to its chain from POSTROUTING, and the chain."""
    jumps = [rule for rule in table.rules('POSTROUTING') if rule.targets(PROBE_CHAIN)]
    return jumps, [PROBE_CHAIN] if PROBE_CHAIN in table.chains else []


def probe_sync(params, run, find, writer, check_mode=False):
    """``masquerade: false`` in probe's config file, then (remove_stale_rules)
    its nat rules once it no longer masquerades; state=absent: the file back."""
    # pylint: disable=import-outside-toplevel
    from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import RuleMatch
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import remove_rules, restore, setup
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import check_abs, commit
    files, _unit_dirs, _env_files, backups, result = setup(params, NAME)
    config = check_abs(params['config'], 'config')
    result['removed_rules'] = []
    text = files.read(config)
    if text is None:
        result.msg('%s does not exist; probe is not installed.' % config)
        return result
    result['installed'] = True
    if params['state'] == 'absent':
        return restore(files, backups, result, check_mode, writer, params['backup'])
    new = _MASQ.sub('masquerade: false', text)
    if new != text:
        files.write(config, new)
        result.msg('%s: masquerade: true set to false.' % config)
    commit(files, backups, result, check_mode, writer, params['backup'])
    result['restart_required'] = bool(result['edited'])
    if params['remove_stale_rules']:
        keep = result['restart_required']

        def select(family, table):
            rules, chains = probe_rules(table, family)
            return ([], []) if keep else (rules, chains)
        remove_rules(run, find, RuleMatch(nat=select), check_mode, result)
    return result


def editor():
    return OPTIONS, probe_sync


DAEMON = Daemon(
    NAME,
    editor=editor,
    service='probe.service',
    owner=Owner(NAME, chains=('PROBE',), comments=('probe',),
                hint='probe masquerades: set "masquerade: false" in %s and restart it' % CONFIG),
    description='V(auto) switches probe\'s masquerading off; V(manage) the same, failing where it is missing; '
                'V(report) only reports; V(skip) leaves it alone.',
    doc='``masquerade: true`` in ``%s``, then its ``%s`` chain' % (CONFIG, PROBE_CHAIN),
    read={'remove_stale_rules': True},
    cleanup={'remove_stale_rules': True},
)
