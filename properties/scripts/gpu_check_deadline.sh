#!/usr/bin/env bash
# scripts/gpu-check keeps its deadline and prints its table when a step hangs: a bundle whose qtransit
# never returns, an 8 s deadline. The hung step must show as timed out, every later step as not run,
# the exit must be 1, and the whole must end within the deadline (plus the kill grace).
set -u
src=$1
d=$(mktemp -d /tmp/gpu-check-deadline.XXXXXX)
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/bundle/bin"
printf '#!/bin/sh\nexec sleep 600\n' >"$d/bundle/bin/qtransit"
printf '#!/bin/sh\necho "no GPU: a stand-in"\n' >"$d/bundle/bin/gpu_bench"
chmod +x "$d/bundle/bin/"*
echo "test bundle" >"$d/bundle/COMMIT"
t0=$(date +%s)
out=$(GPU_CHECK_DEADLINE=8 OUT="$d/out" "$src/scripts/gpu-check" --bundle "$d/bundle" 2>&1); rc=$?
took=$(($(date +%s) - t0))
echo "$out"
fail() { echo "gpu_check_deadline: $*"; exit 1; }
[ "$rc" = 1 ] || fail "exit $rc, expected 1"
[ "$took" -le 15 ] || fail "took $took s with an 8 s deadline"
grep -q '^qtransit info .*FAIL (timed out)' <<<"$out" || fail "the hung step is not shown as timed out"
grep -q '^check device = cpu .*FAIL (not run: the 8 s deadline is spent)' <<<"$out" || fail "a later step is not shown as not run"
[ "$(ls "$d/out" | wc -l)" -le 8 ] || fail "more than 8 log files"
echo "gpu_check_deadline: ok ($took s)"
