# ringio's two set-up commands on a fresh machine: `make test` and `make bench`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
export PYO3_PYTHON := $(abspath $(PY))

.PHONY: test bench lint docs venv install bench-deps sanitize miri clean fmt test-ecosystem
.PHONY: wheel sdist wheel-cross test-py test-versions smoke-versions ci-versions bench-py

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Rebuilds the Rust core whenever a source file is newer than the last install.
$(STAMP): $(PY) pyproject.toml Cargo.toml $(shell find src -name '*.rs')
	$(PIP) install -q -e '.[test,lint]'
	touch $(STAMP)

install: $(STAMP)

test: install
	cargo test --quiet
	$(PY) -m pytest -q

# anyio's and uvicorn's own test suites on ringio's loop (not part of `make test`:
# it installs their test dependencies from PyPI, pinned in
# tools/ecosystem/requirements.txt, and downloads their sdists, which carry the
# tests, into build/ecosystem/). Results and each failure: docs/ecosystem.md.
test-ecosystem: install
	$(PIP) install -q -r tools/ecosystem/requirements.txt
	$(PY) tools/ecosystem/run.py

lint: install
	cargo fmt --check
	cargo clippy --quiet --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests bench examples tools

fmt:
	cargo fmt
	$(VENV)/bin/ruff check --fix python tests bench examples tools
	$(VENV)/bin/ruff format python tests bench examples tools

# Peers the benchmarks compare against: Python packages from the `bench` extra,
# Debian packages for libaio, fio and wrk (the HTTP load generator). The pip step is stamped so that `make bench`
# does not rebuild the Rust core when nothing changed.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PIP) install -q -e '.[test,lint,bench]'
	touch $(BENCH_STAMP)

bench-deps: $(BENCH_STAMP)
	@if ! command -v fio >/dev/null || ! command -v wrk >/dev/null || ! ldconfig -p | grep -q libaio.so.1; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio wrk libaio1 >/dev/null) \
		|| (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio wrk libaio1t64 >/dev/null) \
		|| echo "bench: could not install fio/wrk/libaio1; those peers will be skipped"; \
	fi
	@# gaio's Go program: Debian's Go where none is installed; GOTOOLCHAIN=auto then
	@# fetches the go.mod's toolchain through the Go module proxy (Go >= 1.21).
	@command -v go >/dev/null || (apt-get update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null) \
		|| echo "bench: no Go toolchain; the gaio peer will be skipped"
	@GOTOOLCHAIN=auto $(MAKE) --no-print-directory bench-peers

# The quick suite (a few minutes); `$(PY) -m ringio bench all` is the full one.
bench: bench-deps
	$(PY) -m ringio bench all --quick

# The core suites, and the files' reads served without a coroutine (the native
# Ready awaitable), under valgrind memcheck (AddressSanitizer for a
# Rust cdylib inside an uninstrumented CPython needs an ASan runtime preloaded into
# python, which the Rust toolchain does not ship for cdylibs), then `make miri`.
# Any memcheck report fails the run.
# valgrind runs one thread at a time, and 3.19 keeps its lock while a thread
# blocks in io_submit or in io_uring_enter's wait (seen 2026-11-25: one thread in
# io_cqring_wait, every other waiting for valgrind's lock, no progress for 20
# minutes). Tests that need another thread to run meanwhile would deadlock under
# it and are left out: tests/aio/test_threads.py, and the tests where a pool
# thread (the thread engine's, or the aio engine's for opens) must run while
# ringio's loop waits in io_uring_enter: the loops of several threads
# (tests/engines/test_engine_threads.py), a file used from another loop or thread
# (tests/engines/test_other_loop.py), the thread engine on ringio's loop, and a
# loop run in another thread that `run_coroutine_threadsafe` hands a result to.
SANITIZE_TESTS ?= tests/aio tests/uring tests/engines tests/files/test_inline_reads.py \
	tests/files/test_native_pread.py tests/files/test_ready_future.py \
	tests/loop/test_native_calls.py tests/loop/test_loop_state.py
