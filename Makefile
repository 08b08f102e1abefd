# The two commands of the README:
#   make demo   runs the fulfilment example on in-memory endpoints (Go only)
#   make test   installs the test bench and runs every test
GO ?= go

# The repository's Go modules (docs/contributing.md, "Modules"): the library
# (.) and otelkl, a module of its own so that the OpenTelemetry SDK stays out
# of the module graph of services that do not use it. internal/tools pins the
# tools (staticcheck) and has no package. `go test ./...` in one module does
# not reach another: every target below runs in each.
MODULES := . otelkl
TOOLS := internal/tools
STATICCHECK = $(GO) tool -modfile=$(CURDIR)/$(TOOLS)/go.mod staticcheck

# Runs its command (with $$m, the module's directory) in each of MODULES, all
# of them even when one fails, and fails if one did.
define each_module
	@fail=""; for m in $(MODULES); do echo "== $$m: $(1)"; (cd $$m && $(1)) || fail="$$fail $$m"; done; \
	if [ -n "$$fail" ]; then echo "make: failed in module(s):$$fail" >&2; exit 1; fi
endef

GOTEST = $(GO) test -race -trimpath -count=1 -p 3 -parallel 8 ./...

.PHONY: test test-encodings demo install lint tidy bench bench-run

install:
	./scripts/install-testbench

# Three packages at once and up to eight tests of each: most tests wait on
# emulators and timers, not the CPU (docs/contributing.md, "Suite time").
test: install
	$(call each_module,$(GOTEST))

# The suite again on the other read paths (docs/contributing.md).
test-encodings: install
	$(call each_module,KINESISLEASE_TEST_ENCODING=sdk $(GOTEST))
	$(call each_module,KINESISLEASE_TEST_ENCODING=json $(GOTEST))

lint:
	$(call each_module,$(GO) vet ./... && $(STATICCHECK) ./...)

# Every module's go.mod and go.sum are tidy, and every go.mod of the
# repository is one of MODULES or TOOLS (a new module must be added above).
tidy:
	@fail=""; for m in $(MODULES) $(TOOLS); do (cd $$m && $(GO) mod tidy -diff) || fail="$$fail $$m"; done; \
	if [ -n "$$fail" ]; then echo "make: go.mod or go.sum is not tidy in:$$fail (run 'go mod tidy' there and commit the result)" >&2; exit 1; fi
	@for f in $$(find . -name go.mod -not -path './node_modules/*' -not -path '*/testdata/*' | sort); do \
		d=$$(dirname $$f | sed 's,^\./,,'); case " $(MODULES) $(TOOLS) " in *" $$d "*) ;; \
		*) echo "make: $$f is a module the Makefile does not know: add it to MODULES (or TOOLS)" >&2; exit 1 ;; esac; done

bench: install
	$(call each_module,$(GO) test -run '^$$' -bench . -benchtime 2s ./...)
bench-run: ; $(GO) run ./internal/testkit/bench $(BENCHFLAGS)

# In-memory Kinesis and DynamoDB in the demo's process: nothing to install.
# On DynamoDB Local and kinesalite: go run ./examples/fulfilment/demo --emulators
demo:
	$(GO) run ./examples/fulfilment/demo
