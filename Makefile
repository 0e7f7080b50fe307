# allocd: build and test. `make plugins` builds every folder under plugins/ that has a main
# package (plugins/NAME/wasm, or plugins/NAME itself) to build/plugins/NAME.wasm.
GO      ?= go
BUILD   := build
PLUGINS := $(sort $(patsubst plugins/%/,%,$(dir $(wildcard plugins/*/wasm/main.go plugins/*/main.go))))
PLUGINS := $(sort $(foreach p,$(PLUGINS),$(firstword $(subst /, ,$(p)))))

.PHONY: all plugins embed allocd examples examples-if-possible test test-short bench fuzz clean

all: allocd plugins examples-if-possible

plugins: $(PLUGINS:%=$(BUILD)/plugins/%.wasm)

$(BUILD)/plugins/%.wasm: FORCE
	@mkdir -p $(dir $@)
	@src=./plugins/$*; [ -f plugins/$*/wasm/main.go ] && src=./plugins/$*/wasm; \
	echo "plugin $* <- $$src"; \
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -buildmode=c-shared -trimpath -o $@ $$src

# The binary embeds the built-in plugins (internal/builtin): they are copied there first.
EMBED := internal/builtin/wasm
embed: plugins
	@rm -f $(EMBED)/*.wasm
	cp $(PLUGINS:%=$(BUILD)/plugins/%.wasm) $(EMBED)/

allocd: embed
	@mkdir -p $(BUILD)
	$(GO) build -trimpath -o $(BUILD)/allocd ./cmd/allocd

# Plugins in other languages, each built by its own Makefile (examples/NAME/README.md says what
# it needs installed) to build/examples/NAME.wasm. `make` builds them when the toolchain is there;
# `make examples` and `make test` require it.
EXAMPLES := weighted-c
CC_WASM  ?= clang
examples: $(EXAMPLES:%=$(BUILD)/examples/%.wasm)

$(BUILD)/examples/%.wasm: FORCE
	@mkdir -p $(dir $@)
	@$(MAKE) --no-print-directory -C examples/$* OUT=$(abspath $@) CC_WASM=$(CC_WASM)

examples-if-possible:
	@if echo 'int f(void){return 0;}' | $(CC_WASM) --target=wasm32-wasi -nostartfiles -Wl,--no-entry -o /dev/null -x c - 2>/dev/null; then \
		$(MAKE) --no-print-directory examples; \
	else echo "note: examples/weighted-c not built: it needs clang, lld and wasi-libc (see its README); make test needs them"; fi

# The whole suite, with the race detector; end-to-end tests use the binary and plugins built here.
test: allocd plugins examples
	ALLOCD_BIN=$(abspath $(BUILD)/allocd) ALLOCD_PLUGINS=$(abspath $(BUILD)/plugins) ALLOCD_EXAMPLES=$(abspath $(BUILD)/examples) \
		$(GO) test -race -count=1 -timeout 45m ./...
	@$(MAKE) --no-print-directory test-adapters test-bench test-ui

# The client adapters are Go modules of their own (so the core never depends on franz-go or
# rocketmq-client-go): each runs its own `go test -race ./...`.
ADAPTERS := adapters/kafka adapters/rocketmq
.PHONY: test-adapters
test-adapters: allocd plugins
	@for m in $(ADAPTERS); do \
		echo "test $$m"; \
		(cd $$m && ALLOCD_BIN=$(abspath $(BUILD)/allocd) ALLOCD_PLUGINS=$(abspath $(BUILD)/plugins) \
			$(GO) test -race -count=1 -timeout 30m ./...) || exit 1; \
	done

# bench/ is a module of its own (peers: rocketmq-client-go, franz-go, extism go-sdk): its tests
# hold the built-in plugins to the peers' answers.
.PHONY: test-bench
test-bench: allocd plugins
	cd bench && $(GO) test -race -count=1 -timeout 20m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Every fuzz target for FUZZTIME each; their seed corpora also run in `make test`.
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# test/ui is a module of its own (chromedp): a real headless Chromium (Debian's chromium; set
# CHROMIUM to use another) drives the web view of the binary built here, and writes the
# screenshots in docs/.
.PHONY: test-ui
test-ui: allocd
	cd test/ui && ALLOCD_BIN=$(abspath $(BUILD)/allocd) $(GO) test -race -count=1 -timeout 10m ./...

clean:
	rm -rf $(BUILD) $(EMBED)/*.wasm

FORCE:

# etcd for tests: test/etcd is a module of its own (the etcd server stays out of the core module
# and the allocd binary), built to build/etcd-test; internal/etcdtest runs it from ALLOCD_ETCD_BIN.
# ALLOCD_ETCD_BIN=/usr/bin/etcd make test runs the same tests against a stock etcd instead.
ALLOCD_ETCD_BIN ?= $(abspath $(BUILD)/etcd-test)
export ALLOCD_ETCD_BIN
.PHONY: etcd-test test-etcd-module
etcd-test:
	@mkdir -p $(BUILD)
	cd test/etcd && $(GO) build -trimpath -o $(abspath $(BUILD))/etcd-test .
test-etcd-module: etcd-test
	cd test/etcd && $(GO) test -race -count=1 -timeout 10m ./...
test: etcd-test test-etcd-module test-etcd-stock

# The etcd store's tests once more against a stock etcd of another version (Debian's
# etcd-server 3.4; .ci/run installs it): ETCD_STOCK names the binary.
ETCD_STOCK ?= $(shell command -v etcd)
ETCD_PKGS  := ./store/etcdstore/ ./internal/etcdtest/
.PHONY: test-etcd-stock
test-etcd-stock:
	@[ -x "$(ETCD_STOCK)" ] || { echo "no etcd on PATH for test-etcd-stock: apt-get install etcd-server (or ETCD_STOCK=/path/to/etcd)"; exit 1; }
	ALLOCD_ETCD_BIN=$(ETCD_STOCK) $(GO) test -race -count=1 -timeout 10m $(ETCD_PKGS)

# Leadership (issue 12) against the stock etcd too: the elector, and a killed and a paused leader
# through three real replicas.
.PHONY: test-ha-stock
test-ha-stock: allocd plugins
	@[ -x "$(ETCD_STOCK)" ] || { echo "no etcd on PATH for test-ha-stock: apt-get install etcd-server (or ETCD_STOCK=/path/to/etcd)"; exit 1; }
	ALLOCD_ETCD_BIN=$(ETCD_STOCK) ALLOCD_BIN=$(abspath $(BUILD)/allocd) ALLOCD_PLUGINS=$(abspath $(BUILD)/plugins) \
		$(GO) test -race -count=1 -timeout 10m -run 'TestElectorOnEtcd|TestHAKillLeader|TestHAPausedLeaderWakesFenced' ./ha/ ./cmd/allocd/
test: test-ha-stock
