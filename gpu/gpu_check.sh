#!/usr/bin/env bash
# gpu_check.sh: `make gpu-check`, one command for whoever has an NVIDIA GPU: finds the device,
# builds the CUDA plugin for its architecture only, runs the CUDA suite (check_gpu_cuda) on it,
# compares the GPU's greedy tokens and top probabilities with the CPU's through the real binary
# (GPT-2 and Llama-family models) and the logits of the committed GGUF fixtures, benchmarks
# GPT-2-XL and Llama-3.2-1B shapes on the GPU, and prints one summary. Exit status 0 only when every step passed. Without a device it says so and
# exits 1 within seconds, before building anything.
#
# Environment: MAKE, BUILD (default build), NVCC (default: PATH, then /usr/local/cuda/bin/nvcc),
# NVIDIA_SMI (default nvidia-smi), GPU_CHECK_BUDGET (seconds, default 470: the whole run stays
# under 8 minutes), GPU_CHECK_DETECT_TIMEOUT (seconds nvidia-smi may take, default 30),
# GPU_CHECK_KEEP=1 keeps the random models in $BUILD/gpu-check (the logs stay there anyway).
# GPU_CHECK_SIZES="gpt2 qwen3-0.6b llama-3.2-1b gpt2-xl" (mkmodel --size names: the GPT-2, Qwen3
# and Llama comparisons, the Llama bench, the GPT-2 bench): smaller ones for a dry run of this
# script over the emulated plugin (TOKENTOP_GPU_PLUGIN, MAKE=true, a fake NVIDIA_SMI);
# GPU_CHECK_BENCH_TOKENS="512 128" the benches' prompt and generated tokens.
set -u

MAKE=${MAKE:-make}
BUILD=${BUILD:-build}
NVIDIA_SMI=${NVIDIA_SMI:-nvidia-smi}
BUDGET=${GPU_CHECK_BUDGET:-470}
DETECT_TIMEOUT=${GPU_CHECK_DETECT_TIMEOUT:-30}
T0=$SECONDS

say() { printf 'gpu-check: %s\n' "$*"; }
no_gpu() {
    say "no GPU: $*" >&2
    say "nothing was built or run; make gpu-check needs an NVIDIA GPU and its driver (make test covers the CUDA backend through its emulation)" >&2
    exit 1
}

# --- 1. the device (before anything is built) ------------------------------------------------
command -v timeout >/dev/null 2>&1 || { say "FAIL: timeout(1) not found (coreutils)" >&2; exit 1; }
command -v "$NVIDIA_SMI" >/dev/null 2>&1 || no_gpu "$NVIDIA_SMI not found (no NVIDIA driver installed)"
query=$(timeout -k 2 "$DETECT_TIMEOUT" "$NVIDIA_SMI" --query-gpu=index,name,compute_cap,memory.total \
        --format=csv,noheader 2>&1)
rc=$?
[ $rc -eq 124 ] || [ $rc -eq 137 ] && no_gpu "$NVIDIA_SMI did not answer within ${DETECT_TIMEOUT}s"
[ $rc -ne 0 ] && no_gpu "$NVIDIA_SMI failed (exit $rc): $(head -1 <<<"$query")"
line=$(grep -m1 '^[0-9]' <<<"$query")
[ -n "$line" ] || no_gpu "$NVIDIA_SMI lists no device: $(head -1 <<<"$query")"
gpu_name=$(cut -d, -f2 <<<"$line" | sed 's/^ *//')
cap=$(cut -d, -f3 <<<"$line" | tr -d ' .')

if [ -z "${NVCC:-}" ]; then
    NVCC=$(command -v nvcc 2>/dev/null || true)
    [ -n "$NVCC" ] || NVCC=/usr/local/cuda/bin/nvcc
fi
[ -x "$NVCC" ] || { say "FAIL: a GPU is present ($gpu_name) but nvcc was not found: set NVCC=/path/to/nvcc" >&2; exit 1; }
if ! [[ $cap =~ ^[0-9]+$ ]]; then
    # An nvidia-smi without compute_cap: nvcc's own query ("90", or "86,89" for several GPUs).
    cap=$(timeout 30 "$(dirname "$NVCC")/__nvcc_device_query" 2>/dev/null | tr ',' '\n' | head -1 | tr -dc 0-9)
