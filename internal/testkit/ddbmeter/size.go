// Package ddbmeter is an in-memory DynamoDB table that bills and throttles
// every call as DynamoDB would: a dynamo.Client (GetItem and UpdateItem,
// with the expressions package leases/dynamo sends; also served over
// DynamoDB's JSON protocol, Client.ServeHTTP) whose calls are charged read
// and write capacity units from the sizes of the items they touch, per
// caller and per item, and throttled when their item is hot.
//
// It exists to measure what the lease protocol costs on DynamoDB without
// DynamoDB: the simulation (internal/testkit/sim) runs fleets of engine
// Groups, each on its own leases/dynamo Store, on one Table in virtual
// time, and reads the bill. Because the real Store builds every request,
// the items and their sizes are exactly the ones it would write: no
// parallel description of the row format to keep in step. An Endpoint
// serves tables by name over HTTP, with CreateTable and DescribeTable, to
// other processes: the fulfilment demo's instances (examples/fulfilment/demo).
//
// Billing, as documented for DynamoDB (on-demand and provisioned alike):
//
//   - an item's size is the sum of its attribute names' UTF-8 lengths and
//     of its values' sizes (Size);
//   - UpdateItem consumes ceil(max(size before, size after) / 1 KB) write
//     units, at least one; a write whose condition fails consumes the same
//     (the size after being the item the update would have made);
//   - a strongly consistent GetItem consumes ceil(size / 4 KB) read units,
//     at least one (also for an item that does not exist); an eventually
//     consistent one half of that.
//
// Throttling, as DynamoDB limits a partition in both capacity modes (its
// "key range throughput exceeded"), per item: an item is the finest a
// partition can be split to, so a real table may throttle sooner (a
// partition holds many items) but not later. It is on unless the table is
// made with NoThrottling:
//
//   - each item has a read bucket of ItemRCULimit (3,000) units and a
//     write bucket of ItemWCULimit (1,000) units, refilled continuously at
//     that many units a second on time.Now (virtual time inside a
//     testing/synctest bubble) and holding at most one second of them,
//     the burst an idle item allows. DynamoDB's burst capacity (up to 300
//     seconds of a provisioned table's unused capacity) is the table's, not
//     an item's, and is not modelled;
//   - a call is admitted if its item's bucket holds the units it is billed
//     (by the rules above, a failed condition's write included), which it
//     takes; otherwise it is throttled: neither applied nor billed, counted
//     (Units.Throttled), and answered with the error a DynamoDB client
//     making one attempt returns: a *types.ThrottlingException (an
//     on-demand table's; a *types.ProvisionedThroughputExceededException
//     for a table made with Provisioned) whose reason is
//     TableReadKeyRangeThroughputExceeded or
//     TableWriteKeyRangeThroughputExceeded, in an HTTP 400
//     awshttp.ResponseError, a retry.MaxAttemptsError and a
//     smithy.OperationError, as the SDK wraps it. The table's Client does
//     not retry; a real dynamodb.Client served by Client.ServeHTTP gets the
//     error DynamoDB sends and retries it as its retryer does;
//   - Bill.Peaks gives each item's peak second (the most units it consumed
//     between two whole seconds of the clock), since the table was made or
//     ResetPeaks.
//
// The table understands the subset of the expression language the Store
// uses (SET, REMOVE and ADD of top-level and nested map attributes;
// conditions of =, <>, <, <=, >, >=, attribute_exists,
// attribute_not_exists, AND, OR, NOT and parentheses), checks that every
// expression attribute name and value given is used and every one used is
// given (as DynamoDB does), and answers ReturnValues ALL_NEW and
// ReturnValuesOnConditionCheckFailure ALL_OLD. It passes the leases
// conformance suite under leases/dynamo, and its sizes agree to the byte
// with the capacity DynamoDB Local reports for items of the rows' shapes
// (see the package's tests).
package ddbmeter

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Size returns the size DynamoDB counts for item: for each attribute, the
// UTF-8 length of its name plus the size of its value (ValueSize).
func Size(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + ValueSize(v)
	}
	return n
}

// ValueSize returns the size DynamoDB counts for a value, its name aside:
//
//   - S: its UTF-8 length; B: its raw length;
//   - N: one byte per two significant digits (pairs aligned on the decimal
//     point, as DynamoDB stores numbers in base 100) plus one, and one more
//     for a negative number;
//   - BOOL and NULL: one byte;
//   - M and L: 3 bytes, plus for each element one byte and its size (a map
//     element's name counts too);
//   - SS, NS, BS: the sum of their elements' sizes.
func ValueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		return sizeOfAll(v.Value, func(e string) int { return len(e) })
	case *types.AttributeValueMemberNS:
		return sizeOfAll(v.Value, NumberSize)
	case *types.AttributeValueMemberBS:
		return sizeOfAll(v.Value, func(e []byte) int { return len(e) })
	}
	return 0
}

// NumberSize returns the size of a number in DynamoDB's notation (an
// optional sign, digits with an optional decimal point, an optional
// exponent): leading and trailing zeros trimmed, one byte per pair of
// significant digits (pairs aligned on the decimal point), one for the
// exponent, one more for a negative number. Zero takes one byte.
func NumberSize(s string) int {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		for j, c := range s[i+1:] {
			if j == 0 && (c == '+' || c == '-') {
				continue
			}
			exp = exp*10 + int(c-'0')
		}
		if strings.HasPrefix(s[i+1:], "-") {
			exp = -exp
		}
		s = s[:i]
	}
	// s is digits with at most one point: value = 0.D × 10^e.
	intPart, frac, _ := strings.Cut(s, ".")
	digits := intPart + frac
	e := len(intPart) + exp
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	digits = strings.TrimRight(digits[lead:], "0")
	e -= lead
	if digits == "" {
		return 1
	}
	n := len(digits)
	if e%2 != 0 {
		n++ // the first pair is 0d
	}
	size := (n+1)/2 + 1
	if neg {
		size++
	}
	return size
}

// WriteUnits is what a write of an item of size bytes (the larger of before
// and after) consumes: ceil(size / 1 KB), at least one.
func WriteUnits(size int) int { return max(1, (size+1023)/1024) }

// ReadUnits is what a strongly consistent read of an item of size bytes
// consumes: ceil(size / 4 KB), at least one.
func ReadUnits(size int) int { return max(1, (size+4095)/4096) }

// sizeOfAll is the size of a set's elements, each sized by size.
func sizeOfAll[E any](set []E, size func(E) int) int {
	n := 0
	for _, e := range set {
		n += size(e)
	}
	return n
}
