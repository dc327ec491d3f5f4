"""A policy option that lives in tests/ only: the proof that an option is
one row of the options table (``_core/model/options.py``) and its rule.

``nomasq_mark``: packets that carry the firewall mark ``VALUE[/MASK]``
(``0x4000/0x4000``) keep their source address.  Its rule, in each
backend's own words, goes first in our chain (iptables) or our table's
postrouting chain (nftables)::

    -A IP-MASQ-AGENT -m mark --mark 0x4000/0x4000 -m comment --comment "..." -j RETURN
    meta mark & 0x00004000 == 0x00004000 return comment "..."

:data:`OPTION` is the row: its type, default, flag (the resync's
``--nomasq-mark``, and so the unit's ExecStart), usage and help words, its
check (:func:`parse_mark`) and ``extra=True`` (the Policy keeps it in
``Policy.extra``).  Its rule is one function per backend
(:func:`iptables_rule`, :func:`nftables_rule`), each in that backend's
``OPTION_RULES``.  :func:`register` adds the three (``options.register``
and one entry per backend) and returns what takes them out again; nothing
under plugins/ names it.
"""
from ansible_collections.ipmasq.agent.plugins.module_utils._core.iptables_backend import rules as iptables_rules
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model import options
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import Option
from ansible_collections.ipmasq.agent.plugins.module_utils._core.nftables_backend import rules as nftables_rules

NAME = 'nomasq_mark'
FLAG = '--nomasq-mark'
COMMENT = 'ip-masq-agent: marked traffic keeps its source address'
FULL = 0xFFFFFFFF


def _number(text):
    text = text.strip()
    try:
        number = int(text, 16) if text.lower().startswith('0x') else int(text, 10)
    except ValueError:
        return None
    return number if 0 <= number <= FULL else None


def parse_mark(value):
    """``VALUE[/MASK]`` (hex with 0x, or decimal, each 32 bits) as
    iptables-save prints it: ``0x4000/0x4000``, the mask left out when it
    is all ones.  A value outside the mask is refused."""
    text = value if isinstance(value, str) else ''
    first, slash, second = text.partition('/')
    mark = _number(first) if first.strip() else None
    mask = _number(second) if slash else FULL
    if mark is None or mask is None or mark & ~mask:
        raise MasqError('%s: %r is not a firewall mark like 0x4000/0x4000 (VALUE[/MASK], 32 bits each, the value '
                        'inside the mask). Nothing was changed.' % (NAME, value))
    return '0x%x' % mark if mask == FULL else '0x%x/0x%x' % (mark, mask)


def _split(value):
    mark, _slash, mask = value.partition('/')
    return int(mark, 16), int(mask, 16) if mask else FULL


def iptables_rule(value, policy, family, chains):
    """iptables: the RETURN first in our chain (``chains``: name -> ``-A`` lines, the policy's chain first)."""
    out = dict(chains)
    out[policy.chain] = ['-A %s -m mark --mark %s -m comment --comment "%s" -j RETURN'
                         % (policy.chain, value, COMMENT)] + out[policy.chain]
    return out


def nftables_rule(value, policy, rules):
    """nftables: the return first in our postrouting chain (``rules``: ``(expr, comment, family served)``)."""
    mark, mask = _split(value)
    left = {'meta': {'key': 'mark'}}
    if mask != FULL:
        left = {'&': [left, mask]}
    return [([{'match': {'op': '==', 'left': left, 'right': mark}}, {'return': None}], COMMENT, None)] + list(rules)


OPTION = Option(NAME, 'str', None, 'Packets carrying this firewall mark (VALUE/MASK) keep their source address.',
                resync_flag=FLAG, metavar='MARK', check=parse_mark,
                help=('packets carrying this firewall mark (VALUE[/MASK])', 'keep their source address'),
                extra=True)
RULES = ((iptables_rules.OPTION_RULES, iptables_rule), (nftables_rules.OPTION_RULES, nftables_rule))


def register():
    """The row in the options table and its rule in each backend; returns
    the function that takes them out again."""
    unregister = options.register(OPTION)
    for table, rule in RULES:
        table[NAME] = rule

    def undo():
        for table, _rule in RULES:
            table.pop(NAME, None)
        unregister()
    return undo
