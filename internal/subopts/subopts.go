// Package subopts lets kinesisleasetest apply the real
// kinesislease.SubscribeOption values without an import cycle or an
// exported back door: package kinesislease sets Resolve when it loads.
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

// Resolve applies opts (kinesislease.SubscribeOption values) and returns
// their settings; producer (a kinesislease.Producer, or nil) writes to a
// dead-letter stream. Set by package kinesislease.
var Resolve func(opts []any, producer any) Settings
