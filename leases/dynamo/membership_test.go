package dynamo_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// ownerOf returns an owner id of exactly n bytes, told apart by label.
func ownerOf(label string, n int) string {
	o := "fulfilment-" + label + "-"
	return o + strings.Repeat("x", n-len(o))
}

// rowCount returns a membership row's entry count as the item holds it
// (attribute n), and whether it holds one.
func rowCount(t *testing.T, client *dynamodb.Client, table string, row int) (string, bool) {
	t.Helper()
	v, ok := rawItem(t, client, table, driver.MemberKey(row))["n"].(*types.AttributeValueMemberN)
	if !ok {
		return "", false
	}
	return v.Value, true
}

// attrSize is the size DynamoDB bills for an attribute, by the rules of
// "DynamoDB item sizes and formats" in its developer guide.
func attrSize(t *testing.T, name string, v types.AttributeValue) int {
	t.Helper()
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(name) + len(v.Value)
	case *types.AttributeValueMemberN:
		digits := strings.Trim(strings.NewReplacer("-", "", ".", "").Replace(v.Value), "0")
		return len(name) + (len(digits)+1)/2 + 1
	case *types.AttributeValueMemberBOOL:
		return len(name) + 1
	case *types.AttributeValueMemberM:
		n := len(name) + 3
		for k, e := range v.Value {
			n += attrSize(t, k, e) + 1
		}
		return n
	}
	t.Fatalf("attribute %s: no size rule for %T", name, v)
	return 0
}

