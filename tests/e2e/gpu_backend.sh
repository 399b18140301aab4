#!/usr/bin/env bash
# End-to-end checks of the GPU backend, a plugin the real binary opens only for --backend cuda|auto
# (gpu/gpu_plugin.h): the binary links no CUDA library and a CPU run stays small; without a usable
# device --backend cuda fails with the reason in one line and --backend auto runs on the CPU,
# saying so only with -v, in /show and in the REPL's status bar; the plugin is found beside the
# binary, in its ../lib/tokentop, or through TOKENTOP_GPU_PLUGIN, and a wrong file is refused with
# a reason; and, through the emulated plugin (gpu/emu), --backend cuda generates the same greedy
# text as --backend cpu in fp32, fp16 and bf16, and a device error mid-run continues on the CPU.
set -u
source "$(dirname "$0")/common.bash"
EMU_PLUGIN=$BUILD/gpu-emu/tokentop-cuda-emu.so
CUDA_PLUGIN=build/cuda/tokentop-cuda.so          # gpu/gpu.mk: wherever nvcc is found
EMU=(env TOKENTOP_GPU_PLUGIN="$EMU_PLUGIN" "$BIN")

"$MKMODEL" "$tmp/m" --size tiny --seed 5 >/dev/null || { echo "FAIL mkmodel"; exit 1; }
M=(--model "$tmp/m" --threads 1)

# --- what a CPU run costs
check "the binary links no CUDA library (ldd)" bash -c "! ldd '$BIN' | grep -Eiq 'cublas|cudart|libcuda'"
if ldd "$BIN" | grep -q libasan; then
    echo "     (skipped: peak RSS is not measured in a sanitizer build)"
elif [ -x /usr/bin/time ]; then
    for b in cpu auto; do
        /usr/bin/time -f %M -o "$tmp/rss.$b" "$BIN" generate --model models/kjv-target --backend $b \
            -p "And God said" -n 1 -q >/dev/null 2>"$tmp/rss.$b.err"
        echo "     (one-token run, --backend $b: peak RSS $(cat "$tmp/rss.$b") kB)"
    done
    check "a one-token CPU run stays below 80 MB peak RSS" test "$(cat "$tmp/rss.cpu")" -lt 80000
    if grep -q "no CUDA driver" <("$BIN" generate "${M[@]}" -p Hi -n 1 -q --backend cuda 2>&1); then
        check "without a driver, a one-token --backend auto run stays below 80 MB peak RSS" \
            test "$(cat "$tmp/rss.auto")" -lt 80000
    fi
else
    echo "     (skipped: /usr/bin/time is not installed, so peak RSS is not measured)"
fi

# --- the binary of this build: what happens without a usable device
"$BIN" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend cuda >"$tmp/cuda.out" 2>"$tmp/cuda.err"
cuda_rc=$?
"$BIN" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend auto >"$tmp/auto.out" 2>"$tmp/auto.err"
auto_rc=$?
"$BIN" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend auto -v >/dev/null 2>"$tmp/autov.err"
"$BIN" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend cpu >"$tmp/cpu.out" 2>"$tmp/cpu.err"
check "--backend cpu generates" test -s "$tmp/cpu.out"
check "--backend cpu says nothing about CUDA" test "$(grep -c -i cuda "$tmp/cpu.err")" -eq 0
check "--backend auto always generates" test "$auto_rc" -eq 0
check "--backend auto gives the CPU's greedy text or the GPU's same text" cmp -s "$tmp/auto.out" "$tmp/cpu.out"
if [ "$cuda_rc" -ne 0 ]; then
    echo "     (no usable CUDA device here: $(head -c 200 "$tmp/cuda.err"))"
    check "--backend cuda without a device says why in one line" \
        bash -c "[ \$(wc -l < '$tmp/cuda.err') -eq 1 ] && grep -Eq '^tokentop: --backend cuda: no (CUDA driver|CUDA device|GPU plugin)' '$tmp/cuda.err'"
    check "--backend auto on a scripted call says nothing about the fall-back" test ! -s "$tmp/auto.err"
    check "--backend auto -v says once that it uses the CPU, and why" \
        test "$(grep -c "^tokentop: cuda: no .*; using the CPU$" "$tmp/autov.err")" -eq 1
    check "-v names the engine that runs" grep -q "^tokentop: $tmp/m: cpu: " "$tmp/autov.err"
    printf '/show\n' | "$BIN" "${M[@]}" --backend auto >/dev/null 2>"$tmp/show.err"
    check "/show says why --backend auto runs on the CPU" grep -q "^backend     auto: cuda: no .*; using the CPU" "$tmp/show.err"
    printf '/show\n' | "$BIN" "${M[@]}" --backend cpu >/dev/null 2>"$tmp/showcpu.err"
    check "/show says nothing of it with --backend cpu" bash -c "! grep -q '^backend ' '$tmp/showcpu.err'"
    "$BIN" bench --backend cuda --model "$tmp/m" --prompt-tokens 8 --gen-tokens 4 >/dev/null 2>"$tmp/bb.err"
    check "tokentop bench --backend cuda without a device fails with the reason in one line" \
        test $? -ne 0 -a "$(grep -c "^tokentop bench: --backend cuda: no " "$tmp/bb.err")" -eq 1
    if command -v tmux >/dev/null; then
        sock="tokentop-gpu-$$"
        tmux -L "$sock" -f /dev/null new-session -d -s main -x 120 -y 30 \
            "env TERM=screen-256color TOKENTOP_HISTORY= $BIN --model $tmp/m --backend auto"
        for _ in $(seq 200); do
            tmux -L "$sock" capture-pane -p -t main 2>/dev/null | grep -q 'KV 0/' && break
            sleep 0.1
        done
        check "the REPL's status bar says --backend auto runs on the CPU" \
            bash -c "tmux -L '$sock' capture-pane -p -t main | grep -q ' cpu (no GPU) fp'"
        tmux -L "$sock" kill-server 2>/dev/null
    else
        echo "     (skipped: tmux is not installed, so the status bar is not checked)"
    fi
