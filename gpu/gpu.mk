# gpu/gpu.mk: the GPU backend's part of the build (included by the top-level Makefile).
#
# tokentop never links CUDA: the backend is a shared object it opens at run time (gpu/gpu_plugin.h)
# for --backend cuda|auto, so the same binary runs with or without CUDA installed and CPU runs pay
# nothing for it. The mode only decides which plugin is built and placed beside the binary:
#
#   make              auto: CUDA=1 when nvcc is found (PATH or $(CUDA_HOME)/bin), else CUDA=0; one
#                     line says which
#   make CUDA=1       $(BUILD)/tokentop-cuda.so: gpu/cuda_kernels.cu through nvcc for CUDA_ARCHS, the
#                     host code through $(CXX) against the CUDA headers, linked with cudart + cuBLAS
#   make CUDA=emu     $(BUILD)/tokentop-cuda-emu.so: the same gpu/ source over the host emulation
#                     (gpu/emu): `--backend cuda` runs on the CPU through the emulated runtime (slow;
#                     for tests and demos)
#   make CUDA=0       no plugin: `--backend cuda` says none was found
#   make test-gpu-emu the emulated GPU suite alone (it is also part of make test, in every mode)
#
# Every mode builds the emulated plugin under $(BUILD)/gpu-emu/ for the tests, which open it through
# TOKENTOP_GPU_PLUGIN. nvcc objects go to build/cuda/ whatever BUILD is (they do not depend on
# SANITIZE), so the slow multi-architecture compile happens once. `make test` also proves that the
# nvcc build of gpu/ compiles and links (check_gpu_cuda, linked with the nvcc objects), or says that
# it is skipped when nvcc is absent.

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
    GPU_NOTE := nvcc found ($(NVCC)): building the CUDA plugin (make CUDA=0 to leave it out)
  else
    CUDA := 0
    GPU_NOTE := nvcc not found: building without the CUDA plugin (CPU only; make CUDA=1 NVCC=/path/to/nvcc to add it)
  endif
else ifeq ($(CUDA),1)
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found on PATH or in $(CUDA_HOME)/bin: set NVCC=/path/to/nvcc or CUDA_HOME)
  endif
  GPU_NOTE := CUDA plugin (nvcc $(NVCC), $(CUDA_SM))
else ifeq ($(CUDA),emu)
  GPU_NOTE := GPU plugin over the host emulation (gpu/emu): --backend cuda runs on the CPU
else ifeq ($(CUDA),0)
  GPU_NOTE := no GPU plugin (CUDA=0)
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
GPU_KERN_SRC := gpu/cuda_kernels.cu gpu/cuda_selftest.cu       # device code: nvcc
GPU_HOST_SRC := gpu/cuda_engine.cu gpu/cuda_ops.cu         # host code only: $(CXX)
CUDA_OBJDIR  := build/cuda
EMU_DIR      := $(BUILD)/gpu-emu
# Each flavour of the backend: its objects, then the entry point, which names the flavour.
CUDA_OBJ     := $(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_KERN_SRC) $(GPU_HOST_SRC)) \
                $(CUDA_OBJDIR)/gpu/plugin_entry.o
EMU_OBJ      := $(patsubst %.cu,$(EMU_DIR)/%.o,$(GPU_KERN_SRC) $(GPU_HOST_SRC)) $(EMU_DIR)/gpu/emu/cuda_emu.o \
                $(EMU_DIR)/gpu/plugin_entry.o
CUDA_PLUGIN  := $(CUDA_OBJDIR)/tokentop-cuda.so
EMU_PLUGIN   := $(EMU_DIR)/tokentop-cuda-emu.so
GPU_PLUGIN_FILES := tokentop-cuda.so tokentop-cuda-emu.so

# Everything becomes position-independent code: it goes into a shared object.
GPU_CXXFLAGS := -std=gnu++17 -g $(OPT) -Wall -Wextra -Wno-unused-parameter -Wshadow -D_GNU_SOURCE \
                -pthread -MMD -MP -I. -fPIC
EMU_CXXFLAGS  = $(GPU_CXXFLAGS) $(SANFLAGS) -DTT_EMU
NVCC_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
                -gencode arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX)
NVCC_FLAGS   := -std=c++17 -O3 -lineinfo -I. $(NVCC_GENCODE) -MMD -MP \
                -Xcompiler -fPIC,-Wall,-Wextra,-Wno-unused-parameter,-Wshadow
