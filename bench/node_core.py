"""The module's own work, without Ansible, against the floor (node side).

Runs INSIDE a network namespace made by bench/run.py, with the node's Python
and PYTHONPATH=build/collections; prints one JSON document.  Never run it in
the root namespace: it flushes the nat table of the namespace it runs in.

    measure SIZES REPS   apply from scratch and no-change rerun, module core
                         (Policy + sync, in process) vs one raw iptables-restore
                         --noflush (apply) / one iptables-save -t nat (no change),
                         and vs the same commands the module runs, run bare
    profile SIZE         where the core's time goes: per-function timings and
                         the top of a cProfile of Policy + sync (no change)

PYTHONPATH decides which code runs: bench/run points it at this tree, or at
an older revision extracted by ``--baseline REV`` (the "before" rows).  Both
layouts are understood: the core package ``module_utils/_core`` and the
single file ``module_utils/_masq.py`` it replaced.
"""
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import time

from nsguard import refuse_unless_own_namespace  # bench/, this script's directory

try:
    from corelayout import core_module  # bench/, this script's directory: either layout of the core
    _ipt, _save, _policy, _sync = (core_module(name) for name in (
        '_core.iptables_backend.chain',
        '_core.iptables_backend.save',
        '_core.model.policy',
        '_core.engine.sync',
    ))
    try:
        _rules = core_module('_core.iptables_backend.rules')
        _tools = core_module('_core.iptables_backend.tools')
    except ImportError:         # a revision before iptables.py was split: all in it
        _rules = _tools = _ipt
    _masq = None
    LAYOUT = '_core'
except ImportError:             # an older revision: everything in _masq.py
    from ansible_collections.ipmasq.agent.plugins.module_utils import _masq
    _ipt = _rules = _tools = _save = _policy = _sync = None
    LAYOUT = '_masq'

CHAIN = 'IP-MASQ-AGENT'


class Core:
    """The same few calls on either layout of the core."""

    def __init__(self):
        self.layout = LAYOUT
        if LAYOUT == '_core':
            self.file = _ipt.__file__
            self.restore_wait = _tools.RESTORE_WAIT_SECONDS
        else:
            self.file = _masq.__file__
            self.restore_wait = _masq.RESTORE_WAIT_SECONDS

    def policy(self, cidrs):
        if self.layout == '_core':
            return _policy.Policy(nonmasquerade_cidrs=cidrs, cidr_limit=None)
        return _masq.Policy(nonmasquerade_cidrs=cidrs, cidr_limit=None)

    def sync(self, pol):
        if self.layout == '_core':
            return _sync.sync(pol, _ipt.IptablesBackend(run, shutil.which))
        return _masq.sync(pol, run=run, find=shutil.which)

    def rules(self, pol):
        if self.layout == '_core':
            return _rules.chain_rules(pol, 4), '-A POSTROUTING ' + _rules.jump_spec(pol.chain)
        return pol.chain_rules(4), '-A POSTROUTING ' + pol.jump_spec()

    def chain_rule_count(self, text):
        if self.layout == '_core':
            return len(_save.parse_save(text).rules(CHAIN))
        return len(_masq.parse_save(text, CHAIN).chain_rules)

    def parts(self, cidrs, text):
        """(name, callable) of the core's steps, for the profile."""
        pol = self.policy(cidrs)
        if self.layout == '_core':
            table = _save.parse_save(text)
            desired = _rules.chain_rules(pol, 4)
            current = [r.line for r in table.rules(CHAIN)]
            return [
                ('Policy(...) (validation: parse_cidrs)', lambda: self.policy(cidrs)),
                ('chain_rules (render)', lambda: _rules.chain_rules(pol, 4)),
                ('parse_save', lambda: _save.parse_save(text)),
                ('same_rules', lambda: _rules.same_rules(current, desired)),
                ('plan_present (incl. render, same_rules)', lambda: _ipt.plan_present(4, table, pol)),
            ]
        state = _masq.parse_save(text, CHAIN)
        desired = pol.chain_rules(4)
        return [
            ('Policy(...) (validation: parse_cidrs)', lambda: self.policy(cidrs)),
            ('chain_rules (render)', lambda: pol.chain_rules(4)),
            ('parse_save', lambda: _masq.parse_save(text, CHAIN)),
            ('same_rules', lambda: _masq._same_rules(state.chain_rules, desired)),  # pylint: disable=protected-access
            ('plan_present (incl. render, same_rules)', lambda: _masq.plan_present(4, state, pol)),
        ]


CORE = Core()
RESET = '*nat\nCOMMIT\n'   # restore WITHOUT --noflush: empties this namespace's nat table


