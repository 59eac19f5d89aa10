# Top-level entry points (contract: build, test, demo). Each target first installs what is
# missing, then configures and builds with CMake + Ninja.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test test-gpu demo clean fuzz-build fuzz-smoke fuzz-long

all: build

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir $(CMAKE_FLAGS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# `make test` leaves out the tests labelled gpu; `make test-gpu` runs only
# those: it builds every GPU test program, then runs them where nvidia-smi
# finds a GPU (else ctest reports the run skipped). Where clang is present,
# `make test` also fuzzes the importer: TEST_FUZZ_RUNS executions (30000; 0
# skips it) from a fixed seed, so that a run is repeatable.
TEST_FUZZ_RUNS ?= 30000
FUZZ_BUILD_DIR ?= build-fuzz
test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -LE gpu
	@if [ "$(TEST_FUZZ_RUNS)" != 0 ] && command -v clang >/dev/null 2>&1; then \
	  FUZZ_SMOKE_RUNS=$(TEST_FUZZ_RUNS) FUZZ_SEED=1 scripts/fuzz.sh smoke $(FUZZ_BUILD_DIR); \
	else echo "test: importer fuzzing skipped (no clang, or TEST_FUZZ_RUNS=0)"; fi

test-gpu: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L gpu
	@nvidia-smi -L 2>/dev/null | grep -q '^GPU' || echo "test-gpu: no GPU here (nvidia-smi -L \
	lists none): the run half was skipped; copy $(BUILD_DIR)/test/gpu-tests to a GPU machine \
	and run its run.sh there"

demo: build
	scripts/demo.sh $(BUILD_DIR)

# The importer's fuzz target (libFuzzer + ASan, clang, its own build directory; see
# scripts/fuzz.sh): fuzz-smoke fuzzes for FUZZ_SECONDS (30) from the test models,
# fuzz-long for FUZZ_RUNS executions (1000000), keeping its corpus.
fuzz-build:
	scripts/fuzz.sh build $(FUZZ_BUILD_DIR)
fuzz-smoke:
	scripts/fuzz.sh smoke $(FUZZ_BUILD_DIR)
fuzz-long:
	scripts/fuzz.sh long $(FUZZ_BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_BUILD_DIR)
