#!/usr/bin/env bash
# Run the collection's Molecule scenarios (extensions/molecule/*) with podman.
#
#   sudo bash tests/molecule.sh                  # every scenario
#   sudo bash tests/molecule.sh default traffic  # some of them
#   sudo bash tests/molecule.sh --images-only    # only build the node images
#   sudo bash tests/molecule.sh --rebuild ...    # rebuild the node images first
#
# Root on Debian 12. What it does, in order:
#   1. installs podman, runc, netavark and mmdebstrap from the archive;
#   2. makes a venv of its own (build/molecule-venv) with Molecule, the podman
#      driver and the `ansible` bundle (for containers.podman: Galaxy is not
#      reachable from these machines), pinned in tests/molecule/requirements.txt;
#   3. writes build/molecule/containers.conf (runc, ulimits this root shell can
#      grant) and exports it as CONTAINERS_CONF;
#   4. builds the node images localhost/ipmasq-node:{bookworm,bookworm-docker,trixie}
#      (trixie with nftables too) with mmdebstrap from this machine's own apt
#      sources, once: an image is reused while its package list is unchanged;
#   5. runs `molecule test -s <scenario>` for each scenario, one after the
#      other, inside a network namespace made for this run (podman's network
#      backend adds iptables chains and sets ip_forward in the namespace it
#      runs in: that must never be this machine's own), and prints the time
#      each took;
#   6. on exit, also on failure or Ctrl-C, removes every container and network
#      labelled io.ipmasq.molecule, then the namespace.
# Exit status: 0 when every scenario passed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
. scripts/apt.sh
. scripts/podman-conf.sh

all_scenarios=(default resync nftables docker flannel traffic ipv6 removal example upgrade upgrade-1.0.0)
# upgrade-1.0.0: the upgrade scenario again, from the release before the last
# one (IMQ_PREVIOUS_REF; the scenario's own default is the last release), and
# with this tree's resync on the timer (IMQ_RESYNC_MODE; the scenario's own
# default is the watch mode), so that both modes' upgrades are run.
declare -A previous_refs=([upgrade-1.0.0]=36609b2)
declare -A resync_modes=([upgrade-1.0.0]=timer)
work="$here/build/molecule"
venv="$here/build/molecule-venv"
label=io.ipmasq.molecule

images_only=false
rebuild=false
scenarios=()
for arg in "$@"; do
  case "$arg" in
    --images-only) images_only=true ;;
    --rebuild) rebuild=true ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "molecule.sh: unknown option $arg" >&2; exit 2 ;;
    *)
      if [ ! -f "extensions/molecule/${arg%%-[0-9]*}/molecule.yml" ]; then
        echo "molecule.sh: no scenario $arg (have: ${all_scenarios[*]})" >&2
        exit 2
      fi
      scenarios+=("$arg")
      ;;
  esac
done
[ "${#scenarios[@]}" -gt 0 ] || scenarios=("${all_scenarios[@]}")

if [ "$(id -u)" != 0 ]; then
  echo "molecule.sh: run as root (podman, network namespaces)" >&2
  exit 2
fi

log() { printf '== %s\n' "$*"; }
trap 'echo "molecule.sh: failed (line $LINENO)" >&2' ERR

# --- 1. host packages ------------------------------------------------------
apt_pkgs=(podman runc netavark mmdebstrap eatmydata iptables python3-venv util-linux iproute2)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 2. the Molecule venv --------------------------------------------------
reqs=tests/molecule/requirements.txt
want=$(sha256sum "$reqs" | cut -d' ' -f1)
if [ ! -x "$venv/bin/molecule" ] || [ "$(cat "$venv/.requirements.sha" 2>/dev/null)" != "$want" ]; then
  log "creating $venv from $reqs"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  # (pip's status passes through the filter: pipefail)
  "$venv/bin/pip" install -q --upgrade pip 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
  "$venv/bin/pip" install -q -r "$reqs" 2>&1 | { grep -v "^WARNING: Location" >&2 || true; }
  "$venv/bin/python" -c 'import molecule, molecule_plugins.podman, ansible_collections.containers.podman'
  echo "$want" > "$venv/.requirements.sha"
fi

# --- 3. podman's configuration (scripts/podman-conf.sh says why) -----------
podman_conf "$work" tests/molecule.sh

