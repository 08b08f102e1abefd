package ddbmeter_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/testkit/ddbmeter"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/leases/leasestest"
)

// handlerTransport takes a real client's requests to a handler in the
// process: no socket, so it also runs inside a synctest bubble.
type handlerTransport struct{ h http.Handler }

func (h handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// sdkClient returns a real dynamodb.Client whose requests c serves (see
// ddbmeter.Client.ServeHTTP); attempts is its RetryMaxAttempts (0: the
// SDK's default retryer), counted calls the requests c was sent.
func sdkClient(c *ddbmeter.Client, attempts int, calls *int) *dynamodb.Client {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls != nil {
			*calls++
		}
		c.ServeHTTP(w, r)
	})
	return dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://ddbmeter.invalid"), Credentials: aws.AnonymousCredentials{},
		HTTPClient: &http.Client{Transport: handlerTransport{h}}, RetryMaxAttempts: attempts,
	})
}

var hotKey = map[string]types.AttributeValue{ddbmeter.KeyAttr: &types.AttributeValueMemberS{Value: "hot"}}

// bump is a write of one unit (the item stays under 1 KB) that counts
// itself in the item (n), conditional on nothing.
func bump() *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{TableName: aws.String("meter"), Key: hotKey, UpdateExpression: aws.String("SET pad = :p ADD n :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": &types.AttributeValueMemberS{Value: strings.Repeat("p", 900)}, ":one": &types.AttributeValueMemberN{Value: "1"},
		}}
}

// checkThrottle fails t unless err is what a real DynamoDB client returns
// for a call op throttled with reason, as the SDK shapes it: an operation
// error of DynamoDB's, around an HTTP 400 response error with a request
// id, around the service's exception of type E (with reason), which the
// SDK's retryer counts as a throttle.
func checkThrottle[E interface {
	*types.ThrottlingException | *types.ProvisionedThroughputExceededException
	smithy.APIError
}](t *testing.T, err error, op, reason string) {
	t.Helper()
	var (
		exc  E
		oe   *smithy.OperationError
		resp *awshttp.ResponseError
	)
	if !errors.As(err, &exc) {
		t.Fatalf("%s: %v (%T), want a %T", op, err, err, exc)
	}
	var reasons []types.ThrottlingReason
	switch e := any(exc).(type) {
	case *types.ThrottlingException:
		reasons = e.ThrottlingReasons
	case *types.ProvisionedThroughputExceededException:
		reasons = e.ThrottlingReasons
	}
	if len(reasons) != 1 || aws.ToString(reasons[0].Reason) != reason || !strings.HasSuffix(aws.ToString(reasons[0].Resource), ":table/meter") {
		t.Errorf("%s: throttling reasons %+v, want one, %s of table/meter", op, reasons, reason)
	}
	if !errors.As(err, &oe) || oe.Service() != "DynamoDB" || oe.Operation() != op {
		t.Errorf("%v: not an operation error of DynamoDB %s", err, op)
	}
	if !errors.As(err, &resp) || resp.HTTPStatusCode() != http.StatusBadRequest || resp.ServiceRequestID() == "" {
		t.Errorf("%v: not an HTTP 400 response error with a request id", err)
	}
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) != aws.TrueTernary {
		t.Errorf("%v: the SDK's retryer would not see a throttle", err)
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) != aws.TrueTernary {
		t.Errorf("%v: the SDK's retryer would not retry it", err)
	}
}

