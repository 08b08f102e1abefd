package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

var nameSeq atomic.Uint64

// maxNameBase bounds the part of a name taken from the test name, keeping
// names well under Kinesis's 128 characters (DynamoDB allows 255).
const maxNameBase = 80

// TableName returns a DynamoDB table name unique to this call: the test's
// name reduced to [A-Za-z0-9_.-], a sequence number and a random suffix.
func TableName(tb testing.TB) string {
	tb.Helper()
	return uniqueName(tb.Name())
}

// StreamName returns a Kinesis stream name unique to this call, built like
// TableName's (at most 128 characters of [A-Za-z0-9_.-]).
func StreamName(tb testing.TB) string {
	tb.Helper()
	return uniqueName(tb.Name())
}

func uniqueName(testName string) string {
	var b strings.Builder
	dash := false
	for _, r := range testName {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.Trim(b.String(), "-.")
	if len(base) > maxNameBase {
		// Keep the end: it tells subtests apart.
		base = strings.TrimLeft(base[len(base)-maxNameBase:], "-.")
	}
	if base == "" {
		base = "test"
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return fmt.Sprintf("%s-%d-%s", base, nameSeq.Add(1), hex.EncodeToString(suffix[:]))
}