SANITIZE_SKIP ?= --ignore=tests/aio/test_threads.py \
	--ignore=tests/engines/test_engine_threads.py \
	--ignore=tests/engines/test_other_loop.py -k "not thread-ringio" \
	--deselect "tests/uring/test_ring.py::test_get_events_releases_the_gil" \
	--deselect "tests/files/test_ready_future.py::test_run_coroutine_threadsafe_takes_a_ready"
sanitize: install miri
	@command -v valgrind >/dev/null || (apt-get update -qq && apt-get install -y -qq valgrind >/dev/null)
	PYTHONMALLOC=malloc valgrind --tool=memcheck --error-exitcode=99 --leak-check=no \
		--suppressions=tools/valgrind-python.supp -q \
		$(PY) -m pytest -q -p no:cacheprovider -o timeout=300 -o timeout_method=thread \
		$(SANITIZE_SKIP) $(SANITIZE_TESTS)

# Miri on the Rust unit tests: the pure-Rust unsafe code (aligned allocations, the
# provided-buffer ring's entries and release-published tail,
# sockaddr casts, the statx buffer, the iocb layout). Tests that call the kernel are
# marked `cfg_attr(miri, ignore)`: Miri cannot run io_uring or AIO syscalls.
miri:
	@rustup +nightly component list --installed 2>/dev/null | grep -q '^miri' \
		|| rustup component add miri rust-src --toolchain nightly
	cargo +nightly miri test --lib

docs: install
	$(PIP) install -q -e '.[docs]'
	$(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) .venvs target site dist build

# ---------------------------------------------------------------- wheels, versions
# `make wheel`: one wheel per CPython version (WHEEL_VERSIONS) for x86_64, linked by
# zig against glibc 2.17 so that they are manylinux2014 (maturin --zig, the `ziglang`
# package from PyPI), each checked by `auditwheel show`; `make sdist`: the source
# archive. With --target, maturin builds for a version that is not installed here
# from the interpreter's configuration it ships. docs/versions.md says why not one
# abi3 wheel, and how each version is tested.
WHEEL_VERSIONS ?= 3.11 3.12 3.13 3.14
WHEEL_TARGET := x86_64-unknown-linux-gnu
WHEEL_TOOLS := $(VENV)/.wheel-tools
WHEEL_STAMP := dist/.wheel-built
$(WHEEL_TOOLS): $(PY)
	$(PIP) install -q 'maturin>=1.16,<2' ziglang auditwheel
	touch $(WHEEL_TOOLS)

$(WHEEL_STAMP): $(WHEEL_TOOLS) pyproject.toml Cargo.toml Cargo.lock LICENSE-MIT LICENSE-APACHE \
		$(shell find src python -name '*.rs' -o -name '*.py' -o -name '*.pyi')
	rm -f dist/ringio-*-cp3*-*x86_64*.whl
	PATH=$(abspath $(VENV))/bin:$$PATH CARGO_TARGET_DIR=target/wheel \
		$(VENV)/bin/maturin build --quiet --release --zig --compatibility manylinux2014 \
		--target $(WHEEL_TARGET) $(addprefix -i python,$(WHEEL_VERSIONS)) --out dist
	@set -e; for w in dist/ringio-*-cp3*-*x86_64*.whl; do $(VENV)/bin/auditwheel show $$w; done
	touch $(WHEEL_STAMP)

wheel: $(WHEEL_STAMP)

sdist: $(WHEEL_TOOLS)
	$(VENV)/bin/maturin sdist --out dist

# Cross-compiled wheels into dist/cross (zig links them; rustup adds the targets):
# aarch64 manylinux2014, x86_64 and aarch64 musllinux_1_2. Built and checked (tag,
# libraries), not run: no aarch64 or musl CPython on this machine.
CROSS_WHEELS ?= aarch64-unknown-linux-gnu:manylinux2014 \
	x86_64-unknown-linux-musl:musllinux_1_2 aarch64-unknown-linux-musl:musllinux_1_2