// TestMemberRowFormat pins the layout of a membership row, which the
// package documentation describes, and the size of an entry (what every
// heartbeat of every member of the row pays for).
func TestMemberRowFormat(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	owner := ownerOf("a", 40)
	row := 1
	e := leases.Member{Owner: owner, Incarnation: "0123456789", Heartbeat: 999990}
	if _, err := s.Join(ctx(t), row, e); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, client, s.Table(), driver.MemberKey(row))
	if len(item) != 3 {
		t.Fatalf("membership row holds %v, want lease_key, the entry count n and one entry", item)
	}
	if k := item["lease_key"].(*types.AttributeValueMemberS).Value; k != "#members:"+fmt.Sprint(row) {
		t.Fatalf("membership row key %q", k)
	}
	if n, ok := item["n"].(*types.AttributeValueMemberN); !ok || n.Value != "1" {
		t.Fatalf("membership row's entry count n is %v, want N 1", item["n"])
	}
	if n := attrSize(t, "n", item["n"]); n != 3 {
		t.Errorf("the entry count of a row of up to 9 entries: %d bytes, want 3", n)
	}
	attr := "m_" + owner
	m, ok := item[attr].(*types.AttributeValueMemberM)
	if !ok {
		t.Fatalf("attribute %s is %T, want a map", attr, item[attr])
	}
	if len(m.Value) != 2 || m.Value["i"].(*types.AttributeValueMemberS).Value != "0123456789" ||
		m.Value["h"].(*types.AttributeValueMemberN).Value != "999990" {
		t.Fatalf("entry %v, want {i: S 0123456789, h: N 999990} and nothing else", m.Value)
	}
	if n := attrSize(t, attr, m); n != 63 {
		t.Errorf("entry of a 40-byte owner id: %d bytes, want 63 (the package documentation says so)", n)
	}
	keySize := attrSize(t, "lease_key", item["lease_key"])
	if keySize != 19 {
		t.Errorf("membership row key: %d bytes, want 19", keySize)
	}

	// A heartbeat carries the stored notice: bumpNotice sets it as a
	// requester does, before the heartbeat that is checked.
	bumpNotice := func(notice int64) {
		t.Helper()
		next := e
		next.Notice = notice
		if _, err := s.ReplaceMember(ctx(t), row, e, next); err != nil {
			t.Fatal(err)
		}
		e = next
	}

	bumpNotice(42)
	e.Leaving = true
	e.Heartbeat++ // a heartbeat moves forward
	if _, err := s.Heartbeat(ctx(t), row, e); err != nil {
		t.Fatal(err)
	}
	m = rawItem(t, client, s.Table(), driver.MemberKey(row))[attr].(*types.AttributeValueMemberM)
	if len(m.Value) != 4 || !m.Value["l"].(*types.AttributeValueMemberBOOL).Value || m.Value["n"].(*types.AttributeValueMemberN).Value != "42" {
		t.Fatalf("entry with leaving and a notice: %v, want l: BOOL true, n: N 42", m.Value)
	}
	if n := attrSize(t, attr, m); n != 70 {
		t.Errorf("entry of a 40-byte owner id, leaving, with a notice: %d bytes, want 70", n)
	}

	e.Ended = 12
	e.Heartbeat++ // a heartbeat moves forward
	if _, err := s.Heartbeat(ctx(t), row, e); err != nil {
		t.Fatal(err)
	}
	m = rawItem(t, client, s.Table(), driver.MemberKey(row))[attr].(*types.AttributeValueMemberM)
	if len(m.Value) != 5 || !m.Value["l"].(*types.AttributeValueMemberBOOL).Value || m.Value["n"].(*types.AttributeValueMemberN).Value != "42" ||
		m.Value["e"].(*types.AttributeValueMemberN).Value != "12" {
		t.Fatalf("entry with leaving, a notice and ended shards: %v, want l: BOOL true, n: N 42, e: N 12", m.Value)
	}
	if n := attrSize(t, attr, m); n != 74 {
		t.Errorf("entry of a 40-byte owner id, leaving, with a notice and ended shards: %d bytes, want 74", n)
	}
	t.Logf("entry of a 40-byte owner id: 63 bytes (70 leaving, with a notice; 74 with ended shards too); %d per 1 KB row", (1024-keySize)/63)

	// Ended alone.
	e.Leaving = false
	bumpNotice(0)
	e.Ended = 3
	e.Heartbeat++ // a heartbeat moves forward
	if _, err := s.Heartbeat(ctx(t), row, e); err != nil {
		t.Fatal(err)
	}
	m = rawItem(t, client, s.Table(), driver.MemberKey(row))[attr].(*types.AttributeValueMemberM)
	if len(m.Value) != 3 || m.Value["e"].(*types.AttributeValueMemberN).Value != "3" {
		t.Fatalf("entry with ended shards only: %v, want i, h and e: N 3", m.Value)
	}

	// Back to not leaving, no notice and no ended shards: the optional keys
	// are gone.
	e.Ended = 0
	e.Heartbeat++ // a heartbeat moves forward
	if _, err := s.Heartbeat(ctx(t), row, e); err != nil {
		t.Fatal(err)
	}
	if m = rawItem(t, client, s.Table(), driver.MemberKey(row))[attr].(*types.AttributeValueMemberM); len(m.Value) != 2 {
		t.Fatalf("entry %v, want l, n and e omitted", m.Value)
	}

	// The entry count follows joins and removals, and nothing else.
	mate := leases.Member{Owner: ownerOf("b", 40), Incarnation: "inc-b", Heartbeat: 1}
	steps := []struct {
		what string
		do   func() error
		want string
	}{
		{"a second join", func() error { return second(s.Join(ctx(t), row, mate)) }, "2"},
		{"the same join again", func() error { return second(s.Join(ctx(t), row, mate)) }, "2"},
		{"a heartbeat", func() error {
			e.Heartbeat++
			return second(s.Heartbeat(ctx(t), row, e))
		}, "2"},
		{"a new incarnation", func() error {
			next := leases.Member{Owner: owner, Incarnation: "inc-2", Heartbeat: 1}
			err := second(s.ReplaceMember(ctx(t), row, e, next))
			e = next
			return err
		}, "2"},
		{"a removal", func() error { return second(s.ReplaceMember(ctx(t), row, mate, leases.Member{})) }, "1"},
		{"the same removal again", func() error { return second(s.ReplaceMember(ctx(t), row, mate, leases.Member{})) }, "1"},
		{"the last removal", func() error { return second(s.ReplaceMember(ctx(t), row, e, leases.Member{})) }, "0"},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if n, ok := rowCount(t, client, s.Table(), row); !ok || n != st.want {
			t.Fatalf("after %s: the row's entry count n is %q (present %v), want %s", st.what, n, ok, st.want)
		}
	}
}

