#!/usr/bin/env bash
# Sourced by tests/molecule.sh and tests/ee.sh: `podman_conf DIR WRITER`
# writes DIR/containers.conf and exports it as CONTAINERS_CONF.
# The root shell here lacks CAP_SYS_RESOURCE: podman's default ulimits would
# make every container fail (setrlimit: Operation not permitted), so ask for
# exactly what this shell has. crun refuses this host's hybrid cgroup layout;
# runc works.
podman_conf() {
  local dir=$1 writer=$2 nofile nproc
  mkdir -p "$dir"
  nofile=$(ulimit -Hn)
  nproc=$(cat /proc/sys/kernel/pid_max)
  cat > "$dir/containers.conf" <<CONF
# Written by $writer
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"

[network]
network_backend = "netavark"
CONF
  export CONTAINERS_CONF="$dir/containers.conf"
}