wheel-cross: $(WHEEL_TOOLS)
	@set -e; for spec in $(CROSS_WHEELS); do \
		target=$${spec%%:*}; tag=$${spec#*:}; \
		rustup target list --installed | grep -qx $$target || rustup target add $$target; \
		PATH=$(abspath $(VENV))/bin:$$PATH CARGO_TARGET_DIR=target/wheel \
			$(VENV)/bin/maturin build --quiet --release --zig --target $$target \
			--compatibility $$tag $(addprefix -i python,$(WHEEL_VERSIONS)) --out dist/cross; \
	done
	@# auditwheel analyses manylinux wheels here; a musllinux one it cannot on a glibc
	@# host (it looks for musl's libc.so among the host's): its NEEDED list instead.
	@for w in dist/cross/*manylinux*.whl; do $(VENV)/bin/auditwheel show $$w; done
	@for w in dist/cross/*musllinux*.whl; do \
		echo "$$w:"; unzip -p $$w 'ringio/_core.*.so' > dist/cross/.so; \
		readelf -d dist/cross/.so | grep NEEDED; rm -f dist/cross/.so; \
	done

# `make test-py VERSION=3.13`: the wheel in a venv of that CPython (.venvs/VERSION;
# pyenv's, else pythonVERSION on PATH, else for 3.13/3.14 a Debian sid chroot under
# SID_CHROOT, made once), the whole suite there, CPython's own test_asyncio of that
# version on ringio's loop included. TESTS= narrows it (pytest arguments).
# `make test-versions`: the wheel's smoke program in a fresh venv, then the suite,
# on each of VERSIONS.
VERSIONS ?= 3.11 3.12 3.13 3.14
SID_CHROOT ?= /var/tmp/ringio-sid
export SID_CHROOT
TESTS ?=
test-py: wheel
	@test -n "$(VERSION)" || (echo "make test-py VERSION=3.12|3.13|3.14" && false)
	tools/test-py.sh $(VERSION) --smoke
	tools/test-py.sh $(VERSION) $(TESTS)

test-versions: wheel
	@set -e; for v in $(VERSIONS); do $(MAKE) --no-print-directory test-py VERSION=$$v; done

smoke-versions: wheel
	@set -e; for v in $(VERSIONS); do tools/test-py.sh $$v --smoke; done

# `make bench-py VERSION=3.14 BENCH="http --quick"`: `python -m ringio bench BENCH`
# in that version's venv (as test-py makes it), with the `bench` extra's peers that
# have wheels for it (on 3.14 also zuvloop and rsloop). Results in bench/results/.
BENCH ?= all --quick
bench-py: wheel
	@test -n "$(VERSION)" || (echo "make bench-py VERSION=3.12|3.13|3.14 [BENCH=...]" && false)
	tools/test-py.sh $(VERSION) --bench $(BENCH)

# What CI runs besides `make test`, within its 90 minutes (docs/versions.md): on
# each other version, the smoke program (a start_server echo) and the loop, files,
# engines and Watcher suites, CPython's own test_asyncio of that version on ringio's loop
# included (tests/loop).
CI_VERSIONS ?= 3.12 3.13 3.14
CI_VERSION_TESTS ?= tests/loop tests/files tests/engines tests/watcher
ci-versions: wheel
	@set -e; for v in $(CI_VERSIONS); do \
		tools/test-py.sh $$v --smoke; \
		tools/test-py.sh $$v $(CI_VERSION_TESTS); \
	done

# Networking benchmark peers (gaio echo benchmarks in Go, closed-loop echo client in C),
# built into bench/build/. Each is skipped with a note when its toolchain is missing.
BENCH_BUILD := bench/build
.PHONY: bench-peers
bench-peers:
	@mkdir -p $(BENCH_BUILD)
	@if command -v go >/dev/null; then \
		(cd bench/peers/gaio && go build -o ../../build/gaiobench .) && echo "built $(BENCH_BUILD)/gaiobench"; \
	else echo "bench-peers: go not found; gaio peer skipped"; fi
	@if command -v gcc >/dev/null; then \
		gcc -O2 -Wall -Wextra -o $(BENCH_BUILD)/echoclient bench/client/echoclient.c -pthread \
		&& echo "built $(BENCH_BUILD)/echoclient"; \
	else echo "bench-peers: gcc not found; C echo client skipped"; fi
