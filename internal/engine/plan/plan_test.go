package plan_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/internal/engine/plan"
)

// self is the owner id of the instance planning in these tests.
const self = "me"

// picture builds the Input of self from a picture of the stream: one entry
// per shard, in ListShards order, "id=state" or "id<p1,p2=state" (the shard's
// parents), where state is
//
//	mine        held by self (a worker runs here)
//	free        a free row
//	a           a row held by owner a, alive
//	a!          a row held by owner a, expired (a is dead)
//	me          a row held in self's name with no worker here (an orphan)
//	end         a free row at SHARD_END; a@end: held by a, at SHARD_END
//	end+rewind  a free row at SHARD_END with a rewind pending
func picture(t *testing.T, shards ...string) plan.Input {
	t.Helper()
	in := plan.Input{Self: self, Held: map[string]bool{}, Rows: map[string]plan.Row{}}
	for _, s := range shards {
		id, state, ok := strings.Cut(s, "=")
		if !ok {
			t.Fatalf("picture: %q: want id=state", s)
		}
		sh := plan.Shard{ID: id}
		if id, parents, ok := strings.Cut(id, "<"); ok {
			sh = plan.Shard{ID: id, Parents: strings.Split(parents, ",")}
		}
		in.Shards = append(in.Shards, sh)
		var r plan.Row
		switch {
		case state == "mine":
			in.Held[sh.ID] = true
			continue
		case state == "free":
		case state == "end":
			r.AtEnd = true
		case state == "end+rewind":
			r.AtEnd, r.Rewinding = true, true
		case strings.HasSuffix(state, "@end"):
			r.Owner, r.AtEnd = strings.TrimSuffix(state, "@end"), true
		case strings.HasSuffix(state, "!"):
			r.Owner, r.Expired = strings.TrimSuffix(state, "!"), true
		default:
			r.Owner = state
		}
		in.Rows[sh.ID] = r
	}
	return in
}

// seq returns "prefix0", "prefix1", ... "prefix<n-1>" each followed by
// "=state".
func seq(prefix string, from, to int, state string) []string {
	var s []string
	for i := from; i < to; i++ {
		s = append(s, prefix+strconv.Itoa(i)+"="+state)
	}
	return s
}

