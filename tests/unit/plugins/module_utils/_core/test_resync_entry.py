"""The resync entry point's command line and logging (module_utils/_core/agent/resync.py).
Its cycles against real iptables are in tests/integration/test_resync.py."""
import io
import os
import subprocess
import sys

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils import _resync_code
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync as r
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import runner
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.runner import make_run


def test_defaults_mirror_upstream_and_the_role():
    opts = r.parse_args([])
    assert opts.config == '/etc/ip-masq-agent/config'
    assert opts.masq_chain == 'IP-MASQ-AGENT'
    assert opts.state_file == '/var/lib/ipmasq-agent/last-good-config'
    assert (opts.nomasq_all_reserved_ranges, opts.enable_ipv6, opts.random_fully) == (False, False, None)
    assert opts.rule_format == "docs"
    assert (opts.to_ports, opts.jump_position, opts.resync_interval) == ('', 'append', None)
    assert (opts.check, opts.once, opts.verbose, opts.log_format) == (False, False, False, 'auto')


@pytest.mark.parametrize('arg,value', [
    ('--enable-ipv6', True), ('--enable-ipv6=true', True), ('--enable-ipv6=True', True), ('--enable-ipv6=1', True),
    ('--enable-ipv6=t', True), ('--enable-ipv6=TRUE', True), ('--enable-ipv6=false', False),
    ('--enable-ipv6=0', False), ('--enable-ipv6=F', False), ('--enable-ipv6=False', False),
])
def test_booleans_take_gos_forms(arg, value):
    assert r.parse_args([arg]).enable_ipv6 is value


def test_values_with_space_or_equals():
    opts = r.parse_args(['--config', '/etc/a b', '--masq-chain=MY-SNAT', '--to-ports', '1024-2000,3000',
                         '--jump-position=first', '--state-file=/x=y', '-v', '--check', '--once'])
    assert (opts.config, opts.masq_chain, opts.to_ports, opts.jump_position, opts.state_file) == (
        '/etc/a b', 'MY-SNAT', '1024-2000,3000', 'first', '/x=y')
    assert opts.verbose and opts.check and opts.once


@pytest.mark.parametrize('argv,fragment', [
    (['--enable-ipv6=yes'], "invalid boolean value 'yes' for --enable-ipv6"),
    (['--enable-ipv6', 'false'], "unexpected argument 'false'"),
    (['--jump-position', 'last'], '--jump-position must be one of append, first'),
    (['--log-format=json'], '--log-format must be one of auto, journal, plain'),
    (['--state-file'], '--state-file needs a value'),
    (['--masq'], 'unknown option --masq'),
    (['-x'], 'unknown option -x'),
])
def test_bad_command_lines_exit_64_with_usage(argv, fragment, capsys):
    with pytest.raises(SystemExit) as e:
        r.parse_args(argv)
    assert e.value.code == 64
    err = capsys.readouterr().err
    assert err.startswith('usage: ip-masq-agent') and fragment in err


def test_help_exits_0(capsys):
    with pytest.raises(SystemExit) as e:
        r.parse_args(['--help'])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for flag in r.flags():
        assert flag in out


def test_journal_prefixes_and_plain_lines():
    out = io.StringIO()
    log = r.Log('journal', stream=out)
    log('warning', 'repaired drift: x')
    log('err', 'two\nlines')
    log('debug', 'hidden unless verbose')
    assert out.getvalue() == '<4>repaired drift: x\n<3>two\n<3>lines\n'
    out = io.StringIO()
    log = r.Log('plain', verbose=True, stream=out)
    log('notice', 'applied')
    log('debug', 'shown')
    assert out.getvalue() == 'ip-masq-agent: notice: applied\nip-masq-agent: debug: shown\n'


def test_auto_log_format_follows_journal_stream(tmp_path, monkeypatch):
    path = tmp_path / 'stderr'
    with open(str(path), 'w') as stream:
        st = os.fstat(stream.fileno())
        monkeypatch.setenv('JOURNAL_STREAM', '%d:%d' % (st.st_dev, st.st_ino))
        assert r.Log('auto', stream=stream).journal is True
        monkeypatch.setenv('JOURNAL_STREAM', '%d:%d' % (st.st_dev, st.st_ino + 1))
        assert r.Log('auto', stream=stream).journal is False
        monkeypatch.delenv('JOURNAL_STREAM')
        assert r.Log('auto', stream=stream).journal is False


def test_find_looks_on_path_then_in_sbin(tmp_path, monkeypatch):
    tool = tmp_path / 'iptables-save'
    tool.write_text('#!/bin/sh\n')
    tool.chmod(0o755)
    (tmp_path / 'not-executable').write_text('')
    monkeypatch.setenv('PATH', str(tmp_path))
    assert r.find('iptables-save') == str(tool)
    assert r.find('not-executable') is None
    assert r.find('sh') in ('/usr/bin/sh', '/bin/sh')
    assert r.find('no-such-tool-here') is None


def test_run_passes_stdin_and_reports_failures():
    run = r.make_run(timeout=5)
    assert run(['/bin/cat'], 'payload\n') == (0, 'payload\n', '')
    rc, _out, err = run(['/bin/sh', '-c', 'echo oops >&2; exit 3'])
    assert (rc, err) == (3, 'oops\n')
    assert run(['/nonexistent/tool'])[0] == 127


def test_run_records_the_pids_of_its_commands_only_in_the_list_it_is_given():
    """The watcher's record of our own commands (watch.describe skips their
    transactions) is an argument of the runner, not module state."""
    pids = []
    run = runner.make_run(timeout=5, record=pids)
    assert run(['/bin/sh', '-c', 'echo $$']) == (0, '%d\n' % pids[0], '') and len(pids) == 1
    for _i in range(runner.RECORDED + 3):
        run(['/bin/true'])
    assert len(pids) == runner.RECORDED and len(set(pids)) == runner.RECORDED
    assert runner.make_run(timeout=5)(['/bin/true'])[0] == 0 and len(pids) == runner.RECORDED
    assert not hasattr(runner, 'SPAWNED')


def test_run_is_bounded_in_time():
    rc, _out, err = r.make_run(timeout=1)(['/bin/sleep', '5'])
    assert rc == 124 and 'did not finish within 1 seconds' in err


def test_the_entry_point_runs_from_the_installed_package_alone(tmp_path):
    """python3 -m with PYTHONPATH on a tree holding only what the role installs
    (the core package, put there by the resync_code module's installer)."""
    written, removed = _resync_code.install(str(tmp_path), _resync_code.package_sources(), make_run(),
                                            '/usr/bin/python3')
    assert 'agent/resync.py' in written and removed == []
    assert sorted(os.listdir(str(tmp_path))) == ['v']
    assert _resync_code.install(str(tmp_path), _resync_code.package_sources(), make_run(),
                                '/usr/bin/python3') == ([], [])
    proc = subprocess.run(['/usr/bin/python3', '-S', '-B', '-m', r.__name__, '--help'], capture_output=True, text=True,
                          env={'PYTHONPATH': _resync_code.resync_root(str(tmp_path)), 'PATH': '/usr/bin:/bin'},
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('usage: ip-masq-agent')
    assert sys.modules[r.__name__] is r