def make_cidrs(count):
    # Same list as benchlib.make_cidrs (this file runs with the node's Python, outside the venv).
    first = count // 2
    out = ['10.%d.%d.0/24' % (i // 256, i % 256) for i in range(first)]
    out += ['100.%d.%d.0/24' % (64 + i // 256, i % 256) for i in range(count - first)]
    return out


def run(argv, data=None):
    """What the module's run_command does, with subprocess (LC_ALL=C is in the environment)."""
    proc = subprocess.run(argv, input=data, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def must(argv, data=None):
    rc, out, err = run(argv, data)
    if rc != 0:
        raise RuntimeError('%s: rc=%d %s' % (' '.join(argv), rc, err))
    return out


def cpu_now():
    """CPU seconds of this process plus every child it has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + usage.ru_utime + usage.ru_stime


def sample(func):
    cpu0 = cpu_now()
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start, cpu_now() - cpu0


def floor_payload(policy):
    rules, jump = CORE.rules(policy)
    lines = [':%s - [0:0]' % CHAIN] + rules + [jump]
    return '*nat\n' + '\n'.join(lines) + '\nCOMMIT\n'


def module_core(cidrs, expect_changed):
    result = CORE.sync(CORE.policy(cidrs))
    if result['changed'] != expect_changed:
        raise RuntimeError('sync changed=%s, expected %s' % (result['changed'], expect_changed))
    return result


def measure(size, reps):
    cidrs = make_cidrs(size)
    save = shutil.which('iptables-save')
    save6 = shutil.which('ip6tables-save')
    restore = shutil.which('iptables-restore')
    payload = floor_payload(CORE.policy(cidrs))

    def floor_apply():
        must([restore, '--noflush'], payload)

    def floor_nochange():
        must([save, '-t', 'nat'])

    def same_nochange():
        # The commands the module runs for a no-change run (it reads both families), run bare.
        must([save, '-t', 'nat'])
        must([save6, '-t', 'nat'])

    def same_apply():
        same_nochange()
        must([restore, '--wait=%d' % CORE.restore_wait, '--noflush'], payload)

    steps = {
        'module_apply': lambda: module_core(cidrs, True),
        'floor_apply': floor_apply,
        'same_apply': same_apply,
        'module_nochange': lambda: module_core(cidrs, False),
        'floor_nochange': floor_nochange,
        'same_nochange': same_nochange,
    }
    # Warm-up (page cache, modules loaded in the kernel), not recorded.
    must([restore], RESET)
    module_core(cidrs, True)
    out = interleaved(steps, reps, lambda: must([restore], RESET))
    rules = CORE.chain_rule_count(must([save, '-t', 'nat']))
    must([restore], RESET)
    out.update({'size': size, 'reps': reps, 'chain_rules': rules, 'layout': CORE.layout})
    return out


def interleaved(steps, reps, reset):
    """Run ``steps`` (``<who>_apply`` / ``<who>_nochange`` for who in module,
    floor, same) ``reps`` times, interleaved: each rep empties the table
    (``reset``) before every apply, then runs the no-change runs; which side
    goes first rotates, so that none always runs warmer.  Returns
    ``{step: {'wall': median, 'cpu': median}}`` in seconds."""
    who = ('module', 'floor', 'same')
    series = dict(('%s_%s' % (w, step), []) for w in who for step in ('apply', 'nochange'))
    for rep in range(reps):
        order = who[rep % 3:] + who[:rep % 3]
        for key in order:
            reset()
            _r, wall, cpu = sample(steps[key + '_apply'])
            series[key + '_apply'].append((wall, cpu))
        for key in order:
            _r, wall, cpu = sample(steps[key + '_nochange'])
            series[key + '_nochange'].append((wall, cpu))
    return dict((key, {'wall': statistics.median(v[0] for v in values),
                       'cpu': statistics.median(v[1] for v in values)}) for key, values in series.items())


def best_ms(func, repeats):
    best = float('inf')
    for _i in range(repeats):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best * 1000.0


def profile(size, repeats=20):
    cidrs = make_cidrs(size)
    save = shutil.which('iptables-save')
    restore = shutil.which('iptables-restore')
    must([restore], RESET)
    try:
        CORE.sync(CORE.policy(cidrs))
        text = must([save, '-t', 'nat'])
        parts = CORE.parts(cidrs, text) + [
            ('iptables-save -t nat (subprocess)', lambda: must([save, '-t', 'nat'])),
            ('whole no-change run (Policy + sync)', lambda: module_core(cidrs, False)),
        ]
        timings = [{'part': name, 'ms': best_ms(func, repeats if 'subprocess' not in name and 'whole' not in name
                                                else max(3, repeats // 4))}
                   for name, func in parts]
        prof = cProfile.Profile()
        prof.enable()
        for _i in range(5):
            module_core(cidrs, False)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats('tottime').print_stats(12)
        # Trim the absolute paths so the table reads in a results file.
        top = buf.getvalue().replace(os.path.dirname(CORE.file) + '/', '').replace(
            os.path.dirname(os.__file__) + '/', '')
        return {'size': size, 'parts': timings, 'cprofile_top': top.strip()}
    finally:
        must([restore], RESET)


def main(argv):
    refuse_unless_own_namespace('node_core.py')   # it empties the nat table of where it runs
    if argv[:1] == ['measure']:
        sizes = [int(x) for x in argv[1].split(',')]
        reps = [int(x) for x in argv[2].split(',')]
        out = [measure(size, rep) for size, rep in zip(sizes, reps)]
    elif argv[:1] == ['profile']:
        out = profile(int(argv[1]))
    else:
        sys.stderr.write(__doc__)
        return 2
    json.dump(out, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
