# gpu/gpu.mk: the GPU backend's part of the build (included by the top-level Makefile).
#
#   make              auto: the CUDA backend when nvcc is found (PATH or $(CUDA_HOME)/bin), else none;
#                     one line says which
#   make CUDA=1       the CUDA backend: gpu/cuda_kernels.cu through nvcc for CUDA_ARCHS, the host code
#                     through $(CXX) against the CUDA headers, linked with cudart + cuBLAS
#   make CUDA=emu     the same gpu/ source over the host emulation (gpu/emu): `--backend cuda` runs
#                     on the CPU through the emulated runtime (slow; for tests and demos)
#   make CUDA=0       no GPU backend (gpu/cuda_stub.c: "built without CUDA")
#   make test-gpu-emu the emulated GPU suite alone (it is also part of make test, in every mode)
#
# nvcc objects go to build/cuda/ whatever BUILD is (they do not depend on SANITIZE), so the slow
# multi-architecture compile happens once. `make test` also proves that the nvcc build of gpu/
# compiles and links (in CUDA=1 mode that is the build itself; otherwise a separate link), or says
# that it is skipped when nvcc is absent.

# nvcc: $(CUDA_HOME)/bin/nvcc when CUDA_HOME is given, else the one on PATH, else /usr/local/cuda's;
# the toolkit (headers, libraries) is the directory above nvcc's.
ifneq ($(origin CUDA_HOME),undefined)
  NVCC ?= $(wildcard $(CUDA_HOME)/bin/nvcc)
else
  NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
  CUDA_HOME := $(if $(NVCC),$(patsubst %/bin/,%,$(dir $(NVCC))),/usr/local/cuda)
endif
# sm_80 A100 / A30, sm_86 RTX 30xx / A10 / A40, sm_89 RTX 40xx / L4 / L40, sm_90 H100 / H200,
# sm_100 B200 / GB200, sm_120 RTX 50xx / RTX PRO 6000; PTX of the newest one lets later GPUs
# JIT-compile it. CUDA_ARCHS=90 (say) builds for one machine in a third of the time.
CUDA_ARCHS ?= 80 86 89 90 100 120
CUDA_PTX   ?= $(lastword $(CUDA_ARCHS))
CUDA_SM    := $(patsubst %,sm_%,$(CUDA_ARCHS))

ifeq ($(CUDA),)
  ifneq ($(NVCC),)
    CUDA := 1
    GPU_NOTE := nvcc found ($(NVCC)): building with the CUDA backend (make CUDA=0 to leave it out)
  else
    CUDA := 0
    GPU_NOTE := nvcc not found: building without the CUDA backend (CPU only; make CUDA=1 NVCC=/path/to/nvcc to add it)
  endif
else ifeq ($(CUDA),1)
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found on PATH or in $(CUDA_HOME)/bin: set NVCC=/path/to/nvcc or CUDA_HOME)
  endif
  GPU_NOTE := CUDA backend (nvcc $(NVCC), $(CUDA_SM))
else ifeq ($(CUDA),emu)
  GPU_NOTE := GPU backend over the host emulation (gpu/emu): --backend cuda runs on the CPU
else ifeq ($(CUDA),0)
  GPU_NOTE := no GPU backend (CUDA=0)
else
  $(error CUDA must be 1, emu or 0 (or unset to detect nvcc), not '$(CUDA)')
endif

ifeq ($(filter clean,$(MAKECMDGOALS)),)
  ifeq ($(MAKELEVEL)$(if $(wildcard $(BUILD)/config.mk),,missing),0)
    $(info gpu: $(GPU_NOTE))
  endif
endif

