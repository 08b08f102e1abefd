package shard_test

import (
	"testing"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
