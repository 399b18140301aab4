#!/bin/sh
# build_native.sh: builds llama.cpp for this CPU from the source node-llama-cpp 3.22.1 ships, and
# links llama_bench.c and llama_logits.c against it.
#
#   tools/peer/build_native.sh [WORKDIR]        (default tools/peer/work, git-ignored)
#
# The source is the git bundle inside the npm package node-llama-cpp@3.22.1
# (llama/gitRelease.bundle, llama.cpp de3ff81, the same source as the prebuilt
# @node-llama-cpp/linux-x64 binaries). It is configured CPU only with
# -DGGML_NATIVE=ON (-march=native: every ISA extension of the build machine, AMX included where
# present) and built at `nice -n 10` with JOBS (default 2) jobs. Nothing it fetches or builds is
# part of the repository. Re-running skips the steps already done.
#
# Afterwards WORKDIR holds:
#   llama.cpp/build/bin/{libllama.so,libggml*.so,llama-bench,llama-quantize}
#   llama_bench          tools/peer/llama_bench.c linked against that build (rpath set)
#   llama_logits         tools/peer/llama_logits.c, the same way
# NO_AMX=1 compiles ggml without AMX (-mno-amx-tile -mno-amx-int8 -mno-amx-bf16 beside
# -march=native): on the Xeon VMs here ggml's AMX buffer dies in its first Q8_0, Q4_0 or Q4_K
# product (SIGILL or SIGSEGV), and --no-extra-bufts, the other way round it, also turns off the
# repacked AVX-512 layouts; without AMX those stay. Use another WORKDIR for it.
# Needs: npm, git, cmake, a C/C++ compiler.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:-$HERE/work}
JOBS=${JOBS:-2}
PKG=node-llama-cpp@3.22.1
COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6

mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
cd "$WORK"

if [ ! -f node-llama-cpp-3.22.1.tgz ]; then
    echo "build_native: npm pack $PKG" >&2
    npm pack --silent "$PKG" >/dev/null
fi
if [ ! -d llama.cpp/.git ]; then
    rm -rf npm-src && mkdir npm-src
    tar xzf node-llama-cpp-3.22.1.tgz -C npm-src package/llama/gitRelease.bundle
    git clone -q npm-src/package/llama/gitRelease.bundle llama.cpp
fi
head=$(git -C llama.cpp rev-parse HEAD)
if [ "$head" != "$COMMIT" ]; then
    echo "build_native: llama.cpp is at $head, expected $COMMIT" >&2
    exit 1
fi

cd llama.cpp
if [ ! -f build/CMakeCache.txt ]; then
    ISA=
    [ "${NO_AMX:-0}" = 1 ] && ISA="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    # CPU only: no CUDA/Vulkan/Metal even where the toolkits are installed; no libcurl needed
    cmake -B build -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS="$ISA" -DCMAKE_CXX_FLAGS="$ISA" \
        -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENMP=ON \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
fi
nice -n 10 cmake --build build -j"$JOBS" --target llama llama-bench llama-quantize
cd "$WORK"

LIB=$WORK/llama.cpp/build/bin
cc -O2 -Wall -Wextra -Wshadow -std=c11 -D_POSIX_C_SOURCE=200809L \
    -I llama.cpp/include -I llama.cpp/ggml/include "$HERE/llama_bench.c" -o llama_bench \
    -L "$LIB" -lllama -lggml -lggml-base -Wl,-rpath,"$LIB"
cc -O2 -Wall -Wextra -Wshadow -std=c11 -D_POSIX_C_SOURCE=200809L \
    -I llama.cpp/include -I llama.cpp/ggml/include "$HERE/llama_logits.c" -o llama_logits \
    -L "$LIB" -lllama -lggml -lggml-base -lm -Wl,-rpath,"$LIB"
echo "build_native: $WORK/llama_bench, $WORK/llama_logits, $LIB/llama-quantize" >&2
