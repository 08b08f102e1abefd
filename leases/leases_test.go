package leases_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in            string
		stream, shard string
	}{
		{"orders:shardId-000000000001", "orders", "shardId-000000000001"},
		{"arn:aws:kinesis:us-east-1:123456789012:stream/orders:shardId-000000000002", "arn:aws:kinesis:us-east-1:123456789012:stream/orders", "shardId-000000000002"},
		{"a.b_c-d:s", "a.b_c-d", "s"},
	} {
		k, err := leases.ParseKey(tc.in)
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", tc.in, err)
		}
		if k.Stream != tc.stream || k.Shard != tc.shard {
			t.Errorf("ParseKey(%q) = %q, %q; want %q, %q", tc.in, k.Stream, k.Shard, tc.stream, tc.shard)
		}
		if k.String() != tc.in {
			t.Errorf("ParseKey(%q).String() = %q", tc.in, k.String())
		}
	}
}

func TestParseKeyRejects(t *testing.T) {
	for _, in := range []string{"", "orders", ":shard", "orders:", "orders:\x00", strings.Repeat("s", 3000) + ":x", "o:" + strings.Repeat("s", 129)} {
		if k, err := leases.ParseKey(in); err == nil {
			t.Errorf("ParseKey(%q) = %+v, want an error", in, k)
		}
	}
	if _, err := leases.NewKey("orders", "shard:1"); err == nil || !strings.Contains(err.Error(), "colon") {
		t.Errorf("NewKey with a colon in the shard id: %v, want an error naming the colon", err)
	}
}

func TestConflictError(t *testing.T) {
	native := errors.New("ConditionalCheckFailedException")
	var err error = &leases.ConflictError{Op: "Renew", Key: leases.Key{Stream: "s", Shard: "x"}, ExpectedCounter: 4, ExpectedOwner: "a", Err: native}
	if !errors.Is(err, leases.ErrConflict) || !errors.Is(err, native) {
		t.Fatalf("%v does not match both ErrConflict and the native error", err)
	}
	for _, want := range []string{"Renew", "s:x", "counter 4", `owner "a"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"orders:shardId-000000000001", "arn:aws:kinesis:us-east-1:1:stream/o:shardId-1", "", ":", "a:b:c", "\xff:\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := leases.ParseKey(s)
		if err != nil {
			return
		}
		if k.String() != s {
			t.Fatalf("ParseKey(%q).String() = %q", s, k.String())
		}
		if err := k.Validate(); err != nil {
			t.Fatalf("ParseKey(%q) returned an invalid key: %v", s, err)
		}
		back, err := leases.ParseKey(k.String())
		if err != nil || back != k {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}
