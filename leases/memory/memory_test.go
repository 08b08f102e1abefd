package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/leasestest"
	"github.com/kinesislease/kinesislease/leases/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	leasestest.Run(t, func(*testing.T) leases.Store { return memory.New() })
}

func TestConformanceSharedStore(t *testing.T) {
	s := memory.New()
	leasestest.Run(t, func(*testing.T) leases.Store { return s })
}
