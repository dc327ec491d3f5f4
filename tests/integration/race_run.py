"""One writer of a stress round (tests/integration/test_concurrency.py).

Run inside a node's namespace with the venv's Python.  It imports everything
first, says it is ready (one byte on the file descriptor named by
$IMQ_READY_FD), then blocks on stdin until the test closes it: every writer of
the round starts at the same moment.  Then it runs, unchanged, either the
masq_chain module's own main() (module arguments from a file, as Ansible
hands them to a module) or one cycle of the node-side resync, and exits with
its exit code.  Nothing is mocked: the module runs its real code against the
namespace's real iptables.
"""
import json
import os
import sys


def main():
    spec_path = sys.argv[1]
    with open(spec_path) as handle:
        spec = json.load(handle)
    sys.path.insert(0, spec['collections'])
    if spec['kind'] == 'module':
        from ansible_collections.ipmasq.agent.plugins.modules import masq_chain as entry  # noqa: E402
        sys.argv = ['masq_chain', spec['args_file']]
    else:
        from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync as entry  # noqa: E402
    if 'IMQ_READY_FD' in os.environ:     # without it: run at once (tests/integration/test_write_verify.py)
        ready = int(os.environ['IMQ_READY_FD'])
        os.write(ready, b'x')
        os.close(ready)
        os.read(0, 1)           # returns when the test closes the other end: go
    if spec['kind'] == 'module':
        entry.main()            # exits with the module's JSON on stdout
    sys.exit(entry.main(spec['argv']))


if __name__ == '__main__':
    main()
