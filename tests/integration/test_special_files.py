"""A FIFO, socket or device where the writers' lock, the agent config file,
the state file or the metrics file should be (issue 18, item 5).  A plain
open() of a FIFO blocks until a writer opens it: masq_chain hung with no
bound and the resync until systemd killed it.  Now the lock and the config
file are refused clearly (the module fails naming the path and what it is,
nothing changed; the resync exits 2 as for any bad config file and keeps
enforcing the last good configuration), the state and metrics files are
warned about and replaced.

Real FIFOs in the test's own directories: the module's /run is a directory
of the test's own (private_run.py), the resync's files are under tmp_path.
Every run is bounded (TIMEOUT): a run that blocks fails the test."""
import json
import os
import subprocess

from ipmasq_lab import netlab
from ipmasq_lab.policy_view import CHAIN, JUMP, chain_lines, ours
from test_resync import SEED_001, Agent, lines

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 30
FIFO = 'it is a FIFO (named pipe), not a regular file'


def test_a_fifo_at_the_lock_path_fails_the_module_clearly_and_changes_nothing(nft_node, tmp_path):
    node = nft_node
    run = tmp_path / 'run'
    run.mkdir()
    os.mkfifo(str(run / 'ipmasq-agent.lock'))
    args = tmp_path / 'args.json'
    args.write_text(json.dumps({'ANSIBLE_MODULE_ARGS': {'backend': 'iptables'}}))
    spec = tmp_path / 'spec.json'
    spec.write_text(json.dumps({'kind': 'module', 'collections': netlab.COLLECTIONS, 'args_file': str(args)}))
    before = node.snapshot()
    argv = ['/usr/bin/python3', os.path.join(HERE, 'private_run.py'), str(run), '--',
            os.path.join(netlab.VENV_BIN, 'python'), os.path.join(HERE, 'race_run.py'), str(spec)]
    try:
        proc = node.ns.exec(argv, check=False, timeout=TIMEOUT, env=node.backend.env())
    except subprocess.TimeoutExpired:
        raise AssertionError('the module blocked on the FIFO at the lock path for %d s' % TIMEOUT)
    res = json.loads(proc.stdout[proc.stdout.index('{'):])
    assert res.get('failed') is True and res.get('changed', False) is False
    assert res['msg'] == ('the lock file /run/ipmasq-agent.lock that every writer of ipmasq.agent takes is a FIFO '
                          '(named pipe), not a regular file; nothing was changed. Remove it (the next run creates '
                          'the file again).')
    assert node.snapshot() == before


def _run(agent, *flags):
    try:
        return agent.run(*flags, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError('the resync blocked on a FIFO for %d s' % TIMEOUT)


def test_a_fifo_as_the_config_file_is_refused_and_the_last_good_configuration_enforced(nft_node, tmp_path):
    agent = Agent(nft_node, tmp_path)
    agent.write(SEED_001)
    _run(agent)
    assert agent.state_text() == SEED_001
    nft_node.ipt('-F', CHAIN)                   # drift, for the last good configuration to repair
    os.unlink(agent.config)
    os.mkfifo(agent.config)
    proc = _run(agent)
    assert proc.returncode == 2, proc.stderr
    assert lines(proc, '<3>%s refused: %s cannot be read: %s. Enforcing the last good configuration instead (%s, '
                       'saved ' % (agent.config, agent.config, FIFO, agent.state)), proc.stderr
    assert lines(proc, '<4>repaired drift (last good configuration): IPv4: rewrite chain %s' % CHAIN), proc.stderr
    rules = chain_lines(['10.0.0.0/8'])
    assert ours(nft_node.rules()) == [rules[0], JUMP % (CHAIN, CHAIN)] + rules[1:]
    assert agent.state_text() == SEED_001


def test_a_fifo_as_the_state_file_is_a_warning_and_replaced(nft_node, tmp_path):
    agent = Agent(nft_node, tmp_path)
    agent.write(SEED_001)
    os.makedirs(os.path.dirname(agent.state))
    os.mkfifo(agent.state)
    proc = _run(agent)
    assert proc.returncode == 0, proc.stderr
    assert lines(proc, '<4>state file %s cannot be read (%s); it is written again after the next good apply.'
                 % (agent.state, FIFO)), proc.stderr
    assert os.path.isfile(agent.state) and agent.state_text() == SEED_001
    rules = chain_lines(['10.0.0.0/8'])
    assert ours(nft_node.rules()) == [rules[0], JUMP % (CHAIN, CHAIN)] + rules[1:]


def test_a_fifo_as_the_metrics_file_is_a_warning_and_replaced(nft_node, tmp_path):
    agent = Agent(nft_node, tmp_path / 'agent')
    agent.write(SEED_001)
    textfile = tmp_path / 'textfile'
    textfile.mkdir()
    prom = textfile / 'ip_masq_agent.prom'
    os.mkfifo(str(prom))
    proc = _run(agent, '--metrics-dir', str(textfile))
    assert proc.returncode == 0, proc.stderr
    assert lines(proc, '<4>metrics: the previous %s cannot be read (%s): its counters start again at 0.'
                 % (prom, FIFO)), proc.stderr
    assert os.path.isfile(str(prom)) and 'ip_masq_agent_runs_total{result="ok"} 1' in prom.read_text()