# --- 4. node images --------------------------------------------------------
base_pkgs=python3,python3-apt,iptables,iproute2,systemd,systemd-sysv,dbus,procps,conntrack,tcpdump,iputils-ping,netcat-openbsd,ca-certificates,busybox-static
host_sources=/etc/apt/sources.list.d/debian.sources
[ -f "$host_sources" ] || host_sources=/etc/apt/sources.list
host_codename=$(sed -n "s/^VERSION_CODENAME=//p" /etc/os-release | tr -d "\"")

# sources_for SUITE: this machine's own apt sources (same mirror, whatever it
# is), with the host's release name replaced by SUITE.
sources_for() {
  local suite=$1 ext=sources
  case "$host_sources" in *.list) ext=list ;; esac
  local out="$work/$suite.$ext"
  sed -E "s/\\b${host_codename}\\b/${suite}/g" "$host_sources" > "$out"
  echo "$out"
}

# build_image TAG SUITE PACKAGES: localhost/ipmasq-node:TAG from SUITE, unless
# an image with the same recipe exists already.
build_image() {
  local tag=$1 suite=$2 pkgs=$3
  local ref="localhost/ipmasq-node:$tag"
  local recipe
  recipe=$(printf '%s\n%s\n%s\n' "$suite" "$pkgs" "$(cat "$host_sources")" | sha256sum | cut -c1-16)
  if ! $rebuild && podman image exists "$ref" &&
     [ "$(podman image inspect --format '{{ index .Config.Labels "io.ipmasq.recipe" }}' "$ref")" = "$recipe" ]; then
    log "image $ref: present"
    return 0
  fi
  local src cache="$work/apt-cache-$suite" tar="$work/rootfs-$tag.tar" start=$SECONDS
  src=$(sources_for "$suite")
  mkdir -p "$cache"
  log "image $ref: building from $suite (mmdebstrap, log in $work/mmdebstrap-$tag.log)"
  # The .deb files are kept in $cache so that the next image of the same
  # release downloads only what it adds.
  # eatmydata: dpkg without fsync, twice as fast; nothing of it stays in the image.
  # The setup hook's $1 is for mmdebstrap's shell (the chroot directory).
  # shellcheck disable=SC2016
  if ! mmdebstrap --variant=apt --include="$pkgs" --skip=essential/unlink \
      --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata \
      --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
      --setup-hook="sync-in $cache /var/cache/apt/archives/" \
      --customize-hook="sync-out /var/cache/apt/archives $cache" \
      "$suite" "$tar" "$src" > "$work/mmdebstrap-$tag.log" 2>&1; then
    tail -n 30 "$work/mmdebstrap-$tag.log" >&2
    rm -f "$tar"
    echo "molecule.sh: could not build $ref" >&2
    return 1
  fi
  podman import --quiet --change 'CMD ["/sbin/init"]' --change "LABEL io.ipmasq.recipe=$recipe" "$tar" "$ref" >/dev/null
  rm -f "$tar"
  log "image $ref: built in $((SECONDS - start)) s"
}

images_start=$SECONDS
# Debian 13 from the same archive: its own download, in parallel with Debian 12.
# It also carries nftables (nft) beside iptables: the nftables scenario's
# backend, and the switch between the two on one node.
trixie_pkgs="$base_pkgs,nftables"
build_image trixie trixie "$trixie_pkgs" > "$work/build-trixie.out" 2>&1 &
trixie_pid=$!
images_ok=true
build_image bookworm bookworm "$base_pkgs" || images_ok=false
build_image bookworm-docker bookworm "$base_pkgs,docker.io" || images_ok=false
wait "$trixie_pid" || images_ok=false
cat "$work/build-trixie.out"
$images_ok || exit 1
log "images ready in $((SECONDS - images_start)) s"
$images_only && exit 0

# --- 5. a network namespace for podman, and the scenarios -------------------
export PATH="$venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$here/build/collections"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1
# The podman connection with pipelining: one `podman exec` per module instead
# of five (extensions/molecule/shared/connection_plugins/podman.py says why).
export ANSIBLE_CONNECTION_PLUGINS="$here/extensions/molecule/shared/connection_plugins" ANSIBLE_PIPELINING=1
mkdir -p build/collections/ansible_collections/ipmasq
[ -e build/collections/ansible_collections/ipmasq/agent ] || ln -sfn "$here" build/collections/ansible_collections/ipmasq/agent

