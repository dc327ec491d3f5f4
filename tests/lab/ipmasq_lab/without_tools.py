"""Run a command as on a node where some tools are not installed.

    python3 without_tools.py /usr/sbin/nft ... -- argv...

It re-runs itself under ``unshare --mount --propagation private`` (a mount
namespace of its own, whose mounts never reach the machine's), covers each
path there with a bind mount of /dev/null (not executable: tool lookups
pass it over), then runs argv.
"""
import os
import subprocess
import sys

MARK = 'IMQ_WITHOUT_TOOLS'


def main():
    if os.environ.get(MARK) != str(os.getpid()):
        # Not yet in a mount namespace of our own: unshare execs python, which keeps this pid.
        env = dict(os.environ)
        env[MARK] = str(os.getpid())
        os.execve('/usr/bin/unshare', ['unshare', '--mount', '--propagation', 'private',
                                       sys.executable] + sys.argv, env)
    sep = sys.argv.index('--')
    paths, argv = sys.argv[1:sep], sys.argv[sep + 1:]
    for path in paths:
        subprocess.run(['mount', '--bind', '/dev/null', path], check=True)
    del os.environ[MARK]
    os.execvp(argv[0], argv)


if __name__ == '__main__':
    main()
