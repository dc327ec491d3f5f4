"""A backend that lives in tests/ only: the proof that the backend
interface (plugins/module_utils/_core/engine/backend.py) is closed.

``probe_backend(directory, name='probe')`` makes a real, if simple, backend
class (a ``backend.Backend``).  Its "nat table" is the directory: each
``<directory>/<chain>.json`` is one chain, ``{"ours": ..., "lines": [...]}``,
one rule a line, every chain passed by every packet (the probe has no
jumps).  A rule is ``ipv4 RETURN <cidr>`` (the destination keeps its
source) or ``ipv4 MASQUERADE [<comment>...]`` (``ipv6`` alike; SNAT too).

The sync half: ours is ``<chain>.json`` (``"ours": true``) holding the
policy's rules (``ipv4 RETURN 10.0.0.0/8``, ..., ``ipv4 MASQUERADE``).  It
reads, plans with undo, writes and removes that file, reports its own
result key (``result[name]``), and says its own words for every consumer
(diff text, the one-line msg, the resync's lines, drift words and kinds,
the rules metric, the SNAT report).  It needs no tool: it is installed
where its directory exists.

The audit half (``audit_read``): the SNAT audit reads every chain of the
directory, ours as the sync wrote it and the rules of other writers that a
test adds (``add_chain``), and returns them as neutral findings; ours is
the chain of the audit's chain name, as for iptables.  It runs no command
(it reads its files, as the sync half does), so it declares no
``audit_listings``.

``registered(directory, name)`` registers one with ``backends.register``
(the one line a backend needs) and takes it out again after a ``with``::

    with registered(tmp_path / 'probe') as probe:
        sync.sync(policy, backends.Backends(run, find, choice=probe.name))
        probe.add_chain('other', ['ipv4 MASQUERADE something else'])
        _snat_sources.inspect({}, False, False, run, find)

Nothing under plugins/ names it: every consumer reaches it through the
registry.
"""
import contextlib
import json
import os

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.conds import Cond, combine
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.walk import FAMILY_NAMES, SNAT_TARGETS, source
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.backend import AuditFinding, AuditTable, Backend
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.drift import compare, describe
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.result_words import did, plural
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.transaction import Step


def policy_lines(policy):
    """The probe's form of a policy: per family, a RETURN per kept CIDR, then MASQUERADE."""
    lines = []
    for family in policy.families():
        lines.extend('ipv%d RETURN %s' % (family, cidr) for cidr in policy.cidrs[family])
        lines.append('ipv%d MASQUERADE' % family)
    return lines


def probe_sources(backend, table, family, chain, lines, our_chain):
    """The SNAT rules of ``family`` in one chain of the probe (its file's
    ``lines``), as the audit's source records: each one's matches are the
    RETURNs before it (destinations that keep their source) and its
    comment; every chain is reached (the probe has no jumps)."""
    kept = Cond()
    found = []
    for line in lines:
        words = line.split()
        if words[:1] != [FAMILY_NAMES[family]] or len(words) < 2:
            continue
        if words[1] == 'RETURN':
            if len(words) < 3:
                break           # returns everything: no rule after it acts
            kept.dests.append((True, words[2]))
        elif words[1] in SNAT_TARGETS:
            own = Cond()
            if words[2:]:
                own.comments.append(' '.join(words[2:]))
            src = source(family=FAMILY_NAMES[family], backend=backend, table=table, chain=chain, rule=line,
                         target=words[1], path=[chain], reachable=True, cond=combine([kept, own]), gated=False)
            src['ours'] = chain == our_chain
            found.append(src)
    return found


class ProbeState:
    """What the probe read in one run."""

    def __init__(self):
        self.read = False
        self.lines = None       # ours (the file's lines), when the file exists
        self.after = None       # what the run writes (present), once planned
        self.changed = False
        self.note = None