# The example scenario uses the collection as a user has it: built into a
# release tarball and installed from it into an empty path.
if [[ " ${scenarios[*]} " == *" example "* ]]; then
  rm -rf build/molecule/example-collections build/molecule/dist
  ansible-galaxy collection build --output-path build/molecule/dist . >/dev/null
  # (ANSIBLE_COLLECTIONS_PATH of its own: with this tree's on it, ansible-galaxy
  # would find ipmasq.agent installed already and install nothing)
  ANSIBLE_COLLECTIONS_PATH="$here/build/molecule/example-collections" ansible-galaxy collection install \
    -p build/molecule/example-collections build/molecule/dist/ipmasq-agent-*.tar.gz >/dev/null
  [ -f build/molecule/example-collections/ansible_collections/ipmasq/agent/roles/ip_masq/tasks/main.yml ] ||
    { echo "molecule.sh: the example's collection did not install" >&2; exit 1; }
  log "example: installed $(basename build/molecule/dist/ipmasq-agent-*.tar.gz) into build/molecule/example-collections"
fi

# Namespaces left by a run that was killed outright (its pid is gone).
for old in $(ip netns list | awk '{print $1}' | grep -E '^imq-molecule-[0-9]+$' || true); do
  if [ ! -d "/proc/${old#imq-molecule-}" ]; then
    ip netns delete "$old" || true
  fi
done

ns="imq-molecule-$$"
# in_ns CMD...: run CMD with its network namespace switched to ours, and
# nothing else changed (ip netns exec would also remount /sys, which hides the
# cgroup mounts podman needs).
in_ns() { nsenter --net="/run/netns/$ns" -- "$@"; }

podman_cleanup() {
  local ids
  ids=$(in_ns podman ps -aq --filter "label=$label" 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086  # one id per word
    in_ns podman rm --force --volumes --time 0 $ids >/dev/null 2>&1 || true
  fi
  ids=$(in_ns podman network ls -q --filter "label=$label" 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    in_ns podman network rm --force $ids >/dev/null 2>&1 || true
  fi
}

# The running `molecule test`, in a process group of its own (setsid), so that
# a signal stops it and every ansible-playbook it started before the cleanup.
child=
stop_child() {
  [ -n "$child" ] || return 0
  kill -TERM -- "-$child" 2>/dev/null || true
  local _
  for _ in $(seq 1 30); do
    kill -0 -- "-$child" 2>/dev/null || break
    sleep 1
  done
  kill -KILL -- "-$child" 2>/dev/null || true
  child=
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_child
  if ip netns list | grep -qw "$ns"; then
    podman_cleanup
    ip netns delete "$ns" || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$ns"
in_ns ip link set lo up
# Whatever an earlier, interrupted run left behind.
podman_cleanup

results=()
failed=0
total_start=$SECONDS
for s in "${scenarios[@]}"; do
  log "scenario $s"
  start=$SECONDS
  # In the background and waited for: bash runs a trap only between commands,
  # and `wait` is one that a signal interrupts.
  ref=${previous_refs[$s]:-}
  mode=${resync_modes[$s]:-}
  setsid nsenter --net="/run/netns/$ns" -- env ${ref:+IMQ_PREVIOUS_REF=$ref} ${mode:+IMQ_RESYNC_MODE=$mode} \
    molecule test --scenario-name "${s%%-[0-9]*}" &
  child=$!
  rc=0
  wait "$child" || rc=$?
  child=
  if [ "$rc" -eq 0 ]; then
    status=PASS
  else
    status=FAIL
    failed=$((failed + 1))
    podman_cleanup
  fi
  took=$((SECONDS - start))
  results+=("$(printf '%-13s %s %4d s' "$s" "$status" "$took")")
  log "scenario $s: $status in $took s"
done

log "summary ($((SECONDS - total_start)) s for the scenarios)"
printf '   %s\n' "${results[@]}"
printf '%s\n' "${results[@]}" > "$work/timings.txt"
if [ "$failed" -gt 0 ]; then
  echo "molecule.sh: $failed of ${#scenarios[@]} scenario(s) failed" >&2
  exit 1
fi
