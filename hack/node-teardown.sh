#!/usr/bin/env bash
# node-teardown.sh removes everything hack/node-up.sh made, whatever state it
# was left in (a clean stop, a failed start, a kill -9 of everything, a
# second run): the processes, the mounts, the network namespace (and with it
# the veth, the pod network and every nftables/iptables rule and ipset the
# node's parts made, which live only in that namespace), the cgroups, the
# kubelet's sysctls and the files. It can always be re-run; it exits 0 when
# nothing is left and says what it could not remove otherwise.
set -uo pipefail

STATE=${USERLAND_NODE_STATE:-/tmp/node-run}
NS=${USERLAND_NODE_NETNS:-userland-node}
CG=${USERLAND_NODE_CGROUP:-userland-node}
HOST_IF=ulnode0
log() { echo "node-teardown: $*" >&2; }
t0=$(date +%s.%N)
step() { log "$1 done at $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')s"; }
[[ $(id -u) == 0 ]] || { log "needs root"; exit 1; }
failed=0

# 1. Processes: the recorded ones (only if their command line names $STATE,
# so a reused pid is never killed), everything in the cgroup /$CG (daemons,
# shims and pods), and everything in the network namespace.
node_pids() {
  local f p
  for f in "$STATE"/pids/*; do
    [[ -f $f ]] || continue
    p=$(<"$f")
    if [[ -r /proc/$p/cmdline ]] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -qF "$STATE"; then echo "$p"; fi
  done
  for f in /sys/fs/cgroup/*/"$CG"; do
    [[ -d $f ]] && find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  ip netns pids "$NS" 2>/dev/null
}
# Zombies cannot be killed; they leave the cgroup once their parent reaps
# them (the cgroup removal below waits for that).
live() { while read -r p; do [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) =~ ^[^Z]$ ]] && echo "$p"; done; }
for _ in $(seq 50); do
  pids=$(node_pids | sort -un | grep -vx "$$" | live || true)
  [[ -z $pids ]] && break
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null
  sleep 0.1
done
if [[ -n $(node_pids | sort -un | grep -vx "$$" | live || true) ]]; then
  log "processes still alive: $(node_pids | sort -un | tr '\n' ' ')"
  failed=1
fi

step processes
# 2. Mounts on the host under $STATE: the pinned mount namespace (whose
# own mounts — container root filesystems, volumes, pod netns files — go
# with it once its processes are gone) and its bind mount. Deepest first.
for _ in 1 2 3; do
  mounts=$(awk -v s="$STATE" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  [[ -z $mounts ]] && break
  for m in $mounts; do umount -l "$m" 2>/dev/null || umount -f "$m" 2>/dev/null; done
done
if awk -v s="$STATE" 'index($5, s) == 1 {f=1} END {exit !f}' /proc/self/mountinfo; then
  log "mounts left under $STATE"
  failed=1
fi

step mounts
# 3. Network namespace (its veth end, bridge, routes, nftables tables,
# iptables rules and ipsets go with it) and the host end of the veth.
if ip netns list | grep -qw "$NS"; then ip netns del "$NS" || failed=1; fi
# Deleting the namespace deletes the pair asynchronously: wait for the host
# end to go before deleting it by hand (it is gone already after a crash
# that left no namespace).
for _ in $(seq 20); do ip link show "$HOST_IF" >/dev/null 2>&1 || break; sleep 0.1; done
ip link del "$HOST_IF" 2>/dev/null
if ip link show "$HOST_IF" >/dev/null 2>&1; then log "veth $HOST_IF left"; failed=1; fi
# A crash can leave the host's nftables with a node table only if a part ran
# outside the namespace; remove the node's own table if it ever shows up.
if nft list table ip userland-node >/dev/null 2>&1; then nft delete table ip userland-node || failed=1; fi

step "network namespace"
# 4. Cgroups, deepest first (a cgroup dir is removed with rmdir once empty).
for h in /sys/fs/cgroup/*/; do
  [[ -d $h$CG ]] || continue
  for _ in $(seq 50); do
    find "$h$CG" -depth -type d -exec rmdir {} \; 2>/dev/null
    [[ -d $h$CG ]] || break
    sleep 0.1
  done
  if [[ -d $h$CG ]]; then log "cgroup $h$CG left"; failed=1; fi
done

step cgroups
# 5. Sysctls the kubelet set host-wide.
if [[ -f $STATE/sysctl.saved ]]; then
  while IFS= read -r kv; do sysctl -qw "$kv" || failed=1; done <"$STATE/sysctl.saved"
fi

# 6. Files. --one-file-system never follows into a mount that is left.
if [[ -e $STATE ]] && ((failed == 0)); then
  rm -rf --one-file-system "$STATE" || failed=1
fi
if ((failed)); then
  log "incomplete; re-run it"
  exit 1
fi
log "clean"
