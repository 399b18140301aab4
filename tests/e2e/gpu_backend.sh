#!/usr/bin/env bash
# End-to-end checks of the GPU backend through the real binary: --backend auto falls back to the
# CPU with one line when there is no device; --backend cuda fails with that reason; and, through
# the emulated build (tokentop-emu, gpu/gpu.mk), --backend cuda generates the same greedy text as
# --backend cpu in fp32, fp16 and bf16, prefix reuse and all.
set -u
source "$(dirname "$0")/common.bash"
EMU=$BUILD/gpu-emu/tokentop-emu

"$MKMODEL" "$tmp/m" --size tiny --seed 5 >/dev/null || { echo "FAIL mkmodel"; exit 1; }
M=(--model "$tmp/m" --threads 1)

# --- the binary of this build: what happens without a usable device
"$BIN" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend cuda >"$tmp/cuda.out" 2>"$tmp/cuda.err"
cuda_rc=$?
"$BIN" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend auto >"$tmp/auto.out" 2>"$tmp/auto.err"
auto_rc=$?
"$BIN" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend cpu >"$tmp/cpu.out" 2>"$tmp/cpu.err"
check "--backend cpu generates" test -s "$tmp/cpu.out"
check "--backend cpu says nothing about CUDA" test "$(grep -c -i cuda "$tmp/cpu.err")" -eq 0
check "--backend auto always generates" test "$auto_rc" -eq 0
check "--backend auto gives the CPU's greedy text or the GPU's same text" cmp -s "$tmp/auto.out" "$tmp/cpu.out"
if grep -q "no CUDA device" "$tmp/cuda.err"; then
    echo "     (this machine has no usable CUDA device: $(head -c 160 "$tmp/cuda.err"))"
    check "--backend cuda without a device fails" test "$cuda_rc" -ne 0
    check "--backend cuda says why in one line" test "$(wc -l < "$tmp/cuda.err")" -eq 1
    check "--backend auto says once that it uses the CPU, and why" \
        test "$(grep -c "cuda: no CUDA device.*; using the CPU" "$tmp/auto.err")" -eq 1
elif grep -q "no CUDA backend" "$tmp/cuda.err"; then
    echo "     (this build has no CUDA backend)"
    check "--backend cuda in a build without CUDA fails in one line" \
        test "$cuda_rc" -ne 0 -a "$(wc -l < "$tmp/cuda.err")" -eq 1
    check "--backend auto in a build without CUDA is silent" test ! -s "$tmp/auto.err"
else
    check "--backend cuda generates on the device" test "$cuda_rc" -eq 0
    check "--backend cuda gives the CPU's greedy text" cmp -s "$tmp/cuda.out" "$tmp/cpu.out"
fi

# --- the same program over the emulated GPU
if [ -x "$EMU" ]; then
    for dt in fp32 fp16 bf16; do
        "$EMU" generate "${M[@]}" -p "In the beginning" -n 20 --greedy -q --dtype $dt --backend cpu \
            >"$tmp/c.$dt" 2>/dev/null
        "$EMU" generate "${M[@]}" -p "In the beginning" -n 20 --greedy -q --dtype $dt --backend cuda \
            >"$tmp/g.$dt" 2>"$tmp/g.$dt.err"
        check "emulated GPU, $dt: same greedy text as the CPU" cmp -s "$tmp/c.$dt" "$tmp/g.$dt"
        check "emulated GPU, $dt: no warnings" test ! -s "$tmp/g.$dt.err"
    done
    "$EMU" generate "${M[@]}" -p "Hello" -n 12 --greedy -q --backend cuda --no-graphs >"$tmp/ng" 2>&1
    "$EMU" generate "${M[@]}" -p "Hello" -n 12 --greedy -q --backend cuda >"$tmp/wg" 2>&1
    check "emulated GPU: graphs on and off give the same text" cmp -s "$tmp/ng" "$tmp/wg"
    "$BUILD/gpu-emu/cuda-bench-emu" --size tiny --prompt 16 --gen 4 --runs 1 >"$tmp/bench" 2>"$tmp/bench.err"
    check "cuda-bench over the emulation runs" test $? -eq 0
    check "cuda-bench reports decode with graphs on and off" \
        grep -q "decode, graphs off: .* tokens/s (graphs: " "$tmp/bench"
    check "cuda-bench reports the bandwidth share and device memory" \
        grep -q "% of the .* GB/s peak; graphs on" "$tmp/bench"
    "$EMU" bench --backend cuda --model "$tmp/m" --prompt-tokens 8 --gen-tokens 4 --json >"$tmp/gb" 2>/dev/null
    check "tokentop bench --backend cuda reports device memory, graphs on/off and the bandwidth share" \
        bash -c "grep -q '\"backend\":\"cuda\"' '$tmp/gb' && grep -q '\"device_memory_mb\":' '$tmp/gb' \
                 && grep -q '\"decode_nograph_tok_s\":' '$tmp/gb' && grep -q '\"bandwidth_fraction\":' '$tmp/gb'"
    # A sticky device error (injected by the emulation) mid-prefill or mid-decode: the run goes on
    # on the CPU, with one message, and gives the CPU's greedy text; speculative runs too.
    "$EMU" generate "${M[@]}" -p "Hello there" -n 24 --greedy -q --backend cpu >"$tmp/fb.cpu" 2>/dev/null
    for at in 40 400; do
        TT_EMU_FAULT_AFTER=$at "$EMU" generate "${M[@]}" -p "Hello there" -n 24 --greedy -q \
            --backend cuda >"$tmp/fb.$at" 2>"$tmp/fb.$at.err"
        check "device error at operation $at: the run finishes on the CPU" test $? -eq 0
        check "device error at operation $at: same greedy text as the CPU" cmp -s "$tmp/fb.cpu" "$tmp/fb.$at"
        check "device error at operation $at: one message naming the call and the fallback" \
            test "$(grep -c "tokentop: cuda: .* failed at gpu/.*continuing on the CPU" "$tmp/fb.$at.err")" -eq 1
    done
    TT_EMU_FAULT_AFTER=300 "$EMU" generate "${M[@]}" --draft "$tmp/m" -p "Hello there" -n 24 --greedy -q \
        --backend cuda >"$tmp/fb.spec" 2>/dev/null
    check "device error during speculative rounds: same greedy text" cmp -s "$tmp/fb.cpu" "$tmp/fb.spec"
    TT_EMU_FAULT_AFTER=400 "$EMU" generate "${M[@]}" -p "Hello there" -n 24 --greedy --json \
        --backend cuda >"$tmp/fb.json" 2>/dev/null
    check "device error: the JSON summary reports the fallback" grep -q '"device_fallbacks":1' "$tmp/fb.json"
else
    echo "     (no $EMU in this build: CUDA=0)"
fi
if grep -q "no CUDA device" "$tmp/cuda.err"; then
    "$BIN" bench --backend cuda --model "$tmp/m" --prompt-tokens 8 --gen-tokens 4 >/dev/null 2>"$tmp/bb.err"
    check "tokentop bench --backend cuda without a device fails with the reason" \
        test $? -ne 0 -a "$(grep -c "no CUDA device" "$tmp/bb.err")" -eq 1
fi
if [ -x "$BUILD/gpu/cuda-bench" ] && grep -q "no CUDA device" "$tmp/cuda.err"; then
    "$BUILD/gpu/cuda-bench" >/dev/null 2>"$tmp/nb.err"
    check "cuda-bench without a device fails with the reason" \
        test $? -eq 1 -a "$(grep -c "cuda-bench: no CUDA device" "$tmp/nb.err")" -eq 1
fi

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