// TestJoinFullRow: a row whose entry count n reached RowCapacity refuses
// a Join in its condition: the conflict says Full, wraps the SDK's error,
// and n stays.
func TestJoinFullRow(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	row := 3
	for i := range driver.RowCapacity {
		if _, err := s.Join(ctx(t), row, leases.Member{Owner: ownerOf(fmt.Sprint(i), 30), Incarnation: "inc", Heartbeat: 1}); err != nil {
			t.Fatalf("join %d: %v", i+1, err)
		}
	}
	if n, _ := rowCount(t, client, s.Table(), row); n != fmt.Sprint(driver.RowCapacity) {
		t.Fatalf("a full row's entry count n is %q, want %d", n, driver.RowCapacity)
	}
	x := leases.Member{Owner: ownerOf("x", 30), Incarnation: "inc", Heartbeat: 1}
	_, err := s.Join(ctx(t), row, x)
	var ce *leases.MemberConflictError
	if !errors.As(err, &ce) || !ce.Full {
		t.Fatalf("Join in a full row: %v, want a *leases.MemberConflictError with Full set", err)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("the SDK's ConditionalCheckFailedException is not wrapped: %v", err)
	}
	if n, _ := rowCount(t, client, s.Table(), row); n != fmt.Sprint(driver.RowCapacity) {
		t.Fatalf("after the refused join the entry count n is %q, want %d", n, driver.RowCapacity)
	}
}

// TestLeaseRowFormatTakeAs: TakeAs writes owner and incarnation; a new
// incarnation's TakeAs replaces it; Release removes both.
func TestLeaseRowFormatTakeAs(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	k := leases.Key{Stream: "orders", Shard: "shardId-000000000001"}
	l, err := s.Create(ctx(t), k)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range [][2]string{{"instance-a", "inc-a"}, {"instance-b", "inc-b"}, {"instance-b", "inc-b2"}} {
		if l, err = s.TakeAs(ctx(t), l, h[0], h[1]); err != nil {
			t.Fatal(err)
		}
		item := rawItem(t, client, s.Table(), k.String())
		if v, ok := item["incarnation"].(*types.AttributeValueMemberS); !ok || v.Value != h[1] {
			t.Fatalf("after TakeAs by %s: incarnation %v, want S %s", h[0], item["incarnation"], h[1])
		}
		if v, ok := item["owner"].(*types.AttributeValueMemberS); !ok || v.Value != h[0] {
			t.Fatalf("after TakeAs by %s: owner %v", h[0], item["owner"])
		}
	}
	if _, err = s.Release(ctx(t), l, leases.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, client, s.Table(), k.String())
	for _, name := range []string{"incarnation", "owner"} {
		if _, ok := item[name]; ok {
			t.Errorf("Release kept attribute %s: %v", name, item)
		}
	}
}

