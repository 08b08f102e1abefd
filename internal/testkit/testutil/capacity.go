package testutil

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Capacity counts the DynamoDB capacity units a client's GetItem and
// UpdateItem calls consumed, as DynamoDB (Local) reports them: its
// middleware asks every call for ReturnConsumedCapacity TOTAL. Add
// Capacity.Options to a client's options.
type Capacity struct {
	mu                sync.Mutex
	read, write       float64
	reads, writeCalls int64
	byKey             func(key string) string
	perGroup          map[string]float64
}

// NewCapacity returns a meter; group, if set, names the group (for example
// "members" or "leases") of the item with key key, and WritesBy reports the
// write units per group.
func NewCapacity(group func(key string) string) *Capacity {
	return &Capacity{byKey: group, perGroup: map[string]float64{}}
}

// Options is the client option that meters the client's calls.
func (c *Capacity) Options(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("testutil.Capacity",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				var key string
				switch p := in.Parameters.(type) {
				case *dynamodb.GetItemInput:
					p.ReturnConsumedCapacity = dtypes.ReturnConsumedCapacityTotal
					key = keyOf(p.Key)
				case *dynamodb.UpdateItemInput:
					p.ReturnConsumedCapacity = dtypes.ReturnConsumedCapacityTotal
					key = keyOf(p.Key)
				}
				out, md, err := next.HandleInitialize(ctx, in)
				var cc *dtypes.ConsumedCapacity
				isWrite := false
				switch r := out.Result.(type) {
				case *dynamodb.GetItemOutput:
					cc = r.ConsumedCapacity
				case *dynamodb.UpdateItemOutput:
					cc, isWrite = r.ConsumedCapacity, true
				}
				if cc != nil {
					c.add(key, aws.ToFloat64(cc.CapacityUnits), isWrite)
				}
				return out, md, err
			}), middleware.After)
	})
}

func keyOf(k map[string]dtypes.AttributeValue) string {
	if v, ok := k["lease_key"].(*dtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (c *Capacity) add(key string, units float64, write bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if write {
		c.write += units
		c.writeCalls++
		if c.byKey != nil {
			c.perGroup[c.byKey(key)] += units
		}
	} else {
		c.read += units
		c.reads++
	}
}

// Units returns the read and write units consumed so far, and the calls
// that reported them.
func (c *Capacity) Units() (read, write float64, reads, writes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read, c.write, c.reads, c.writeCalls
}

// WritesBy returns the write units per group so far.
func (c *Capacity) WritesBy() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]float64, len(c.perGroup))
	for k, v := range c.perGroup {
		m[k] = v
	}
	return m
}