// TestHotItemWriteThrottled drives one item's writes of one unit through a
// real dynamodb.Client (no retries): 900 a second for 10 seconds, none
// throttled; then 1,200 a second for 10 seconds, which the item's bucket
// (a second of 1,000 WCU, refilled at 1,000 a second) admits 11,000 of,
// throttling the rest with the SDK's ThrottlingException. Throttled writes
// are neither applied nor billed, and are counted.
func TestHotItemWriteThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		tbl := ddbmeter.NewTable()
		c := sdkClient(tbl.Client(1), 1, nil)
		drive := func(perSecond int, d time.Duration) (ok, throttled int) {
			t.Helper()
			n := int(d.Seconds() * float64(perSecond))
			for range n {
				_, err := c.UpdateItem(ctx, bump())
				if err == nil {
					ok++
				} else {
					if throttled == 0 {
						checkThrottle[*types.ThrottlingException](t, err, "UpdateItem", ddbmeter.ReasonWriteKeyRange)
					}
					throttled++
				}
				time.Sleep(time.Second / time.Duration(perSecond))
			}
			return ok, throttled
		}
		if ok, thr := drive(900, 10*time.Second); thr != 0 || ok != 9000 {
			t.Fatalf("900 writes a second for 10s: %d admitted, %d throttled; want all 9,000 admitted", ok, thr)
		}
		tbl.ResetPeaks()
		ok, thr := drive(1200, 10*time.Second)
		if ok < 10_995 || ok > 11_005 || ok+thr != 12_000 {
			t.Errorf("1,200 writes a second for 10s: %d admitted, %d throttled; want about 11,000 admitted (a full bucket and 10s of refill)", ok, thr)
		}
		b := tbl.Bill()
		u := b.ByKey["hot"]
		if u.Throttled != int64(thr) || b.ByClient[1].Throttled != int64(thr) || u.Writes != int64(9000+ok) || u.WCU != float64(9000+ok) {
			t.Errorf("bill %+v (by key), %+v (by client): want %d throttled, %d writes of one unit", u, b.ByClient[1], thr, 9000+ok)
		}
		if n := tbl.Item("hot")["n"].(*types.AttributeValueMemberN).Value; n != strconv.Itoa(9000+ok) {
			t.Errorf("the item counted %s writes, want %d: a throttled write was applied", n, 9000+ok)
		}
		// The peak second: at most the burst (a full bucket) and a second
		// of refill, at least the rate.
		if p := b.Peaks["hot"]; p.WCU < ddbmeter.ItemWCULimit || p.WCU > 2*ddbmeter.ItemWCULimit || p.RCU != 0 {
			t.Errorf("peak %+v, want between %d and %d WCU in a second", p, ddbmeter.ItemWCULimit, 2*ddbmeter.ItemWCULimit)
		}
		t.Logf("1,200 writes a second for 10s: %d admitted, %d throttled; peak second %v WCU", ok, thr, b.Peaks["hot"].WCU)
	})
}

// TestThrottleErrorAsTheSDKs: a throttled call answers the same error
// through the table's own dynamo.Client (as the simulations use it) as
// through a real dynamodb.Client served by the table over HTTP: a
// ThrottlingException, or a ProvisionedThroughputExceededException for a
// Provisioned table, wrapped as the SDK wraps it.
func TestThrottleErrorAsTheSDKs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		for _, provisioned := range []bool{false, true} {
			var opts []ddbmeter.Option
			if provisioned {
				opts = append(opts, ddbmeter.Provisioned())
			}
			tbl := ddbmeter.NewTable(opts...)
			direct := tbl.Client(0)
			for i := range ddbmeter.ItemWCULimit {
				if _, err := direct.UpdateItem(ctx, bump()); err != nil {
					t.Fatalf("write %d of a full bucket: %v", i, err)
				}
			}
			_, err1 := direct.UpdateItem(ctx, bump())
			_, err2 := sdkClient(direct, 1, nil).UpdateItem(ctx, bump())
			for _, err := range []error{err1, err2} {
				if provisioned {
					checkThrottle[*types.ProvisionedThroughputExceededException](t, err, "UpdateItem", ddbmeter.ReasonWriteKeyRange)
				} else {
					checkThrottle[*types.ThrottlingException](t, err, "UpdateItem", ddbmeter.ReasonWriteKeyRange)
				}
			}
			if got := tbl.Bill().ByKey["hot"].Throttled; got != 2 {
				t.Errorf("%d throttled calls counted, want 2", got)
			}
		}
	})
}

// TestSDKRetriesThrottle: behind a real dynamodb.Client at the SDK's
// default retryer, a write to an item whose bucket is empty is throttled,
// retried by the SDK after its backoff (virtual time), and succeeds once
// the bucket has refilled.
func TestSDKRetriesThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		tbl := ddbmeter.NewTable()
		direct := tbl.Client(0)
		for range ddbmeter.ItemWCULimit {
			if _, err := direct.UpdateItem(ctx, bump()); err != nil {
				t.Fatal(err)
			}
		}
		var calls int
		start := time.Now()
		if _, err := sdkClient(direct, 0, &calls).UpdateItem(ctx, bump()); err != nil {
			t.Fatalf("the SDK did not retry the throttled write to success: %v", err)
		}
		thr := tbl.Bill().ByKey["hot"].Throttled
		if thr < 1 || int64(calls) != thr+1 || time.Since(start) <= 0 {
			t.Errorf("%d requests, %d throttled, in %v: want throttled ones retried after a backoff, then one admitted", calls, thr, time.Since(start))
		}
		t.Logf("%d requests (%d throttled) over %v", calls, thr, time.Since(start))
	})
}

