// Package subopts lets kinesisleasetest apply the real
// kinesislease.SubscribeOption values through a sealed method: every
// SubscribeOption value implements Resolver, a method that is exported so
// that the harness can call it, but whose result's type is internal to the
// module, so no other code can name it.
package subopts

import (
	"context"
	"time"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/kltype"
)

// Settings are what a list of SubscribeOptions sets that a handler's
// pipeline uses (the harness ignores where reading starts, polling and
// checkpoints: it reads no stream).
type Settings struct {
	Codec  codec.Codec
	Policy kltype.RetryPolicy
	// Sink is the dead-letter sink: WithDeadLetter's, or a dead-letter
	// stream's written with the producer given to Resolve; nil for none.
	Sink func(ctx context.Context, dl *kltype.DeadLetterRecord) error
	// HandlerTimeout is WithHandlerTimeout's, 0 for none.
	HandlerTimeout time.Duration
	// MaxAge is WithMaxRecordAge's, 0 for none.
	MaxAge time.Duration
	// DeadLetterStream is WithDeadLetterStream's stream, "" for none.
	DeadLetterStream string
	// Err joins the invalid options, each named.
	Err error
}

// Resolver is implemented by every kinesislease.SubscribeOption value.
// ResolveSubscribeOptions applies opts (SubscribeOption values; the
// receiver is only the way in) with the defaults and returns their
// settings; producer (a kinesislease.Producer, or nil) writes to a
// dead-letter stream.
type Resolver interface {
	ResolveSubscribeOptions(opts []any, producer any) Settings
}
