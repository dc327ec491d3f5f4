# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The one reader of ``nft -j list ...`` output (libnftables JSON), and the
one renderer of its rules as nft syntax.

Tables with their chains (base-chain attributes kept: ``type``, ``hook``,
``prio``), rules (their ``expr`` statements as libnftables writes them), named
maps and sets with their elements, and every other named object of a table
(counters, quotas, flowtables, ...) by kind and name.  The SNAT audit walks
it; the nftables backend reads its own table with it, and compares and shows
rules as :func:`render_rule` writes them.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError


class NftTable:
    """One table: ``chains`` name -> chain object, ``rules`` chain -> [rule
    object], ``maps`` and ``sets`` name -> elements, ``info`` the table
    object, each in the order listed (plain dicts keep it; importing
    collections would cost a resync cycle more than reading the table)."""

    def __init__(self, family, name):
        self.family = family
        self.name = name
        self.info = {}
        self.chains = {}
        self.rules = {}
        self.maps = {}
        self.sets = {}
        self.others = []       # (kind, name) of every other object in the table
        self.unreadable = None  # the text listing, when nft's JSON of the table could not be read

    @staticmethod
    def rule_text(rule):
        """A rule of this table as ``nft list`` prints it (:func:`render_rule`)."""
        return render_rule(rule)


def parse_nft(data, what='nft -j list ruleset'):
    """Tables from libnftables JSON (text or already decoded), in the order listed."""
    if isinstance(data, str):
        import json  # pylint: disable=import-outside-toplevel

        try:
            data = json.loads(data)
        except ValueError as e:
            raise MasqError('%s printed something that is not JSON: %s' % (what, e))
    items = data.get('nftables', []) if isinstance(data, dict) else []
    tables = {}

    def table(obj):
        key = (obj.get('family'), obj.get('table', obj.get('name')))
        if key not in tables:
            tables[key] = NftTable(*key)
        return tables[key]

    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            continue
        kind, obj = next(iter(item.items()))
        if not isinstance(obj, dict):
            continue
        if kind == 'table':
            table(obj).info = obj
        elif kind == 'chain':
            t = table(obj)
            t.chains[obj.get('name')] = obj
            t.rules.setdefault(obj.get('name'), [])
        elif kind == 'rule':
            t = table(obj)
            t.rules.setdefault(obj.get('chain'), []).append(obj)
        elif kind == 'map':
            table(obj).maps[obj.get('name')] = obj.get('elem', [])
        elif kind == 'set':
            table(obj).sets[obj.get('name')] = obj
        elif kind != 'metainfo' and 'table' in obj:
            table(obj).others.append((kind, obj.get('name')))
    return tables


def documents(text, what='nft -j'):
    """The JSON documents of one nft run that listed several things (one
    document per list command, one after the other)."""
    import json  # pylint: disable=import-outside-toplevel

    decoder = json.JSONDecoder()
    docs = []
    index = 0
    text = text.strip()
    while index < len(text):
        try:
            doc, index = decoder.raw_decode(text, index)
        except ValueError as e:
            raise MasqError('%s printed something that is not JSON: %s' % (what, e))
        docs.append(doc)
        while index < len(text) and text[index].isspace():
            index += 1
    return docs


def version(data):
    """The nft version a listing names in its metainfo, or None."""
    for item in (data.get('nftables', []) if isinstance(data, dict) else []):
        if isinstance(item, dict) and 'metainfo' in item:
            return (item['metainfo'] or {}).get('version')
    return None


# --------------------------------------------------------------------------
# Rules as nft syntax
# --------------------------------------------------------------------------

def _dump(obj):
    """JSON text of what the renderer does not know (json imported only then)."""
    import json  # pylint: disable=import-outside-toplevel

    return json.dumps(obj, sort_keys=True)


_META_BARE = frozenset(('iifname', 'oifname', 'iif', 'oif', 'iiftype', 'oiftype'))


def render_expr(e, quote=False):
    """nft syntax for one JSON expression (close to what ``nft list`` prints)."""
    if isinstance(e, bool):
        return 'true' if e else 'false'
    if isinstance(e, str):
        return '"%s"' % e if quote and not e.startswith('@') else e
    if isinstance(e, int):
        return str(e)
    if isinstance(e, list):
        return ','.join(render_expr(x, quote) for x in e)
    if not isinstance(e, dict) or len(e) != 1:
        return _dump(e)
    key, val = next(iter(e.items()))
    if key == 'payload' and isinstance(val, dict):
        if 'protocol' in val:
            return '%s %s' % (val['protocol'], val.get('field', ''))
        return '@%s,%s,%s' % (val.get('base'), val.get('offset'), val.get('len'))
    if key == 'meta' and isinstance(val, dict):
        k = val.get('key', '')
        return k if k in _META_BARE else 'meta ' + k
    if key == 'fib' and isinstance(val, dict):
        flags = val.get('flags', [])
        flags = [flags] if isinstance(flags, str) else flags
        return 'fib %s %s' % (' . '.join(flags), val.get('result', ''))
    if key == 'numgen' and isinstance(val, dict):
        text = 'numgen %s mod %s' % (val.get('mode', ''), val.get('mod'))
        return text + (' offset %s' % val['offset'] if val.get('offset') else '')
    if key == 'ct' and isinstance(val, dict):
        return 'ct %s%s' % (val['dir'] + ' ' if val.get('dir') else '', val.get('key', ''))
    if key == 'prefix' and isinstance(val, dict):
        return '%s/%s' % (val.get('addr'), val.get('len'))
    if key == 'range' and isinstance(val, list) and len(val) == 2:
        return '%s-%s' % (render_expr(val[0]), render_expr(val[1]))
    if key == 'set':
        items = val if isinstance(val, list) else [val]
        return '{ %s }' % ', '.join(
            '%s : %s' % (render_expr(i[0], quote), render_expr(i[1])) if isinstance(i, list) and len(i) == 2
            else render_expr(i, quote) for i in items)
    if key == 'concat' and isinstance(val, list):
        return ' . '.join(render_expr(x) for x in val)
    if key in ('&', '|', '^', '<<', '>>') and isinstance(val, list) and len(val) == 2:
        return '%s %s %s' % (render_expr(val[0]), key, _hexish(val[1]))
    if key == 'elem' and isinstance(val, dict):
        return render_expr(val.get('val'), quote)
    if key in ('jump', 'goto') and isinstance(val, dict):
        return '%s %s' % (key, val.get('target'))
    if key in ('accept', 'drop', 'return', 'continue', 'queue'):
        return key
    return _dump(e)


