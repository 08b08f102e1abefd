package shardlist

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/internal/membership"
	"github.com/kinesislease/kinesislease/leases"
)

// TestAssignListers: every stream gets one lister, the same whatever the
// order the members are given in, and no member lists more than its
// share (⌈streams/members⌉, at most maxListed); streams beyond maxListed
// a member get none. A member leaving moves only the streams it listed.
func TestAssignListers(t *testing.T) {
	owners := func(n int) []string {
		var os []string
		for i := range n {
			os = append(os, fmt.Sprintf("member-%02d", i))
		}
		return os
	}
	streams := func(n int) []string {
		var ks []string
		for i := range n {
			ks = append(ks, fmt.Sprintf("stream-%d", i))
		}
		return ks
	}
	for _, c := range []struct{ streams, members int }{{1, 1}, {1, 20}, {3, 20}, {20, 20}, {30, 20}, {10, 2}, {20, 3}} {
		keys, os := streams(c.streams), owners(c.members)
		a := assignListers(keys, os)
		rev := slices.Clone(os)
		slices.Reverse(rev)
		if b := assignListers(keys, rev); !maps.Equal(a, b) {
			t.Errorf("%d streams, %d members: the order of the members changed the listers: %v, then %v", c.streams, c.members, a, b)
		}
		share := min((c.streams+c.members-1)/c.members, maxListed)
		load := map[string]int{}
		none := 0
		for _, k := range keys {
			if a[k] == "" {
				none++
				continue
			}
			load[a[k]]++
		}
		for o, n := range load {
			if n > share {
				t.Errorf("%d streams, %d members: %s lists %d streams, want at most %d", c.streams, c.members, o, n, share)
			}
		}
		if want := max(c.streams-c.members*maxListed, 0); none != want {
			t.Errorf("%d streams, %d members: %d streams with no lister, want %d", c.streams, c.members, none, want)
		}
	}

	// A member that lists nothing leaves: no stream changes lister.
	keys, os := streams(3), owners(20)
	a := assignListers(keys, os)
	idle := slices.IndexFunc(os, func(o string) bool { return !slices.Contains(slices.Collect(maps.Values(a)), o) })
	b := assignListers(keys, slices.Delete(slices.Clone(os), idle, idle+1))
	if !maps.Equal(a, b) {
		t.Errorf("%s, which lists nothing, left: listers %v became %v", os[idle], a, b)
	}
	// The lister of one stream leaves: only that stream moves.
	gone := a[keys[0]]
	c := assignListers(keys, slices.DeleteFunc(slices.Clone(os), func(o string) bool { return o == gone }))
	for _, k := range keys[1:] {
		if c[k] != a[k] && a[k] != gone {
			t.Errorf("%s left: stream %s moved from %s to %s", gone, k, a[k], c[k])
		}
	}
	if c[keys[0]] == gone || c[keys[0]] == "" {
		t.Errorf("%s left: stream %s listed by %q", gone, keys[0], c[keys[0]])
	}
}

// TestPublishedDigest: a member's Listing names each stream it lists by a
// tag of its key, and published finds a stream's digest there, and no
// other's.
func TestPublishedDigest(t *testing.T) {
	d1, d2 := shardDigest([]string{"b", "a"}), shardDigest([]string{"a", "b", "c"})
	if d1 != shardDigest([]string{"a", "b"}) || d1 == d2 || len(d1) != 12 {
		t.Fatalf("shardDigest: %q for {a b} (either order), %q for {a b c}: want 12 hex digits, equal for equal sets only", d1, d2)
	}
	m := membership.New(membership.Config{Owner: "me"})
	s := New(Config{Owner: "me", View: m})
	m.Observe(0, []leases.Member{{Owner: "l", Incarnation: "0.l", Listing: strings.Join([]string{streamTag("s1") + d1, streamTag("s2") + d2}, ",")}}, mono(), mono())
	for _, c := range []struct {
		key, want string
		ok        bool
	}{{"s1", d1, true}, {"s2", d2, true}, {"s3", "", false}} {
		if got, ok := s.published("l", c.key); got != c.want || ok != c.ok {
			t.Errorf("published(l, %s) = %q, %v; want %q, %v", c.key, got, ok, c.want, c.ok)
		}
	}
	if _, ok := s.published("nobody", "s1"); ok {
		t.Errorf("published by a member never seen")
	}
}