// TestMembershipLostResponse: a membership write lands, its answer is
// lost, the SDK resends it. A heartbeat's resent copy meets its own entry
// and succeeds again; a Join's and a ReplaceMember's fail their condition
// (the first copy wrote the entry) and the store finds the entry already
// as asked: a success, not a conflict, and the row's entry count moved
// once.
func TestMembershipLostResponse(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	s, client := newStore(t, faults)
	owner := ownerOf("a", 40)
	row := 0
	mate := leases.Member{Owner: ownerOf("mate", 30), Incarnation: "inc-mate", Heartbeat: 1}
	if _, err := s.Join(ctx(t), row, mate); err != nil {
		t.Fatal(err)
	}
	old := leases.Member{Owner: owner, Incarnation: "inc-1", Heartbeat: 1}
	next := leases.Member{Owner: owner, Incarnation: "inc-2", Heartbeat: 1}
	bumped := next
	bumped.Notice = 1
	steps := []struct {
		name string
		do   func() ([]leases.Member, error)
		want leases.Member // the entry after; zero: none
	}{
		{"Join", func() ([]leases.Member, error) { return s.Join(ctx(t), row, old) }, old},
		{"Heartbeat", func() ([]leases.Member, error) {
			old.Heartbeat++
			return s.Heartbeat(ctx(t), row, old)
		}, leases.Member{Owner: owner, Incarnation: "inc-1", Heartbeat: 2}},
		{"ReplaceMember by a new incarnation", func() ([]leases.Member, error) { return s.ReplaceMember(ctx(t), row, old, next) }, next},
		{"ReplaceMember bumping the notice", func() ([]leases.Member, error) { return s.ReplaceMember(ctx(t), row, next, bumped) }, bumped},
		{"Heartbeat with the bumped notice", func() ([]leases.Member, error) {
			bumped.Heartbeat++
			return s.Heartbeat(ctx(t), row, bumped)
		}, leases.Member{Owner: owner, Incarnation: "inc-2", Heartbeat: 2, Notice: 1}},
		{"ReplaceMember removing", func() ([]leases.Member, error) { return s.ReplaceMember(ctx(t), row, bumped, leases.Member{}) }, leases.Member{}},
	}
	for _, st := range steps {
		before := faults.Attempts("UpdateItem")
		faults.Inject(testutil.Fault{Op: "UpdateItem", Times: 1, PerAttempt: true, LoseResponse: true})
		ms, err := st.do()
		if err != nil {
			t.Fatalf("%s whose first answer was lost: %v, want success (the write landed)", st.name, err)
		}
		if n := faults.Attempts("UpdateItem") - before; n != 2 {
			t.Fatalf("%s: %d UpdateItem attempts, want 2 (one lost, one resent)", st.name, n)
		}
		stored, err := s.Members(ctx(t), row)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range [][]leases.Member{ms, stored} {
			if !hasEntry(got, mate) {
				t.Fatalf("%s: row %v lacks the row-mate %+v", st.name, got, mate)
			}
			if st.want.Owner == "" && hasOwner(got, owner) || st.want.Owner != "" && !hasEntry(got, st.want) {
				t.Fatalf("%s: row %v, want the entry %+v", st.name, got, st.want)
			}
		}
		if n, _ := rowCount(t, client, s.Table(), row); n != fmt.Sprint(len(stored)) {
			t.Fatalf("%s: the row's entry count n is %q with %d entries: a resent write counted twice", st.name, n, len(stored))
		}
	}
}

// TestJoinLostResponseOnLastSlot: the Join that fills a row lands and its
// answer is lost; the resent copy finds the row full, but with the entry
// it wrote: a success, and the row holds RowCapacity entries.
func TestJoinLostResponseOnLastSlot(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	s, client := newStore(t, faults)
	row := 5
	for i := range driver.RowCapacity - 1 {
		if _, err := s.Join(ctx(t), row, leases.Member{Owner: ownerOf(fmt.Sprint(i), 30), Incarnation: "inc", Heartbeat: 1}); err != nil {
			t.Fatal(err)
		}
	}
	last := leases.Member{Owner: ownerOf("last", 30), Incarnation: "inc-last", Heartbeat: 1}
	before := faults.Attempts("UpdateItem")
	faults.Inject(testutil.Fault{Op: "UpdateItem", Times: 1, PerAttempt: true, LoseResponse: true})
	ms, err := s.Join(ctx(t), row, last)
	if err != nil {
		t.Fatalf("the Join that filled the row, its first answer lost: %v, want success", err)
	}
	if n := faults.Attempts("UpdateItem") - before; n != 2 {
		t.Fatalf("%d UpdateItem attempts, want 2 (one lost, one resent)", n)
	}
	if len(ms) != driver.RowCapacity || !hasEntry(ms, last) {
		t.Fatalf("the Join's answer %v, want %d entries with %+v", ms, driver.RowCapacity, last)
	}
	if n, _ := rowCount(t, client, s.Table(), row); n != fmt.Sprint(driver.RowCapacity) {
		t.Fatalf("the row's entry count n is %q, want %d", n, driver.RowCapacity)
	}
}

