package kinesisx

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

const arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"

func TestStreamNames(t *testing.T) {
	if !IsARN(arn) || IsARN("orders") {
		t.Fatalf("IsARN wrong")
	}
	if got := Name(arn); got != "orders" {
		t.Errorf("Name(%q) = %q, want orders", arn, got)
	}
	if got := Name("orders"); got != "orders" {
		t.Errorf("Name(orders) = %q", got)
	}
	if name, a := Fields("orders"); aws.ToString(name) != "orders" || a != nil {
		t.Errorf("Fields(orders) = %v, %v", name, a)
	}
	if name, a := Fields(arn); name != nil || aws.ToString(a) != arn {
		t.Errorf("Fields(arn) = %v, %v", name, a)
	}
	if in := GetRecordsInput(arn, "it", 0); aws.ToString(in.StreamARN) != arn || in.Limit != nil {
		t.Errorf("GetRecordsInput(arn) = %+v", in)
	}
	if in := GetRecordsInput("orders", "it", 5); in.StreamARN != nil || aws.ToInt32(in.Limit) != 5 {
		t.Errorf("GetRecordsInput(name) = %+v", in)
	}
}

// TestLeaseStream: a namespace goes before the stream's name, however the
// stream is named; without one the name alone, as always; the keys it
// makes are lease keys that split back on their last colon.
func TestLeaseStream(t *testing.T) {
	for _, tc := range []struct{ ns, stream, want string }{
		{"", "orders", "orders"},
		{"", arn, "orders"},
		{"acct-b", "orders", "acct-b/orders"},
		{"acct-b", arn, "acct-b/orders"},
	} {
		got := LeaseStream(tc.ns, tc.stream)
		if got != tc.want {
			t.Errorf("LeaseStream(%q, %q) = %q, want %q", tc.ns, tc.stream, got, tc.want)
		}
		if IsLeaseStream(got) != (tc.ns != "") {
			t.Errorf("IsLeaseStream(%q) = %v", got, !(tc.ns != ""))
		}
		k, err := leases.ParseKey(got + ":shardId-000000000001")
		if err != nil || k.Stream != tc.want || k.Shard != "shardId-000000000001" {
			t.Errorf("ParseKey of %q's row: %+v, %v", got, k, err)
		}
		if err := leases.ValidateLeaseKey(k); err != nil {
			t.Errorf("ValidateLeaseKey(%v): %v", k, err)
		}
	}
	if IsLeaseStream(arn) || IsLeaseStream("orders") {
		t.Errorf("IsLeaseStream of a stream ARN or name: true")
	}
}

func TestIteratorInput(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	for _, c := range []struct {
		p    kltype.StartPosition
		typ  types.ShardIteratorType
		seq  string
		time bool
	}{
		{kltype.Latest, types.ShardIteratorTypeLatest, "", false},
		{kltype.TrimHorizon, types.ShardIteratorTypeTrimHorizon, "", false},
		{kltype.AtTimestamp(at), types.ShardIteratorTypeAtTimestamp, "", true},
		{kltype.AtSequenceNumber("49"), types.ShardIteratorTypeAtSequenceNumber, "49", false},
		{kltype.AfterSequenceNumber("50"), types.ShardIteratorTypeAfterSequenceNumber, "50", false},
	} {
		in := IteratorInput(arn, "shardId-000000000001", c.p)
		if in.ShardIteratorType != c.typ || aws.ToString(in.StartingSequenceNumber) != c.seq ||
			(in.Timestamp != nil) != c.time || aws.ToString(in.StreamARN) != arn || aws.ToString(in.ShardId) != "shardId-000000000001" {
			t.Errorf("IteratorInput(%v) = %+v", c.p, in)
		}
		if c.time && !in.Timestamp.Equal(at) {
			t.Errorf("IteratorInput(%v): time %v", c.p, in.Timestamp)
		}
	}
}

func TestPositionAfter(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	for _, c := range []struct {
		cp   leases.Checkpoint
		want kltype.StartPosition
		ok   bool
	}{
		{leases.Checkpoint{}, kltype.StartPosition{}, false},
		{leases.Checkpoint{Sequence: "49"}, kltype.AfterSequenceNumber("49"), true},
		{leases.Checkpoint{Sequence: "49", SubSequence: 3}, kltype.AtSequenceNumber("49"), true},
		{leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, kltype.TrimHorizon, true},
		{leases.Checkpoint{Sequence: leases.RewindLatest}, kltype.Latest, true},
		{leases.RewindAtSequence("51"), kltype.AtSequenceNumber("51"), true},
		{leases.RewindAtTimestamp(at), kltype.AtTimestamp(at), true},
	} {
		got, ok := PositionAfter(c.cp)
		if ok != c.ok || got.Type != c.want.Type || got.Sequence != c.want.Sequence || !got.Time.Equal(c.want.Time) {
			t.Errorf("PositionAfter(%v) = %v, %v; want %v, %v", c.cp, got, ok, c.want, c.ok)
		}
	}
}

func TestClassify(t *testing.T) {
	api := func(code string) error {
		return fmt.Errorf("shard x: GetRecords: %w", &smithy.GenericAPIError{Code: code, Message: "m"})
	}
	for _, c := range []struct {
		name                                 string
		err                                  error
		denied, notFound, throttled, perm, x bool
	}{
		{"denied", api("AccessDeniedException"), true, false, false, true, false},
		{"expired token", api("ExpiredTokenException"), true, false, false, true, false},
		{"kms", &types.KMSAccessDeniedException{Message: aws.String("m")}, true, false, false, true, false},
		{"not found", fmt.Errorf("w: %w", &types.ResourceNotFoundException{Message: aws.String("m")}), false, true, false, true, false},
		{"invalid", &types.InvalidArgumentException{Message: aws.String("m")}, false, false, false, true, false},
		{"throttled", &types.ProvisionedThroughputExceededException{Message: aws.String("m")}, false, false, true, false, false},
		{"dynamo throttled", api("ThrottlingException"), false, false, true, false, false},
		{"expired iterator", &types.ExpiredIteratorException{Message: aws.String("m")}, false, false, false, false, true},
		{"plain", errors.New("connection reset"), false, false, false, false, false},
	} {
		if IsAccessDenied(c.err) != c.denied || IsNotFound(c.err) != c.notFound || IsThrottled(c.err) != c.throttled ||
			Permanent(c.err) != c.perm || IsExpiredIterator(c.err) != c.x {
			t.Errorf("%s: denied %v notFound %v throttled %v permanent %v expired %v", c.name,
				IsAccessDenied(c.err), IsNotFound(c.err), IsThrottled(c.err), Permanent(c.err), IsExpiredIterator(c.err))
		}
	}
}
