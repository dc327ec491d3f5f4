# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Docker's masquerading of its default bridge: ``"ip-masq": false`` in
daemon.json (or ``--ip-masq=false`` where the flag is on the dockerd command
line), the stale MASQUERADE rule a restart can leave behind (in iptables, or
with ``"firewall-backend": "nftables"`` in the nft tables ``ip
docker-bridges`` and ``ip6 docker-bridges``), and the user-defined networks
Docker cannot change in place (reported).

Standard library only: this file runs on managed nodes.
"""

import ipaddress
import json
import os

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import RuleMatch
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import is_interface_name
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import (
    NFT_FAMILIES,
    bounded,
    remove_rules,
    restore,
    setup,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.daemon_json import json_raw_value, json_remove, json_set, parse_daemon_json
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.docker_names import (
    DEFAULT_BRIDGE,
    DOCKER_NFT_COMMENT,
    DOCKER_NFT_OUT_CHAIN,
    DOCKER_NFT_TABLE,
    NETWORK_BRIDGE,
    NETWORK_ID_DIGITS,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import commit
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.goflags import bool_value, find_flag_all, fix_flags, set_arg
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.systemd import command_lines, load_unit


# The module's own options (its argument spec beside base.COMMON_SPEC): the
# module and ip_masq_node's daemons part build the same parameters from them.
DOCKER_OPTIONS = dict(
    daemon_json=dict(type='path', default='/etc/docker/daemon.json'),
    unit_name=dict(type='str', default='docker.service'),
    remove_stale_rules=dict(type='bool', default=False),
    bridge_name=dict(type='str'),
    bridge_cidrs=dict(type='list', elements='str'),
    report_networks=dict(type='bool', default=False),
    docker_bin=dict(type='path'),
)


def _same_net(a, nets):
    try:
        net = ipaddress.ip_network(a, strict=False)
    except ValueError:
        return False
    return any(net == n for n in nets)


def docker_bridge_rules(table, bridge, subnets):
    """Docker's default-bridge MASQUERADE rules in a nat table
    (``iptables_save.NatTable``): ``-s <subnet> ! -o <bridge> -j MASQUERADE``
    in POSTROUTING (any subnet when ``subnets`` is None) and the hairpin
    ``-o <bridge> -m addrtype --src-type LOCAL -j MASQUERADE``, exactly as
    iptables-save prints them."""
    out = []
    for rule in table.rules('POSTROUTING'):
        rest = rule.words
        if (len(rest) == 7 and rest[0] == '-s' and rest[2:] == ['!', '-o', bridge, '-j', 'MASQUERADE']
                and (subnets is None or _same_net(rest[1], subnets))):
            out.append(rule)
        elif rest == ['-o', bridge, '-m', 'addrtype', '--src-type', 'LOCAL', '-j', 'MASQUERADE']:
            out.append(rule)
    return out


def _match(stmt):
    m = stmt.get('match') if isinstance(stmt, dict) else None
    return m if isinstance(m, dict) else {}


def _nft_net(value):
    """The network an nft JSON address (a prefix, or one bare address) stands for; None otherwise."""
    try:
        if isinstance(value, dict) and isinstance(value.get('prefix'), dict):
            prefix = value['prefix']
            return ipaddress.ip_network('%s/%d' % (prefix['addr'], int(prefix['len'])), strict=False)
        if isinstance(value, str):
            return ipaddress.ip_network(value, strict=False)
    except (KeyError, TypeError, ValueError):
        pass
    return None


def is_docker_nft_masquerade(rule, bridge, family, subnets):
    """Whether an nft rule (``nft -j`` form) is exactly the default-bridge
    masquerade rule Docker's nftabler writes into ``ip``/``ip6``
    ``docker-bridges``: ``oifname != "<bridge>" ip[6] saddr <subnet>
    counter masquerade comment "MASQUERADE"`` (the counter and the comment
    optional), its subnet one of ``subnets`` (any when None)."""
    if rule.get('comment') not in (None, DOCKER_NFT_COMMENT):
        return False
    expr = [s for s in rule.get('expr') or [] if not (isinstance(s, dict) and 'counter' in s)]
    if len(expr) != 3 or expr[2] != {'masquerade': None}:
        return False
    oif, saddr = _match(expr[0]), _match(expr[1])
    if (oif.get('op'), oif.get('left'), oif.get('right')) != ('!=', {'meta': {'key': 'oifname'}}, bridge):
        return False
    if (saddr.get('op'), saddr.get('left')) != ('==', {'payload': {'protocol': family, 'field': 'saddr'}}):
        return False
    net = _nft_net(saddr.get('right'))
    if net is None or net.version != NFT_FAMILIES[family]:
        return False
    return subnets is None or any(net == n for n in subnets)


def docker_nft_rules(tables, bridge, subnets):
    """Docker's default-bridge masquerade rules in its nftables tables
    (``tables`` as ``NftTools.ruleset`` reads them): in ``ip
    docker-bridges`` and ``ip6 docker-bridges``, chain
    ``nat-postrouting-out__<bridge>``, the rules
    :func:`is_docker_nft_masquerade` accepts, with ``subnets`` of the
    table's family (any subnet when ``subnets`` is None; no rule of a family
    ``subnets`` has none of).

    Returns ``[(text, what)]``, the ``nft`` part of a ``backend.RuleMatch``:
    each rule as nft prints it, and the rule (the backend deletes it by its handle).  The hairpin rule
    ``fib saddr type local counter masquerade comment "MASQUERADE FROM
    HOST"`` in ``nat-postrouting-in__<bridge>`` is not picked: Docker writes
    it whenever the userland proxy is off, whatever ``ip-masq`` says, and it
    rewrites only the host's own connections into the bridge."""
    if not is_interface_name(bridge):
        raise MasqError('bridge_name: %r is not an interface name. Nothing was changed.' % (bridge,))
    chain = DOCKER_NFT_OUT_CHAIN + bridge
    out = []
    for family in sorted(NFT_FAMILIES):
        table = tables.get((family, DOCKER_NFT_TABLE))
        if table is None:
            continue
        fam = None
        if subnets is not None:
            fam = [s for s in subnets if s.version == NFT_FAMILIES[family]]
            if not fam:
                continue
        for rule in table.rules.get(chain, []):
            if is_docker_nft_masquerade(rule, bridge, family, fam):
                where = '%s %s %s' % (family, DOCKER_NFT_TABLE, chain)
                out.append(('IPv%d: %s: %s' % (NFT_FAMILIES[family], where, table.rule_text(rule)),
                            ('rule', family, DOCKER_NFT_TABLE, chain, rule)))
    return out


