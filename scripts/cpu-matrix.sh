#!/usr/bin/env bash
# cpu-matrix.sh: reproduce here the CPUs CI may run on. dtsim's floating-point results go
# through code that picks its kernels by CPU: OpenBLAS (OPENBLAS_CORETYPE), ATen's
# vectorized ops (ATEN_CPU_CAPABILITY) and dtsim's own kernels (DTSIM_KERNELS_ISA); and
# glibc picks FMA versions of exp/log/pow (which the network model's jitter draws use)
# on CPUs that have FMA. This runs the release build under every combination of the
# first three this CPU can execute, plus one that is the oldest x86-64 it can pretend to
# be (Prescott, portable paths, glibc's FMA and AVX2 variants off: GLIBC_TUNABLES).
#
#   scripts/cpu-matrix.sh figures [--build DIR]          the regression scenarios' figures
#                                                         (bench/baselines/simulated.json)
#                                                         per combination, with the spread
#   scripts/cpu-matrix.sh suite [--build DIR] [--quick] [CTEST ARGS...]
#                                                         the whole ctest suite per combination
#                                                         (--quick: one combination per BLAS
#                                                         core type instead of every triple)
#   scripts/cpu-matrix.sh combos                          the combinations, one per line
#
# Exit 0 when every combination passed (figures: within the baseline's tolerances).
# Core types whose instructions this CPU lacks (SkylakeX without AVX-512, Bulldozer's
# FMA4 on Intel or Zen) would stop on SIGILL and are left out, named on stderr.
set -uo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
[ -n "$mode" ] && shift
build=build/release
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    *) break ;;
  esac
done

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }

# OpenBLAS core types (Debian's DYNAMIC_ARCH build) and the instructions they need.
blas_types=(Prescott Nehalem)
has avx && blas_types+=(Sandybridge)
has avx2 && has fma && blas_types+=(Haswell Zen)
has avx512f && has avx512bw && has avx512dq && has avx512vl && blas_types+=(SkylakeX)
has fma4 && blas_types+=(Bulldozer)
for t in SkylakeX Bulldozer; do
  [[ " ${blas_types[*]} " == *" $t "* ]] || echo "cpu-matrix: $t left out: this CPU lacks its instructions" >&2
done

# dtsim's kernel paths and ATen's: "" means no cap (the best this CPU has).
isa_paths=(baseline)
aten_caps=(default)
if has avx2 && has fma; then isa_paths+=(avx2); aten_caps+=(avx2); fi
if has avx512f && has avx512bw; then isa_paths+=(""); aten_caps+=(avx512); fi

combos=()
for b in "${blas_types[@]}"; do
  if [ "$quick" = 1 ]; then
    # One triple per core type, cycling the other two so every path is still used.
    i=${#combos[@]}
    combos+=("$b ${isa_paths[$((i % ${#isa_paths[@]}))]:-native} ${aten_caps[$(((i + 1) % ${#aten_caps[@]}))]}")
  else
    for k in "${isa_paths[@]}"; do
      for a in "${aten_caps[@]}"; do combos+=("$b ${k:-native} $a"); done
    done
  fi
done
combos+=("Prescott baseline default nofma")

with_combo() {  # with_combo "BLAS ISA ATEN [nofma]" command...: runs the command in that combination
  local blas isa aten libm
  read -r blas isa aten libm <<<"$1"
  shift
  local vars=(OPENBLAS_CORETYPE="$blas" ATEN_CPU_CAPABILITY="$aten")
  [ "$isa" = native ] || vars+=(DTSIM_KERNELS_ISA="$isa")
  [ "${libm:-}" = nofma ] && vars+=(GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA)
  env -u DTSIM_KERNELS_ISA -u GLIBC_TUNABLES "${vars[@]}" "$@"
}

case "$mode" in
  combos)
    printf '%s\n' "${combos[@]}"
    ;;
  figures)
    regress="$build/bench/dtsim_regress"
    [ -x "$regress" ] || { echo "cpu-matrix: $regress is not built (make build)" >&2; exit 2; }
    status=0
    echo "| OPENBLAS_CORETYPE | DTSIM_KERNELS_ISA | ATEN_CPU_CAPABILITY | scenario | figure | baseline | now | rel. diff | allowed | |"
    echo "|---|---|---|---|---|---:|---:|---:|---:|---|"
    for c in "${combos[@]}"; do
      read -r blas isa aten libm <<<"$c"
      [ "${libm:-}" = nofma ] && aten="$aten (glibc without FMA/AVX2)"
      out=$(with_combo "$c" "$regress" simulated --baseline bench/baselines/simulated.json) || status=1
      # Rows of the floating-point figures (the exact ones are the same everywhere or fail).
      grep -E '^\| [^|]+ \| (final_loss) \|' <<<"$out" | sed "s#^|#| $blas | $isa | $aten |#"
      grep -q 'regression' <<<"$out" && grep -E '^  ' <<<"$out" | sed "s#^#  [$c] #" >&2
    done
    exit $status
    ;;
  suite)
    status=0
    echo "| OPENBLAS_CORETYPE DTSIM_KERNELS_ISA ATEN_CPU_CAPABILITY | result | failed |"
    echo "|---|---|---|"
    for c in "${combos[@]}"; do
      echo "=== $c" >&2
      log=$(mktemp)
      if with_combo "$c" ctest --test-dir "$build" -j "$(nproc)" --output-on-failure "$@" >"$log" 2>&1; then
        echo "| $c | $(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | head -1 || true) | |"
      else
        status=1
        failed=$(sed -n '/The following tests FAILED/,$p' "$log" | grep -E '^\s+[0-9]+ - ' | sed -E 's/^\s+[0-9]+ - //; s/ \(.*//' | paste -sd, -)
        echo "| $c | $(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | head -1 || true) | $failed |"
        cp "$log" "${TMPDIR:-/tmp}/cpu-matrix-$(tr ' ' '-' <<<"$c").log"
      fi
      rm -f "$log"
    done
    exit $status
    ;;
  *)
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