CUDA_LIBS    := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
CUDA_INFO_TEXT := cuda (nvcc $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p'), $(CUDA_SM))
EMU_INFO_TEXT  := cuda-emu (host emulation)
# A plugin exports its entry point only (plugin.exports); the binary exports to it the core/
# functions it calls (host.exports).
PLUGIN_LDFLAGS   := -shared -Wl,--version-script=gpu/plugin.exports
GPU_HOST_LDFLAGS := -Wl,--dynamic-list=gpu/host.exports

# The mode's plugin, copied beside $(BIN) (and ./tokentop): what the loader finds there.
ifeq ($(CUDA),1)
  GPU_PLUGIN := $(BUILD)/tokentop-cuda.so
else ifeq ($(CUDA),emu)
  GPU_PLUGIN := $(BUILD)/tokentop-cuda-emu.so
else
  GPU_PLUGIN :=
endif

# What tokentop itself links: the loader, and dlopen.
GPU_OBJ  += $(BUILD)/gpu/gpu_plugin.o
GPU_LIBS += -ldl
$(BIN): gpu/host.exports

# A plugin file of another mode left beside the binary would be found first; remove it (the
# top-level Makefile does the same beside ./tokentop when it copies the binary there).
GPU_PLUGIN_STALE := $(filter-out $(notdir $(GPU_PLUGIN)),$(GPU_PLUGIN_FILES))
.PHONY: gpu-plugin-stale
gpu-plugin-stale:
	@rm -f $(addprefix $(BUILD)/,$(GPU_PLUGIN_STALE))

# ---------------------------------------------------------------------------------------------
# Rules
# Each flavour's objects depend on its compilers and their flags (CUDA_ARCHS above all), recorded
# in a file rewritten only when they change.
.PHONY: gpu-flags-force
RECORD_FLAGS = @mkdir -p $(@D); echo '$(1)' > $@.tmp && { cmp -s $@.tmp $@ || mv $@.tmp $@; }; rm -f $@.tmp
$(CUDA_OBJDIR)/nvcc-flags: gpu-flags-force
	$(call RECORD_FLAGS,$(NVCC) $(NVCC_FLAGS) $(CXX) $(GPU_CXXFLAGS) $(CUDA_INFO_TEXT))
$(EMU_DIR)/cxx-flags: gpu-flags-force
	$(call RECORD_FLAGS,$(CXX) $(EMU_CXXFLAGS))

$(CUDA_OBJ): $(CUDA_OBJDIR)/nvcc-flags
$(filter-out %/plugin_entry.o,$(EMU_OBJ)): $(EMU_DIR)/cxx-flags

$(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_KERN_SRC)): $(CUDA_OBJDIR)/%.o: %.cu
	@mkdir -p $(@D)
	@echo "  NVCC    $< ($(CUDA_SM), compute_$(CUDA_PTX))"
	$(Q)$(NVCC) $(NVCC_FLAGS) -c $< -o $@

$(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_HOST_SRC)): $(CUDA_OBJDIR)/%.o: %.cu
	@mkdir -p $(@D)
	@echo "  CXX     $<"
	$(Q)$(CXX) -x c++ $(GPU_CXXFLAGS) -I$(CUDA_HOME)/include -c $< -o $@

# Like the other nvcc-side objects, without $(CFLAGS)' sanitizers: build/cuda/ serves every BUILD.
$(CUDA_OBJDIR)/gpu/plugin_entry.o: gpu/plugin_entry.c
	@mkdir -p $(@D)
	@echo "  CC      $< (cuda)"
	$(Q)$(CC) -std=gnu11 -g $(OPT) -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -MMD -MP -I. -fPIC \
	    -DGPU_BUILD_INFO='"$(CUDA_INFO_TEXT)"' -c $< -o $@

$(EMU_DIR)/%.o: %.cu | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CXX-EMU $<"
	$(Q)$(CXX) -x c++ $(EMU_CXXFLAGS) -c $< -o $@

$(EMU_DIR)/%.o: %.cc | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CXX-EMU $<"
	$(Q)$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

$(EMU_DIR)/gpu/plugin_entry.o: gpu/plugin_entry.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	@echo "  CC      $< (emu)"
	$(Q)$(CC) $(CFLAGS) -fPIC -DGPU_BUILD_INFO='"$(EMU_INFO_TEXT)"' -c $< -o $@

