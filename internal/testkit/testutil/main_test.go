package testutil

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(orphanModeEnv) != "" {
		startForOrphanCheck() // a child process of TestNoOrphanEmulators
	}
	Main(m)
}
