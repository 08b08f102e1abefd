package leases_test

import (
	"testing"

	"github.com/kinesislease/kinesislease/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