func TestPlan(t *testing.T) {
	type want struct {
		take        []string
		want, share int
		active      int
		live        []string
		stable      bool
		handoff     plan.Request // after every take up to Want succeeded
	}
	tests := []struct {
		name    string
		shards  []string
		handed  []string // Input.HandedOver
		pending bool     // Input.Pending
		want    want
	}{
		{
			name:   "stable fleet: nothing to do",
			shards: []string{"s0=mine", "s1=mine", "s2=a", "s3=a", "s4=b", "s5=b"},
			want:   want{share: 2, active: 6, live: []string{"a", "b", self}, stable: true},
		},
		{
			name:   "alone with a dead owner's leases: takes them all",
			shards: []string{"s0=mine", "s1=a!", "s2=a!", "s3=a!"},
			want:   want{take: []string{"s1", "s2", "s3"}, want: 3, share: 4, active: 4, live: []string{self}},
		},
		{
			// a is dead: its rows are expired and a is not an owner, so the
			// share is 6/2 and nobody asks a for anything.
			name:   "dead owner with several leases: survivors take up to the share",
			shards: []string{"s0=mine", "s1=b", "s2=a!", "s3=a!", "s4=a!", "s5=a!"},
			want:   want{take: []string{"s2", "s3", "s4", "s5"}, want: 2, share: 3, active: 6, live: []string{"b", self}},
		},
		{
			// Ties between equally loaded owners go to the smallest id.
			name:   "new instance joining: asks the most loaded owner (ties: smallest id)",
			shards: []string{"s0=b", "s1=b", "s2=a", "s3=a", "s4=c", "s5=c"},
			want: want{want: 2, share: 2, active: 6, live: []string{"a", "b", "c", self},
				handoff: plan.Request{Owner: "a", Shard: "s2"}},
		},
		{
			name:   "new instance joining: the most loaded owner is asked",
			shards: []string{"s0=a", "s1=a", "s2=b", "s3=b", "s4=b"},
			want: want{want: 2, share: 2, active: 5, live: []string{"a", "b", self},
				handoff: plan.Request{Owner: "b", Shard: "s2"}},
		},
		{
			name:    "one request at a time: none while one is pending",
			shards:  []string{"s0=a", "s1=a", "s2=b", "s3=b", "s4=b"},
			pending: true,
			want:    want{want: 2, share: 2, active: 5, live: []string{"a", "b", self}},
		},
		{
			name:   "an owner only one lease ahead is not asked",
			shards: []string{"s0=mine", "s1=a", "s2=a"},
			want:   want{want: 1, share: 2, active: 3, live: []string{"a", self}, stable: true},
		},
		{
			name:   "4 shards on 3 instances: 2/2/0 is not settled",
			shards: []string{"s0=a", "s1=a", "s2=b", "s3=b"},
			want: want{want: 2, share: 2, active: 4, live: []string{"a", "b", self},
				handoff: plan.Request{Owner: "a", Shard: "s0"}},
		},
		{
			name:   "4 shards on 3 instances: 2/1/1 is settled",
			shards: []string{"s0=mine", "s1=a", "s2=a", "s3=b"},
			want:   want{want: 1, share: 2, active: 4, live: []string{"a", "b", self}, stable: true},
		},
		{
			name:   "4 shards on 3 instances: the one holding 2 stays",
			shards: []string{"s0=mine", "s1=mine", "s2=a", "s3=b"},
			want:   want{share: 2, active: 4, live: []string{"a", "b", self}, stable: true},
		},
		{
			name:   "5 shards on 2 instances: 4/1 moves one",
			shards: []string{"s0=mine", "s1=a", "s2=a", "s3=a", "s4=a"},
			want: want{want: 2, share: 3, active: 5, live: []string{"a", self},
				handoff: plan.Request{Owner: "a", Shard: "s1"}},
		},
		{
			name:   "5 shards on 2 instances: 3/2 is settled",
			shards: []string{"s0=mine", "s1=mine", "s2=a", "s3=a", "s4=a"},
			want:   want{want: 1, share: 3, active: 5, live: []string{"a", self}, stable: true},
		},
		{
			name:   "at its share: a free row is left (Want 0)",
			shards: []string{"s0=mine", "s1=mine", "s2=mine", "s3=a", "s4=free"},
			want:   want{take: []string{"s4"}, want: 0, share: 3, active: 5, live: []string{"a", self}},
		},
		{
			name:   "above its share: takes nothing, asks nothing",
			shards: []string{"s0=mine", "s1=mine", "s2=mine", "s3=a", "s4=b", "s5=free"},
			want:   want{take: []string{"s5"}, want: -1, share: 2, active: 6, live: []string{"a", "b", self}},
		},
		{
			name:   "expired rows are tried after the free ones",
			shards: []string{"s0=a!", "s1=free", "s2=a!", "s3=free"},
			want:   want{take: []string{"s1", "s3", "s0", "s2"}, want: 4, share: 4, active: 4, live: []string{self}},
		},
		{
			// Were ended rows counted, a would hold 4 and be asked, and the
			// free ended row would be taken.
			name:   "ended rows are neither active nor counted",
			shards: []string{"s0=a", "s1=a@end", "s2=a@end", "s3=a@end", "s4=end"},
			want:   want{want: 1, share: 1, active: 1, live: []string{"a", self}, stable: true},
		},
		{
			name:   "an ended row with a rewind pending is active",
			shards: []string{"s0=end+rewind", "s1=end"},
			want:   want{take: []string{"s0"}, want: 1, share: 1, active: 1, live: []string{self}},
		},
		{
			name:   "children wait for their parent",
			shards: []string{"p0=a", "c1<p0=free", "c2<p0=free"},
			want:   want{want: 1, share: 1, active: 1, live: []string{"a", self}, stable: true},
		},
		{
			name:   "children start once their parent is at SHARD_END",
			shards: []string{"p0=end", "c1<p0=free", "c2<p0=free"},
			want:   want{take: []string{"c1", "c2"}, want: 2, share: 2, active: 2, live: []string{self}},
		},
		{
			name:   "a child held by another owner counts once its parent ended",
			shards: []string{"p0=a@end", "c1<p0=a", "c2<p0=a", "c3<p0=a"},
			want: want{want: 2, share: 2, active: 3, live: []string{"a", self},
				handoff: plan.Request{Owner: "a", Shard: "c1"}},
		},
		{
			name:   "a merge child waits for both parents",
			shards: []string{"p0=end", "p1=a", "c<p0,p1=free"},
			want:   want{want: 1, share: 1, active: 1, live: []string{"a", self}, stable: true},
		},
		{
			name:   "a merge child starts once both parents ended",
			shards: []string{"p0=end", "p1=b@end", "c<p0,p1=free"},
			want:   want{take: []string{"c"}, want: 1, share: 1, active: 1, live: []string{self}},
		},
		{
			name:   "a parent aged out of the stream does not block",
			shards: []string{"c1<gone=free", "c2<gone,p1=free", "p1=end"},
			want:   want{take: []string{"c1", "c2"}, want: 2, share: 2, active: 2, live: []string{self}},
		},
		{
			// Held here means not at its end yet: the worker is reading it.
			name:   "a parent held here blocks its child",
			shards: []string{"p0=mine", "c1<p0=free"},
			want:   want{share: 1, active: 1, live: []string{self}, stable: true},
		},
		{
			name:   "a shard handed over is left for the requester",
			shards: []string{"s0=free", "s1=a", "s2=free"},
			handed: []string{"s0"},
			want:   want{take: []string{"s2"}, want: 2, share: 2, active: 3, live: []string{"a", self}},
		},
		{
			name:   "a shard handed over still counts as active",
			shards: []string{"s0=free", "s1=a"},
			handed: []string{"s0"},
			want:   want{want: 1, share: 1, active: 2, live: []string{"a", self}, stable: true},
		},
		{
			name:   "an own orphan row is taken back at once",
			shards: []string{"s0=me", "s1=a"},
			want:   want{take: []string{"s0"}, want: 1, share: 1, active: 2, live: []string{"a", self}},
		},
		{
			name:   "many orphans: taken back before a live owner is asked",
			shards: append(seq("s", 0, 3, "me"), seq("t", 0, 5, "a")...),
			want: want{take: []string{"s0", "s1", "s2"}, want: 4, share: 4, active: 8, live: []string{"a", self},
				handoff: plan.Request{Owner: "a", Shard: "t0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := picture(t, tt.shards...)
			for _, id := range tt.handed {
				if in.HandedOver == nil {
					in.HandedOver = map[string]bool{}
				}
				in.HandedOver[id] = true
			}
			in.Pending = tt.pending
			d := plan.Plan(in)
			w := tt.want
			if !slices.Equal(d.Take, w.take) {
				t.Errorf("Take = %q, want %q", d.Take, w.take)
			}
			if d.Want != w.want || d.Share != w.share || d.Active != w.active {
				t.Errorf("Want, Share, Active = %d, %d, %d; want %d, %d, %d", d.Want, d.Share, d.Active, w.want, w.share, w.active)
			}
			if !slices.Equal(d.Live, w.live) {
				t.Errorf("Live = %q, want %q", d.Live, w.live)
			}
			if d.Stable != w.stable {
				t.Errorf("Stable = %v, want %v", d.Stable, w.stable)
			}
			taken := min(max(d.Want, 0), len(d.Take))
			if got := d.Handoff(taken, nil); got != w.handoff {
				t.Errorf("Handoff(%d) = %+v, want %+v", taken, got, w.handoff)
			}
		})
	}
}

// TestHandoffAfterTakes: the handoff is decided with the leases held after
// the takes, not before.
func TestHandoffAfterTakes(t *testing.T) {
	d := plan.Plan(picture(t, "s0=free", "s1=a", "s2=a"))
	if d.Want != 2 || !slices.Equal(d.Take, []string{"s0"}) {
		t.Fatalf("Want %d, Take %q; want 2, [s0]", d.Want, d.Take)
	}
	// The take failed: a holds two more than we do.
	if got, want := d.Handoff(0, nil), (plan.Request{Owner: "a", Shard: "s1"}); got != want {
		t.Errorf("Handoff(0) = %+v, want %+v", got, want)
	}
	// The take succeeded: a is only one ahead.
	if got := d.Handoff(1, nil); got != (plan.Request{}) {
		t.Errorf("Handoff(1) = %+v, want none", got)
	}
}

// TestDeterministic: the same input and the same random sequence give the
// same decision; the randomness shuffles only the free rows, which come
// before the expired ones, and picks only among the victim's leases.
func TestDeterministic(t *testing.T) {
	shards := append(append(seq("f", 0, 8, "free"), seq("x", 0, 3, "z!")...), seq("b", 0, 12, "b")...)
	free, expired := []string{"f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7"}, []string{"x0", "x1", "x2"}
	run := func(seed uint64) ([]string, plan.Request) {
		in := picture(t, shards...)
		in.Rand = rand.New(rand.NewPCG(seed, 1))
		d := plan.Plan(in)
		return d.Take, d.Handoff(0, in.Rand) // as if every take failed: b is asked
	}
	orders, picks := map[string]bool{}, map[string]bool{}
	for seed := range uint64(20) {
		take, req := run(seed)
		take2, req2 := run(seed)
		if !slices.Equal(take, take2) || req != req2 {
			t.Fatalf("seed %d: two runs gave %q %+v and %q %+v", seed, take, req, take2, req2)
		}
		if got := slices.Sorted(slices.Values(take[:len(free)])); !slices.Equal(got, free) {
			t.Fatalf("seed %d: Take %q does not start with the free rows %q", seed, take, free)
		}
		if !slices.Equal(take[len(free):], expired) {
			t.Fatalf("seed %d: Take %q does not end with the expired rows %q in shard order", seed, take, expired)
		}
		if req.Owner != "b" || !strings.HasPrefix(req.Shard, "b") {
			t.Fatalf("seed %d: Handoff %+v, want one of b's leases", seed, req)
		}
		orders[strings.Join(take, ",")] = true
		picks[req.Shard] = true
	}
	if len(orders) < 2 || len(picks) < 2 {
		t.Errorf("20 seeds gave %d orders of the free rows and %d choices of the lease to ask for: the random input is not used", len(orders), len(picks))
	}
}

// TestPure: the planner reads no store, no clock and no global random
// source: its only imports are math/rand/v2 (for the *rand.Rand it is
// given) and slices, and it calls no top-level function of math/rand/v2.
func TestPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"math/rand/v2": true, "slices": true}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); !allowed[p] {
				t.Errorf("%s imports %s", name, p)
			}
		}
		// The only use of package rand is its Rand type.
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "rand" && sel.Sel.Name != "Rand" {
					t.Errorf("%s uses rand.%s", name, sel.Sel.Name)
				}
			}
			return true
		})
	}
}