func hasEntry(ms []leases.Member, want leases.Member) bool {
	for _, m := range ms {
		if m == want {
			return true
		}
	}
	return false
}

func hasOwner(ms []leases.Member, owner string) bool {
	for _, m := range ms {
		if m.Owner == owner {
			return true
		}
	}
	return false
}

// hookRetryer runs hook before the SDK's first retry, between a lost
// attempt and its resent copy.
type hookRetryer struct {
	aws.RetryerV2
	once sync.Once
	hook func()
}

func (h *hookRetryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	h.once.Do(h.hook)
	return h.RetryerV2.RetryDelay(attempt, err)
}

// TestReplaceMemberLostResponseThenOthersWrite: a ReplaceMember bumping the
// notice lands and its answer is lost, then the member heartbeats before
// the SDK resends it (learning the new notice from its heartbeat's conflict
// and heartbeating again with it): the resent copy fails, the entry found is
// not the one asked for, and the call reports a conflict carrying the
// entry, not a success.
func TestReplaceMemberLostResponseThenOthersWrite(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	table := testutil.TableName(t)
	plain := testutil.DynamoClient(t)
	testutil.CreateLeaseTable(t, plain, table)
	member := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(plain))

	owner := ownerOf("a", 40)
	row := 1
	e := leases.Member{Owner: owner, Incarnation: "inc-1", Heartbeat: 5}
	if _, err := member.Join(ctx(t), row, e); err != nil {
		t.Fatal(err)
	}
	bumped := e
	bumped.Notice = 1
	alive := e
	alive.Heartbeat++
	var hookErr error
	retryer := &hookRetryer{hook: func() {
		// The member's heartbeat with the notice it knew meets the bump.
		_, err := member.Heartbeat(ctx(t), row, alive)
		var ce *leases.MemberConflictError
		if !errors.As(err, &ce) || ce.Current != bumped {
			hookErr = fmt.Errorf("heartbeat with the old notice after the bump landed: %v, want a *leases.MemberConflictError carrying %+v", err, bumped)
			return
		}
		alive.Notice = ce.Current.Notice
		_, hookErr = member.Heartbeat(ctx(t), row, alive)
	}}
	client := testutil.DynamoClient(t, faults.DynamoOptions, func(o *dynamodb.Options) {
		std, ok := o.Retryer.(aws.RetryerV2)
		if !ok {
			std = retry.NewStandard()
		}
		retryer.RetryerV2 = std
		o.Retryer = retryer
	})
	requester := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(client))

	faults.Inject(testutil.Fault{Op: "UpdateItem", Times: 1, PerAttempt: true, LoseResponse: true})
	_, err := requester.ReplaceMember(ctx(t), row, e, bumped)
	if hookErr != nil {
		t.Fatalf("the member's heartbeat between the attempts: %v", hookErr)
	}
	var ce *leases.MemberConflictError
	if !errors.As(err, &ce) || !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("ReplaceMember whose write was overwritten before its resent copy: %v, want a *leases.MemberConflictError", err)
	}
	if ce.Current != alive {
		t.Fatalf("conflict carries %+v, want the member's entry %+v", ce.Current, alive)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("the SDK's ConditionalCheckFailedException is not wrapped: %v", err)
	}
}

