# memtrace — see README.md. `make test`, `make demo` and `make bench` need
# root (BPF): sudo make test, or make test in a root shell.
GO      ?= go
BIN     ?= bin
CC      ?= gcc

.PHONY: all build man image demo test test-kernels bench fuzz generate check-generate check-clang lint check-large-files clean

all: build

# CGO_ENABLED=0: a static binary. With gcc present, go links libc
# dynamically for cgo; the binary would then need a libc in a scratch image,
# and in whole-host mode it would map the very libc it probes.
# VERSION and COMMIT name the build (memtrace --version): set here, since a
# build with -buildvcs=false (or from a tarball) records no revision.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS ?= -X main.version=$(VERSION) -X main.commit=$(COMMIT)
build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/memtrace ./cmd/memtrace

# Man pages from the flags (cobra/doc): memtrace.1 and one per subcommand,
# in $(MANDIR). `man -l $(MANDIR)/memtrace.1` reads one.
MANDIR ?= $(BIN)/man
man:
	$(GO) run -tags man ./cmd/memtrace $(MANDIR)

# The container image (Containerfile: the static binary, FROM scratch),
# built with Debian's buildah (apt-get install -y buildah); vfs storage
# and chroot isolation work inside containers and CI runners too.
IMAGE   ?= memtrace:latest
BUILDAH ?= buildah --storage-driver vfs
image: build
	$(BUILDAH) bud --isolation chroot -f Containerfile -t $(IMAGE) .

# Build memtrace and a small leaking C program, trace it, show the table.
demo: build
	$(CC) -O2 -g -o $(BIN)/leaky testdata/demo/leaky.c
	$(BIN)/memtrace -- $(BIN)/leaky

test:
	$(GO) vet ./...
	# -p 1: the whole-host tests probe every process's libc for a moment;
	# packages in parallel would measure, or run valgrind, under those probes.
	# -timeout 60m: cmd/memtrace's e2e tests take 6 minutes on a quiet
	# machine, over go test's default 10 with both cores busy, and 18 on a
	# quiet machine whose uprobe traps cost 5 µs each.
	$(GO) test -count=1 -p 1 -timeout 60m ./...

# Run every fuzz target (func Fuzz* in a _test.go) for FUZZTIME each, from
# its seeds in the package's testdata/fuzz/; an input that fails is
# written there, to be committed with its fix. The parsers of what a
# traced process, a binary or a recording controls (docs/security.md).
# FUZZTIME counts executions (100000x), not seconds: a duration races the
# fuzzing coordinator's deadline on a loaded machine and fails with a bare
# "context deadline exceeded" and no input (go.dev/issue/75804).
FUZZTIME ?= 100000x
fuzz:
	@set -e; for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for fn in $$(grep -h '^func Fuzz' $$pkg/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "== $$pkg $$fn"; \
			$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

# Boot Debian 12's kernels (scripts/kernels/kernels) in qemu and run a
# subset of the real-BPF tests inside each (docs/kernels.md).
test-kernels:
	scripts/kernels/run.sh

bench: build
	$(GO) run ./bench/cmd/membench -memtrace $(BIN)/memtrace $(BENCHFLAGS)

# Regenerate the BPF object and its Go bindings (needs clang, llvm,
# libbpf-dev, bpftool: apt-get install -y clang llvm libbpf-dev bpftool).
# The committed objects are clang CLANG_MAJOR's (Debian 12's): another
# clang compiles other bytes, and check-generate would fail on them.
CLANG       ?= clang
CLANG_MAJOR ?= 14
generate: check-clang
	BPF2GO_CC=$(CLANG) $(GO) generate .

check-clang:
	@command -v $(CLANG) >/dev/null || { echo "make generate: $(CLANG) not found: apt-get install -y clang llvm libbpf-dev bpftool" >&2; exit 1; }
	@v=$$($(CLANG) -dumpversion); [ "$${v%%.*}" = "$(CLANG_MAJOR)" ] || { \
		echo "make generate: $(CLANG) is version $$v; the committed BPF objects are built with clang $(CLANG_MAJOR) (Debian 12's): use it (CLANG=clang-$(CLANG_MAJOR)), or CLANG_MAJOR=$${v%%.*} to rebuild them all with yours" >&2; exit 1; }

# CI: the committed generated files must be what `make generate` produces.
check-generate: generate
	git diff --exit-code -- internal/tracer/

# golangci-lint from the Go module proxy, at a pinned version
# (.golangci.yml says which linters).
GOLANGCI_LINT_VERSION ?= v2.15.0
lint:
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

# No tracked file but the generated BPF objects above 1 MB.
check-large-files:
	scripts/check-large-files.sh

clean:
	rm -rf $(BIN)
