#!/usr/bin/env bash
# Node-side watcher of the Molecule scenario `upgrade`, run as a transient
# systemd unit during a role run (systemd-run; bounded: at most MAX_SECONDS,
# and it stops as soon as DIR/stop exists).
#
#   imq-upgrade-watch poll DIR [MAX_SECONDS]
#       reads both nat tables (iptables and ip6tables -S) about every 50 ms;
#       a listing without our POSTROUTING jump or without the MASQUERADE rule
#       of the IP-MASQ-AGENT chain is appended to DIR/poll-missing.
#   imq-upgrade-watch trigger DIR [MAX_SECONDS]
#       starts ip-masq-agent.service again and again (0.5 s after the
#       last run ended), as timer or path-unit ticks would; every start that
#       fails is appended to DIR/trigger-failed.
#
# DIR/<mode>-count holds "<runs> <bad>"; DIR/<mode>-done appears at the end.
set -u
mode=${1:?mode}
dir=${2:?dir}
max=${3:-600}
mkdir -p "$dir"
end=$((SECONDS + max))
n=0
bad=0
while [ ! -e "$dir/stop" ] && [ "$SECONDS" -lt "$end" ] && [ "$n" -lt 20000 ]; do
  n=$((n + 1))
  case $mode in
    poll)
      for tool in iptables ip6tables; do
        out=$("$tool" -w 5 -t nat -S 2>&1)
        if ! grep -q -- '^-A POSTROUTING .*-j IP-MASQ-AGENT$' <<<"$out" ||
           ! grep -q -- '^-A IP-MASQ-AGENT .*-j MASQUERADE' <<<"$out"; then
          bad=$((bad + 1))
          printf '== poll %d %s %s\n%s\n' "$n" "$tool" "$(date +%T.%N)" "$out" >> "$dir/poll-missing"
        fi
      done
      sleep 0.05
      ;;
    trigger)
      if ! out=$(systemctl start ip-masq-agent.service 2>&1); then
        bad=$((bad + 1))
        printf '== start %d %s\n%s\n%s\n' "$n" "$(date +%T.%N)" "$out" \
          "$(systemctl show --property=Result,ExecMainStatus ip-masq-agent.service)" >> "$dir/trigger-failed"
      fi
      sleep 0.5
      ;;
    *)
      echo "imq-upgrade-watch: unknown mode $mode" >&2
      exit 2
      ;;
  esac
  echo "$n $bad" > "$dir/$mode-count"
done
echo "$n $bad" > "$dir/$mode-done"
