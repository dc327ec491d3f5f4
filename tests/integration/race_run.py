"""One writer of a stress round (tests/integration/test_concurrency.py).

Run inside a node's namespace with the venv's Python.  It imports everything
first, says it is ready (one byte on the file descriptor named by
$IMQ_READY_FD), then blocks on stdin until the test closes it: every writer of
the round starts at the same moment.  Then it runs, unchanged, either the
masq_chain module's own main() (module arguments from a file, as Ansible
hands them to a module) or one cycle of the node-side resync, and exits with
its exit code.  Nothing is mocked: the module runs its real code against the
namespace's real iptables.

``race_run.py --slot FD SPEC``: the same writer for round after round of one
test, imported once.  For each round the test sends, over the socket FD, the
read end of that round's "go" pipe and the write end of its "ready" pipe
(SCM_RIGHTS) and two file names; the slot forks a child that sends its
output to those files, writes its ready byte, blocks on the go pipe like a
writer started on its own, then runs the writer and exits.  The slot answers
with the child's exit status.  A fresh process per writer, as above, costs
the imports again each time: a third of a second, most of a writer's cost.
"""
import json
import os
import socket
import sys


def load(spec_path):
    """The writer's entry point, imported, and its spec."""
    with open(spec_path) as handle:
        spec = json.load(handle)
    sys.path.insert(0, spec['collections'])
    if spec['kind'] == 'module':
        from ansible_collections.ipmasq.agent.plugins.modules import masq_chain as entry  # noqa: E402
        sys.argv = ['masq_chain', spec['args_file']]
    else:
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync as entry  # noqa: E402
    return entry, spec


def wait_for_go(ready, go):
    os.write(ready, b'x')
    os.close(ready)
    os.read(go, 1)          # returns when the test closes the other end: go


def write(entry, spec):
    """Run the writer; never returns (the process exits with its status)."""
    if spec['kind'] == 'module':
        entry.main()            # exits with the module's JSON on stdout
    sys.exit(entry.main(spec['argv']))


def slot(sock_fd, spec_path):
    entry, spec = load(spec_path)
    sock = socket.socket(fileno=sock_fd)
    while True:
        msg, fds, _flags, _addr = socket.recv_fds(sock, 4096, 2)
        if not msg:
            return 0            # the test is done with this writer
        go, ready = fds
        out_path, err_path = json.loads(msg.decode())
        pid = os.fork()
        if pid == 0:
            sock.close()
            for fd, path in ((1, out_path), (2, err_path)):
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(target, fd)
                os.close(target)
            wait_for_go(ready, go)
            os.close(go)
            write(entry, spec)
        os.close(go)
        os.close(ready)
        _pid, status = os.waitpid(pid, 0)
        sock.sendall(b'%d\n' % os.waitstatus_to_exitcode(status))


def main():
    if sys.argv[1] == '--slot':
        sys.exit(slot(int(sys.argv[2]), sys.argv[3]))
    entry, spec = load(sys.argv[1])
    if 'IMQ_READY_FD' in os.environ:     # without it: run at once (tests/integration/test_write_verify.py)
        wait_for_go(int(os.environ['IMQ_READY_FD']), 0)
    write(entry, spec)


if __name__ == '__main__':
    main()
