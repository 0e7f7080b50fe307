# allocd: build and test. `make plugins` builds every folder under plugins/ that has a main
# package (plugins/NAME/wasm, or plugins/NAME itself) to build/plugins/NAME.wasm.
GO      ?= go
BUILD   := build
PLUGINS := $(sort $(patsubst plugins/%/,%,$(dir $(wildcard plugins/*/wasm/main.go plugins/*/main.go))))
PLUGINS := $(sort $(foreach p,$(PLUGINS),$(firstword $(subst /, ,$(p)))))

.PHONY: all plugins allocd test test-short bench fuzz clean

all: allocd plugins

plugins: $(PLUGINS:%=$(BUILD)/plugins/%.wasm)

$(BUILD)/plugins/%.wasm: FORCE
	@mkdir -p $(dir $@)
	@src=./plugins/$*; [ -f plugins/$*/wasm/main.go ] && src=./plugins/$*/wasm; \
	echo "plugin $* <- $$src"; \
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -buildmode=c-shared -trimpath -o $@ $$src

allocd:
	@mkdir -p $(BUILD)
	$(GO) build -trimpath -o $(BUILD)/allocd ./cmd/allocd

# The whole suite, with the race detector; end-to-end tests use the binary and plugins built here.
test: allocd plugins
	ALLOCD_BIN=$(abspath $(BUILD)/allocd) ALLOCD_PLUGINS=$(abspath $(BUILD)/plugins) \
		$(GO) test -race -count=1 -timeout 45m ./...
	# bench/ is a module of its own (peers: rocketmq-client-go, extism go-sdk): its tests hold the
	# built-in plugins to the peers' answers.
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

clean:
	rm -rf $(BUILD)

FORCE:
