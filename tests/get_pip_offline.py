"""Stand-in for the get-pip bootstrap script that ansible-test downloads from a
host these machines cannot reach.  It installs pip the same way, from the
Python's own ensurepip and then PyPI: ansible-test runs it as
``python get_pip.py [pip options] pip==X [--no-setuptools] [--no-wheel]``."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
subprocess.check_call([sys.executable, '-m', 'ensurepip', '--upgrade'], stdout=subprocess.DEVNULL)
sys.exit(subprocess.call([sys.executable, '-m', 'pip', 'install'] + args))