# ---------------------------------------------------------------------------------------------
# Sources and objects
GPU_HDR      := $(wildcard gpu/*.h gpu/emu/*.h)
GPU_KERN_SRC := gpu/cuda_kernels.cu gpu/cuda_selftest.cu       # device code: nvcc
GPU_HOST_SRC := gpu/cuda_engine.cu gpu/cuda_ops.cu         # host code only: $(CXX)
CUDA_OBJDIR  := build/cuda
CUDA_OBJ     := $(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_KERN_SRC) $(GPU_HOST_SRC))
EMU_DIR      := $(BUILD)/gpu-emu
EMU_OBJ      := $(patsubst %.cu,$(EMU_DIR)/%.o,$(GPU_KERN_SRC) $(GPU_HOST_SRC)) $(EMU_DIR)/gpu/emu/cuda_emu.o
GPU_INFO_OBJ := $(BUILD)/gpu/build_info.o

GPU_CXXFLAGS := -std=gnu++17 -g $(OPT) -Wall -Wextra -Wno-unused-parameter -Wshadow -D_GNU_SOURCE \
                -pthread -MMD -MP -I.
EMU_CXXFLAGS  = $(GPU_CXXFLAGS) $(SANFLAGS) -DTT_EMU
NVCC_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
                -gencode arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX)
NVCC_FLAGS   := -std=c++17 -O3 -lineinfo -I. $(NVCC_GENCODE) -MMD -MP \
                -Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-Wshadow
CUDA_LIBS    := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++

ifeq ($(CUDA),1)
  GPU_OBJ        += $(CUDA_OBJ)
  GPU_LIBS       += $(CUDA_LIBS)
  GPU_REPL_FLAGS := -DTOKENTOP_CUDA=1
  GPU_INFO_TEXT  := cuda (nvcc $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p'), $(CUDA_SM))
else ifeq ($(CUDA),emu)
  GPU_OBJ        += $(EMU_OBJ)
  GPU_LIBS       += -lstdc++
  GPU_REPL_FLAGS := -DTOKENTOP_CUDA_EMU=1
  GPU_INFO_TEXT  := cuda-emu (host emulation)
else
  GPU_OBJ        += $(BUILD)/gpu/cuda_stub.o
  GPU_REPL_FLAGS :=
  GPU_INFO_TEXT  := none (built without CUDA)
endif
GPU_OBJ += $(GPU_INFO_OBJ)

# The app/ objects see which backend is linked; they (and the library) are rebuilt when the mode
# changes, because build_info.c is rewritten exactly then.
$(BUILD)/app/%.o: override CFLAGS += $(GPU_REPL_FLAGS)
$(APP_SRC:%.c=$(BUILD)/%.o) $(BUILD)/app/main.o: $(BUILD)/gpu/build_info.c

GPU_INFO_C := /* build_info.c: generated by gpu/gpu.mk; rewritten when the GPU build mode changes. */\n\#include "gpu/cuda_engine.h"\nconst char *cuda_build_info(void) { return "$(GPU_INFO_TEXT)"; }\n

# Remade on every run, but rewritten (and so newer than its dependents) only when the mode changed.
.PHONY: gpu-info-force
$(BUILD)/gpu/build_info.c: gpu-info-force
	@mkdir -p $(@D)
	@printf '$(GPU_INFO_C)' > $@.tmp && { cmp -s $@.tmp $@ || mv $@.tmp $@; }; rm -f $@.tmp

$(GPU_INFO_OBJ): $(BUILD)/gpu/build_info.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# ---------------------------------------------------------------------------------------------
# Rules
# The nvcc objects depend on the compiler and its flags (CUDA_ARCHS above all), recorded here.
$(CUDA_OBJDIR)/nvcc-flags: gpu-info-force
	@mkdir -p $(@D)
	@echo '$(NVCC) $(NVCC_FLAGS)' > $@.tmp && { cmp -s $@.tmp $@ || mv $@.tmp $@; }; rm -f $@.tmp

$(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_KERN_SRC)): $(CUDA_OBJDIR)/nvcc-flags

$(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_KERN_SRC)): $(CUDA_OBJDIR)/%.o: %.cu
	@mkdir -p $(@D)
	@echo "  NVCC    $< ($(CUDA_SM), compute_$(CUDA_PTX))"
	$(Q)$(NVCC) $(NVCC_FLAGS) -c $< -o $@

$(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_HOST_SRC)): $(CUDA_OBJDIR)/%.o: %.cu
	@mkdir -p $(@D)
	@echo "  CXX     $<"
	$(Q)$(CXX) -x c++ $(GPU_CXXFLAGS) -I$(CUDA_HOME)/include -c $< -o $@

$(EMU_DIR)/%.o: %.cu | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CXX-EMU $<"
	$(Q)$(CXX) -x c++ $(EMU_CXXFLAGS) -c $< -o $@

$(EMU_DIR)/%.o: %.cc | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CXX-EMU $<"
	$(Q)$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

