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

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
)

// RetryAfter asks for the record to be delivered again after d.
func RetryAfter(d time.Duration, err error) error { return &kltype.RetryAfterError{Delay: d, Err: err} }

// Drop acknowledges the record without processing it (logged with err).
func Drop(err error) error { return &kltype.DropError{Err: err} }

// DeadLetter sends the record to the dead-letter sink now, without retrying.
func DeadLetter(err error) error { return &kltype.DeadLetterError{Err: err} }

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
func NewDeadLetterEnvelope(dl *kltype.DeadLetterRecord) DeadLetterEnvelope {
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
func streamSink(client Producer, stream string) pipeline.Sink {
	return func(ctx context.Context, dl *kltype.DeadLetterRecord) error {
		data, err := json.Marshal(NewDeadLetterEnvelope(dl))
		if err != nil {
			return err
		}
		pk := dl.Record.PartitionKey
		if pk == "" {
			pk = dl.Record.ShardID
		}
		in := &kinesis.PutRecordsInput{Records: []ktypes.PutRecordsRequestEntry{{Data: data, PartitionKey: aws.String(pk)}}}
		in.StreamName, in.StreamARN = kinesisx.Fields(stream)
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
