# The two commands of the README:
#   make demo   runs the fulfilment example on local emulators
#   make test   installs the test bench and runs every test
GO ?= go

.PHONY: test demo install lint bench

install:
	./scripts/install-testbench

# Most tests wait on emulators and timers, not the CPU: at go test's
# defaults (-p and -parallel = GOMAXPROCS, 2 here) the suite kept 1.2 of 2
# cores busy. Four packages and four parallel tests at once: 134 s against
# 233-286 s (docs/testing.md).
test: install
	$(GO) test -race -count=1 -p 4 -parallel 4 ./...

lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

bench: install
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
bench-run: ; $(GO) run ./internal/bench $(BENCHFLAGS)

demo: install
	$(GO) run ./examples/fulfilment/demo
