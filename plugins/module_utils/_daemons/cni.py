# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The CNI networks' masquerading (containerd's, CRI-O's, nerdctl's default
networks): ``"ipMasq": true`` of the bridge and ptp plugins set to false in
the network files (``*.conf``, ``*.conflist``, ``*.json`` of
``/etc/cni/net.d``), and the masquerade rules the plugins already wrote for
the running containers of those networks removed (names: ``cni_daemon.py``).

The files are edited as text: only the ``true`` of each ``ipMasq`` of a
bridge or ptp plugin becomes ``false`` (and flannel's plugin's delegate gets
``"ipMasq": false``), every other byte stays.  Which files the runtime loads
and what their keys mean (Go's encoding/json): ``cni_network.py``.  A
network that masquerades a family our policy does not cover (IPv6 without
the option ``ipv6``) is left on, with its rules, and a warning.

The rules: a plugin reads its network's file only on ADD and DEL, so no
restart applies the edit; new containers get no rule, and the rules of the
running ones are removed here, for the networks of the files only (another
network's rules, and portmap's ``CNI-HOSTPORT-*``/``CNI-DN-*`` rules, which
carry other names and comments, are never selected):

- iptables: each ``POSTROUTING`` jump commented ``name: "<network>" id:
  "<id>"`` to the chain named for that network and id, and every rule of
  that chain.  The chain itself stays, empty: the plugins' DEL (1.1.1, with
  iptables-nft) fails when the chain is missing, and a runtime that runs DEL
  with its cached copy of the old configuration (``ipMasq`` still true)
  would then fail to remove the container.  With the empty chain, that DEL
  succeeds and deletes the chain.  A jump to the chain from elsewhere, or a
  rule in it without the plugin's comment, is not the plugin's: error,
  nothing changed.
- the emptied chains are recorded, and a later run deletes those still
  there, empty and unreferenced, once their containers are gone from the
  runtime's own records (``cni_chains.py``).
- nftables (``ipMasqBackend``): the network's rules in ``masq_checks`` of
  ``inet cni_plugins_masquerade``; the table and its ``postrouting`` chain,
  which every network shares, stay.