def docker_sync(params, run, find, writer, check_mode=False, restarted=False):
    """``ip-masq: false`` for Docker's default bridge (or undo it).
    ``restarted``: the clean-up as after the role's restart of Docker
    (``docker_daemon.restarted``), for the explanation's after mode."""
    p = params
    files, unit_dirs, env_files, backups, result = setup(p, 'docker')
    result['where'] = None
    result['flag_sources'] = []
    result['removed_rules'] = []
    result['masquerading_networks'] = []
    unit = load_unit(files, p['unit_name'], unit_dirs)
    if unit is not None and unit.masked:
        result.msg('%s is masked; Docker is not managed.' % p['unit_name'])
        return result
    if unit is None and not (files.root == '/' and find('dockerd')):
        result.msg('Docker is not installed (no %s, no dockerd); nothing to do.' % p['unit_name'])
        return result
    result['installed'] = True
    result['unit'] = unit.fragment if unit else None
    result['unit_files'] = unit.files if unit else []

    if p['state'] == 'absent':
        return restore(files, backups, result, check_mode, writer, p['backup'], semantic=_docker_semantic_restore)

    messages = []

    def load():
        u = load_unit(files, p['unit_name'], unit_dirs)
        commands, extra, _defs = command_lines(files, u, env_files, messages)
        return u, commands, extra

    def is_false(occ):
        return bool_value(occ.value) is False

    def to_false(occ):
        set_arg(files, occ, 'false')
        return '%s set to %sip-masq=false' % (occ.text(), occ.dashes)

    unit, commands, extra, occs = fix_flags(files, load, 'ip-masq', is_false, to_false, result)
    for m in sorted(set(messages)):
        result.msg(m)
    result['flag_sources'] = [o.as_dict() for o in occs]

    config = p['daemon_json']
    for occ in find_flag_all(commands, extra, 'config-file', takes_value=True):
        if occ.value and occ.value.startswith('/'):
            config = occ.value
            result.msg('dockerd reads its configuration from %s (--config-file).' % config)
    result['daemon_json'] = config
    text = files.read(config)
    data, _o, _c, _m = parse_daemon_json(text, config)

    if occs:
        # The trap: a setting both on the command line and in daemon.json
        # makes dockerd refuse to start.
        result['where'] = 'command line'
        if 'ip-masq' in data:
            files.write(config, json_remove(text, config, 'ip-masq'))
            result.msg('%s: removed "ip-masq" because --ip-masq is on the dockerd command line (%s); Docker '
                       'refuses to start with both.' % (config, ', '.join(o.arg.describe() for o in occs)))
        left = [o for o in occs if not is_false(o)]
        result['default_bridge_masquerade'] = bool(left)
        if left:
            where = ', '.join('%s (%s)' % (o.text(), o.arg.describe()) for o in left)
            result.warn('Docker still masquerades its default bridge: %s. If it is flannel\'s '
                        'mk-docker-opts.sh output, set ipmasq=false there (ipmasq.agent.flannel_ip_masq does) '
                        'and restart flanneld, then Docker.' % where)
    else:
        result['where'] = 'daemon.json'
        result['default_bridge_masquerade'] = False
        new = json_set(text, config, 'ip-masq', 'false')
        if new != text:
            files.write(config, new)
    no_iptables = [o for o in find_flag_all(commands, extra, 'iptables') if bool_value(o.value) is False]
    if data.get('iptables') is False or no_iptables:
        result.msg('Docker runs with iptables disabled, so it adds no MASQUERADE rule at all.')
    if data.get('bridge') == 'none':
        result.msg('Docker has no default bridge ("bridge": "none").')

    commit(files, backups, result, check_mode, writer, p['backup'])
    result['restart_required'] = bool(result['edited'])
    pending = result['restart_required']

    if p['remove_stale_rules'] or p['report_networks']:
        docker = p.get('docker_bin') or find('docker')
        if p['remove_stale_rules']:
            _docker_stale_rules(p, run, find, docker, data, pending, check_mode, result, restarted)
        if p['report_networks']:
            _docker_networks(run, find, docker, result)
    return result


