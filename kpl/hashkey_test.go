package kpl_test

import (
	"crypto/md5"
	"errors"
	"math/big"
	"testing"

	"github.com/kinesislease/kinesislease/kpl"
)

// bigOf is k as a big.Int.
func bigOf(k kpl.HashKey) *big.Int {
	b := new(big.Int).SetUint64(k.Hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(k.Lo))
}

var maxKey, _ = new(big.Int).SetString("340282366920938463463374607431768211455", 10) // 2^128 - 1

func TestParseHashKey(t *testing.T) {
	for _, s := range []string{"0", "1", "9", "10", "18446744073709551615", "18446744073709551616", "170141183460469231731687303715884105728",
		"340282366920938463463374607431768211455", "000340282366920938463463374607431768211455", "0000"} {
		k, err := kpl.ParseHashKey(s)
		if err != nil {
			t.Errorf("ParseHashKey(%q): %v", s, err)
			continue
		}
		want, _ := new(big.Int).SetString(s, 10)
		if bigOf(k).Cmp(want) != 0 || k.String() != want.String() {
			t.Errorf("ParseHashKey(%q) = %s (%v), want %s", s, bigOf(k), k, want)
		}
	}
	if k, _ := kpl.ParseHashKey("340282366920938463463374607431768211455"); k != kpl.MaxHashKey {
		t.Errorf("2^128-1 parsed as %v, want MaxHashKey", k)
	}
	for _, s := range []string{"", "-1", "+1", "1e3", " 1", "0x10", "340282366920938463463374607431768211456", "3402823669209384634633746074317682114550",
		"1000000000000000000000000000000000000000000"} {
		if k, err := kpl.ParseHashKey(s); !errors.Is(err, kpl.ErrBadHashKey) {
			t.Errorf("ParseHashKey(%q) = %v, %v; want an error matching ErrBadHashKey", s, k, err)
		}
	}
}

// FuzzParseHashKey checks ParseHashKey against math/big.
func FuzzParseHashKey(f *testing.F) {
	for _, s := range []string{"0", "340282366920938463463374607431768211455", "340282366920938463463374607431768211456", "12a", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := kpl.ParseHashKey(s)
		want, ok := new(big.Int).SetString(s, 10)
		valid := ok && s != "" && s[0] != '+' && s[0] != '-' && want.Sign() >= 0 && want.Cmp(maxKey) <= 0
		for _, c := range s {
			if c < '0' || c > '9' {
				valid = false // big.Int also takes underscores and signs
			}
		}
		switch {
		case valid && (err != nil || bigOf(k).Cmp(want) != 0):
			t.Fatalf("ParseHashKey(%q) = %s, %v; want %s", s, bigOf(k), err, want)
		case !valid && err == nil:
			t.Fatalf("ParseHashKey(%q) = %s, want an error", s, bigOf(k))
		}
	})
}

func TestPartitionKeyHash(t *testing.T) {
	for _, pk := range []string{"", "a", "customer-42", "日本-1", "🦄"} {
		sum := md5.Sum([]byte(pk))
		if got, want := bigOf(kpl.PartitionKeyHash(pk)), new(big.Int).SetBytes(sum[:]); got.Cmp(want) != 0 {
			t.Errorf("PartitionKeyHash(%q) = %s, want %s", pk, got, want)
		}
	}
}

// TestUserRecordsOutsideRange: the user records of an aggregate are routed
// by their own explicit hash key, or else the MD5 of their partition key;
// against the range of the lower of two shards, those of the upper half are
// outside.
func TestUserRecordsOutsideRange(t *testing.T) {
	lower, err := kpl.ParseHashRange("0", "170141183460469231731687303715884105727") // [0, 2^127)
	if err != nil {
		t.Fatal(err)
	}
	upper, err := kpl.ParseHashRange("170141183460469231731687303715884105728", "340282366920938463463374607431768211455")
	if err != nil {
		t.Fatal(err)
	}
	lowPK, highPK := pkIn(t, lower), pkIn(t, upper)
	users := []kpl.UserRecord{
		{PartitionKey: lowPK, Data: []byte("a")},
		{PartitionKey: highPK, Data: []byte("b")},
		{PartitionKey: highPK, ExplicitHashKey: "5", Data: []byte("c")}, // the explicit key wins
		{PartitionKey: lowPK, ExplicitHashKey: "170141183460469231731687303715884105728", Data: []byte("d")},
		{PartitionKey: lowPK, ExplicitHashKey: "170141183460469231731687303715884105727", Data: []byte("e")}, // the range's end
	}
	got, err := kpl.Split(kpl.Aggregate(users))
	if err != nil {
		t.Fatal(err)
	}
	wantIn := []bool{true, false, true, false, true}
	for i, u := range got {
		k, err := u.HashKey()
		if err != nil {
			t.Fatalf("user record %d: %v", i, err)
		}
		if lower.Contains(k) != wantIn[i] || upper.Contains(k) == wantIn[i] {
			t.Errorf("user record %d (%q, ehk %q, key %s): in the lower shard %v, in the upper %v; want %v, %v",
				i, u.PartitionKey, u.ExplicitHashKey, k, lower.Contains(k), upper.Contains(k), wantIn[i], !wantIn[i])
		}
	}
	if lower.Whole() || upper.Whole() {
		t.Error("a half range reports itself whole")
	}
	if whole, _ := kpl.ParseHashRange("0", "340282366920938463463374607431768211455"); !whole.Whole() {
		t.Error("the whole range does not report itself whole")
	}
	if _, err := (kpl.UserRecord{PartitionKey: "a", ExplicitHashKey: "not-a-number"}).HashKey(); !errors.Is(err, kpl.ErrBadHashKey) {
		t.Errorf("bad explicit hash key: %v, want ErrBadHashKey", err)
	}
	if _, err := kpl.ParseHashRange("10", "9"); !errors.Is(err, kpl.ErrBadHashKey) {
		t.Errorf("empty range: %v, want ErrBadHashKey", err)
	}
}

// pkIn returns a partition key whose MD5 lies in r.
func pkIn(t *testing.T, r kpl.HashRange) string {
	t.Helper()
	for i := range 1000 {
		pk := "key-" + big.NewInt(int64(i)).String()
		if r.Contains(kpl.PartitionKeyHash(pk)) {
			return pk
		}
	}
	t.Fatal("no partition key found in the range")
	return ""
}
