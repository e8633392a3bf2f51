# qtransit: the two commands.
#   make run   install what is missing, build (Release), run the default job, write a report
#   make test  install what is missing, build Release and ASan+UBSan (clang, with the fuzz targets), run
#              the whole test suite and the fuzz targets (30 s each, JOBS at once)
# Both work alone on a fresh Debian 12 machine as root.
SHELL := /bin/bash
.DEFAULT_GOAL := help
JOBS ?= $(shell nproc)
REPORT_DIR ?= qtransit-report

# Debian packages the build and tests need. The CUDA toolkit is optional (QTRANSIT_CUDA=AUTO):
# it is not a Debian package here; when /usr/local/cuda is present the CUDA backend is built too.
# Open MPI: the mpi backend (qtransit simulate --backend mpi under mpirun) and its tests.
# python3: the interpreter the mpi and report tests run (CMake pins Debian's /usr/bin/python3).
# The test `deps_installed` (scripts/check-deps) fails when the build finds a package, or a test runs
# a program, that these lists do not install.
# python3-dev, python3-venv, python3-pip: `pip install .` (the Python package: pyproject.toml) builds
# its native module against the headers, in a virtual environment (Debian's python3 takes no
# system-wide pip installs). python3-numpy: it installs into /usr/include/python3.11, the headers
# directory the build compiles against, so the dependency audit counts it a build package (and the
# numpy emulation tests, make test's, use it too).
PACKAGES := g++ cmake ninja-build libgtest-dev libgmock-dev librapidcheck-dev libboost-dev libeigen3-dev \
            libbenchmark-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libmimalloc-dev \
            openmpi-bin libopenmpi-dev python3 python3-dev python3-venv python3-pip python3-numpy chromium
# chromium: the Release build looks for it (find_program in properties/CMakeLists.txt: it renders
# report.html in report_render_test), so `make run`'s build installs it too, and finds the same.
# What only `make test` needs: clang and its runtime (libFuzzer, the sanitizers) build the sanitizer
# build (tests and the fuzz targets of properties/fuzz: one build, docs/DECISIONS.md D42). ccache: the
# GPU bundle's build (test gpu_pack_bundle) takes the Release build's objects from its cache
# (scripts/compile-cache); without it every build still works, compiling everything itself.
TEST_PACKAGES := clang libclang-rt-14-dev ccache

.PHONY: help deps deps-test print-packages build build-asan run test python-test fuzz outside nightly bench clean

help:
	@echo "make run    build and run the default job (qtransit check: the numerics gate), reports in $(REPORT_DIR)/"
	@echo "make test   build (Release and ASan+UBSan) and run the whole test suite"
	@echo "make bench  encode/decode throughput against memcpy"
	@echo "make python-test  pip install . into $(VENV) and run the Python tests and examples (pytest)"
	@echo "make fuzz   build the libFuzzer targets (clang) and run each for FUZZ_TIME seconds (default 30)"
	@echo "make nightly  the nightly tier: what the default gate leaves out to stay within 60 s (every integer width, every 16-bit and NCCL FP8 path; gate/nightly_gate.toml) and the rotation gate, reports in $(NIGHTLY_DIR)/ (not in make test: 1.5 to 2 minutes)"
	@echo "make outside  third-party quantizers from PyPI (torchao MX, NVFP4 and float8, torch float8, ml_dtypes, bitsandbytes NF4; FBGEMM's HFP8, INT8 row-wise and MX4 in a second environment) under check_codec with their conventions declared, report in build/outside-report/ (not in make test: two torch downloads of about 4.6 GB each)"

# One line before any build: what was installed, or that nothing was missing. apt's own output goes to
# build/deps.log (its tail is printed when apt fails).
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "make deps: nothing missing ($(words $(1)) Debian packages already installed)"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root, or install:$$missing" >&2; exit 2; fi; \
	mkdir -p build; \
	if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing) >build/deps.log 2>&1; then \
	  echo "make deps: installed$$missing"; \
	else tail -n 20 build/deps.log >&2; echo "make deps: apt-get could not install$$missing (log: build/deps.log)" >&2; exit 2; fi
endef

deps:
	$(call install_missing,$(PACKAGES))

deps-test:
	$(call install_missing,$(PACKAGES) $(TEST_PACKAGES))

# The lists, for scripts/check-deps (the test that nothing the build uses is installed by hand only).
print-packages:
	@echo $(PACKAGES) $(TEST_PACKAGES)

BUILD_RELEASE = cmake --preset release && cmake --build --preset release -j $(JOBS)
BUILD_ASAN = cmake --preset asan && cmake --build --preset asan -j $(JOBS)
BUILD_FUZZ = cmake --preset asan && cmake --build --preset fuzz -j $(JOBS)
FUZZ_TIME ?= 30
# The Python package (issue 21): a virtual environment in build/venv with the build and test
# requirements from PyPI, `pip install .` in it (without build isolation, so that the native build
# kept in build/python-<tag>/ stays valid from one run to the next), then pytest over python/tests and
# examples/python next to the Release command (the tests compare its JSON with Python's). CXX=c++
# (CC=cc) unless set: the compiler CMake picks for build/release, so that the compile cache serves
# the Release build's objects (pyproject.toml) instead of pip's choice, Python's own g++ name.
VENV ?= build/venv
PYTHON_TEST = { [ -x $(VENV)/bin/python ] || /usr/bin/python3 -m venv $(VENV); } && \
	$(VENV)/bin/pip install -q --disable-pip-version-check -r python/requirements-test.txt && \
	CXX="$${CXX:-c++}" CC="$${CC:-cc}" CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(VENV)/bin/pip install -q --disable-pip-version-check --no-build-isolation . && \
	cd build && QTRANSIT_CLI=$(CURDIR)/build/release/cli/qtransit $(abspath $(VENV))/bin/python -m pytest -q -p no:cacheprovider \
	  ../python/tests ../examples/python

