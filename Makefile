# qtransit: the two commands.
#   make run   install what is missing, build (Release), run the default job, write a report
#   make test  install what is missing, build Release and ASan+UBSan, run the whole test suite
# Both work alone on a fresh Debian 12 machine as root.
SHELL := /bin/bash
.DEFAULT_GOAL := help
JOBS ?= $(shell nproc)
REPORT_DIR ?= qtransit-report

# Debian packages the build and tests need. The CUDA toolkit is optional (QTRANSIT_CUDA=AUTO):
# it is not a Debian package here; when /usr/local/cuda is present the CUDA backend is built too.
# Open MPI: the mpi backend (qtransit simulate --backend mpi under mpirun) and its tests.
PACKAGES := g++ cmake ninja-build libgtest-dev libgmock-dev librapidcheck-dev libboost-dev \
            libbenchmark-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev \
            openmpi-bin libopenmpi-dev

.PHONY: help deps build build-asan run test bench clean

help:
	@echo "make run    build and run the default job (qtransit check: the numerics gate), reports in $(REPORT_DIR)/"
	@echo "make test   build (Release and ASan+UBSan) and run the whole test suite"
	@echo "make bench  encode/decode throughput against memcpy"

deps:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "make deps: run as root, or install:$$missing" >&2; exit 2; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

build-asan: deps
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)

# The default job is the numerics gate (`qtransit check` with its embedded default config: every
# format, every path, N = 8, 64, 384, four distributions); its reports land in $(REPORT_DIR)/.
# It exits 1 when a verdict fails, and `make run` with it.
run: build
	./build/release/cli/qtransit info
	./build/release/cli/qtransit check --report-dir $(REPORT_DIR)
	@echo "open $(REPORT_DIR)/report.html (summary: $(REPORT_DIR)/report.md)"

test: build build-asan
	ctest --preset release -j $(JOBS)
	ctest --preset asan -j $(JOBS)

bench: build
	./build/release/cli/qtransit bench
	./build/release/bench/codec_bench --benchmark_min_time=0.2

clean:
	rm -rf build $(REPORT_DIR)
