"""The nftables backend's core, without Ansible (node side of parts ``nftcore`` and ``conn``).

Runs INSIDE a network namespace made by bench/run.py (``nft_bench.py``), with
the node's Python and PYTHONPATH=build/collections; prints one JSON document.
Never run it in the root namespace: it flushes the nft ruleset of the
namespace it runs in.

    apply BACKEND SIZE   part conn: the policy of SIZE spaced CIDRs written by
                         the core (Policy + sync, backend ``nftables`` or
                         ``iptables``: the iptables flavour is whatever PATH
                         gives), then checked: SIZE set elements, or SIZE
                         RETURN rules and the jump
    apply BACKEND SIZE EXCEPTIONS SOURCES POD
                         part extconn: the same with exception_cidrs (the
                         lower /25 of EXCEPTIONS of the kept /24s, spread
                         evenly) and source_cidrs (SOURCES CIDRs: POD, the
                         pod's /32, and SOURCES - 1 spaced /26s of
                         100.64.0.0/10); 0 leaves an option out.  Checked:
                         the element count of every set and the order of the
                         chain's set lookups, or the count of iptables rules
    measure SIZES REPS   part nftcore: apply from an empty ruleset and the
                         no-change rerun, the core in process (Policy + sync,
                         backend ``nftables``) vs the floor (one bare
                         ``nft -j -f -`` of exactly the transaction the core
                         writes; one bare ``nft -j list table inet
                         ip-masq-agent``) vs the same commands the core runs
                         (argv and stdin recorded from the core), run bare
    profile SIZE         where a no-change run's time goes: per-step timings
                         and the top of a cProfile of Policy + sync

Every command, the core's and the bare ones, runs through the core's own
runner (``runner.make_run()``: posix_spawn, waited for), so CPU is this
process plus every child it has waited for (getrusage).
"""
import cProfile
import io
import json
import os
import pstats
import sys

from corelayout import core_module  # bench/, this script's directory: either layout of the core
from node_core import cpu_now, interleaved, sample  # bench/, this script's directory
from nsguard import refuse_unless_own_namespace

CHAIN = 'IP-MASQ-AGENT'
TABLE = 'ip-masq-agent'
SET4 = 'nonmasq-ipv4'
EXC4 = 'exceptions-ipv4'
SRC4 = 'sources-ipv4'
_backends, _nft_json, _nft, _nft_rules, _policy, _runner, _sync = (core_module(name) for name in (
    '_core.registry.backends',
    '_core.nftables_backend.nft_json',
    '_core.nftables_backend.table',
    '_core.nftables_backend.rules',
    '_core.model.policy',
    '_core.node.runner',
    '_core.engine.sync',
))
RUN = _runner.make_run()