build: deps
	$(BUILD_RELEASE)

build-asan: deps-test
	$(BUILD_ASAN)

# The default job is the numerics gate (`qtransit check` with its embedded default config: every
# format, every path, N = 8, 64, 384, four distributions); its reports land in $(REPORT_DIR)/.
# It exits 1 when a verdict fails, and `make run` with it.
run: build
	./build/release/cli/qtransit info
	./build/release/cli/qtransit check --report-dir $(REPORT_DIR)
	@echo "open $(REPORT_DIR)/report.html (summary: $(REPORT_DIR)/report.md)"

test: deps-test
	$(BUILD_RELEASE)
	$(BUILD_ASAN)
	ctest --preset release -j $(JOBS)
	ctest --preset asan -j $(JOBS)
	$(PYTHON_TEST)
	scripts/run-fuzzers --time $(FUZZ_TIME) --jobs $(JOBS)

# The libFuzzer targets alone (the sanitizer build's fuzz targets only), each for FUZZ_TIME seconds.
fuzz: deps-test
	$(BUILD_FUZZ)
	scripts/run-fuzzers --time $(FUZZ_TIME) --jobs $(JOBS)

python-test: deps-test
	$(BUILD_RELEASE)
	$(PYTHON_TEST)

# The nightly tier (D48): the default gate stays within 60 s on a 2-core machine (issue 49) by leaving
# out what gate/nightly_gate.toml runs (int3, int5-int7 and their asym, the all-reduce rings, fp16's
# tree, NCCL's e5m2 and its ncclAvg all-reduces, DeepEP's other scale rules); then the rotation gate.
# Not in make test: run nightly and before each release, its figures in bench/RESULTS.md. Exit 1 when
# a verdict fails, as make run.
NIGHTLY_DIR ?= build/nightly-report
nightly: build
	./build/release/cli/qtransit check --config gate/nightly_gate.toml --report-dir $(NIGHTLY_DIR)/nightly
	./build/release/cli/qtransit check --config gate/rotation_gate.toml --report-dir $(NIGHTLY_DIR)/rotation

# The outside tier (issue 52): real third-party quantizers from PyPI checked by qtransit in virtual
# environments of their own, the package built beside make test's: torchao, torch, ml_dtypes and
# bitsandbytes (examples/third_party/requirements.txt) in $(OUTSIDE_VENV) (build/outside-python),
# report in build/outside-report/; FBGEMM's CPU codecs (requirements-fbgemm.txt: fbgemm-gpu-cpu loads
# only with the torch release it was built against) in $(OUTSIDE_FBGEMM_VENV) (build/outside-fbgemm-python),
# report in build/outside-report/fbgemm/. Not part of make test: run before each release and record
# the result in bench/RESULTS.md; a FAIL there is a finding (docs/FINDINGS.md), exit 2 only when an
# adapter cannot run.
OUTSIDE_VENV ?= build/outside-venv
OUTSIDE_FBGEMM_VENV ?= build/outside-fbgemm-venv
outside: deps-test
	$(BUILD_RELEASE)
	{ [ -x $(OUTSIDE_VENV)/bin/python ] || /usr/bin/python3 -m venv $(OUTSIDE_VENV); } && \
	$(OUTSIDE_VENV)/bin/pip install -q --disable-pip-version-check -r python/requirements-test.txt -r examples/third_party/requirements.txt && \
	CXX="$${CXX:-c++}" CC="$${CC:-cc}" CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(OUTSIDE_VENV)/bin/pip install -q --disable-pip-version-check --no-build-isolation \
	  --config-settings build-dir=build/outside-python . && \
	$(OUTSIDE_VENV)/bin/python examples/third_party/run_outside.py build/outside-report torch && \
	{ [ -x $(OUTSIDE_FBGEMM_VENV)/bin/python ] || /usr/bin/python3 -m venv $(OUTSIDE_FBGEMM_VENV); } && \
	$(OUTSIDE_FBGEMM_VENV)/bin/pip install -q --disable-pip-version-check -r python/requirements-test.txt -r examples/third_party/requirements-fbgemm.txt && \
	CXX="$${CXX:-c++}" CC="$${CC:-cc}" CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(OUTSIDE_FBGEMM_VENV)/bin/pip install -q --disable-pip-version-check --no-build-isolation \
	  --config-settings build-dir=build/outside-fbgemm-python . && \
	$(OUTSIDE_FBGEMM_VENV)/bin/python examples/third_party/run_outside.py build/outside-report/fbgemm fbgemm

bench: build
	./build/release/cli/qtransit bench
	./build/release/bench/codec_bench --benchmark_min_time=0.2

clean:
	rm -rf build $(REPORT_DIR)
