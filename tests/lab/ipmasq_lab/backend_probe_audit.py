"""The audit half of the test backend (tests only): a backend whose nat
rules live in a made-up tool, ``probe-nat``, that the SNAT audit reads
through ``Backend.audit_read`` like every registered backend.  A test
registers it (``backends.REGISTRY``) and runs the audit, the judge and the
report with no change under plugins/: the audit names no technology, so
it lists the probe's rules in the probe's own words.

``probe-nat --list ipv4`` (``ipv6``) prints one rule a line::

    <chain> <target> [<comment>...]

where the target is MASQUERADE or SNAT (a SNAT rule), or the name of a
chain it jumps to; POSTROUTING is the hook.
"""
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.conds import Cond, combine
from ansible_collections.ipmasq.agent.plugins.module_utils._audit.walk import FAMILY_NAMES, SNAT_TARGETS, bfs, source
from ansible_collections.ipmasq.agent.plugins.module_utils._core.backend import AuditFinding, AuditTable, Backend
from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError

TOOL = 'probe-nat'
HOOK = 'POSTROUTING'


class ProbeRule:
    def __init__(self, line):
        words = line.split()
        self.line = line
        self.chain, self.target = words[0], words[1]
        self.cond = Cond()
        if words[2:]:
            self.cond.comments.append(' '.join(words[2:]))


def probe_sources(rules, family, chain):
    """The SNAT sources of the probe's rules, as the audit's source records; ``chain`` is ours."""
    chains = {}
    for rule in rules:
        chains.setdefault(rule.chain, []).append(rule)

    def edges(name):
        for rule in chains.get(name, []):
            if rule.target in chains:
                yield rule, rule.target
    paths = bfs([HOOK] if HOOK in chains else [], edges)
    found = []
    for rule in rules:
        if rule.target not in SNAT_TARGETS:
            continue
        path = paths.get(rule.chain)
        hops = path or [(rule.chain, None)]
        via = [r for _name, r in hops if r is not None]
        src = source(family=FAMILY_NAMES[family], backend=ProbeAudit.name, table='probe nat', chain=rule.chain,
                     rule=rule.line, target=rule.target, path=[name for name, _r in hops],
                     reachable=path is not None, cond=combine([r.cond for r in via] + [rule.cond]), gated=False,
                     our_chain=chain)
        src['ours'] = rule.chain == chain
        found.append(src)
    return found


class ProbeAudit:
    """The mixin: what the probe backend gives the SNAT audit."""

    name = 'probe'
    audit_rank = 5
    audit_listings = ((TOOL, ('--list', 'ipv4')), (TOOL, ('--list', 'ipv6')))

    def audit_read(self, view, family):
        if family is None:
            return []
        path = view.find(TOOL)
        if not path:
            return []
        view.tools_found = True
        argv = [path, '--list', FAMILY_NAMES[family]]
        rc, out, err = view.run(argv)
        if rc != 0:
            raise MasqError('%s failed (rc=%d): %s' % (' '.join(argv), rc, err))
        rules = [ProbeRule(line) for line in out.splitlines() if line.strip()]
        table = AuditTable('probe nat', (family,), lambda chain: probe_sources(rules, family, chain))
        return [AuditFinding(self.name, family, self.name, self.name, 'IPv%d probe nat table' % family,
                             tables=[table])]


class ProbeBackend(ProbeAudit, Backend):
    """Only looked in and audited: the policy is never written here."""

    writes = False

    def available(self):
        return bool(self.node.find(TOOL))