class ProbeBackend(Backend):
    """The policy as lines in a JSON file of its own, and the SNAT audit of
    every chain file beside it (see the module docstring)."""

    name = 'probe'
    directory = None
    installed_text = 'the probe directory exists'
    drift_kinds = ('probe_missing', 'probe_rewritten')
    metric_help = 'probe: the lines of our file for the family'
    audit_rank = 5          # after iptables (0-2) and nftables (3)
    result_keys = ('probe',)
    fail_removal = False    # a test's way to make the removal of the file fail (a switch is then undone)

    # -- reading -------------------------------------------------------------

    @classmethod
    def path(cls, chain):
        return os.path.join(cls.directory, '%s.json' % chain)

    @classmethod
    def _file(cls, path):
        """A chain file's data (None: no such file)."""
        try:
            with open(path, encoding='utf-8') as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise MasqError('%s: %s cannot be read (%s). Nothing was changed.' % (cls.name, path, e))
        if not isinstance(data, dict) or not isinstance(data.get('lines'), list):
            raise MasqError('%s: %s holds no lines. Nothing was changed.' % (cls.name, path))
        return data

    @classmethod
    def add_chain(cls, chain, lines):
        """A test's way to add another writer's chain (``"ours": false``) to the probe's table."""
        with open(cls.path(chain), 'w', encoding='utf-8') as handle:
            json.dump({'ours': False, 'lines': list(lines)}, handle)

    def available(self):
        return os.path.isdir(self.directory)

    def state(self, reading):
        return reading.of.setdefault(self.name, ProbeState())

    def was_read(self, reading):
        return self.state(reading).read

    def _load(self, reading):
        st = self.state(reading)
        st.read = True
        data = self._file(self.path(reading.chain))
        if data is None:
            return
        if data.get('ours') is not True:
            raise MasqError('%s: %s is not ours. Nothing was changed.' % (self.name, self.path(reading.chain)))
        st.lines = data['lines']

    def holds_ours(self, reading):
        return self.state(reading).lines is not None

    def ours_text(self, reading):
        return 'our %s file %s' % (self.name, self.path(reading.chain))

    def read(self, reading, policy):
        if not self.available():
            raise MasqError('%s: the directory %s does not exist. Nothing was changed.' % (self.name, self.directory))
        self._load(reading)

    def look(self, reading, why):
        if self.available():
            self._load(reading)
        else:
            self.state(reading).note = 'no %s directory: nothing to remove.' % self.name

    # -- planning ------------------------------------------------------------

    def _write(self, chain, lines):
        path = self.path(chain)
        if lines is None:
            if self.fail_removal:
                raise MasqError('%s: cannot remove %s.' % (self.name, path))
            if os.path.exists(path):
                os.unlink(path)
            return
        with open(path + '.tmp', 'w', encoding='utf-8') as handle:
            json.dump({'ours': True, 'lines': lines}, handle)
        os.rename(path + '.tmp', path)

    def plan_present(self, reading, policy, adopt):
        st = self.state(reading)
        st.after = policy_lines(policy)
        if st.lines == st.after:
            return []
        st.changed = True
        before, after = st.lines, st.after
        if before is None:
            action, kind = 'write %s (%s)' % (self.path(reading.chain), plural(len(after), 'line')), 'probe_missing'
        else:
            action, kind = ('rewrite %s (%d lines -> %d lines)' % (self.path(reading.chain), len(before), len(after)),
                            'probe_rewritten')
        return [Step(self.name, [action], lambda: self._write(reading.chain, after),
                     lambda: self._write(reading.chain, before), [kind])]

    def plan_absent(self, reading, adopt, strict, undo):
        st = self.state(reading)
        if st.lines is None:
            return []
        st.changed = True
        before = st.lines
        return [Step(self.name, ['remove %s' % self.path(reading.chain)], lambda: self._write(reading.chain, None),
                     (lambda: self._write(reading.chain, before)) if undo else None, ['probe_unwanted'])]

    # -- the result ----------------------------------------------------------

    def report(self, reading, plan, policy, state, result):
        st = self.state(reading)
        managed = reading.selected == self.name
        after = st.after if managed else (None if st.changed else st.lines)
        result[self.name] = {
            'path': self.path(reading.chain), 'managed': managed, 'read': st.read, 'changed': st.changed,
            'exists_before': st.lines is not None, 'before': st.lines, 'after': after,
            'drift': compare(st.lines, st.after) if managed and st.changed and st.lines is not None else None,
        }
        return ['%s: %s' % (self.name, st.note)] if st.note else []

    @classmethod
    def rules_in_place(cls, result, policy):
        out = {}
        for line in (result.get(cls.name) or {}).get('after') or []:
            family = int(line.split()[0][len('ipv'):])
            out[family] = out.get(family, 0) + 1
        return out

    @classmethod
    def holds_policy(cls, result):
        return bool((result.get(cls.name) or {}).get('managed'))

    @classmethod
    def diff_text(cls, result, which):
        own = result.get(cls.name) or {}
        lines = own.get(which)
        if not own.get('read') and lines is None:
            return ''
        return '# %s %s\n%s' % (cls.name, own.get('path'), ''.join(line + '\n' for line in lines or []))

    @classmethod
    def msg_parts(cls, result, check_mode, present, elsewhere):
        own = result.get(cls.name) or {}
        what = '%s file' % cls.name
        if own.get('changed'):
            if own.get('managed') and present:
                return [did(check_mode, '%s (%s)' % (what, plural(len(own.get('after') or []), 'line')),
                            'written', 'write')], [], []
            return [did(check_mode, what, 'removed', 'remove')], [], []
        if own.get('managed'):
            return [], ['%s in place' % what], []
        return [], [], []

    @classmethod
    def log_lines(cls, result):
        own = result.get(cls.name) or {}
        return ['%s input:\n%s' % (cls.name, '\n'.join(own['after']))] if own.get('changed') and own.get('after') else []

    @classmethod
    def in_sync_text(cls, result):
        return 'in sync: %s (%s); nothing written.' % (result[cls.name]['path'], result['selected_backend_reason'])

    @classmethod
    def drift_words(cls, result, action, said):
        if not action.startswith('%s: rewrite ' % cls.name) or cls.name in said:
            return ''
        said.add(cls.name)
        return describe((result.get(cls.name) or {}).get('drift') or {})

    @classmethod
    def drift_report(cls, result):
        own = result.get(cls.name) or {}
        words = describe(own.get('drift') or {})
        return ('drifted' if own.get('exists_before') else 'missing'), (['%s file: %s' % (cls.name, words)] if words else [])

    # -- the SNAT audit --------------------------------------------------------

    def audit_read(self, view, family):
        """Every chain of the directory (ours, as the sync wrote it, and the
        others a test added), read when the audit asks, as one table."""
        if family is None or not self.available():
            return []
        view.tools_found = True
        chains = []
        for name in sorted(os.listdir(self.directory)):
            data = self._file(os.path.join(self.directory, name)) if name.endswith('.json') else None
            if data is not None:
                chains.append((name[:-len('.json')], data['lines']))
        table = '%s nat' % self.name

        def sources(chain):
            return [src for name, lines in chains
                    for src in probe_sources(self.name, table, family, name, lines, chain)]
        return [AuditFinding(self.name, family, self.name, self.name, 'IPv%d %s nat table' % (family, self.name),
                             tables=[AuditTable(table, (family,), sources)])]

    @classmethod
    def audit_words(cls, chain, advice):
        return {'ours': '%s (file %s)' % (cls.name, cls.path(chain))}

    @classmethod
    def fleet_report_words(cls, chain):
        return {'by_hand': 'rm %s' % cls.path(chain)}


def probe_backend(directory, name='probe'):
    """A ProbeBackend class named ``name`` whose files are in ``directory``."""
    return type('ProbeBackend_%s' % name.replace('-', '_'), (ProbeBackend,),
                {'name': name, 'directory': str(directory), 'result_keys': (name,)})


@contextlib.contextmanager
def registered(directory, name='probe'):
    """A probe backend in the registry for the ``with`` block (``backends.register``)."""
    cls = probe_backend(directory, name)
    unregister = backends.register(cls)
    try:
        yield cls
    finally:
        unregister()