-include $(wildcard $(CUDA_OBJDIR)/gpu/*.d)

# The plugins. Every symbol a plugin leaves undefined must come from a library it links or be one
# the binary exports (host.exports): anything else would only fail when the plugin is opened, so
# the link fails now, naming it.
PLUGIN_CHECK = gpu/plugin_symbols.sh $@ gpu/host.exports || { rm -f $@; exit 1; }

# The nvcc plugin is linked without the sanitizers (its objects never have them), so one file
# serves every BUILD.
$(CUDA_PLUGIN): $(CUDA_OBJ) gpu/plugin.exports gpu/host.exports gpu/plugin_symbols.sh
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) -pthread $(PLUGIN_LDFLAGS) -o $@ $(CUDA_OBJ) $(CUDA_LIBS) $(LDLIBS)
	@$(PLUGIN_CHECK)

$(EMU_PLUGIN): $(EMU_OBJ) gpu/plugin.exports gpu/host.exports gpu/plugin_symbols.sh
	@mkdir -p $(@D)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $(PLUGIN_LDFLAGS) -o $@ $(EMU_OBJ) -lstdc++ $(LDLIBS)
	@$(PLUGIN_CHECK)

$(BUILD)/tokentop-cuda.so: $(CUDA_PLUGIN)
	$(Q)cp $< $@.tmp && mv -f $@.tmp $@

$(BUILD)/tokentop-cuda-emu.so: $(EMU_PLUGIN)
	$(Q)cp $< $@.tmp && mv -f $@.tmp $@

# ---------------------------------------------------------------------------------------------
# Tests
#
# check_gpu_emu: the backend's own source over the emulation, against the CPU engine, linked in
# (the suites call gpu/ functions the plugin table does not carry: per-op launchers, emulation knobs).
$(BUILD)/tests/check_gpu_emu: $(BUILD)/tests/check_gpu_emu.o $(BUILD)/tests/testutil.o $(EMU_OBJ) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/tests/testutil.o $(EMU_OBJ) $(LIB) $(PKG_LIBS) $(CHECK_LIBS) \
	    $(GPU_LIBS) -lstdc++ $(LDLIBS)

.PHONY: test-gpu-emu gpu-nvcc-check
test-gpu-emu: $(BUILD)/tests/check_gpu_emu
	$(BUILD)/tests/check_gpu_emu

# The nvcc build of gpu/ compiles and links, in every mode where nvcc is found: the plugin
# ($(CUDA_OBJDIR)/tokentop-cuda.so, whose link fails on a symbol nothing provides) and
# check_gpu_cuda, linked with the nvcc objects: on a device it runs the shared cases there; without
# one it checks the fallback; it asserts the build string this build gives the objects.
# Each requested architecture has machine code in the objects: every SASS image records the ptxas
# options it was built with ("-arch sm_XX").
GPU_ARCH_CHECK = for o in $(patsubst %.cu,$(CUDA_OBJDIR)/%.o,$(GPU_KERN_SRC)); do for a in $(CUDA_SM); do \
	  strings $$o | grep -q -- "-arch $$a " || { echo "gpu: $$o has no code for $$a"; exit 1; }; done; done

ifneq ($(NVCC),)
$(BUILD)/tests/check_gpu_cuda.o: override CFLAGS += -DGPU_EXPECT_BUILD_INFO='"$(CUDA_INFO_TEXT)"'
$(BUILD)/tests/check_gpu_cuda.o: $(CUDA_OBJDIR)/nvcc-flags

$(BUILD)/tests/check_gpu_cuda: $(BUILD)/tests/check_gpu_cuda.o $(BUILD)/tests/testutil.o $(CUDA_OBJ) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/tests/testutil.o $(CUDA_OBJ) $(LIB) $(PKG_LIBS) $(CHECK_LIBS) \
	    $(CUDA_LIBS) $(GPU_LIBS) $(LDLIBS)

gpu-nvcc-check: $(CUDA_PLUGIN) $(BUILD)/tests/check_gpu_cuda
	@$(GPU_ARCH_CHECK)
	@echo "gpu: nvcc build of gpu/ ($(CUDA_SM)) compiled and linked: $(CUDA_PLUGIN), check_gpu_cuda"
else
TESTS := $(filter-out $(BUILD)/tests/check_gpu_cuda,$(TESTS))
gpu-nvcc-check:
	@echo "gpu: nvcc not found: skipping check_gpu_cuda and the check that the CUDA build of gpu/ compiles and links"
endif

# The emulated plugin: tests/e2e/gpu_backend.sh opens it in the real binary through
# TOKENTOP_GPU_PLUGIN and runs `--backend cuda` end to end without a GPU.
GPU_TEST_DEPS += gpu-nvcc-check $(EMU_PLUGIN) $(GPU_PLUGIN) gpu-plugin-stale

# cuda-bench: the backend's own benchmark (gpu/cuda_bench.c), linked with the nvcc objects; the
# emulated twin lets tests/e2e/gpu_backend.sh check that it runs.
GPU_BENCH := $(BUILD)/gpu/cuda-bench
$(GPU_BENCH): $(BUILD)/gpu/cuda_bench.o $(CUDA_OBJ) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(CUDA_OBJ) $(LIB) $(PKG_LIBS) $(CUDA_LIBS) $(GPU_LIBS) $(LDLIBS)

$(EMU_DIR)/cuda-bench-emu: $(BUILD)/gpu/cuda_bench.o $(EMU_OBJ) $(LIB)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(EMU_OBJ) $(LIB) $(PKG_LIBS) $(GPU_LIBS) -lstdc++ $(LDLIBS)

.PHONY: gpu-bench
gpu-bench: $(GPU_BENCH)
	$(GPU_BENCH) $(GPU_BENCH_ARGS)

GPU_TEST_DEPS += $(EMU_DIR)/cuda-bench-emu $(if $(NVCC),$(GPU_BENCH))

# make gpu-check: for whoever has an NVIDIA GPU, one command (gpu/gpu_check.sh, under 8 minutes):
# the plugin built for the device present, check_gpu_cuda run on it, the GPU's greedy tokens and
# top probabilities against the CPU's (GPT-2 and Llama-family models), the GPU bench at GPT-2-XL
# and Llama-3.2-1B shapes, one summary. Without a device it says so and fails at once.
.PHONY: gpu-check
gpu-check:
	@MAKE="$(MAKE)" BUILD="$(BUILD)" NVCC="$(NVCC)" gpu/gpu_check.sh