def _hexish(v):
    return '0x%08x' % v if isinstance(v, int) else render_expr(v)


def involves(e, kind, key=None):
    """True if expression ``e`` contains a ``{kind: {...}}`` (with ``key``)."""
    if isinstance(e, dict):
        for k, v in e.items():
            if k == kind and (key is None or (isinstance(v, dict) and v.get('key') == key)):
                return True
            if involves(v, kind, key):
                return True
    elif isinstance(e, list):
        return any(involves(x, kind, key) for x in e)
    return False


def _nat_text(kind, val):
    if not val:
        return kind
    parts = [kind]
    if kind == 'masquerade':
        if val.get('port') is not None:
            parts.append('to :%s' % render_expr(val['port']))
    else:
        fam = val.get('family')
        target = render_expr(val['addr']) if val.get('addr') is not None else ''
        if val.get('port') is not None:
            if fam == 'ip6':
                target = '[%s]' % target
            target += ':%s' % render_expr(val['port'])
        parts.append(('%s to %s' % (fam, target)) if fam else 'to %s' % target)
    flags = val.get('flags')
    if flags:
        parts.append(','.join(flags) if isinstance(flags, list) else str(flags))
    return ' '.join(parts)


def render_stmt(s):
    if not isinstance(s, dict) or len(s) != 1:
        return _dump(s)
    key, val = next(iter(s.items()))
    if key == 'match' and isinstance(val, dict):
        left = val.get('left')
        quote = isinstance(left, dict) and 'meta' in left and isinstance(left['meta'], dict) and \
            left['meta'].get('key') in ('iifname', 'oifname')
        right = val.get('right')
        right_text = _hexish(right) if involves(left, 'meta', 'mark') else render_expr(right, quote)
        op = val.get('op', '==')
        binop = isinstance(left, dict) and any(k in left for k in ('&', '|', '^', '<<', '>>'))
        if op in ('==', 'in') and not binop:
            return '%s %s' % (render_expr(left), right_text)
        return '%s %s %s' % (render_expr(left), op, right_text)
    if key == 'counter':
        return 'counter'
    if key in ('masquerade', 'snat', 'dnat', 'redirect'):
        return _nat_text(key, val if isinstance(val, dict) else None)
    if key == 'mangle' and isinstance(val, dict):
        return '%s set %s' % (render_expr(val.get('key')), render_expr(val.get('value')))
    if key == 'vmap' and isinstance(val, dict):
        return '%s vmap %s' % (render_expr(val.get('key')), render_expr(val.get('data'), quote=True))
    if key == 'xt':
        if isinstance(val, dict):
            return 'xt %s %s' % (val.get('type', ''), val.get('name', ''))
        return 'xt ?'
    if key in ('jump', 'goto', 'accept', 'drop', 'return', 'continue', 'queue'):
        return render_expr(s)
    if val is None:
        return key
    return key


def render_rule(rule):
    text = ' '.join(render_stmt(s) for s in rule.get('expr', []))
    if rule.get('comment'):
        text += ' comment "%s"' % rule['comment']
    return text


# The nft families a removal (``deletion``) may name.
DELETION_FAMILIES = ('ip', 'ip6', 'inet')


def rule_handle(rule, where):
    """The handle of a rule ``nft -j`` listed (a positive int), or an error."""
    handle = rule.get('handle')
    if isinstance(handle, bool) or not isinstance(handle, int) or handle <= 0:
        raise MasqError('nft listed a rule without a usable handle in %s (%r); no nft transaction was run.'
                        % (where, handle))
    return handle


def deletion(what):
    """The libnftables JSON commands that remove ``what`` (a daemon's pick,
    ``backend.RuleMatch``): ``('rule', family, table, chain, rule)`` deleted
    by its handle, or ``('chain', family, table, chain)`` flushed and deleted."""
    kind, family, table, chain = what[:4]
    if family not in DELETION_FAMILIES:
        raise MasqError('internal error: nft family %r is not one of %s.' % (family, ', '.join(DELETION_FAMILIES)))
    if kind == 'rule':
        handle = rule_handle(what[4], '%s %s %s' % (family, table, chain))
        return [{'delete': {'rule': {'family': family, 'table': table, 'chain': chain, 'handle': handle}}}]
    if kind != 'chain':
        raise MasqError('internal error: an nft removal of %r (neither a rule nor a chain).' % (kind,))
    ident = {'family': family, 'table': table, 'name': chain}
    return [{'flush': {'chain': dict(ident)}}, {'delete': {'chain': dict(ident)}}]
