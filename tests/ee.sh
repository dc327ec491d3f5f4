#!/usr/bin/env bash
# Build the collection's execution environment with ansible-builder and run
# the site play in it, as AWX and Automation Platform do
# (docs/docsite/rst/awx.rst).
#
#   sudo bash tests/ee.sh                # build what is missing, then the test
#   sudo bash tests/ee.sh --images-only  # only build the images
#   sudo bash tests/ee.sh --rebuild      # rebuild both images first
#
# Root on Debian 12. What it does, in order:
#   1. installs podman, runc, netavark and mmdebstrap from the archive (as
#      tests/molecule.sh does), writes build/ee/containers.conf (runc, the
#      ulimits this root shell can grant) and exports it as CONTAINERS_CONF;
#   2. when an image is to be built, downloads the wheels of
#      tests/ee/base-requirements.txt and meta/ee-requirements.txt into
#      build/ee/wheels (pip, with this machine's pip configuration): no
#      container here reaches an index;
#   3. builds the base image localhost/ipmasq-ee-base:bookworm with mmdebstrap
#      from this machine's own apt sources (Python 3, pip, ssh, then
#      ansible-core and ansible-runner from the wheels): no registry is
#      reachable for the images ansible-builder's documentation starts from;
#   4. builds the execution environment localhost/ipmasq-ee:<recipe> from
#      tests/ee/execution-environment.yml with ansible-builder (podman build
#      --network=none, inside a network namespace made for it): the
#      collection from its release tarball, and its Python dependency
#      (netaddr) found by ansible-builder in the collection's
#      meta/execution-environment.yml;
#   5. runs tests/integration/test_execution_environment.py: the site play
#      through `ansible-runner run --process-isolation --container-image`,
#      against the SSH fleet, podman inside the fleet's controller namespace.
# Each image is reused while its recipe (a hash of its inputs) is unchanged,
# as tests/molecule.sh reuses its node images; the execution environment's
# recipe is its definition, the collection's meta/execution-environment.yml
# and meta/ee-requirements.txt, galaxy.yml and the base image's recipe, not
# the collection's code: the test runs this tree's collection from the
# job's project (requirements_collections, as AWX installs a project's
# collections/requirements.yml), over the one built into the image.
# Prints the seconds each step took. Exit status: 0 when the test passed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
. scripts/apt.sh

work="$here/build/ee"
images_only=false
rebuild=false
for arg in "$@"; do
  case "$arg" in
    --images-only) images_only=true ;;
    --rebuild) rebuild=true ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "ee.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "ee.sh: run as root (podman, network namespaces)" >&2
  exit 2
fi
log() { printf '== ee: %s\n' "$*"; }
trap 'echo "ee.sh: failed (line $LINENO)" >&2' ERR
total_start=$SECONDS

# --- 1. host packages and podman's configuration ---------------------------
apt_pkgs=(podman runc netavark mmdebstrap eatmydata iptables util-linux iproute2 openssh-client)
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
export PATH="$here/.venv/bin:$PATH"
for tool in ansible-builder ansible-runner ansible-galaxy; do
  command -v "$tool" >/dev/null || { echo "ee.sh: $tool is missing: run scripts/bootstrap.sh" >&2; exit 1; }
done
mkdir -p "$work"
# runc and the ulimits this shell can grant (scripts/podman-conf.sh says why)
. scripts/podman-conf.sh
podman_conf "$work" tests/ee.sh

# --- 2. the wheels (only when an image is to be built) ----------------------
wheels="$work/wheels"
wheels_fresh=false
ensure_wheels() {
  local want start=$SECONDS
  want=$(cat tests/ee/base-requirements.txt meta/ee-requirements.txt | sha256sum | cut -c1-16)
  if { $rebuild && ! $wheels_fresh; } || [ "$(cat "$wheels/.requirements.sha" 2>/dev/null)" != "$want" ]; then
    log "downloading wheels into $wheels"
    rm -rf "$wheels"
    mkdir -p "$wheels"
    # (pip's status passes through the filter: pipefail)
    pip download -q --only-binary=:all: -d "$wheels" -r tests/ee/base-requirements.txt -r meta/ee-requirements.txt 2>&1 |
      { grep -v "^WARNING: Location" >&2 || true; }
    # What the base image installs from them (tests/ee/base-requirements.txt).
    cp tests/ee/base-requirements.txt "$wheels/base.txt"
    echo "$want" > "$wheels/.requirements.sha"
    wheels_fresh=true
    log "wheels: $((SECONDS - start)) s"
  fi
}

# --- 3. the base image -----------------------------------------------------
step_start=$SECONDS
base_ref=localhost/ipmasq-ee-base:bookworm
base_pkgs=python3,python3-pip,python3-venv,openssh-client,ca-certificates,procps
host_sources=/etc/apt/sources.list.d/debian.sources
[ -f "$host_sources" ] || host_sources=/etc/apt/sources.list
host_codename=$(sed -n "s/^VERSION_CODENAME=//p" /etc/os-release | tr -d "\"")
base_recipe=$(printf '%s\n%s\n%s\n%s\n' "$base_pkgs" "$(cat "$host_sources")" "$host_codename" \
  "$(cat tests/ee/base-requirements.txt)" | sha256sum | cut -c1-16)