def spaced_cidrs(count):
    """``count`` distinct /24s, every other one of 10.0.0.0/8 (10.0.0.0/24,
    10.0.2.0/24, ...; at most 32,768): no two adjacent, so an nft interval
    set holds ``count`` intervals and iptables ``count`` RETURN rules.  Same
    list as nft_bench.spaced_cidrs (this file runs with the node's Python)."""
    if count > 32768:
        raise ValueError('at most 32,768 spaced /24s in 10.0.0.0/8')
    return ['10.%d.%d.0/24' % ((2 * i) // 256, (2 * i) % 256) for i in range(count)]


def exception_cidrs(size, count):
    """``count`` exceptions inside the kept ranges of spaced_cidrs(size):
    the lower /25 of kept /24s spread evenly over the list (the first is
    10.0.0.0/25), no two adjacent; at most ``size``."""
    if count > size:
        raise ValueError('at most one exception per kept /24: %d > %d' % (count, size))
    return ['10.%d.%d.0/25' % ((2 * j) // 256, (2 * j) % 256) for j in (i * size // count for i in range(count))]


def source_cidrs(count, pod):
    """``count`` sources: ``count - 1`` spaced /26s of 100.64.0.0/10
    (100.64.0.0/26, 100.64.0.128/26, ...; no two adjacent) and ``pod`` (the
    pod's own address, so its packets take the whole chain), last."""
    if count > 32768:
        raise ValueError('at most 32,768 spaced /26s in 100.64.0.0/10')
    base = (100 << 24) | (64 << 16)
    out = []
    for i in range(count - 1):
        addr = base + 128 * i
        out.append('%d.%d.%d.%d/26' % (addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255, addr & 255))
    return out + [pod]


def must(argv, data=None):
    rc, out, err = RUN(argv, data)
    if rc != 0:
        raise RuntimeError('%s: rc=%d %s' % (' '.join(argv), rc, err))
    return out


def nft():
    path = _runner.find('nft')
    if not path:
        raise RuntimeError('nft not found')
    return path


def reset():
    """Empty this namespace's nft ruleset (never the host's: see nsguard.py)."""
    must([nft(), 'flush', 'ruleset'])


def core_sync(cidrs, choice, run=RUN, **extensions):
    pol = _policy.Policy(nonmasquerade_cidrs=cidrs, cidr_limit=None, **extensions)
    return _sync.sync(pol, _backends.Backends(run, _runner.find, choice=choice))


def nft_set_size(name=SET4):
    data = json.loads(must([nft(), '-j', 'list', 'set', 'inet', TABLE, name]))
    for item in data.get('nftables', []):
        if 'set' in item:
            return len(item['set'].get('elem') or [])
    return 0


def iptables_counts():
    """(RETURN rules for 10.x CIDRs in our chain, jumps to it) from iptables-save -t nat."""
    save = _runner.find('iptables-save')
    text = must([save, '-t', 'nat'])
    rules = [line for line in text.splitlines() if line.startswith('-A %s -d 10.' % CHAIN)]
    jumps = [line for line in text.splitlines() if line.startswith('-A POSTROUTING') and line.endswith('-j ' + CHAIN)]
    return len(rules), len(jumps), os.path.realpath(save)


# ---------------------------------------------------------------------------
# apply (part conn)
# ---------------------------------------------------------------------------

def chain_lookups():
    """The sets our nft chain looks up, in rule order (from ``nft list chain``)."""
    text = must([nft(), 'list', 'chain', 'inet', TABLE, 'postrouting'])
    order = []
    for line in text.splitlines():
        for name in (SRC4, EXC4, SET4):
            if '@' + name in line:
                order.append(name)
    return order


def iptables_chain_rules():
    save = _runner.find('iptables-save')
    text = must([save, '-t', 'nat'])
    return sum(1 for line in text.splitlines() if line.startswith('-A %s ' % CHAIN))


def apply(choice, size, exceptions=0, sources=0, pod=None):
    cidrs = spaced_cidrs(size)
    extensions = {}
    if exceptions:
        extensions['exception_cidrs'] = exception_cidrs(size, exceptions)
    if sources:
        extensions['source_cidrs'] = source_cidrs(sources, pod)
    _r, wall, cpu = sample(lambda: core_sync(cidrs, choice, **extensions))
    result = _r
    if not result['changed']:
        raise RuntimeError('apply %s N=%d: the core reported no change on an empty namespace' % (choice, size))
    out = {'backend': choice, 'size': size, 'changed': True, 'commands': result['commands'],
           'selected': result.get('selected_backend'), 'apply_wall': wall, 'apply_cpu': cpu,
           'exceptions': exceptions, 'sources': sources}
    if choice == 'nftables':
        out['set_elements'] = nft_set_size()
        if out['set_elements'] != size:
            raise RuntimeError('nft set %s holds %d elements, expected %d' % (SET4, out['set_elements'], size))
        if extensions:
            # The sets hold what was asked, and the chain looks up the sources first, then the
            # exceptions, then the kept ranges (written here by hand, not taken from the core).
            want = [name for name, count in ((SRC4, sources), (EXC4, exceptions)) if count] + [SET4]
            out['lookups'] = chain_lookups()
            if out['lookups'] != want:
                raise RuntimeError('the chain looks up %s, expected %s in that order' % (out['lookups'], want))
            for name, count in ((EXC4, exceptions), (SRC4, sources)):
                if count:
                    out[name] = nft_set_size(name)
                    if out[name] != count:
                        raise RuntimeError('nft set %s holds %d elements, expected %d' % (name, out[name], count))
    else:
        rules, jumps, tool = iptables_counts()
        out.update(return_rules=rules, jumps=jumps, tool=tool)
        if extensions:
            # exceptions x sources rewriting rules, link-local + N RETURNs, one MASQUERADE per source.
            gates = max(sources, 1)
            want = exceptions * gates + 1 + size + gates
            out['chain_rules'] = iptables_chain_rules()
            if out['chain_rules'] != want or jumps != 1:
                raise RuntimeError('iptables: %d rules in %s and %d jumps, expected %d and 1'
                                   % (out['chain_rules'], CHAIN, jumps, want))
        elif rules != size or jumps != 1:
            raise RuntimeError('iptables: %d RETURN rules and %d jumps, expected %d and 1' % (rules, jumps, size))
    again = core_sync(cidrs, choice, **extensions)
    if again['changed']:
        raise RuntimeError('apply %s N=%d: the rerun changed something: %s' % (choice, size, again['actions']))
    return out


# ---------------------------------------------------------------------------
# measure (part nftcore)
# ---------------------------------------------------------------------------

def _recording(calls):
    """RUN, appending ``(argv, data, stdout)`` of every command to ``calls``."""
    def run(argv, data=None):
        rc, out, err = RUN(argv, data)
        calls.append((list(argv), data, out))
        return rc, out, err
    return run


def recorded(cidrs):
    """The (argv, stdin, stdout) of every command the core runs, for an
    apply from an empty ruleset and for the no-change rerun; and the
    results of both."""
    calls = {'apply': [], 'nochange': []}
    results = {}
    for step in ('apply', 'nochange'):
        results[step] = core_sync(cidrs, 'nftables', _recording(calls[step]))
    return calls, results


def replay(calls):
    for argv, data, _out in calls:
        RUN(argv, data)     # the same rc as the core got: a failed listing is part of what it runs


def check_nochange(result, size):
    if result['changed']:
        raise RuntimeError('no-change run N=%d changed: %s' % (size, result['actions']))
    commands = result['commands']
    if len(commands) != 1 or not commands[0].split()[0].endswith('/nft'):
        raise RuntimeError('no-change run N=%d ran %r, expected one nft' % (size, commands))


def measure(size, reps):
    cidrs = spaced_cidrs(size)
    reset()
    calls, results = recorded(cidrs)       # also the warm-up
    transaction = results['apply']['nftables']['transaction']
    if not transaction:
        raise RuntimeError('the apply from an empty ruleset wrote no transaction')
    check_nochange(results['nochange'], size)
    listing = [nft(), '-j', 'list', 'table', 'inet', TABLE]
    # The floor's apply must leave exactly what the core leaves: the core's rerun then changes nothing.
    reset()
    must([nft(), '-j', '-f', '-'], transaction)
    check_nochange(core_sync(cidrs, 'nftables'), size)
    elements = nft_set_size()
    if elements != size:
        raise RuntimeError('nft set %s holds %d elements, expected %d' % (SET4, elements, size))

    def module_apply():
        result = core_sync(cidrs, 'nftables')
        if not result['changed']:
            raise RuntimeError('apply N=%d: no change' % size)
        return result

    def module_nochange():
        result = core_sync(cidrs, 'nftables')
        check_nochange(result, size)
        return result

    steps = {
        'module_apply': module_apply,
        'floor_apply': lambda: must([nft(), '-j', '-f', '-'], transaction),
        'same_apply': lambda: replay(calls['apply']),
        'module_nochange': module_nochange,
        'floor_nochange': lambda: must(listing),
        'same_nochange': lambda: replay(calls['nochange']),
    }
    out = interleaved(steps, reps, reset)
    listing_bytes = len(must(listing))
    reset()
    out.update({'size': size, 'reps': reps, 'set_elements': elements, 'listing_bytes': listing_bytes,
                'transaction_bytes': len(transaction),
                'apply_commands': results['apply']['commands'], 'nochange_commands': results['nochange']['commands'],
                'apply_processes': len(calls['apply']), 'nochange_processes': len(calls['nochange'])})
    return out


# ---------------------------------------------------------------------------
# profile
# ---------------------------------------------------------------------------

def best_ms(func, repeats):
    """The least CPU time (this process and its children) of ``repeats`` calls, in ms."""
    best = float('inf')
    for _i in range(repeats):
        start = cpu_now()
        func()
        best = min(best, cpu_now() - start)
    return best * 1000.0


def profile(size, repeats=10):
    """Per-step timings of a no-change run (CPU ms, best of ``repeats``) and
    a cProfile of five.  The steps are the core's own functions, called on
    what the core itself read (its recorded nft output)."""
    import gc  # pylint: disable=import-outside-toplevel

    cidrs = spaced_cidrs(size)
    reset()
    try:
        calls, results = recorded(cidrs)
        check_nochange(results['nochange'], size)
        text = [out for argv, _data, out in calls['nochange'] if argv[0].endswith('/nft')][-1]
        docs = _nft_json.documents(text)
        table = _nft_json.parse_nft(docs[0]).get(('inet', TABLE))
        pol = _policy.Policy(nonmasquerade_cidrs=cidrs, cidr_limit=None)
        desired = _nft_rules.Desired(pol)
        listing = [nft(), '-j', 'list', 'table', 'inet', TABLE]

        def without_gc():
            gc.disable()
            try:
                core_sync(cidrs, 'nftables')
            finally:
                gc.enable()

        parts = [
            ('the no-change run\'s nft command, bare (subprocess)', lambda: replay(calls['nochange'])),
            ('nft -j list table (the floor; subprocess)', lambda: must(listing)),
            ('nft_json.documents (JSON decode of what nft printed)', lambda: _nft_json.documents(text)),
            ('nft_json.parse_nft', lambda: _nft_json.parse_nft(docs[0])),
            ('Policy(...) (validation: parse_cidrs)',
             lambda: _policy.Policy(nonmasquerade_cidrs=cidrs, cidr_limit=None)),
            ('nftables_rules.Desired(policy) (the rules; intervals only for a write)', lambda: _nft_rules.Desired(pol)),
            ('nftables.differences (_same_elements: the set as CIDR text)',
             lambda: _nft.differences(table, desired)),
            ('nftables_rules.render_live (the result\'s "before" text, made only for a change)', lambda: _nft_rules.render_live(table)),
            ('nftables_rules.render_desired (the result\'s "after" text, made only for a change)', lambda: _nft_rules.render_desired(desired)),
            ('nftables.plan_present (Desired + differences)', lambda: _nft.plan_present(table, pol)),
            ('whole no-change run (Policy + sync)', lambda: core_sync(cidrs, 'nftables')),
            ('whole no-change run, cyclic GC off (gc.disable)', without_gc),
        ]
        timings = [{'part': name, 'ms': best_ms(func, repeats if 'subprocess' not in name and 'whole' not in name
                                                else max(3, repeats // 2))}
                   for name, func in parts]
        prof = cProfile.Profile()
        prof.enable()
        for _i in range(5):
            core_sync(cidrs, 'nftables')
        prof.disable()
        tops = []
        for key, count in (('tottime', 15), ('cumulative', 25)):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(count)
            tops.append(buf.getvalue().replace(os.path.dirname(_nft.__file__) + '/', '').replace(
                os.path.dirname(os.__file__) + '/', '').strip())
        return {'size': size, 'parts': timings, 'cprofile_top': tops[0], 'cprofile_cumulative': tops[1]}
    finally:
        reset()


def main(argv):
    refuse_unless_own_namespace('node_nft.py')   # it flushes the nft ruleset of where it runs
    if argv[:1] == ['apply'] and len(argv) == 3:
        out = apply(argv[1], int(argv[2]))
    elif argv[:1] == ['apply'] and len(argv) == 6:
        out = apply(argv[1], int(argv[2]), int(argv[3]), int(argv[4]), argv[5])
    elif argv[:1] == ['measure'] and len(argv) == 3:
        sizes = [int(x) for x in argv[1].split(',')]
        reps = [int(x) for x in argv[2].split(',')]
        out = [measure(size, rep) for size, rep in zip(sizes, reps)]
    elif argv[:1] == ['profile'] and len(argv) == 2:
        out = profile(int(argv[1]))
    else:
        sys.stderr.write(__doc__)
        return 2
    json.dump(out, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