def _docker_semantic_restore(path, current, original):
    """daemon.json changed since we wrote it: revert only "ip-masq"."""
    if not path.endswith('.json'):
        return None
    try:
        raw = json_raw_value(original, path, 'ip-masq') if original is not None else None
        if raw is None:
            return json_remove(current, path, 'ip-masq')
        return json_set(current, path, 'ip-masq', raw)
    except MasqError:
        return None


def _docker_cli(run, find, docker, args):
    if not docker or not os.path.exists(docker):
        return None
    rc, out, err = run(bounded(find, [docker] + list(args)))
    if rc != 0:
        return None
    try:
        return json.loads(out)
    except ValueError:
        return None


def _docker_stale_rules(p, run, find, docker, data, pending, check_mode, result, restarted=False):
    bridge = p.get('bridge_name')
    subnets = None
    if p.get('bridge_cidrs'):
        try:
            subnets = [ipaddress.ip_network(c, strict=False) for c in p['bridge_cidrs']]
        except ValueError as e:
            raise MasqError('bridge_cidrs: %s. Nothing was changed.' % e)
    running = None
    info = _docker_cli(run, find, docker, ['network', 'inspect', 'bridge'])
    if isinstance(info, list) and info and isinstance(info[0], dict):
        net = info[0]
        opts = net.get('Options') or {}
        bridge = bridge or opts.get('com.docker.network.bridge.name')
        if subnets is None:
            subnets = []
            for cfg in (net.get('IPAM') or {}).get('Config') or []:
                try:
                    subnets.append(ipaddress.ip_network(cfg.get('Subnet'), strict=False))
                except (TypeError, ValueError):
                    pass
            subnets = subnets or None
        running = opts.get('com.docker.network.bridge.enable_ip_masquerade')
    bridge = bridge or data.get('bridge') or DEFAULT_BRIDGE
    if bridge == 'none':
        return
    if not is_interface_name(bridge):
        raise MasqError('bridge_name: %r is not an interface name. Nothing was changed.' % (bridge,))
    result['bridge'] = {'name': bridge, 'subnets': [str(s) for s in subnets] if subnets else None}
    if restarted:
        # As after the role's restart: Docker runs with the settings this run's edit writes (moby reads
        # ip-masq only when it starts), so its default bridge masquerades as they say; no restart pending.
        running, pending = ('true' if result['default_bridge_masquerade'] else 'false'), False
        if running == 'true':
            result['after_restart'] = ('after the restart Docker still masquerades its default bridge %s (the '
                                       'command line keeps --ip-masq on), so its MASQUERADE rule stays' % bridge)
        else:
            result['after_restart'] = (
                'after the restart with ip-masq off, Docker no longer masquerades its default bridge %s, and the '
                'clean-up after it removes the MASQUERADE rule Docker left there; what else Docker makes at that '
                'restart (the rules of its user-defined networks, re-created as they are set) is taken to be as it '
                'is now' % bridge)
    if running == 'true':
        result.msg('The running Docker still masquerades its default bridge (restart pending); '
                   'its MASQUERADE rule is left alone.')
        return
    if result['default_bridge_masquerade'] or (pending and running is None):
        result.msg('Docker has not been restarted with ip-masq off yet; its MASQUERADE rule is left alone.')
        return

    def select(family, table):
        fam = [s for s in subnets if s.version == family] if subnets else None
        if subnets and not fam:
            return [], []
        return docker_bridge_rules(table, bridge, fam), []

    def pick(tables):
        return docker_nft_rules(tables, bridge, subnets)

    removed = remove_rules(run, find, RuleMatch(nat=select, nft=pick), check_mode, result)
    if removed:
        result.msg('Removed Docker\'s stale default-bridge MASQUERADE rule(s): %s' % '; '.join(removed))