label() { podman image inspect --format "{{ index .Config.Labels \"io.ipmasq.recipe\" }}" "$1" 2>/dev/null || true; }
if ! $rebuild && podman image exists "$base_ref" && [ "$(label "$base_ref")" = "$base_recipe" ]; then
  log "image $base_ref: present"
else
  ensure_wheels
  log "image $base_ref: building (mmdebstrap, log in $work/mmdebstrap.log)"
  src="$work/bookworm.sources"
  case "$host_sources" in *.list) src="$work/bookworm.list" ;; esac
  sed -E "s/\\b${host_codename}\\b/bookworm/g" "$host_sources" > "$src"
  cache="$work/apt-cache"
  tar="$work/rootfs-base.tar"
  mkdir -p "$cache"
  # ansible-core and ansible-runner from the wheels, into Debian's python3
  # (as pip does in the images ansible-builder starts from); the wheels are
  # not left in the image. The hooks' $1 is the chroot, for mmdebstrap's shell.
  # shellcheck disable=SC2016
  if ! mmdebstrap --variant=apt --include="$base_pkgs" --skip=essential/unlink \
      --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata \
      --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
      --setup-hook="sync-in $cache /var/cache/apt/archives/" \
      --customize-hook="sync-out /var/cache/apt/archives $cache" \
      --customize-hook='mkdir -p "$1"/tmp/wheels' \
      --customize-hook="sync-in $wheels /tmp/wheels" \
      --customize-hook='chroot "$1" python3 -m pip install -q --no-index --find-links /tmp/wheels --break-system-packages --root-user-action=ignore -r /tmp/wheels/base.txt' \
      --customize-hook='rm -rf "$1"/tmp/wheels "$1"/root/.cache' \
      bookworm "$tar" "$src" > "$work/mmdebstrap.log" 2>&1; then
    tail -n 30 "$work/mmdebstrap.log" >&2
    rm -f "$tar"
    echo "ee.sh: could not build $base_ref" >&2
    exit 1
  fi
  podman import --quiet --change 'CMD ["/bin/bash"]' --change "LABEL io.ipmasq.recipe=$base_recipe" "$tar" "$base_ref" >/dev/null
  rm -f "$tar"
  log "image $base_ref: built"
fi
log "base image: $((SECONDS - step_start)) s"

# --- 4. the execution environment -------------------------------------------
step_start=$SECONDS
ee_recipe=$(cat tests/ee/execution-environment.yml tests/ee/requirements.yml meta/execution-environment.yml \
  meta/ee-requirements.txt galaxy.yml <(echo "$base_recipe") <(ansible-builder --version) | sha256sum | cut -c1-16)
ee_ref="localhost/ipmasq-ee:$ee_recipe"

ns="imq-ee-$$"
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if ip netns list | grep -qw "$ns"; then ip netns delete "$ns" || true; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! $rebuild && podman image exists "$ee_ref"; then
  log "image $ee_ref: present"
else
  ensure_wheels
  def="$work/definition"
  rm -rf "$def"
  mkdir -p "$def/collections"
  cp tests/ee/execution-environment.yml tests/ee/requirements.yml "$def/"
  cp -r "$wheels" "$def/wheels"
  ansible-galaxy collection build --force --output-path "$work/dist" . >/dev/null
  mv "$work"/dist/ipmasq-agent-*.tar.gz "$def/collections/ipmasq-agent.tar.gz"
  # podman build runs in a network namespace of its own (podman's network
  # backend must never act on this machine's): --network=none in any case.
  for old in $(ip netns list | awk '{print $1}' | grep -E '^imq-ee-[0-9]+$' || true); do
    [ -d "/proc/${old#imq-ee-}" ] || ip netns delete "$old" || true
  done
  ip netns add "$ns"
  log "image $ee_ref: building (ansible-builder, log in $work/builder.log)"
  if ! nsenter --net="/run/netns/$ns" -- ansible-builder build -v 2 --container-runtime podman \
      -f "$def/execution-environment.yml" -c "$work/context" -t "$ee_ref" \
      --extra-build-cli-args="--network=none" > "$work/builder.log" 2>&1; then
    tail -n 40 "$work/builder.log" >&2
    echo "ee.sh: could not build $ee_ref" >&2
    exit 1
  fi
  ip netns delete "$ns"
  # The build's stage images (untagged, with the base image's label), and
  # earlier recipes' images go (the base image is kept: it is tagged by name).
  for old in $(podman images -q --filter dangling=true --filter "label=io.ipmasq.recipe=$base_recipe" || true); do
    podman rmi "$old" >/dev/null 2>&1 || true
  done
  for old in $(podman images --format '{{.Repository}}:{{.Tag}}' --filter reference=localhost/ipmasq-ee | grep -vxF "$ee_ref" || true); do
    podman rmi "$old" >/dev/null 2>&1 || true
  done
  log "image $ee_ref: built"
fi
log "execution environment: $((SECONDS - step_start)) s"
$images_only && exit 0

# --- 5. the site play in it --------------------------------------------------
step_start=$SECONDS
export IMQ_EE_IMAGE="$ee_ref"
export ANSIBLE_COLLECTIONS_PATH="$here/build/collections"
rc=0
pytest -p no:cacheprovider -q tests/integration/test_execution_environment.py || rc=$?
log "site play in the execution environment: $((SECONDS - step_start)) s"
log "total: $((SECONDS - total_start)) s"
exit "$rc"