// TestMembershipMisconfigured: the membership methods map a missing table
// and denied access like the lease methods, naming the table.
func TestMembershipMisconfigured(t *testing.T) {
	t.Parallel()
	owner := ownerOf("a", 20)
	e := leases.Member{Owner: owner, Incarnation: "inc", Heartbeat: 1}
	calls := func(s *dynamo.Store) map[string]error {
		return map[string]error{
			"Join":           second(s.Join(ctx(t), 0, e)),
			"Heartbeat":      second(s.Heartbeat(ctx(t), 0, e)),
			"Members":        second(s.Members(ctx(t), 0)),
			"ReplaceMember":  second(s.ReplaceMember(ctx(t), 0, e, leases.Member{})),
			"Header":         second(s.Header(ctx(t))),
			"BumpRow":        s.BumpRow(ctx(t), 0),
			"ReportVanished": s.ReportVanished(ctx(t)),
			"TakeAs":         second(s.TakeAs(ctx(t), leases.Lease{Key: leases.Key{Stream: "orders", Shard: "shardId-0"}, Counter: 1}, owner, "inc")),
			"CreateAs":       second(s.CreateAs(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-0"}, owner, "inc", leases.Checkpoint{Sequence: "1"}, "")),
		}
	}
	t.Run("MissingTable", func(t *testing.T) {
		table := testutil.TableName(t) // never created
		s := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(testutil.DynamoClient(t)))
		for name, err := range calls(s) {
			var notFound *types.ResourceNotFoundException
			if !errors.Is(err, leases.ErrMisconfigured) || !errors.As(err, &notFound) {
				t.Errorf("%s on a missing table: %v, want leases.ErrMisconfigured wrapping ResourceNotFoundException", name, err)
				continue
			}
			for _, want := range []string{table, "not found", "create-table"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %q does not say %q", name, err, want)
				}
			}
		}
	})
	t.Run("AccessDenied", func(t *testing.T) {
		faults := &testutil.Faults{}
		s, _ := newStore(t, faults)
		faults.Inject(testutil.Fault{Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"}})
		for name, err := range calls(s) {
			if !errors.Is(err, leases.ErrMisconfigured) {
				t.Errorf("%s with access denied: %v, want leases.ErrMisconfigured", name, err)
				continue
			}
			for _, want := range []string{s.Table(), "access denied", "dynamodb:GetItem", "dynamodb:UpdateItem"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %q does not say %q", name, err, want)
				}
			}
		}
	})
	t.Run("InvalidTableName", func(t *testing.T) {
		s := dynamo.New(testutil.Config(t), "no spaces allowed")
		for name, err := range calls(s) {
			if !errors.Is(err, leases.ErrMisconfigured) {
				t.Errorf("%s with an invalid table name: %v, want leases.ErrMisconfigured", name, err)
			}
		}
	})
}

// TestMembershipMalformedEntry: an entry another tool wrote in a shape the
// store does not know is reported, naming the table and the attribute, not
// read as a member.
func TestMembershipMalformedEntry(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	_, err := client.UpdateItem(testutil.WithoutFaults(ctx(t)), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.Table()),
		Key:                       map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: driver.MemberKey(0)}},
		UpdateExpression:          aws.String("SET #m = :v"),
		ExpressionAttributeNames:  map[string]string{"#m": "m_broken"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "not a map"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Members(ctx(t), 0)
	if err == nil || !strings.Contains(err.Error(), s.Table()) || !strings.Contains(err.Error(), "m_broken") {
		t.Fatalf("Members of a row with a malformed entry: %v, want an error naming the table and the attribute", err)
	}
}