else
    check "--backend cuda generates on the device" test "$cuda_rc" -eq 0
    check "--backend cuda gives the CPU's greedy text" cmp -s "$tmp/cuda.out" "$tmp/cpu.out"
fi

# --- where the plugin is looked for, and wrong files
"${EMU[@]}" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend cuda -v >/dev/null 2>"$tmp/env.err"
check "TOKENTOP_GPU_PLUGIN opens the named plugin" grep -q "GPU plugin $EMU_PLUGIN\$" "$tmp/env.err"
for layout in "bin:bin" "bin:lib/tokentop"; do
    bindir=$tmp/tree-${layout%%:*}-${layout##*/}/bin
    plugdir=$(dirname "$bindir")/${layout##*:}
    mkdir -p "$bindir" "$plugdir"
    cp "$BIN" "$bindir/tokentop" && cp "$EMU_PLUGIN" "$plugdir/"
    "$bindir/tokentop" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend cuda -v \
        >"$tmp/tree.out" 2>"$tmp/tree.err"
    check "the plugin is found in ${layout##*:}/ of the binary's tree" \
        bash -c "grep -q 'GPU plugin .*/${layout##*:}/tokentop-cuda-emu.so\$' '$tmp/tree.err' && cmp -s '$tmp/tree.out' '$tmp/cpu.out'"
done
TOKENTOP_GPU_PLUGIN=$tmp/none.so "$BIN" generate "${M[@]}" -p Hi -n 1 -q --backend cuda 2>"$tmp/none.err"
check "a TOKENTOP_GPU_PLUGIN that does not exist is named" \
    grep -q "^tokentop: --backend cuda: TOKENTOP_GPU_PLUGIN=$tmp/none.so: no such file" "$tmp/none.err"
libm=$(ldd "$BIN" | sed -n 's/.*libm\.so\.6 => \([^ ]*\) .*/\1/p')
TOKENTOP_GPU_PLUGIN=$libm "$BIN" generate "${M[@]}" -p Hi -n 1 -q --backend cuda 2>"$tmp/libm.err"
check "a shared object that is not a plugin is refused" grep -q "no tokentop_gpu_plugin entry point" "$tmp/libm.err"
echo "not an ELF file" >"$tmp/bad.so"
TOKENTOP_GPU_PLUGIN=$tmp/bad.so "$BIN" generate "${M[@]}" -p Hi -n 1 -q --backend auto -v >"$tmp/bad.out" 2>"$tmp/bad.err"
check "--backend auto with a broken plugin runs on the CPU and -v says why" \
    bash -c "grep -q 'cuda: cannot load $tmp/bad.so' '$tmp/bad.err' && test -s '$tmp/bad.out'"
if [ -f "$CUDA_PLUGIN" ]; then
    # The nvcc plugin resolves against this binary (a symbol missing from gpu/host.exports would
    # fail here) and answers for the device itself.
    TOKENTOP_GPU_PLUGIN=$CUDA_PLUGIN "$BIN" generate "${M[@]}" -p "Hello" -n 8 --greedy -q --backend cuda \
        >"$tmp/real.out" 2>"$tmp/real.err"
    check "the nvcc plugin loads into the binary and answers for the device" \
        bash -c "grep -q '^tokentop: --backend cuda: no CUDA device' '$tmp/real.err' || cmp -s '$tmp/real.out' '$tmp/cpu.out'"
    if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
        mkdir -p "$tmp/real/bin" && cp "$BIN" "$CUDA_PLUGIN" "$tmp/real/bin/"
        "$tmp/real/bin/tokentop" generate "${M[@]}" -p Hi -n 1 -q --backend cuda 2>"$tmp/nodrv.err"
        check "without the CUDA driver, the plugin found beside the binary is not opened" \
            grep -q "^tokentop: --backend cuda: no CUDA driver (libcuda.so.1" "$tmp/nodrv.err"
    fi
fi

# --- the same program over the emulated GPU
for dt in fp32 fp16 bf16; do
    "${EMU[@]}" generate "${M[@]}" -p "In the beginning" -n 20 --greedy -q --dtype $dt --backend cpu \
        >"$tmp/c.$dt" 2>/dev/null
    "${EMU[@]}" generate "${M[@]}" -p "In the beginning" -n 20 --greedy -q --dtype $dt --backend cuda \
        >"$tmp/g.$dt" 2>"$tmp/g.$dt.err"
    check "emulated GPU, $dt: same greedy text as the CPU" cmp -s "$tmp/c.$dt" "$tmp/g.$dt"
    check "emulated GPU, $dt: no warnings" test ! -s "$tmp/g.$dt.err"
done
"${EMU[@]}" generate "${M[@]}" -p "Hello" -n 12 --greedy -q --backend cuda --no-graphs >"$tmp/ng" 2>&1
"${EMU[@]}" generate "${M[@]}" -p "Hello" -n 12 --greedy -q --backend cuda >"$tmp/wg" 2>&1
check "emulated GPU: graphs on and off give the same text" cmp -s "$tmp/ng" "$tmp/wg"
# Beams, samples and batched bench on the GPU's sequences (the emulation is batch-invariant).
beam_ids() { grep -o '"beams":\[.*' "$1" | grep -o '"ids":\[[0-9,]*\]'; }
for b in cpu cuda; do
    "${EMU[@]}" generate "${M[@]}" -p "Hello there" -n 8 --num-beams 4 --dtype fp32 --json --backend $b \
        >"$tmp/beam.$b" 2>"$tmp/beam.$b.err"
done
check "emulated GPU: --num-beams 4 returns four beams" test "$(beam_ids "$tmp/beam.cuda" | wc -l)" -eq 4
check "emulated GPU: --num-beams gives the CPU's beams" cmp -s <(beam_ids "$tmp/beam.cpu") <(beam_ids "$tmp/beam.cuda")
samples_ok=1
"${EMU[@]}" generate "${M[@]}" -p "Hello there" -n 12 --temp 1.2 --dtype fp16 --samples 3 --seed 20 --json \
    --backend cuda >"$tmp/smp.jsonl" 2>"$tmp/smp.err" || samples_ok=0
for i in 0 1 2; do
    "${EMU[@]}" generate "${M[@]}" -p "Hello there" -n 12 --temp 1.2 --dtype fp16 --seed $((20 + i)) --json \
        --backend cuda >"$tmp/smp1.jsonl" 2>/dev/null
    diff <(grep "\"sample\":$i," "$tmp/smp.jsonl" | grep '"step"' | sed "s/\"sample\":$i,//") \
        <(grep '"step"' "$tmp/smp1.jsonl") >/dev/null && [ -s "$tmp/smp1.jsonl" ] || samples_ok=0
done
check "emulated GPU, fp16: sample i of --samples 3 --seed 20 is the run --seed 20+i" test $samples_ok = 1
"${EMU[@]}" bench --backend cuda --model "$tmp/m" --dtype fp16 --prompt-tokens 8 --gen-tokens 4 --batch 1,3 \
    --json >"$tmp/gbb" 2>/dev/null
check "tokentop bench --backend cuda --batch reports each batch size, fp16 cache bytes" \
    grep -q '"batch":\[{"batch":1,.*"kv_bytes_per_sequence":32768,.*{"batch":3,' "$tmp/gbb"
"$BUILD/gpu-emu/cuda-bench-emu" --size tiny --prompt 16 --gen 4 --runs 1 >"$tmp/bench" 2>"$tmp/bench.err"
check "cuda-bench over the emulation runs" test $? -eq 0
check "cuda-bench reports decode with graphs on and off" \
    grep -q "decode, graphs off: .* tokens/s (graphs: " "$tmp/bench"
check "cuda-bench reports the bandwidth share and device memory" \
    grep -q "% of the .* GB/s peak; graphs on" "$tmp/bench"
"${EMU[@]}" bench --backend cuda --model "$tmp/m" --prompt-tokens 8 --gen-tokens 4 --json >"$tmp/gb" 2>/dev/null
check "tokentop bench --backend cuda reports device memory, graphs on/off and the bandwidth share" \
    bash -c "grep -q '\"backend\":\"cuda\"' '$tmp/gb' && grep -q '\"device_memory_mb\":' '$tmp/gb' \
             && grep -q '\"decode_nograph_tok_s\":' '$tmp/gb' && grep -q '\"bandwidth_fraction\":' '$tmp/gb'"
# A sticky device error (injected by the emulation) mid-prefill or mid-decode: the run goes on
# on the CPU, with one message, and gives the CPU's greedy text; speculative runs too.
"${EMU[@]}" generate "${M[@]}" -p "Hello there" -n 24 --greedy -q --backend cpu >"$tmp/fb.cpu" 2>/dev/null
for at in 40 400; do
    TT_EMU_FAULT_AFTER=$at "${EMU[@]}" generate "${M[@]}" -p "Hello there" -n 24 --greedy -q \
        --backend cuda >"$tmp/fb.$at" 2>"$tmp/fb.$at.err"
    check "device error at operation $at: the run finishes on the CPU" test $? -eq 0
    check "device error at operation $at: same greedy text as the CPU" cmp -s "$tmp/fb.cpu" "$tmp/fb.$at"
    check "device error at operation $at: one message naming the call and the fallback" \
        test "$(grep -c "tokentop: cuda: .* failed at gpu/.*continuing on the CPU" "$tmp/fb.$at.err")" -eq 1
done
TT_EMU_FAULT_AFTER=300 "${EMU[@]}" generate "${M[@]}" --draft "$tmp/m" -p "Hello there" -n 24 --greedy -q \
    --backend cuda >"$tmp/fb.spec" 2>/dev/null
check "device error during speculative rounds: same greedy text" cmp -s "$tmp/fb.cpu" "$tmp/fb.spec"
TT_EMU_FAULT_AFTER=400 "${EMU[@]}" generate "${M[@]}" -p "Hello there" -n 24 --greedy --json \
    --backend cuda >"$tmp/fb.json" 2>/dev/null
check "device error: the JSON summary reports the fallback" grep -q '"device_fallbacks":1' "$tmp/fb.json"
# Beams and samples have no CPU fallback: a device error ends the run with the reason and exit 1.
TT_EMU_FAULT_AFTER=150 "${EMU[@]}" generate "${M[@]}" -p "Hello there" -n 8 --num-beams 3 -q --backend cuda \
    >/dev/null 2>"$tmp/fb.beam"
check "device error during beam steps: exit 1 with one message naming the call" \
    test $? -eq 1 -a "$(grep -c '^tokentop: cuda: .* failed at gpu/cuda_engine.cu:' "$tmp/fb.beam")" -eq 1
TT_EMU_FAULT_AFTER=40 "${EMU[@]}" generate "${M[@]}" -p "Hello there" -n 8 --samples 2 -q --backend cuda \
    >/dev/null 2>"$tmp/fb.smp"
check "device error during --samples: exit 1 and each sample says why" \
    test $? -eq 1 -a "$(grep -c '^tokentop: sample [01]: cuda: ' "$tmp/fb.smp")" -eq 2

if [ -x "$BUILD/gpu/cuda-bench" ] && grep -q "no CUDA" "$tmp/cuda.err"; then
    "$BUILD/gpu/cuda-bench" >/dev/null 2>"$tmp/nb.err"
    check "cuda-bench without a device fails with the reason" \
        test $? -eq 1 -a "$(grep -c "cuda-bench: no CUDA device" "$tmp/nb.err")" -eq 1
fi

# --- the Llama family over the emulated GPU: random qwen3 (q/k norms, head_dim != hidden/heads,
# GQA) and llama (one KV head, untied head, F16 file) models, greedy ids as on the CPU
"$MKMODEL" "$tmp/q3" --arch qwen3 --embd 64 --heads 4 --kv-heads 2 --head-dim 24 --layers 2 --inner 96 \
    --vocab 300 --ctx 64 --seed 4 >/dev/null || fail "mkmodel --arch qwen3"
"$MKMODEL" "$tmp/ll" --arch llama --embd 48 --heads 6 --kv-heads 1 --layers 2 --inner 80 --vocab 300 \
    --ctx 64 --untied --dtype fp16 --seed 5 >/dev/null || fail "mkmodel --arch llama"
for fx in q3 ll; do
    for dt in fp32 fp16; do
        for b in cpu cuda; do
            "${EMU[@]}" generate --model "$tmp/$fx" --threads 1 -p "hello world" -n 16 --greedy --json \
                --dtype $dt --backend $b >"$tmp/fx.$fx.$dt.$b" 2>"$tmp/fx.$fx.$dt.$b.err"
        done
        check "emulated GPU, random $(sed -n 's/.*"model_type": *"\([a-z0-9]*\)".*/\1/p' "$tmp/$fx/config.json") model, $dt: the CPU's 16 greedy ids" \
            bash -c "[ \$(grep -c '\"id\":[0-9]*,\"token\"' '$tmp/fx.$fx.$dt.cpu') -eq 16 ] &&
                     cmp -s <(grep -o '\"id\":[0-9]*,\"token\"' '$tmp/fx.$fx.$dt.cpu') \
                            <(grep -o '\"id\":[0-9]*,\"token\"' '$tmp/fx.$fx.$dt.cuda')"
    done
done

# --- GGUF files over the emulated GPU: a quantized file's default precision (Q8_0's is the CPU's
# repacked q8, other types' the blocks as stored) is dequantized to fp16 at upload, not refused
for fx in tiny-qwen3-q8_0 tiny-llama-256-q4_k_m; do
    "${EMU[@]}" generate --model "tests/fixtures/gguf/$fx.gguf" --threads 1 -p "hello world" -n 4 --greedy -q \
        --backend cuda -v >/dev/null 2>"$tmp/gg.$fx.err"
    check "emulated GPU, GGUF $fx with --backend cuda: runs on the GPU, dequantized at upload" \
        bash -c "[ $? -eq 0 ] && grep -q 'dequantized at upload' '$tmp/gg.$fx.err' && ! grep -q 'using the CPU' '$tmp/gg.$fx.err'"
    "${EMU[@]}" bench --backend cuda --model "tests/fixtures/gguf/$fx.gguf" --prompt-tokens 8 --gen-tokens 4 \
        >"$tmp/gb.$fx.out" 2>"$tmp/gb.$fx.err"
    check "emulated GPU, bench --backend cuda on GGUF $fx: measures the blocks dequantized at upload" \
        bash -c "[ $? -eq 0 ] && grep -q 'dequantized at upload' '$tmp/gb.$fx.out' '$tmp/gb.$fx.err'"
done

# --- make gpu-check without a device: says so and fails at once, before building anything
# (three ways: no nvidia-smi, one that finds no device, one that hangs).
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$tmp/smi-none" && chmod +x "$tmp/smi-none"
printf '#!/bin/sh\nexec sleep 60\n' >"$tmp/smi-hang" && chmod +x "$tmp/smi-hang"
for smi in "$tmp/absent" "$tmp/smi-none" "$tmp/smi-hang"; do
    t0=$SECONDS
    NVIDIA_SMI=$smi GPU_CHECK_DETECT_TIMEOUT=2 BUILD=$tmp/gc MAKE=false gpu/gpu_check.sh >"$tmp/gc.out" 2>&1
    rc=$?
    check "gpu-check with NVIDIA_SMI=${smi##*/}: exit 1 within 10 s saying there is no GPU, nothing built" \
        bash -c "[ $rc -eq 1 ] && [ $((SECONDS - t0)) -lt 10 ] && grep -q '^gpu-check: no GPU: ' '$tmp/gc.out' &&
                 [ ! -e '$tmp/gc' ]"
done
if ! command -v nvidia-smi >/dev/null 2>&1; then
    make -s gpu-check >"$tmp/mgc.out" 2>&1
    check "make gpu-check here (no nvidia-smi): fails naming the missing driver" \
        bash -c "[ $? -ne 0 ] && grep -q '^gpu-check: no GPU: nvidia-smi not found' '$tmp/mgc.out'"
fi

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