Standard library only: this file runs on managed nodes.
"""

import os

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError, one_line
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import RuleMatch
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import module_spec
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import gojson
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.backups import Backups
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import (
    COMMON_SPEC,
    Result,
    remove_rules,
    restore,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_chains import EmptiedChains
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_names import (
    CHAIN_PREFIX,
    CNI_CACHE_DIR,
    CNI_CONF_DIR,
    MASQ_KEY,
    NFT_CHAIN,
    NFT_HASH_DIGITS,
    NFT_TABLE,
    chain_name,
    comment_of,
    nft_comment_prefix,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_network import Network, conf_paths
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import Files, check_abs, commit

DAEMON = 'cni'

# The editor's own options (its argument spec beside base.COMMON_SPEC, as the
# daemon registry has it); the module cni_ip_masq takes those of COMMON_SPEC
# that concern it (no unit: the container runtime runs the plugins).
CNI_OPTIONS = dict(
    conf_dirs=dict(type='list', elements='path', default=[CNI_CONF_DIR]),
    remove_stale_rules=dict(type='bool', default=True),
    # Whether our policy covers IPv6: the policy's own option (the role's ip_masq_enable_ipv6).
    ipv6=module_spec(('ipv6',))['ipv6'],
    cache_dir=dict(type='path', default=CNI_CACHE_DIR),
)
MODULE_SPEC = dict(dict((k, dict(COMMON_SPEC[k])) for k in ('state', 'backup_dir', 'backup', 'root')), **CNI_OPTIONS)


def _rules_failed(error, result):
    """The error of a rule removal that failed after the network files were
    written: one line, with what this run changed (the files, the rules
    removed before it), as the other parts of a run say it."""
    details = dict(error.details)
    done = []
    if result['edited']:
        done.append('"%s" set to false in %s' % (MASQ_KEY, ', '.join(result['edited'])))
    removed = details.get('removed_rules') or result['removed_rules'] or []
    if removed and 'Removed before it' not in error.msg:
        done.append('removed %s' % '; '.join(removed))
    details.update(changed=bool(done) or bool(details.get('changed')), edited=list(result['edited']),
                   backups=list(result['backups']))
    text = one_line(error.msg)
    if done:
        text += ' (This run changed, before it failed: %s.)' % ', '.join(done)
    return MasqError(text + ' Run again to finish.', **details)


def _semantic_restore(path, current, original):
    """A network file changed since we wrote it (its owner's MTU, say):
    ``current`` with ``"ipMasq"`` true again in each bridge or ptp plugin
    where ``original`` (the backup store's) had it true, every other byte as
    the owner left it; None (left alone, with a warning) where the file is
    no longer the same list of plugins."""
    if original is None:
        return None
    try:
        was, now = Network(path, original), Network(path, current)
    except MasqError:
        return None
    if was.types != now.types:
        return None
    ours = set(i for i, keys in was.masq_keys if any(value is True for _at, value in keys))
    spans = [gojson.locate(current, now.top, at) for i, keys in now.masq_keys if i in ours
             for at, value in keys if value is False]
    for start, end in sorted(spans, reverse=True):
        current = current[:start] + 'true' + current[end:]
    return current


def _unrecorded(files, backups, dirs, result):
    """state=absent: each network file with ``"ipMasq": false`` in a bridge
    or ptp plugin that the backup store holds no record of (never ours, or
    a store removed since): we cannot tell whether that false is ours, so
    it stays, with a warning naming the file."""
    for path in conf_paths(files, dirs):
        text = files.read(path)
        if text is None or backups.record(path) is not None:
            continue
        try:
            net = Network(path, text)
        except MasqError:
            continue
        if any(value is False for _i, keys in net.masq_keys for _at, value in keys):
            result.warn('%s: "%s" is false (network %s) and the backup store %s holds no record of this file, so '
                        'whether ipmasq.agent set it cannot be told; it is left false. If ipmasq.agent set it (its '
                        'backup store was removed since), set it to true yourself.'
                        % (path, MASQ_KEY, net.name, backups.dir))


# --------------------------------------------------------------------------
# The rules
# --------------------------------------------------------------------------

def cni_rules(table, family, networks, gone=()):
    """``(rules, chains)`` to remove from a nat table
    (``iptables_save.NatTable``) for the ``networks`` (names): each
    POSTROUTING jump carrying the plugins' comment for one of them to the
    chain named for that network and container, and every rule of that
    chain.  The chains emptied so stay (module docstring); ``chains`` are
    those of ``gone`` (chains we emptied earlier, of containers that are
    gone) that are still there, empty, and that nothing jumps to.
    A jump to such a chain from elsewhere, or a rule in it without the
    plugin's comment: error, nothing changed."""
    jumps, targets = [], {}
    for rule in table.rules('POSTROUTING'):
        owner = comment_of(rule.comment)
        if owner is None or owner[0] not in networks:
            continue
        chain = chain_name(*owner)
        if rule.target == chain:
            jumps.append(rule)
            targets[chain] = rule.comment
    # A chain of such a network that lost its jump (a DEL stopped half way).
    for chain, rules in table.chains.items():
        if chain in targets or not chain.startswith(CHAIN_PREFIX) or table.builtin(chain):
            continue
        owners = set(comment_of(r.comment) for r in rules)
        if len(owners) == 1:
            owner = owners.pop()
            if owner is not None and owner[0] in networks and chain_name(*owner) == chain:
                targets[chain] = rules[0].comment
    remove, foreign = list(jumps), []
    for chain in sorted(targets):
        for rule in table.rules(chain):
            (remove if rule.comment == targets[chain] else foreign).append(rule)
        foreign.extend(r for r in table.jumps_to(chain) if r not in jumps and r.comment != targets[chain])
    if foreign:
        raise MasqError('cannot remove the CNI masquerade chain(s) %s (IPv%d): these rules are not the plugin\'s: '
                        '%s. Remove them first. Nothing was changed.'
                        % (', '.join(sorted(targets)), family, '; '.join(r.line for r in foreign)))
    chains = [c for c in sorted(set(gone)) if c in table.chains and c not in targets and not table.rules(c)
              and not table.builtin(c) and not table.jumps_to(c)]
    return remove, chains


def _masquerades(rule):
    return any(isinstance(s, dict) and 'masquerade' in s for s in rule.get('expr') or [])


def cni_nft_rules(tables, networks):
    """The ``networks``' masquerade rules in ``masq_checks`` of ``inet
    cni_plugins_masquerade`` (``tables`` as ``NftTools.ruleset`` reads
    them): ``[(text, what)]``, the ``nft`` part of a ``backend.RuleMatch``:
    each rule as nft prints it, and the rule (the backend deletes it by its handle)."""
    table = tables.get(NFT_TABLE)
    if table is None:
        return []
    where = '%s %s %s' % (NFT_TABLE[0], NFT_TABLE[1], NFT_CHAIN)
    out = []
    for rule in table.rules.get(NFT_CHAIN, []):
        comment = rule.get('comment') or ''
        for network in networks:
            prefix = nft_comment_prefix(network)
            named = ', net: %s, if: ' % network
            rest = comment[len(prefix) + NFT_HASH_DIGITS:]     # after "<network hash>-<instance hash>"
            if comment.startswith(prefix) and (rest.startswith(named) or named.startswith(rest)) and _masquerades(rule):
                out.append(('%s: %s' % (where, table.rule_text(rule)), ('rule', NFT_TABLE[0], NFT_TABLE[1], NFT_CHAIN, rule)))
                break
    return out


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------

def cni_sync(params, run, find, writer, check_mode=False):
    """``"ipMasq": false`` in the bridge and ptp plugins of every network
    file, and the masquerade rules of those networks removed (or undo the
    files)."""
    p = params
    files = Files(p.get('root') or '/')
    dirs = [check_abs(d, 'conf_dirs') for d in p['conf_dirs']]
    backups = Backups(files, p['backup_dir'], DAEMON)
    result = Result(p['state'], DAEMON)
    result['networks'] = []
    result['removed_rules'] = []
    result['stale_rules'] = []
    if not dirs:
        # [] is no directory (as the role's ip_masq_cni_conf_dirs: []): nothing to read, edit or restore.
        result.msg('No CNI network directory given (conf_dirs: []); nothing to do.')
        return result
    present = [d for d in dirs if os.path.isdir(files.real(d))]
    if not present:
        result.msg('No CNI network directory (%s); nothing to do.' % ', '.join(dirs))
        return result
    result['installed'] = True

    if p['state'] == 'absent':
        restore(files, backups, result, check_mode, writer, p['backup'], semantic=_semantic_restore)
        result['restart_required'] = False      # the plugins read the files on every ADD and DEL
        _unrecorded(files, backups, present, result)
        if result['edited']:
            result.msg('New containers of the restored networks %s masqueraded by their plugins again; running '
                       'ones get their rules back when they are re-created.' % ('would be' if check_mode else 'are'))
        return result

    networks, switched, ipam = [], [], {}
    for path in conf_paths(files, present):
        text = files.read(path)
        if text is None:
            continue
        net = Network(path, text, files.read)
        networks.append(net)
        if net.name:
            ipam.setdefault(net.name, []).extend(net.data_dirs)
        uncovered = net.uncovered(p['ipv6'])
        if uncovered:
            result.warn(uncovered)
        elif net.edits:
            files.write(path, net.switched_off(text))
            switched.append(net)
    result['networks'] = [n.as_dict() for n in networks]
    commit(files, backups, result, check_mode, writer, p['backup'])
    for net in switched:
        # A warning where the run edits: the first run on a node switches
        # off networks the user may not know of (podman's, the runtime's).
        said = '%s: %s (network %s)' % (net.path, net.what(check_mode), net.name)
        if check_mode:
            result.msg(said + '.')
        else:
            result.warn('%s: the plugin no longer masquerades its containers, ipmasq.agent\'s policy decides their '
                        'SNAT; the original is kept in %s (state=absent puts it back).' % (said, backups.dir))

    # A network left on keeps its rules (every file of its name).
    kept = set(n.name for n in networks if n.uncovered(p['ipv6']))
    names = sorted(set(n.name for n in networks if n.masquerading and n.name) - kept)
    if p['remove_stale_rules'] and names:
        found = {}      # per family (iptables) and 'nft': what the last read found
        emptied = EmptiedChains(files, backups, check_abs(p['cache_dir'], 'cache_dir'), ipam)

        def select(family, table):
            rules, chains = cni_rules(table, family, names, emptied.gone(family) if emptied.known else ())
            emptied.seen(family, table, rules, chains)
            found[family] = ['IPv%d: %s' % (family, r.line) for r in rules]
            return rules, chains

        def pick(tables):
            picked = cni_nft_rules(tables, names)
            found['nft'] = [text for text, _what in picked]
            return picked

        try:
            remove_rules(run, find, RuleMatch(nat=select, nft=pick), check_mode, result)
        except MasqError as e:
            raise _rules_failed(e, result)
        result['stale_rules'] = [line for key in found for line in found[key]]
        gone = [r for r in result['removed_rules'] if r.split(': ', 1)[-1].startswith('chain ')]
        if len(gone) < len(result['removed_rules']):
            result.msg('%s the masquerade rules of the running containers of %s; their emptied CNI-* chains '
                       'stay for the plugins\' DEL while the containers run.'
                       % ('Would remove' if check_mode else 'Removed', ', '.join(names)))
        if gone:
            result.msg('%s the emptied CNI-* chains of containers that are gone: %s.'
                       % ('Would delete' if check_mode else 'Deleted',
                          ', '.join(r.split(': ', 1)[-1][len('chain '):] for r in gone)))
        if not check_mode:
            try:
                emptied.save()
            except (IOError, OSError) as e:
                result.warn('%s: the record of the emptied CNI-* chains could not be written (%s); their chains '
                            'stay when their containers are gone.' % (emptied.path, e.strerror or e))
    return result
