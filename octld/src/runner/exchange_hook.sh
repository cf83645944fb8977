#!/bin/sh
# The `update` hook of an exchange repository (docs/RUNNERS.md, "The exchange repository"):
# an agent may push only to the refs of an attempt the daemon runs now, which it lists in
# octl-open (one `refs/octl/remote/<run>/<node>/<attempt>/` a line). A push to any other ref,
# or to an attempt the daemon closed (its job ended, was cancelled or superseded), is refused;
# each refusal is also recorded in octl-refused/<run>.<node>.<attempt> for the daemon to read.
# The daemon's own pushes (the bases) carry OCTL_EXCHANGE_DAEMON=1. Runs in the repository.
ref=$1
[ "${OCTL_EXCHANGE_DAEMON:-}" = 1 ] && exit 0
case $ref in
refs/octl/remote/*/*/*/*/*) ;;
*)
  echo "octl: only an attempt's refs/octl/remote/<run>/<node>/<attempt>/<copy>/ may be pushed here, not $ref" >&2
  exit 1
  ;;
esac
attempt=${ref%/*/*}/
grep -qxF "$attempt" octl-open 2>/dev/null && exit 0
key=$(printf %s "${attempt#refs/octl/remote/}" | tr / . | sed 's/\.$//')
msg="octl: the exchange refused the push to $ref: attempt ${key##*.} of node $(echo "$key" | cut -d. -f2) is closed (the daemon no longer runs it), so this copy's work is never merged"
mkdir -p octl-refused && echo "$msg" >> "octl-refused/$key"
echo "$msg" >&2
exit 1
