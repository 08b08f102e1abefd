package ddbmeter

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The most one item may consume, as DynamoDB limits a partition (and an
// item is the finest a partition can be split to): read capacity units
// and write capacity units per second.
const (
	ItemRCULimit = 3000
	ItemWCULimit = 1000
)

// ThrottlingMessage is the message of the ThrottlingException DynamoDB
// returns when a hot key of an on-demand table is throttled;
// ProvisionedMessage that of the ProvisionedThroughputExceededException of
// a provisioned table.
const (
	ThrottlingMessage = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. " +
		"If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
	ProvisionedMessage = "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."
)

// The throttling reasons of a hot item (types.ThrottlingReason.Reason).
const (
	ReasonReadKeyRange  = "TableReadKeyRangeThroughputExceeded"
	ReasonWriteKeyRange = "TableWriteKeyRangeThroughputExceeded"
)

// An Option configures a Table (NewTable).
type Option func(*Table)

// NoThrottling makes the table admit every call, however hot its item:
// for callers that measure units only and drive items harder than
// DynamoDB would allow (a test hammering one row in real time, say).
func NoThrottling() Option { return func(t *Table) { t.unthrottled = true } }

// Provisioned makes the table answer a throttled call as a provisioned
// DynamoDB table does, with a *types.ProvisionedThroughputExceededException,
// instead of the on-demand table's *types.ThrottlingException. The limits
// are the same: per item, ItemRCULimit and ItemWCULimit.
func Provisioned() Option { return func(t *Table) { t.provisioned = true } }

// bucket is a token bucket of capacity units: it holds at most one second
// of its rate, refilled continuously on time.Now (virtual time inside a
// testing/synctest bubble).
type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date; zero: full
}

// take takes cost units at now if the bucket holds them, and reports
// whether it did.
func (b *bucket) take(now time.Time, rate, cost float64) bool {
	if b.at.IsZero() {
		b.tokens = rate
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = min(rate, b.tokens+rate*d.Seconds())
	}
	if !now.Before(b.at) {
		b.at = now
	}
	if b.tokens < cost {
		return false
	}
	b.tokens -= cost
	return true
}

// meter is one item's throttling and peak accounting.
type meter struct {
	read, write bucket
	// sec is the clock second (Unix) secRCU and secWCU were consumed in;
	// peak the most of one second since the table's creation or its last
	// ResetPeaks.
	sec            int64
	secRCU, secWCU float64
	peak           Peak
}

// Peak is the most capacity an item consumed within one second of the
// clock (from a whole second to the next), reads and writes apart.
type Peak struct {
	RCU, WCU float64
}

// meterOf returns key's meter; t.mu is held.
func (t *Table) meterOf(key string) *meter {
	m := t.meters[key]
	if m == nil {
		m = &meter{}
		t.meters[key] = m
	}
	return m
}

// admit takes u's units from key's bucket at now, and reports whether the
// call may go on; if not, it counts the throttled call to id and key.
// Admitted units count towards key's peak. t.mu is held.
func (t *Table) admit(id int, key string, now time.Time, u Units) bool {
	m := t.meterOf(key)
	if !t.unthrottled {
		b, rate, cost := &m.read, float64(ItemRCULimit), u.RCU // a call reads or writes
		if u.WCU > 0 {
			b, rate, cost = &m.write, ItemWCULimit, u.WCU
		}
		if !b.take(now, rate, cost) {
			t.charge(id, key, Units{Throttled: 1})
			return false
		}
	}
	if s := now.Unix(); s != m.sec {
		m.sec, m.secRCU, m.secWCU = s, 0, 0
	}
	m.secRCU += u.RCU
	m.secWCU += u.WCU
	m.peak.RCU = max(m.peak.RCU, m.secRCU)
	m.peak.WCU = max(m.peak.WCU, m.secWCU)
	return true
}

// ResetPeaks starts the peaks Bill reports afresh: from now on, each
// item's peak is the most it consumed in one second since this call.
func (t *Table) ResetPeaks() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.meters {
		m.secRCU, m.secWCU, m.peak = 0, 0, Peak{}
	}
}

// throttled returns the error a real DynamoDB client that makes one
// attempt returns for a call op of table on a hot item (write or read):
// the service's exception (a ThrottlingException, or for a Provisioned
// table a ProvisionedThroughputExceededException, with the key-range
// reason), in the HTTP response error, the attempts error and the
// operation error the SDK wraps it in, so
// that errors.As finds each as it would against DynamoDB and the SDK's
// retryer would see a throttle (retry.DefaultThrottles). t.mu is held.
func (t *Table) throttled(op, table string, write bool) error {
	reason := ReasonReadKeyRange
	if write {
		reason = ReasonWriteKeyRange
	}
	reasons := []types.ThrottlingReason{{Reason: aws.String(reason), Resource: aws.String(tableARN(table))}}
	var api error = &types.ThrottlingException{Message: aws.String(ThrottlingMessage), ThrottlingReasons: reasons}
	if t.provisioned {
		api = &types.ProvisionedThroughputExceededException{Message: aws.String(ProvisionedMessage), ThrottlingReasons: reasons}
	}
	id := t.requestID()
	resp := &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request",
		Header: http.Header{"X-Amzn-Requestid": {id}, "Content-Type": {"application/x-amz-json-1.0"}}}
	// One attempt, as a client with RetryMaxAttempts 1 reports it: the
	// table's own Client does not retry (a real client's retries are
	// another attempt each, see ServeHTTP).
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: &retry.MaxAttemptsError{Attempt: 1, Err: &awshttp.ResponseError{
		RequestID:     id,
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: api},
	}}}
}

// requestID returns a request id of the table's, for an answer or an
// error.
func (t *Table) requestID() string {
	return "DDBMETER" + strconv.FormatUint(t.requests.Add(1), 10)
}

// tableARN is the ARN the throttling reasons name for table (in an account
// and region of none of anyone's).
func tableARN(table string) string {
	if table == "" {
		table = "ddbmeter"
	}
	return fmt.Sprintf("arn:aws:dynamodb:us-east-1:000000000000:table/%s", table)
}