-include $(wildcard $(CUDA_OBJDIR)/gpu/*.d)

# ---------------------------------------------------------------------------------------------
# Tests
#
# check_gpu_emu: the backend's own source over the emulation, against the CPU engine. The emulated
# objects come first on the link line, so the library's GPU members (real or stub) stay out.
$(BUILD)/tests/check_gpu_emu: $(BUILD)/tests/check_gpu_emu.o $(BUILD)/tests/testutil.o $(EMU_OBJ) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/tests/testutil.o $(EMU_OBJ) $(LIB) $(PKG_LIBS) $(CHECK_LIBS) \
	    -lstdc++ $(LDLIBS)

.PHONY: test-gpu-emu gpu-nvcc-check
test-gpu-emu: $(BUILD)/tests/check_gpu_emu
	$(BUILD)/tests/check_gpu_emu

# The nvcc build of gpu/ compiles and links: in CUDA=1 mode the binaries themselves; otherwise
# check_gpu_cuda is linked again against the nvcc objects and run (no device: it checks the
# fallback). Without nvcc the check is skipped, saying so.
# Each requested architecture has machine code in the objects: every SASS image records the ptxas
# options it was built with ("-arch sm_XX").
GPU_ARCH_CHECK = for o in $(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_KERN_SRC)); do for a in $(CUDA_SM); do \
	  strings $$o | grep -q -- "-arch $$a " || { echo "gpu: $$o has no code for $$a"; exit 1; }; done; done

ifeq ($(CUDA),1)
gpu-nvcc-check: $(BIN) $(if $(wildcard tests/check_gpu_cuda.c),$(BUILD)/tests/check_gpu_cuda)
	@$(GPU_ARCH_CHECK)
	@echo "gpu: nvcc build of gpu/ ($(CUDA_SM)) compiled and linked into $(BIN)"
else ifneq ($(NVCC),)
$(CUDA_OBJDIR)/check_gpu_cuda: $(BUILD)/tests/check_gpu_cuda.o $(BUILD)/tests/testutil.o $(CUDA_OBJ) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/tests/testutil.o $(CUDA_OBJ) $(LIB) $(PKG_LIBS) $(CHECK_LIBS) \
	    $(CUDA_LIBS) $(LDLIBS)

gpu-nvcc-check: $(CUDA_OBJDIR)/check_gpu_cuda
	@$(GPU_ARCH_CHECK)
	@echo "gpu: nvcc build of gpu/ ($(CUDA_SM)) compiled and linked; running it"
	@$(CUDA_OBJDIR)/check_gpu_cuda
else
gpu-nvcc-check:
	@echo "gpu: nvcc not found: skipping the check that the CUDA build of gpu/ compiles and links"
endif

GPU_TEST_DEPS += gpu-nvcc-check

# cuda-bench: the backend's own benchmark (gpu/cuda_bench.c), with this build's backend; the
# emulated twin lets tests/e2e/gpu_backend.sh check that it runs.
GPU_BENCH := $(BUILD)/gpu/cuda-bench
$(GPU_BENCH): $(BUILD)/gpu/cuda_bench.o $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LIB) $(PKG_LIBS) $(GPU_LIBS) $(LDLIBS)

$(EMU_DIR)/cuda-bench-emu: $(BUILD)/gpu/cuda_bench.o $(EMU_OBJ) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(EMU_OBJ) $(LIB) $(PKG_LIBS) -lstdc++ $(LDLIBS)

.PHONY: gpu-bench
gpu-bench: $(GPU_BENCH)
	$(GPU_BENCH) $(GPU_BENCH_ARGS)

GPU_TEST_DEPS += $(GPU_BENCH) $(EMU_DIR)/cuda-bench-emu

# tokentop-emu: the real binary (app/, repl/, core/) with the emulated backend, so tests/e2e/gpu_backend.sh
# runs `--backend cuda` end to end without a GPU. Needs app/ objects built with the CUDA code paths
# (CUDA=1 or emu); in CUDA=emu mode it is the same program as $(BIN).
ifneq ($(CUDA),0)
GPU_EMU_BIN := $(EMU_DIR)/tokentop-emu
$(GPU_EMU_BIN): $(BUILD)/app/main.o $(EMU_OBJ) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(EMU_OBJ) $(LIB) $(PKG_LIBS) -lstdc++ $(LDLIBS)
GPU_TEST_DEPS += $(GPU_EMU_BIN)
endif
