# dtsim — the two commands a newcomer runs (both install missing Debian packages first):
#   make demo   build and run the built-in scenario scenarios/quickstart.json
#   make test   build and run the whole test suite (release, then the sanitizer suite)
# .ci/run calls `make test`.

JOBS ?= $(shell nproc)
SANITIZE_TESTS := engine_test trace_writer_test network_model_test emulated_comm_test kernels_test kernels_compressor_test kernels_aggregation_test

.PHONY: demo test deps build build-debug test-release test-sanitize bench clean

demo: build
	./build/release/dtsim run scenarios/quickstart.json

test: test-release test-sanitize

deps:
	./scripts/install-deps.sh

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

build-debug: deps
	cmake --preset debug
	cmake --build --preset debug -j $(JOBS) --target $(SANITIZE_TESTS)

test-release: build
	ctest --preset release -j $(JOBS)

# Engine, trace, network, comm and kernel tests under AddressSanitizer + UBSan (the
# algorithms are covered by the release suite; the debug preset skips CUDA, which the
# release build compile-checks).
test-sanitize: build-debug
	ctest --preset debug -j $(JOBS)

bench: build
	./build/release/bench/dtsim_bench --benchmark_out=build/release/bench.json --benchmark_out_format=json

clean:
	rm -rf build
