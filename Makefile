# edgeq — build, test, cross-compile. `make help` lists the targets.
GO        ?= go
PKG       := ./cmd/edgeq
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BUILDDATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILDDATE)
FUZZTIME  ?= 30000x
export CGO_ENABLED = 0
# Tools the tests run (the nats CLI) are installed with go install.
export PATH := $(shell $(GO) env GOPATH)/bin:$(PATH)

.PHONY: help build run test test-deps unit e2e unit-fuzz fuzz lint cross bench bench-peers bench-light package firmware-test systemd-test clean powercut soak wamp mem

help:
	@echo "make build   build bin/edgeq for this machine"
	@echo "make run     build and run a node on embedded defaults"
	@echo "make test    install what the tests need (apt-get, as root), lint, race tests, short fuzz runs"
	@echo "make unit    race tests of every package but e2e; make e2e  the e2e package (two processes side by side)"
	@echo "make cross   static stripped linux/arm64 and linux/arm (v7) binaries in bin/"
	@echo "make bench   benchmarks (figures for the issue notes)"
	@echo "make bench-peers  edgeq against JetStream, core NATS and raw tidwall/wal, side by side (not in CI)"
	@echo "make bench-light  1,000 msg/s: CPU, bytes written, fsyncs, latency; edgeq against the newest nats-server (not in CI)"
	@echo "make lint    gofmt and go vet"
	@echo "make systemd-test  the amd64 .deb installed in a chroot, booted under systemd (root; scripts/systemd-test.sh)"
	@echo "make powercut ROUNDS=N [SEED=S]  the power-cut series (FUSE, root) with N rounds"
	@echo "make soak SOAK=1h RATE=2000  a node under steady load; fails on growth or loss (CI: SOAK=2m)"
	@echo "make wamp WAMP=20s  write amplification: bytes written per payload byte (not in CI)"
	@echo "make mem    peak RSS with 32 lagging queue groups, and draining 200k (not in CI)"

build:
	$(GO) build -trimpath -ldflags='$(LDFLAGS)' -o $(BIN)/edgeq $(PKG)

run: build
	./$(BIN)/edgeq run

# The e2e package (mostly waiting on real clients, timeouts and restarts)
# runs beside the other packages' race tests and then the short fuzz runs.
test: test-deps lint
	@$(MAKE) --no-print-directory -j2 --output-sync=target e2e unit-fuzz

test-deps:
	@scripts/install-test-deps.sh

# The race detector needs cgo. go vet runs in full in lint (make test runs
# both), so go test's own subset of it is not run a second time here.
# unit is every package but e2e; e2e (scripts/e2e.sh) runs that package as
# two test processes side by side.
unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 45m -vet=off $$($(GO) list ./... | grep -v '/e2e$$')

e2e:
	@scripts/e2e.sh

unit-fuzz: unit
	@$(MAKE) --no-print-directory fuzz

fuzz:
	@scripts/fuzz-short.sh $(FUZZTIME)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

cross: $(BIN)/edgeq-linux-arm64 $(BIN)/edgeq-linux-armv7 $(BIN)/edgeq-linux-amd64
	@ls -l $(BIN)/edgeq-linux-*

# One target per architecture; Dockerfile.arm64 builds $(BIN)/edgeq-linux-arm64 too.
$(BIN)/edgeq-linux-arm64: FORCE
	GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o $@ $(PKG)
$(BIN)/edgeq-linux-armv7: FORCE
	GOOS=linux GOARCH=arm GOARM=7 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o $@ $(PKG)
$(BIN)/edgeq-linux-amd64: FORCE
	GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o $@ $(PKG)
FORCE:

# Tarball and .deb for arm64 and arm v7 in dist/.
package: $(BIN)/edgeq-linux-arm64 $(BIN)/edgeq-linux-armv7
	scripts/package.sh $(BIN)/edgeq-linux-arm64 arm64 $(VERSION) dist
	scripts/package.sh $(BIN)/edgeq-linux-armv7 armv7 $(VERSION) dist

# The amd64 .deb (same files, scripts and unit as arm64's: see
# packaging/arch_test.go) installed in a Debian chroot as an image build
# does, booted with systemd-nspawn and checked (scripts/systemd-test.sh);
# root. SYSTEMD_TEST_DEB=path checks another package instead.
systemd-test: $(BIN)/edgeq-linux-amd64
	@rm -rf $(BIN)/systemd-test
	scripts/package.sh $(BIN)/edgeq-linux-amd64 amd64 $(VERSION) $(BIN)/systemd-test >/dev/null
	scripts/systemd-test.sh $${SYSTEMD_TEST_DEB:-$$(ls $(BIN)/systemd-test/edgeq_*_amd64.deb)}

# The arm binaries under qemu-user against real mosquitto, pty sensors and a
# host NATS worker; footprint budgets.
firmware-test: cross
	firmware-tests/run.sh

# Power cuts on a FUSE mount that drops unsynced data (needs root and
# /dev/fuse); CI runs the short default series inside `make e2e` with a new
# seed each run. SEED=N replays a series (default 1; the test logs it).
ROUNDS ?= 100
SEED ?=
powercut:
	EDGEQ_E2E_POWERCUT_ROUNDS=$(ROUNDS) $(if $(SEED),EDGEQ_E2E_POWERCUT_SEED=$(SEED)) $(GO) test -count=1 -timeout 0 -v -run 'TestPowerCut$$' ./e2e

# A node under steady load (1,000 devices, workers joining and leaving,
# retention active, /metrics every 5s); samples in $(BIN)/soak.csv,
# scripts/soak-plot.sh draws them.
SOAK ?= 1h
RATE ?= 2000
soak:
	@mkdir -p $(BIN)
	EDGEQ_E2E_SOAK=$(SOAK) EDGEQ_E2E_SOAK_RATE=$(RATE) EDGEQ_E2E_SOAK_CSV=$(CURDIR)/$(BIN)/soak.csv \
	  $(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' ./e2e

# Write amplification (e2e/wamp_test.go): bytes the node writes per payload
# byte at 2,000 msg/s with retention active, on an ext4 loop disk when run as
# root; EDGEQ_E2E_WAMP_{PAYLOADS,PARTITIONS,INTERVALS,WAL} set the cases.
WAMP ?= 20s
wamp:
	EDGEQ_E2E_WAMP=$(WAMP) $(GO) test -count=1 -timeout 0 -v -run '^TestWriteAmplification$$' ./e2e

# Peak resident set (VmHWM) of a node with 32 queue groups whose member
# holds its credit and never acks, then 200,000 × 150 B published; and of
# one group draining 200,000 with 4 workers (e2e/memory_bench_test.go).
# EDGEQ_E2E_MEM_CONFIG adds YAML, EDGEQ_E2E_BIN runs another build.
mem:
	$(GO) test -count=1 -timeout 0 -run '^$$' -bench '^BenchmarkMemory' -benchtime 1x -v ./e2e

bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./...

# edgeq against nats-server JetStream, core NATS and a raw tidwall/wal loop,
# same client and workload (scripts/bench-peers.sh); CI does not run it.
bench-peers:
	scripts/bench-peers.sh $(BENCH_PEERS_FLAGS)

# The light-load table: 1,000 msg/s x 150 B for 20 s, edgeq against the newest
# nats-server built from the module proxy (default and sync_interval: always);
# BENCH_LIGHT_FLAGS="--base OLD_BIN" adds an older edgeq. CI does not run it.
bench-light:
	scripts/bench-light.sh $(BENCH_LIGHT_FLAGS)

clean:
	rm -rf $(BIN) dist