// TestHotItemReadThrottled: strongly consistent reads of an item over 4 KB
// cost 2 RCU each, so the item's 3,000 RCU/s admit 1,500 a second: 1,500
// at one instant from a full bucket, the next throttled; a second later
// 1,500 more, a quarter second later 375; then 1,500 a second for 20
// seconds, none throttled; 1,600 a second for 30 seconds, about 1,500
// throttled (the full bucket lasts 15 seconds).
func TestHotItemReadThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		tbl := ddbmeter.NewTable()
		c := tbl.Client(2)
		if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("meter"), Key: hotKey, UpdateExpression: aws.String("SET pad = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: strings.Repeat("p", 5000)}}}); err != nil {
			t.Fatal(err)
		}
		if size := ddbmeter.Size(tbl.Item("hot")); ddbmeter.ReadUnits(size) != 2 {
			t.Fatalf("item of %d bytes: %d read units, want 2", size, ddbmeter.ReadUnits(size))
		}
		sdk := sdkClient(c, 1, nil)
		read := func() error {
			_, err := sdk.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("meter"), Key: hotKey, ConsistentRead: aws.Bool(true)})
			return err
		}
		burst := func(want int) {
			t.Helper()
			for i := range want {
				if err := read(); err != nil {
					t.Fatalf("read %d of %d at one instant: %v", i+1, want, err)
				}
			}
			checkThrottle[*types.ThrottlingException](t, read(), "GetItem", ddbmeter.ReasonReadKeyRange)
		}
		burst(1500)
		time.Sleep(time.Second)
		burst(1500)
		time.Sleep(time.Second / 4)
		burst(375)
		time.Sleep(time.Second) // full again
		// The sustained rates on the table's own client (the same buckets;
		// the SDK's stack is slow for 80,000 calls).
		drive := func(perSecond int, d time.Duration) (throttled int) {
			for range int(d.Seconds() * float64(perSecond)) {
				if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("meter"), Key: hotKey, ConsistentRead: aws.Bool(true)}); err != nil {
					throttled++
				}
				time.Sleep(time.Second / time.Duration(perSecond))
			}
			return throttled
		}
		if thr := drive(1500, 20*time.Second); thr != 0 {
			t.Errorf("1,500 reads a second of a 2-RCU item for 20s: %d throttled, want none", thr)
		}
		if thr := drive(1600, 30*time.Second); thr < 1490 || thr > 1510 {
			t.Errorf("1,600 reads a second of a 2-RCU item for 30s: %d throttled, want about 1,500", thr)
		}
		b := tbl.Bill()
		if u := b.ByKey["hot"]; u.RCU != 2*float64(u.Reads) {
			t.Errorf("bill %+v: want 2 RCU a read, throttled reads not billed", u)
		}
		if p := b.Peaks["hot"]; p.RCU < ddbmeter.ItemRCULimit || p.RCU > 2*ddbmeter.ItemRCULimit {
			t.Errorf("peak %+v, want between %d and %d RCU in a second", p, ddbmeter.ItemRCULimit, 2*ddbmeter.ItemRCULimit)
		}
	})
}

// TestConformanceOverHTTP runs the leases conformance suite on the
// DynamoDB store over a real dynamodb.Client served by the table
// (Client.ServeHTTP): the JSON protocol carries every request and answer
// the store uses, conditional failures' old items included.
func TestConformanceOverHTTP(t *testing.T) {
	tbl := ddbmeter.NewTable()
	s := dynamo.New(aws.Config{}, "meter", dynamo.WithDynamoDBClient(sdkClient(tbl.Client(0), 0, nil)))
	leasestest.Run(t, func(*testing.T) leases.Store { return s })
	if b := tbl.Bill().ByClient[0]; b.Reads == 0 || b.Writes == 0 || b.FailedWrites == 0 {
		t.Fatalf("bill %+v: the suite's reads, writes and failed writes were not all billed", b)
	}
}

// TestNoThrottling: a table made with NoThrottling admits any rate.
func TestNoThrottling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tbl := ddbmeter.NewTable(ddbmeter.NoThrottling())
		c := tbl.Client(0)
		for i := range 5 * ddbmeter.ItemWCULimit {
			if _, err := c.UpdateItem(context.Background(), bump()); err != nil {
				t.Fatalf("write %d at one instant: %v", i, err)
			}
		}
		if p := tbl.Bill().Peaks["hot"]; p.WCU != 5*ddbmeter.ItemWCULimit {
			t.Errorf("peak %+v, want %d WCU", p, 5*ddbmeter.ItemWCULimit)
		}
	})
}
