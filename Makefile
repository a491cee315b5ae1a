# dtsim — the two commands a newcomer runs (both install missing Debian packages first):
#   make demo   build and run the built-in scenario scenarios/quickstart.json
#   make test   build and run the whole test suite: every test in the release build, the
#               kernels again on each ISA path, the LibTorch-free suites under the sanitizers
# .ci/run calls `make test`. `make test-full` adds the passes that are too slow for CI's
# 20-minute budget on 2 cores: the scenario, sweep and README tests on the oldest x86-64
# kernels (run it before committing a golden or a tolerance: README, "What is the same on
# every machine") and every sanitize- or fuzz-labelled suite under the sanitizers.
# `make test-torch2` builds and tests against PyTorch 2.x's LibTorch instead (PyPI's torch
# wheel in .venv-torch2/, build/torch2: scripts/torch2.sh).

JOBS ?= $(shell nproc)

.PHONY: demo test test-full test-torch2 deps build build-debug test-release test-isa test-other-cpu test-sanitize test-sanitize-full bench clean

# The demo builds the dtsim binary only (about a third of the targets); `make test` builds the rest.
demo: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS) --target dtsim
	./build/release/dtsim run scenarios/quickstart.json

test: test-release test-isa test-sanitize

test-full: test-release test-isa test-other-cpu test-sanitize-full

deps:
	./scripts/install-deps.sh

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

build-debug: deps
	cmake --preset debug

test-release: build
	ctest --preset release -j $(JOBS)

# The kernels pick AVX2/AVX-512 paths at run time; check the portable ones give the same bits.
test-isa: build
	DTSIM_KERNELS_ISA=baseline ctest --preset release -j $(JOBS) -L kernels
	DTSIM_KERNELS_ISA=avx2 ctest --preset release -j $(JOBS) -L kernels

# Another CPU (README, "What is the same on every machine"): the scenario, sweep (the
# regression goldens) and README tests again with OpenBLAS's and ATen's oldest x86-64
# kernels, so that a floating-point expectation that holds on this CPU only fails here.
# Left out: the suites that compute no floating-point results (resource limits, the
# progress line, exit codes and help texts). CTest's tests are GoogleTest suites.
test-other-cpu: build
	OPENBLAS_CORETYPE=Prescott ATEN_CPU_CAPABILITY=default ctest --preset release -j $(JOBS) -L 'runner|sweep|docs' \
	  -E '^(ResourceLimits|Progress|ScenarioCli|SweepCli)$$'

# The engine, trace writer and network model suites under AddressSanitizer + UBSan (the
# sanitize suites without LibTorch; the debug preset skips CUDA, which the release build
# compile-checks).
test-sanitize: build-debug
	cmake --build --preset debug -j $(JOBS) --target dtsim_sanitize_torchfree_tests
	ctest --preset debug-torchfree -j $(JOBS)

# Every sanitize-labelled suite (kernels, emulated comm) and the fuzzed readers under the
# sanitizers: builds most of dtsim a second time.
test-sanitize-full: build-debug
	cmake --build --preset debug -j $(JOBS) --target dtsim_sanitize_tests dtsim_fuzz_tests
	ctest --preset debug -j $(JOBS)
	ctest --preset debug-fuzz -j $(JOBS)

# The second configuration: PyTorch 2.x's LibTorch from PyPI's torch wheel (the GPU
# machines' LibTorch) in .venv-torch2/, built in build/torch2 with the CUDA sources, its
# whole suite run on the CPU (scripts/torch2.sh; bench/results/torch2.md).
test-torch2:
	./scripts/install-deps.sh --with-venv
	TORCH2_JOBS=$(JOBS) ./scripts/torch2.sh

bench: build
	./build/release/bench/dtsim_bench --benchmark_out=build/release/bench.json --benchmark_out_format=json

clean:
	rm -rf build

# CI performance gate (bench/README.md): a few benchmarks, each as a ratio to a reference
# measured in the same run, and the simulated figures of reference scenarios, against
# bench/baselines/. `make baselines` refreshes both (commit the result deliberately).
REGRESS_BENCH := ^BM_(Engine|BaselineHeap)/1024$$|^BM_Engine/65536$$|^BM_EmulatedAllReduce/8/4096$$
REGRESS_KERNELS := ^BM_(TopK|Sign|Qsgd|Fp16|Average4)/262144/1/
REGRESS_OUT := build/release/regress
.PHONY: regress baselines regress-run

regress-run: build
	mkdir -p $(REGRESS_OUT)
	./build/release/bench/dtsim_bench --benchmark_filter='$(REGRESS_BENCH)' --benchmark_repetitions=3 \
	  --benchmark_out=$(REGRESS_OUT)/bench.json --benchmark_out_format=json
	./build/release/bench/dtsim_kernels_bench --benchmark_filter='$(REGRESS_KERNELS)' --benchmark_repetitions=3 \
	  --benchmark_out=$(REGRESS_OUT)/kernels.json --benchmark_out_format=json

regress: regress-run
	./build/release/bench/dtsim_regress benchmarks --baseline bench/baselines/benchmarks.json \
	  $(REGRESS_OUT)/bench.json $(REGRESS_OUT)/kernels.json
	./build/release/bench/dtsim_regress simulated --baseline bench/baselines/simulated.json

baselines: regress-run
	./build/release/bench/dtsim_regress benchmarks --update --baseline bench/baselines/benchmarks.json \
	  $(REGRESS_OUT)/bench.json $(REGRESS_OUT)/kernels.json
	./build/release/bench/dtsim_regress simulated --update --baseline bench/baselines/simulated.json
