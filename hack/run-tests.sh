#!/usr/bin/env bash
# `npm test`: every test, as CI runs them (.ci/run installs what they need, then calls this) — the unit tables, lint
# and every e2e spec file against CAPI v1.14, the specs that meet CAPI's owners again against v1.10 and v1.11, a smoke
# of two on v1.12 and v1.13, and the in-place CAPI upgrade v1.10 -> v1.11 — as independent jobs, JOINGUARD_CI_JOBS at
# a time (default 4). Each spec file is its own mocha process with its own test control plane, so files never share a
# cluster, a simulation or a port. Most of a spec's time is waiting for CAPI's controllers and for timeouts, not CPU:
# on 2 cores four jobs at once cost each job little (docs/e2e.md, "How the tests run").
# The builds run in the background, one at a time, while the type check, lint and unit tables run and then while the
# e2e jobs of the releases already built run: first the fetch of CAPI's sources that the unit job waits for (seconds),
# then the shared binaries and v1.14, then the other releases (niced, so that the running specs keep the CPU they
# need); a release's jobs start once its build is there (docs/e2e.md, "The schedule"). Ends with a per-file time
# table, the build times and the plain line `N passed, N failed` (every job's mocha counts added up; a job that printed
# no count counts as 1 failed; a failed build fails each of its jobs).
# `npm run test:unit` stays the quick loop (the unit tables alone, no control plane).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Every process the tests start inherits this mark, so that the leftover check below finds this run's
# processes only (other runs may share the machine).
export JOINGUARD_CI_RUN="ci-$$-$(date +%s%N)"
JOBS="${JOINGUARD_CI_JOBS:-4}"
# The property test's seed is the commit's (its first 7 hex digits): each commit explores histories of its own and
# replays the same ones anywhere (docs/decisions/ci-property-seed-is-the-commits-again.md). Outside git (an unpacked
# archive) the clock's, printed all the same; PROPERTY_SEED set by the caller wins. A seed that fails is a defect to
# fix, never pinned or kept pending; `npm run test:property -- --seeds N` sweeps more seeds.
if [[ -z "${PROPERTY_SEED:-}" ]]; then
  if head="$(git rev-parse HEAD 2>/dev/null)" && [[ "$head" =~ ^[0-9a-f]{7} ]]; then
    PROPERTY_SEED=$(( 16#${head:0:7} ))
  else
    PROPERTY_SEED=$(( $(date +%s) % 2147483647 ))
  fi
fi
export PROPERTY_SEED
echo "property test seed: $PROPERTY_SEED (replay: PROPERTY_SEED=$PROPERTY_SEED npx mocha --config .mocharc.unit.json controllers/joincheck/property.test.ts)"
log_dir="$(mktemp -d)"
started=$(date +%s)
step() { echo "== [$(( $(date +%s) - started ))s] $*"; }

# The specs that meet CAPI's owners (MachineSet, KCP, the topology controller) through the remediation contract,
# run again on v1.10 (the last v1beta1 release) and v1.11 (the first v1beta2 one, the oldest clusterctl's add-on path
# supports). The rest (stack, install, dry run, restart, faults, benchmark smoke) does not depend on the owners'
# release and runs once, on v1.14. v1.12 and v1.13 run a smoke of two: a worker and a first control plane replaced.
OWNER_SPECS=(e2e/scenarios/worker-rescue.test.ts e2e/scenarios/first-control-plane.test.ts
  e2e/scenarios/expired-credential.test.ts e2e/scenarios/withdrawal.test.ts
  e2e/scenarios/deferral-past-bound.test.ts e2e/scenarios/delete-recreate.test.ts e2e/faults/refused-write.test.ts
  e2e/upgrades/md-rollout.test.ts e2e/upgrades/second-control-plane.test.ts e2e/upgrades/kcp-rollout.test.ts
  e2e/upgrades/etcd-learner.test.ts e2e/upgrades/clusterclass-upgrade.test.ts e2e/upgrades/clusterclass-deferred.test.ts
  e2e/upgrades/rollout-suspect.test.ts)
SMOKE_SPECS=(e2e/scenarios/worker-rescue.test.ts e2e/scenarios/first-control-plane.test.ts)
declare -A RELEASE_SPECS=([v1.10]="${OWNER_SPECS[*]}" [v1.11]="${OWNER_SPECS[*]}" [v1.12]="${SMOKE_SPECS[*]}"
  [v1.13]="${SMOKE_SPECS[*]}")
# The in-place CAPI upgrade starts on v1.10 and needs v1.11's build too; it runs once, as a v1.10 job.
UPGRADE_SPEC=e2e/lifecycle/capi-upgrade.test.ts
# Builds besides the CAPI releases (hack/testenv/build.sh --capi <release>): name -> command printing its result
# last; a spec that needs one waits for it instead of building it in its own slot.
declare -A EXTRA_BUILDS=([capi-sources]="bash hack/testenv/capi-sources.sh"
  [promtool]="bash hack/testenv/promtool/build.sh" [image]="bash hack/image/ci-build.sh"
  [kustomize]="bash hack/testenv/kustomize/build.sh" [grafana-schema]="bash hack/testenv/grafana-schema/build.sh"
  [capi-operator]="bash hack/testenv/capi-operator/build.sh" [cert-manager]="bash hack/testenv/cert-manager/build.sh"
  [node]="bash hack/testenv/node/build.sh")
# What a spec needs built besides its release (space-separated names). The unit job needs CAPI's sources (CRDs and API
# types: the api/capi tests read them), a fetch of a few seconds that runs first: without it a cold runner's unit job
# would skip those tests (and fail them: CI=true, hack/testing/inputs.ts).
declare -A NEEDS=([unit]=capi-sources [$UPGRADE_SPEC]=v1.11 [e2e/lifecycle/promtool.test.ts]=promtool
  [e2e/install/image.test.ts]="image cert-manager" [e2e/lifecycle/gitops.test.ts]="kustomize cert-manager"
  [e2e/lifecycle/grafana-schema.test.ts]=grafana-schema [e2e/lifecycle/capi-operator.test.ts]="capi-operator cert-manager"
  [e2e/install/pods.test.ts]="image cert-manager node")
# The install specs run real cert-manager (e2e/support/cert-manager.ts), as do the three above that name it.
for f in admission cert-manager components delete-strategy rbac remediation; do NEEDS[e2e/install/$f.test.ts]=cert-manager; done
# The clusterctl upgrade and move specs start it on each of their management clusters (e2e/lifecycle/fleet.ts).
for f in upgrade move; do NEEDS[e2e/lifecycle/$f.test.ts]=cert-manager; done
# The build order: the CAPI sources' fetch (no build: it runs before the shared binaries), v1.14 first (most jobs),
# then the releases whose jobs weigh most, the smoke releases last.
FETCHES=(capi-sources)
BUILD_ORDER=(capi-sources v1.14 v1.10 cert-manager v1.11 image node promtool kustomize grafana-schema capi-operator v1.13 v1.12)
# Jobs that start more than one control plane take that many slots.
declare -A WEIGHT=([bench/bench.test.ts]=3 [e2e/lifecycle/move.test.ts]=2)
UNIT_GLOBS=('api/**/*.test.ts' 'runtime/**/*.test.ts' 'cmd/**/*.test.ts' 'controllers/**/*.test.ts' 'webhooks/**/*.test.ts' 'manifests/**/*.test.ts' 'hack/**/*.test.ts')
# Unit files that need a release's build (clusterctl, built with v1.14): a job of that release with the unit config,
# left out of the unit job.
BUILT_UNIT_SPECS=(manifests/substitute-clusterctl.test.ts)

# The jobs, longest first (the last measured times, .ci/e2e-times.tsv; 120 s for a file not in it), so that the
# long ones start early and the short ones fill the gaps; a job waits for its release's build.
mapfile -t v114_specs < <(ls e2e/*/*.test.ts bench/*.test.ts | grep -v '^e2e/kind/' | grep -vx "$UPGRADE_SPEC" | sort)
# Lint (ESLint's rules and Prettier's layout) is a job too, and counts as one test in the closing line.
jobs=("unit|unit" "lint|lint")
for f in "${v114_specs[@]}" "${BUILT_UNIT_SPECS[@]}"; do jobs+=("v1.14|$f"); done
for r in v1.10 v1.11 v1.12 v1.13; do for f in ${RELEASE_SPECS[$r]}; do jobs+=("$r|$f"); done; done
jobs+=("v1.10|$UPGRADE_SPEC")
# A file not measured on its release takes its v1.14 time.
expected() { awk -F'\t' -v r="$1" -v f="$2" '$2 == f && $1 == r { t = $3 } $2 == f && $1 == "v1.14" { d = $3 } END { print t != "" ? t : d != "" ? d : 120 }' .ci/e2e-times.tsv 2>/dev/null || echo 120; }
# JOINGUARD_CI_ONLY=<regex> keeps the jobs whose `release|file` matches (a partial run, e.g. to time some files).
mapfile -t jobs < <(for j in "${jobs[@]}"; do [[ -z "${JOINGUARD_CI_ONLY:-}" || "$j" =~ ${JOINGUARD_CI_ONLY} ]] && echo "$(expected "${j%%|*}" "${j#*|}")|$j"; done | sort -t'|' -k1,1nr | cut -d'|' -f2-)
# The releases the jobs need, in build order (a partial run builds only those).
builds=()
for r in "${BUILD_ORDER[@]}"; do
  for j in "${jobs[@]}"; do
    if [[ "${j%%|*}" == "$r" || " ${NEEDS[${j#*|}]:-} " == *" $r "* ]]; then builds+=("$r"); break; fi
  done
done

# The builds, in the background, one at a time (two Go builds at once on 2 cores only slow each other): the shared
# binaries (etcd, kube-apiserver, sim-kubelet) once, then each release's managers and the extra builds. Each
# finished build leaves builds/<name>.bin (what it printed last) or builds/<name>.failed, and its seconds in
# builds/times.tsv. The shared part and v1.14 run at normal priority (only the type check, lint and the unit tables
# run beside them); the later builds under nice, beside the e2e jobs.
mkdir -p "$log_dir/builds" "$log_dir/done"
: >"$log_dir/builds/times.tsv"
build_chain() {
  local r s bin prio=() base=false
  for r in "${builds[@]}"; do
    # The shared binaries before the first real build (the fetches before them need none).
    if [[ " ${FETCHES[*]} " != *" $r "* ]] && ! $base; then
      base=true
      s=$(date +%s)
      if ! bash hack/testenv/build.sh --base >"$log_dir/builds/base.log" 2>&1; then
        echo "----- build of the shared binaries FAILED:"; tail -30 "$log_dir/builds/base.log"
        for r in "${builds[@]}"; do [[ -e "$log_dir/builds/$r.bin" ]] || touch "$log_dir/builds/$r.failed"; done
        return
      fi
      printf 'shared\t%s\n' "$(( $(date +%s) - s ))" >>"$log_dir/builds/times.tsv"
    fi
    s=$(date +%s)
    # shellcheck disable=SC2086 # an extra build's command is words
    if bin="$("${prio[@]}" ${EXTRA_BUILDS[$r]:-bash hack/testenv/build.sh --capi $r} 2>"$log_dir/builds/$r.log" | tail -1)" &&
      [[ -e "$bin" ]]; then
      echo "$bin" >"$log_dir/builds/$r.bin"
    else
      echo "----- build of $r FAILED:"; tail -30 "$log_dir/builds/$r.log"
      touch "$log_dir/builds/$r.failed"
    fi
    printf '%s\t%s\t%s\n' "$r" "$(( $(date +%s) - s ))" "$(cut -d' ' -f1 /proc/loadavg)" >>"$log_dir/builds/times.tsv"
    echo "   [$(( $(date +%s) - started ))s] build $r: $([[ -e "$log_dir/builds/$r.bin" ]] && echo ready || echo FAILED) in $(( $(date +%s) - s ))s"
    $base && prio=(nice -n 10)
  done
}
step "builds in the background: ${builds[*]:-(none)} (the shared binaries before the first Go build; cached after the first build)"
# In a process group of its own (job control on for this one start), so that an early exit stops the whole chain.
set -m
build_chain &
build_pid=$!
set +m
stop_builds() { kill -- "-$build_pid" 2>/dev/null || true; }
trap stop_builds EXIT
trap 'stop_builds; exit 143' TERM INT

step "type-check"
if ! npx tsc --noEmit -p .; then
  stop_builds; echo "0 passed, 1 failed"; exit 1
fi

mkdir -p "$log_dir/jobs"
results="$log_dir/results.tsv"
: >"$results"

# Whether a job can start: "yes", "wait" (a build it needs is not there yet) or "failed" (one of them failed).
ready() { # release, file
  local r need rel="$1"
  [[ "$1" == unit || "$1" == lint ]] && rel=""
  for r in $rel ${NEEDS[$2]:-}; do
    [[ -e "$log_dir/builds/$r.failed" ]] && { echo failed; return; }
    [[ -e "$log_dir/builds/$r.bin" ]] || need=1
  done
  [[ -n "${need:-}" ]] && echo wait || echo yes
}
run_job() { # release, file
  local release="$1" file="$2" log s rc counts
  log="$log_dir/jobs/${release}_${file//\//_}.log"
  s=$(date +%s)
  if [[ "$release" == unit ]]; then
    local ignore=() f
    for f in "${BUILT_UNIT_SPECS[@]}"; do ignore+=(--ignore "$f"); done
    npx mocha --config .mocharc.unit.json "${ignore[@]}" "${UNIT_GLOBS[@]}" >"$log" 2>&1
  elif [[ "$release" == lint ]]; then
    # ESLint, then Prettier's check; no mocha count: its exit code is the one test.
    if npm run -s lint >"$log" 2>&1; then echo "1 passed, 0 failed (lint)" >>"$log"; else echo "0 passed, 1 failed (lint)" >>"$log"; fi
  elif [[ " ${BUILT_UNIT_SPECS[*]} " == *" $file "* ]]; then
    JOINGUARD_CLUSTERCTL="$(cat "$log_dir/builds/$release.bin")/clusterctl" npx mocha --config .mocharc.unit.json "$file" >"$log" 2>&1
  else
    # What the job's extra builds made, where its spec looks for it: the image by ID (the file its build printed
    # last), cert-manager's folder.
    [[ " ${NEEDS[$file]:-} " == *" image "* ]] && export JOINGUARD_IMAGE="$(cat "$(cat "$log_dir/builds/image.bin")")"
    [[ " ${NEEDS[$file]:-} " == *" cert-manager "* ]] && export JOINGUARD_CERT_MANAGER_BIN="$(cat "$log_dir/builds/cert-manager.bin")"
    [[ " ${NEEDS[$file]:-} " == *" node "* ]] && export JOINGUARD_NODE_BIN="$(cat "$log_dir/builds/node.bin")"
    JOINGUARD_CAPI_RELEASE="$release" JOINGUARD_TESTENV_BIN="$(cat "$log_dir/builds/$release.bin")" npx mocha --config .mocharc.json "$file" >"$log" 2>&1
  fi
  rc=$?
  counts="$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)"
  [[ -n "$counts" ]] || counts="0 passed, 1 failed"
  printf '%s\t%s\t%s\t%s\t%s\n' "$release" "$file" "$(( $(date +%s) - s ))" "$rc" "$counts" >>"$results"
  echo "   [$(( $(date +%s) - started ))s] done $release $file: $counts ($(( $(date +%s) - s ))s)"
  if [[ "$counts" != *" 0 failed"* || $rc -ne 0 ]]; then
    echo "----- $release $file (last 80 lines of $log) -----"; tail -80 "$log"; echo "-----"
  fi
  touch "$log_dir/done/$BASHPID"
}

step "tests: ${#jobs[@]} jobs ($(for j in "${jobs[@]}"; do echo "${j%%|*}"; done | sort | uniq -c | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1 }')), $JOBS at a time, each once what it needs is built"
declare -A running_weight
used=0
jobs_started=$(date +%s)
pending=("${jobs[@]}")
while (( ${#pending[@]} > 0 )); do
  # Free the slots of finished jobs.
  for pid in "${!running_weight[@]}"; do
    if [[ -e "$log_dir/done/$pid" ]]; then
      wait "$pid" 2>/dev/null || true
      used=$(( used - running_weight[$pid] )); unset "running_weight[$pid]"
    fi
  done
  # Start the longest job that can start, when it fits (a job heavier than the slots runs once nothing else does);
  # shorter ones wait behind it, so that a three-slot job is not passed over until the end.
  started_one=false
  for i in "${!pending[@]}"; do
    j="${pending[$i]}"; release="${j%%|*}"; file="${j#*|}"; w="${WEIGHT[$file]:-1}"
    case "$(ready "$release" "$file")" in
      failed)
        echo "not run: a build it needs failed (its log's tail is above)" >"$log_dir/jobs/${release}_${file//\//_}.log"
        printf '%s\t%s\t0\t1\t0 passed, 1 failed\n' "$release" "$file" >>"$results"
        echo "   [$(( $(date +%s) - started ))s] not run $release $file: its build failed"
        unset "pending[$i]"; continue ;;
      wait) continue ;;
    esac
    (( used > 0 && used + w > JOBS )) && break
    run_job "$release" "$file" &
    running_weight[$!]=$w; used=$(( used + w ))
    echo "   [$(( $(date +%s) - started ))s] start $release $file (slots in use $used/$JOBS)"
    unset "pending[$i]"; started_one=true
    break
  done
  pending=("${pending[@]}")
  $started_one || sleep 2
done
wait "${!running_weight[@]}" 2>/dev/null
jobs_wall=$(( $(date +%s) - jobs_started ))
# The chain ends with the last build; wait for it (a partial run may not have needed every release).
wait "$build_pid" 2>/dev/null

step "done"
echo "per-file times (seconds, longest first; the e2e files each include their control plane's start):"
printf '| %-7s | %-48s | %7s | %-24s |\n' release file seconds result
sort -t$'\t' -k3,3nr "$results" | while IFS=$'\t' read -r r f secs rc counts; do printf '| %-7s | %-48s | %7s | %-24s |\n' "$r" "$f" "$secs" "$counts"; done
sum=$(awk -F'\t' '{ s += $3 } END { print s + 0 }' "$results")
echo "jobs: ${#jobs[@]} in ${jobs_wall}s wall, ${sum}s of job time ($JOBS at a time); whole run $(( $(date +%s) - started ))s"
echo "builds (seconds; load average at the end; a cached build takes about a second):"
while IFS=$'\t' read -r b secs load; do echo "   $b: ${secs}s${load:+ (load $load)}"; done <"$log_dir/builds/times.tsv"
# The CPU the run used (its waited-for children, builds and jobs: user and system time), to compare runs on a
# shared machine whose load stretches walls.
times >"$log_dir/cpu.txt"
echo "cpu of the builds and jobs (user, system): $(tail -1 "$log_dir/cpu.txt")"

# The failures again, last, so that a reader of only the end of the output (CI keeps the tail) sees which test
# failed and why: mocha's failure list of each failed job, and the property test's seed.
while IFS=$'\t' read -r r f secs job_rc counts; do
  [[ "$counts" == *" 0 failed"* && "$job_rc" == 0 ]] && continue
  [[ "$r" == lint ]] && { echo "----- failed: lint"; tail -40 "$log_dir/jobs/lint_lint.log"; continue; }
  log="$log_dir/jobs/${r}_${f//\//_}.log"
  echo "----- failed: $r $f ($counts, exit $job_rc)"
  grep -m1 -E 'property: seed' "$log" || true
  sed -n '/[0-9] failing/,$p' "$log" | grep -v '^ *at ' | cut -c1-600 | head -40
done <"$results"

# Nothing the tests started may outlive them: each leftover of this run (its environment carries this run's
# mark) is named, then killed by its pid. Processes of other runs are left alone.
rc=0
leftover=""
# The binaries live in build.sh's cache folder (JOINGUARD_CACHE moves it).
cache_bin="${JOINGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/joinguard}/bin"
for pid in $(pgrep -f "$cache_bin/.*/(etcd|kube-apiserver|capi-|sim-kubelet|cert-manager-)" || true); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "JOINGUARD_CI_RUN=$JOINGUARD_CI_RUN"; then
    leftover+="$(ps -o pid=,args= -p "$pid" | cut -c1-200)"$'\n'
  fi
done
if [[ -n "$leftover" ]]; then
  echo "processes left running by the tests:"; echo -n "$leftover"
  for pid in $(awk '{print $1}' <<<"$leftover"); do kill -KILL "$pid" 2>/dev/null || true; done
  rc=1
fi
passed=$(awk -F'\t' '{ split($5, a, " "); s += a[1] } END { print s + 0 }' "$results")
failed=$(awk -F'\t' '{ split($5, a, ", "); split(a[2], b, " "); s += b[1] } END { print s + 0 }' "$results")
(( failed == 0 )) || rc=1
echo "$passed passed, $failed failed"
exit "$rc"