def _docker_networks(run, find, docker, result):
    if not docker or not os.path.exists(docker):
        result.msg('docker CLI not found; user-defined networks not checked.')
        return
    ids = None
    rc, out, _err = run(bounded(find, [docker, 'network', 'ls', '-q', '--no-trunc', '--filter', 'driver=bridge']))
    if rc == 0:
        ids = out.split()
    if ids is None:
        result.msg('docker network ls failed (is Docker running?); user-defined networks not checked.')
        return
    nets = _docker_cli(run, find, docker, ['network', 'inspect'] + ids) if ids else []
    if nets is None:
        result.msg('docker network inspect failed; user-defined networks not checked.')
        return
    for net in nets:
        if not isinstance(net, dict) or net.get('Name') == 'bridge':
            continue
        opts = net.get('Options') or {}
        if str(opts.get('com.docker.network.bridge.enable_ip_masquerade', 'true')).lower() == 'false':
            continue
        net_id = net.get('Id') or ''
        subnets = [c.get('Subnet') for c in (net.get('IPAM') or {}).get('Config') or [] if c.get('Subnet')]
        name = net.get('Name')
        entry = {
            'name': name,
            'id': net_id[:NETWORK_ID_DIGITS],
            'bridge': opts.get('com.docker.network.bridge.name') or NETWORK_BRIDGE % net_id[:NETWORK_ID_DIGITS],
            'subnets': subnets,
            'advice': ('Docker cannot change masquerading of an existing network. Recreate it: disconnect its '
                       'containers, "docker network rm %s", then "docker network create --driver bridge '
                       '-o com.docker.network.bridge.enable_ip_masquerade=false%s %s" (compose: driver_opts '
                       'com.docker.network.bridge.enable_ip_masquerade: "false") and reconnect.'
                       % (name, ''.join(' --subnet %s' % s for s in subnets), name)),
        }
        result['masquerading_networks'].append(entry)
        result.warn('Docker network %s (%s, %s) still masquerades. %s'
                    % (name, entry['bridge'], ', '.join(subnets) or 'no subnet', entry['advice']))