// TestHeaderFormat pins the layout of the membership header: the item
// "#members", one number r<row> per bumped row and vanished, nothing else.
func TestHeaderFormat(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	if item := rawItem(t, client, s.Table(), driver.MemberHeaderKey); item != nil {
		t.Fatalf("a fresh table has a header item: %v", item)
	}
	for _, r := range []int{3, 3, 0, driver.MaxMemberRows - 1} {
		if err := s.BumpRow(ctx(t), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReportVanished(ctx(t)); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, client, s.Table(), driver.MemberHeaderKey)
	want := map[string]string{"r3": "2", "r0": "1", fmt.Sprintf("r%d", driver.MaxMemberRows-1): "1", "vanished": "1"}
	if k, ok := item["lease_key"].(*types.AttributeValueMemberS); !ok || k.Value != "#members" {
		t.Fatalf("the header's key is %v, want S #members", item["lease_key"])
	}
	if len(item) != len(want)+1 {
		t.Fatalf("the header item holds %v, want lease_key and %v", item, want)
	}
	for name, v := range want {
		if n, ok := item[name].(*types.AttributeValueMemberN); !ok || n.Value != v {
			t.Errorf("header attribute %s is %v, want N %s", name, item[name], v)
		}
	}
	h, err := s.Header(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Rows) != 3 || h.Rows[3] != 2 || h.Rows[0] != 1 || h.Rows[driver.MaxMemberRows-1] != 1 || h.Vanished != 1 {
		t.Fatalf("Header: %+v, want rows 3: 2, 0: 1, %d: 1 and vanished 1", h, driver.MaxMemberRows-1)
	}
	// The header is no membership row.
	if ms, err := s.Members(ctx(t), 0); err != nil || len(ms) != 0 {
		t.Fatalf("Members(0) after header bumps: %v, %v; want no entries", ms, err)
	}
}

// TestHeaderMalformed: a header attribute another tool wrote in a shape
// the store does not know is reported, naming the table and the
// attribute.
func TestHeaderMalformed(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]types.AttributeValue{
		"r5":       &types.AttributeValueMemberS{Value: "not a number"},
		"rfive":    &types.AttributeValueMemberN{Value: "1"},
		"vanished": &types.AttributeValueMemberS{Value: "many"},
	} {
		t.Run(name, func(t *testing.T) {
			s, client := newStore(t, &testutil.Faults{})
			_, err := client.UpdateItem(testutil.WithoutFaults(ctx(t)), &dynamodb.UpdateItemInput{
				TableName:                 aws.String(s.Table()),
				Key:                       map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: driver.MemberHeaderKey}},
				UpdateExpression:          aws.String("SET #a = :v"),
				ExpressionAttributeNames:  map[string]string{"#a": name},
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": v},
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Header(ctx(t))
			if err == nil || !strings.Contains(err.Error(), s.Table()) || !strings.Contains(err.Error(), name) {
				t.Fatalf("Header with a malformed attribute %s: %v, want an error naming the table and the attribute", name, err)
			}
		})
	}
}

// TestHeaderLostResponse: a bump whose answer is lost is resent by the
// SDK; the increments need no condition, so the resent copy lands too: the
// call succeeds and the version moved (by one or two: a version read as
// changed only makes members re-read a row).
func TestHeaderLostResponse(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	s, _ := newStore(t, faults)
	for name, bump := range map[string]func() error{
		"BumpRow":        func() error { return s.BumpRow(ctx(t), 2) },
		"ReportVanished": func() error { return s.ReportVanished(ctx(t)) },
	} {
		before, err := s.Header(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		attempts := faults.Attempts("UpdateItem")
		faults.Inject(testutil.Fault{Op: "UpdateItem", Times: 1, PerAttempt: true, LoseResponse: true})
		if err := bump(); err != nil {
			t.Fatalf("%s whose first answer was lost: %v, want success", name, err)
		}
		if n := faults.Attempts("UpdateItem") - attempts; n != 2 {
			t.Fatalf("%s: %d UpdateItem attempts, want 2 (one lost, one resent)", name, n)
		}
		after, err := s.Header(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		moved := after.Rows[2] - before.Rows[2]
		if name == "ReportVanished" {
			moved = after.Vanished - before.Vanished
		}
		if moved < 1 || moved > 2 {
			t.Fatalf("%s whose first answer was lost moved the counter by %d, want 1 or 2", name, moved)
		}
		t.Logf("%s with a lost answer moved its counter by %d", name, moved)
	}
}
