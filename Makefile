# The two commands of the README:
#   make demo   runs the fulfilment example on in-memory endpoints (Go only)
#   make test   installs the test bench and runs every test
GO ?= go

.PHONY: test test-encodings demo install lint bench

install:
	./scripts/install-testbench

# Three packages at once and up to eight tests of each: most tests wait on
# emulators and timers, not the CPU (docs/contributing.md, "Suite time").
test: install
	$(GO) test -race -trimpath -count=1 -p 3 -parallel 8 ./...

# The suite again on the other read paths (docs/contributing.md).
test-encodings: install
	KINESISLEASE_TEST_ENCODING=sdk $(GO) test -race -trimpath -count=1 -p 3 -parallel 8 ./...
	KINESISLEASE_TEST_ENCODING=json $(GO) test -race -trimpath -count=1 -p 3 -parallel 8 ./...

lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

bench: install
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
bench-run: ; $(GO) run ./internal/testkit/bench $(BENCHFLAGS)

# In-memory Kinesis and DynamoDB in the demo's process: nothing to install.
# On DynamoDB Local and kinesalite: go run ./examples/fulfilment/demo --emulators
demo:
	$(GO) run ./examples/fulfilment/demo
