package kinesislease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/shard"
)

// RetryPolicy says how a record whose handler returns a plain error is
// retried: up to Attempts deliveries in all, waiting InitialDelay after the
// first failure and doubling (with jitter) up to MaxDelay. Then the record
// goes to the dead-letter sink; with no sink it is retried every MaxDelay,
// holding its shard (each failure logged at ERROR), so nothing is lost.
type RetryPolicy = shard.RetryPolicy

// DefaultRetryPolicy: 5 deliveries, waits from 100ms doubling to 30s.
var DefaultRetryPolicy = shard.DefaultRetryPolicy

// Special handler outcomes, returned by the constructors below and matched
// with errors.As. Each wraps the handler's error (Unwrap).
type (
	// RetryAfterError delivers the record again after its Delay; it does not
	// count against the retry policy's attempts.
	RetryAfterError = shard.RetryAfterError
	// DropError acknowledges the record without processing it, logged at INFO.
	DropError = shard.DropError
	// DeadLetterError sends the record to the dead-letter sink at once.
	DeadLetterError = shard.DeadLetterError
	// DecodeError is the outcome of a record the codec cannot decode into
	// the subscription's type: dead-lettered at once, reason "decode".
	DecodeError = shard.DecodeError
	// PanicError is what a handler's panic becomes: an error like any other,
	// its stack logged.
	PanicError = shard.PanicError
)

// RetryAfter asks for the record to be delivered again after d.
func RetryAfter(d time.Duration, err error) error { return &RetryAfterError{Delay: d, Err: err} }

// Drop acknowledges the record without processing it (logged with err).
func Drop(err error) error { return &DropError{Err: err} }

// DeadLetter sends the record to the dead-letter sink now, without retrying.
func DeadLetter(err error) error { return &DeadLetterError{Err: err} }

// DeadLetterRecord is a record that could not be processed, as a sink
// receives it: the record (raw bytes intact), the deliveries made, the
// reason ("retries-exhausted", "dead-letter", "decode", "panic",
// "corrupt-aggregate") and the last error.
type DeadLetterRecord = shard.DeadLetter

// WithRetryPolicy sets how failing records are retried (default
// DefaultRetryPolicy).
func WithRetryPolicy(p RetryPolicy) SubscribeOption {
	return subOption(func(s *subscription) {
		if err := p.Validate(); err != nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithRetryPolicy: %w", ErrInvalidOption, err))
		}
		s.worker.Policy = p
	})
}

// WithDeadLetter sends records that cannot be processed to sink. A nil
// return confirms the record is kept; the checkpoint passes the record only
// then. An error is retried with backoff, holding the shard meanwhile.
func WithDeadLetter(sink func(ctx context.Context, dl *DeadLetterRecord) error) SubscribeOption {
	return subOption(func(s *subscription) {
		if sink == nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithDeadLetter(nil)", ErrInvalidOption))
		}
		s.worker.Sink = sink
		s.deadLetterStream = ""
	})
}

// WithDeadLetterStream writes records that cannot be processed to another
// Kinesis stream (name or ARN), as a JSON DeadLetterEnvelope under the
// record's own partition key. The checkpoint passes the record only once
// Kinesis accepted the envelope. The credentials need kinesis:PutRecords on
// that stream.
func WithDeadLetterStream(stream string) SubscribeOption {
	return subOption(func(s *subscription) {
		if err := validStream(stream); err != nil {
			s.errs = append(s.errs, fmt.Errorf("WithDeadLetterStream: %w", err))
		}
		s.deadLetterStream = stream
		s.worker.Sink = nil
	})
}

// DeadLetterEnvelope is what WithDeadLetterStream writes: where the record
// came from, why it failed, and its bytes intact.
type DeadLetterEnvelope struct {
	SourceStream   string    `json:"source_stream"`
	ShardID        string    `json:"shard_id"`
	SequenceNumber string    `json:"sequence_number"`
	SubSequence    int64     `json:"sub_sequence,omitempty"`
	PartitionKey   string    `json:"partition_key"`
	ArrivalTime    time.Time `json:"arrival_time"`
	Attempts       int       `json:"attempts"`
	Reason         string    `json:"reason"`
	Error          string    `json:"error"`
	FailedAt       time.Time `json:"failed_at"`
	Data           []byte    `json:"data"` // base64 in JSON
}

// NewDeadLetterEnvelope builds the envelope of a dead letter.
func NewDeadLetterEnvelope(dl *DeadLetterRecord) DeadLetterEnvelope {
	r := dl.Record
	env := DeadLetterEnvelope{
		SourceStream: r.Stream, ShardID: r.ShardID, SequenceNumber: r.SequenceNumber, SubSequence: r.SubSequence,
		PartitionKey: r.PartitionKey, ArrivalTime: r.ArrivalTime, Attempts: dl.Attempts, Reason: dl.Reason,
		FailedAt: time.Now().UTC(), Data: r.Data,
	}
	if dl.Err != nil {
		env.Error = dl.Err.Error()
	}
	return env
}

// streamSink writes dead letters to a Kinesis stream.
func streamSink(client Kinesis, stream string) shard.Sink {
	return func(ctx context.Context, dl *DeadLetterRecord) error {
		data, err := json.Marshal(NewDeadLetterEnvelope(dl))
		if err != nil {
			return err
		}
		pk := dl.Record.PartitionKey
		if pk == "" {
			pk = dl.Record.ShardID
		}
		in := &kinesis.PutRecordsInput{Records: []ktypes.PutRecordsRequestEntry{{Data: data, PartitionKey: aws.String(pk)}}}
		shard.SetStream(stream, &in.StreamName, &in.StreamARN)
		out, err := client.PutRecords(ctx, in)
		if err != nil {
			return fmt.Errorf("dead-letter stream %q: %w", stream, err)
		}
		if n := aws.ToInt32(out.FailedRecordCount); n > 0 && len(out.Records) > 0 {
			e := out.Records[0]
			return fmt.Errorf("dead-letter stream %q: %s: %s", stream, aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
		} else if n > 0 {
			return errors.New("dead-letter stream: record not accepted")
		}
		return nil
	}
}