fi
[[ $cap =~ ^[0-9]+$ ]] || { say "FAIL: cannot tell the compute capability of $gpu_name (nvidia-smi: '$line')" >&2; exit 1; }
say "device: $gpu_name (sm_$cap); nvcc $NVCC; budget ${BUDGET}s"

work=$BUILD/gpu-check
mkdir -p "$work"
[ "${GPU_CHECK_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"/m-*' EXIT
results=()
failed=0
left() { local l=$((BUDGET - (SECONDS - T0))); echo $((l < 1 ? 1 : l)); }
record() {                                  # record PASS|FAIL "what"
    results+=("$(printf '%-4s %s' "$1" "$2")")
    [ "$1" = PASS ] || failed=$((failed + 1))
    say "$1 $2"
}
# step NAME LIMIT CMD...: runs CMD under min(LIMIT, what is left of the budget), output in a log.
step() {
    local name=$1 limit=$2 l
    shift 2
    l=$(left)
    [ "$limit" -lt "$l" ] || limit=$l
    local log=$work/$name.log
    timeout -k 5 "$limit" "$@" >"$log" 2>&1
    local rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        say "$name: stopped after ${limit}s (last lines of $log):"
        tail -5 "$log" | sed 's/^/    /'
    elif [ $rc -ne 0 ]; then
        say "$name: exit $rc (last lines of $log):"
        tail -8 "$log" | sed 's/^/    /'
    fi
    return $rc
}

# --- 2. build for this device --------------------------------------------------------------------
JOBS=$(nproc 2>/dev/null || echo 4)
if step build 300 "$MAKE" -j"$JOBS" CUDA=1 NVCC="$NVCC" CUDA_ARCHS="$cap" CUDA_PTX="$cap" \
        "$BUILD/tokentop" "$BUILD/tokentop-cuda.so" gpu-plugin-stale "$BUILD/tools/mkmodel" \
        "$BUILD/tests/check_gpu_cuda"; then
    record PASS "build: CUDA plugin for sm_$cap ($(($SECONDS - T0))s)"
else
    record FAIL "build (see $work/build.log)"
    printf '%s\n' "${results[@]}"
    exit 1
fi
TT=$BUILD/tokentop

# --- 3. the CUDA suite on the device ---------------------------------------------------------------
step check_gpu_cuda 240 env CK_DEFAULT_TIMEOUT=120 "$BUILD/tests/check_gpu_cuda"
rc=$?
summary=$(grep -o '[0-9]*%: Checks: .*' "$work/check_gpu_cuda.log" || echo 'no summary')
if grep -q "checking the CPU fallback only" "$work/check_gpu_cuda.log"; then
    record FAIL "check_gpu_cuda found no usable device: $(grep -m1 'checking the CPU fallback' "$work/check_gpu_cuda.log")"
elif [ $rc -eq 0 ]; then
    record PASS "check_gpu_cuda on the device: $summary"
else
    record FAIL "check_gpu_cuda on the device: $summary (see $work/check_gpu_cuda.log)"
fi

# --- 4. GPU against CPU through the binary: greedy ids and top probabilities ---------------------
# One line per generated token: "id id:raw_p id:raw_p ..." (the chosen id, then the top entries).
json_tops() {
    grep '"step"' "$1" | grep -v '"flush":true' | while IFS= read -r l; do
        local id ids ps
        id=$(grep -o '"id":[0-9]*,"token":' <<<"$l" | head -1 | tr -dc 0-9)
        ids=$(grep -o '{"id":[0-9]*,"text":' <<<"$l" | tr -dc '0-9\n')
        ps=$(grep -o '"raw_p":[-0-9.eE+]*' <<<"$l" | tail -n +2 | cut -d: -f2)
        printf '%s %s\n' "$id" "$(paste -d: <(echo "$ids") <(echo "$ps") | head -5 | tr '\n' ' ')"
    done
}
# compare KEY LABEL DIR N: greedy fp32 on both backends; the same ids, and the CPU's top-5 tokens
# with the same raw probabilities on the GPU within 1e-6 + 1e-3 p (random models' distributions
# are flat: a relative bound; the JSON prints 6 digits).
compare() {
    local key=$1 name=$2 dir=$3 n=$4 b
    for b in cpu cuda; do
        step "gen-$key-$b" 120 "$TT" generate --model "$dir" -p "The quick brown fox jumps over" -n "$n" \
            --greedy --json --dtype fp32 --backend "$b" || { record FAIL "$name: generate --backend $b"; return; }
        json_tops "$work/gen-$key-$b.log" >"$work/tops-$key-$b"
    done
    local verdict
    verdict=$(paste -d'|' "$work/tops-$key-cpu" "$work/tops-$key-cuda" | awk -F'|' -v n="$n" '
        { split($1, c, " "); split($2, g, " ");
          if (c[1] != g[1]) { print "token " NR - 1 " differs: cpu " c[1] ", gpu " g[1]; bad = 1; exit }
          delete gp; for (i = 2; i in g; i++) { split(g[i], kv, ":"); gp[kv[1]] = kv[2] }
          for (i = 2; i in c; i++) { split(c[i], kv, ":");
              if (!(kv[1] in gp)) continue;
              d = kv[2] - gp[kv[1]]; if (d < 0) d = -d; if (d > worst) worst = d
              r = d / (1e-6 + 1e-3 * kv[2]); if (r > used) used = r } }
        END { if (bad) exit 1;
              if (NR != n) { print NR " tokens, expected " n; exit 1 }
              if (used > 1) { printf "top-5 probabilities differ by %.3g (%.1f times the bound 1e-6 + 1e-3 p)\n", worst, used; exit 1 }
              printf "%d greedy tokens equal, top-5 probabilities within %.2g (%.0f%% of the bound)\n", NR, worst, 100 * used }')
    if [ $? -eq 0 ]; then record PASS "$name: $verdict"; else record FAIL "$name: $verdict"; fi
}
MK=$BUILD/tools/mkmodel
read -r S_GPT2 S_QWEN S_LLAMA S_XL <<<"${GPU_CHECK_SIZES:-gpt2 qwen3-0.6b llama-3.2-1b gpt2-xl}"
rm -rf "$work"/m-*
# mkmodel_compare KEY SIZE N: a random model of those shapes (bf16 file), compared in fp32.
mkmodel_compare() {
    if step "mk-$1" 120 "$MK" "$work/m-$1" --size "$2" --dtype bf16 --seed 7 --scale 0.5; then
        compare "$1" "$2 shapes (random, fp32)" "$work/m-$1" "$3"
    else
        record FAIL "mkmodel --size $2"
    fi
}
mkmodel_compare gpt2 "$S_GPT2" 24
mkmodel_compare qwen "$S_QWEN" 24
rm -rf "$work/m-gpt2" "$work/m-qwen"
mkmodel_compare llama "$S_LLAMA" 16

# --- 4b. GGUF files on the GPU (the committed fixtures): every predicted position's logits --------
# In fp32 both engines dequantize the file's blocks to the same values: the logits agree to 1e-4 of
# their largest magnitude. By default the GPU dequantizes the blocks to fp16 at upload: its logits
# are to be no farther from the CPU's fp32 ones than the CPU's own fp16 engine's are (1.5x).
gguf_text="$work/gguf-text.txt"
printf 'In the beginning God created the heaven and the earth. And the earth was without form, and void.\n' >"$gguf_text"
logit_diff() {             # logit_diff A REF: "largest |a - ref|" "largest |ref|" over raw float32 files
    [ -s "$1" ] && [ "$(stat -c %s "$1")" = "$(stat -c %s "$2")" ] || { echo "sizes differ"; return 1; }
    paste <(od -An -v -f -w4 "$1") <(od -An -v -f -w4 "$2") |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; r = $2 < 0 ? -$2 : $2; if (r > x) x = r }
             END { printf "%.3g %.3g\n", m, x }'
}
gguf_compare() {           # gguf_compare FILE
    local f=$1 name key run b d
    name=$(basename "$f")
    key=${name%.gguf}
    for run in cpu:fp32 cpu:fp16 cuda:fp32 cuda:; do
        b=${run%%:*} d=${run#*:}
        step "score-$key-$b-${d:-default}" 60 "$TT" score --model "$f" -f "$gguf_text" --backend "$b" \
            ${d:+--dtype $d} --dump-logits "$work/logits-$key-$b-${d:-default}" ||
            { record FAIL "GGUF $name: score --backend $b ${d:+--dtype $d} (see $work/score-$key-$b-${d:-default}.log)"; return; }
        if [ "$b" = cuda ] && grep -q 'using the CPU' "$work/score-$key-$b-${d:-default}.log"; then
            record FAIL "GGUF $name: --backend cuda ${d:+--dtype $d} fell back to the CPU: $(grep -m1 'using the CPU' "$work/score-$key-$b-${d:-default}.log")"
            return
        fi
    done
    local r32 r16 rq
    r32=$(logit_diff "$work/logits-$key-cuda-fp32" "$work/logits-$key-cpu-fp32") &&
    r16=$(logit_diff "$work/logits-$key-cpu-fp16" "$work/logits-$key-cpu-fp32") &&
    rq=$(logit_diff "$work/logits-$key-cuda-default" "$work/logits-$key-cpu-fp32") ||
        { record FAIL "GGUF $name: the logit files differ in size"; return; }
    local verdict
    verdict=$(awk -v a="$r32" -v b="$r16" -v c="$rq" 'BEGIN {
        split(a, x, " "); split(b, y, " "); split(c, z, " "); top = x[2]
        ok = x[1] <= 1e-4 * top && z[1] <= 1.5 * y[1] + 1e-4 * top
        printf "fp32 logits within %.3g of the CPU'"'"'s (largest %.3g); dequantized to fp16 at upload: %.3g from the CPU'"'"'s fp32 (the CPU'"'"'s fp16 engine: %.3g)\n", x[1], top, z[1], y[1]
        exit !ok }')
    if [ $? -eq 0 ]; then record PASS "GGUF $name: $verdict"; else record FAIL "GGUF $name: $verdict"; fi
}
FIX=${GPU_CHECK_FIXTURES:-tests/fixtures/gguf}
for f in "$FIX/tiny-llama-256-q4_k_m.gguf" "$FIX/tiny-llama-256-q5_0.gguf" "$FIX/tiny-qwen3-q8_0.gguf"; do
    if [ -f "$f" ]; then gguf_compare "$f"; else record FAIL "GGUF fixture $f not found"; fi
done

# --- 5. GPU bench at GPT-2-XL and Llama-3.2-1B shapes, fp16 --------------------------------------
read -r B_PROMPT B_GEN <<<"${GPU_CHECK_BENCH_TOKENS:-512 128}"
# The no-graph pass of each bench times every op of its decode steps (TOKENTOP_CUDA_PROFILE): the
# tables are printed after the summary.
profiles=()
bench() {
    local name=$1 dir=$2 f
    if step "bench-$name" 150 env TOKENTOP_CUDA_PROFILE=1 "$TT" bench --backend cuda --model "$dir" --dtype fp16 \
            --prompt-tokens "$B_PROMPT" --gen-tokens "$B_GEN" --json; then
        profiles+=("$work/bench-$name.log")
        f=$(grep -m1 '^{' "$work/bench-$name.log")
        num() { grep -o "\"$1\":[-0-9.eE+]*" <<<"$f" | head -1 | cut -d: -f2; }
        record PASS "$(printf 'bench %s fp16: prefill %.0f tok/s, decode %.1f tok/s (no graphs %.1f) = %.0f%% of peak bandwidth' \
            "$name" "$(num prefill_tok_s)" "$(num decode_tok_s)" "$(num decode_nograph_tok_s)" \
            "$(awk -v x="$(num bandwidth_fraction)" 'BEGIN { print 100 * x }')")"
    else
        record FAIL "bench $name (see $work/bench-$name.log)"
    fi
}
if [ -d "$work/m-llama" ]; then bench "$S_LLAMA" "$work/m-llama"; fi
rm -rf "$work/m-llama"
if step mk-xl 120 "$MK" "$work/m-xl" --size "$S_XL" --dtype fp16 --seed 7; then
    bench "$S_XL" "$work/m-xl"
else
    record FAIL "mkmodel --size $S_XL"
fi

# --- summary -------------------------------------------------------------------------------------
for f in "${profiles[@]}"; do
    echo
    echo "gpu-check: where a decode step's time goes ($(basename "$f" .log), fp16, without graphs):"
    sed -n '/^cuda profile:/,/host wall time/p' "$f"
done
echo
echo "gpu-check summary: $gpu_name (sm_$cap), $((SECONDS - T0))s"
printf '  %s\n' "${results[@]}"
if [ $failed -ne 0 ]; then
    echo "gpu-check: $failed step(s) FAILED (logs in $work)"
    exit 1
fi
echo "gpu-check: all ${#results[@]} steps passed"
