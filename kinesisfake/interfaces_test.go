package kinesisfake_test

import (
	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

// A Kinesis is what kinesislease.WithKinesisClient and
// kinesislease.NewPublisherFromClient take. The package itself does not
// import the library, so the check lives here.
var (
	_ kinesislease.Kinesis  = (*kinesisfake.Kinesis)(nil)
	_ kinesislease.Producer = (*kinesisfake.Kinesis)(nil)
)
