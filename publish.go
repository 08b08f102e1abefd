package kinesislease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// PutRecords' limits.
const (
	maxBatchRecords = 500
	maxBatchBytes   = 5 << 20 // data and partition keys of one call
	maxRecordBytes  = 1 << 20 // data and partition key of one record
)

// ErrRecordTooLarge: an encoded record with its partition key exceeds
// Kinesis' 1 MiB.
var ErrRecordTooLarge = errors.New("kinesislease: record larger than 1 MiB")

// PublishOption configures Publish and NewPublisher.
type PublishOption interface{ applyPub(*pubConfig) }

type pubOption func(*pubConfig)

func (f pubOption) applyPub(c *pubConfig) { f(c) }

type pubConfig struct {
	codec       codec.Codec
	hashKey     func(partitionKey string) string
	linger      time.Duration
	maxAttempts int
	errs        []error
}

// WithPublishCodec sets how values are encoded (default codec.JSON).
func WithPublishCodec(c codec.Codec) PublishOption {
	return pubOption(func(p *pubConfig) {
		if c == nil {
			p.errs = append(p.errs, fmt.Errorf("%w: WithPublishCodec(nil)", ErrInvalidOption))
		}
		p.codec = c
	})
}

// WithExplicitHashKey sets each record's explicit hash key from its
// partition key (a decimal 128-bit number that picks the shard); "" leaves
// it to the partition key's hash.
func WithExplicitHashKey(fn func(partitionKey string) string) PublishOption {
	return pubOption(func(p *pubConfig) { p.hashKey = fn })
}

// WithLinger sets how long a Publisher waits for more records before
// sending a batch that is not full (default 50ms).
func WithLinger(d time.Duration) PublishOption {
	return pubOption(func(p *pubConfig) {
		if d < 0 {
			p.errs = append(p.errs, fmt.Errorf("%w: WithLinger(%v)", ErrInvalidOption, d))
		}
		p.linger = d
	})
}

// WithPublishAttempts sets how many PutRecords calls a record may take
// before its failure is returned (default 10; each failed entry is retried
// with backoff).
func WithPublishAttempts(n int) PublishOption {
	return pubOption(func(p *pubConfig) {
		if n < 1 {
			p.errs = append(p.errs, fmt.Errorf("%w: WithPublishAttempts(%d)", ErrInvalidOption, n))
		}
		p.maxAttempts = n
	})
}

func newPubConfig(opts []PublishOption) (pubConfig, error) {
	c := pubConfig{codec: codec.JSON, linger: 50 * time.Millisecond, maxAttempts: 10}
	for _, o := range opts {
		if o == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: nil option", ErrInvalidOption))
			continue
		}
		o.applyPub(&c)
	}
	return c, errors.Join(c.errs...)
}

// Publish encodes v and puts it on stream under partitionKey, retrying
// throttling and transient failures. For many records use a Publisher.
func Publish[T any](ctx context.Context, svc *Service, stream, partitionKey string, v T, opts ...PublishOption) error {
	p, err := NewPublisher[T](svc, stream, append([]PublishOption{WithLinger(0)}, opts...)...)
	if err != nil {
		return err
	}
	defer p.Close(context.WithoutCancel(ctx))
	return p.Put(ctx, partitionKey, v)
}

// PublishError reports records PutRecords did not accept after the
// publisher's attempts.
type PublishError struct {
	Stream string
	Failed []FailedRecord
}

// FailedRecord is one record Kinesis did not accept.
type FailedRecord struct {
	PartitionKey string
	Code         string // ErrorCode, e.g. ProvisionedThroughputExceededException
	Message      string
}

func (e *PublishError) Error() string {
	f := e.Failed[0]
	return fmt.Sprintf("kinesislease: publish to %q: %d records not accepted, first: partition key %q: %s: %s",
		e.Stream, len(e.Failed), f.PartitionKey, f.Code, f.Message)
}

// Publisher batches records of type T into PutRecords calls: at most 500
// records and 5 MiB per call. It keeps the order of the records of each
// partition key: a call carries at most one record of a key, so a failed
// entry retried later can never land behind a younger record of its key.
// A partial failure retries only the failed entries. It is safe for
// concurrent use.
type Publisher[T any] struct {
	client Producer
	log    *slog.Logger
	stream string
	cfg    pubConfig

	mu      sync.Mutex
	queue   []*pending
	bytes   int
	wake    chan struct{}
	closed  bool
	done    chan struct{}
	stopped chan struct{}
}

type pending struct {
	entry    ktypes.PutRecordsRequestEntry
	size     int
	attempts int
	result   chan error // buffered 1
}

// NewPublisher returns a Publisher to stream (a name or an ARN) that puts
// records with the service's Kinesis client and logs with its logger.
// Close it to send what is buffered and stop its goroutine. A program that
// only publishes needs no Service: see NewPublisherFromClient.
func NewPublisher[T any](svc *Service, stream string, opts ...PublishOption) (*Publisher[T], error) {
	if svc == nil {
		return nil, fmt.Errorf("%w: NewPublisher on a nil service", ErrInvalidOption)
	}
	return newPublisher[T](svc.kin, svc.log, stream, opts)
}

// NewPublisherFromClient returns a Publisher to stream (a name or an ARN)
// that puts records with client, for a program that publishes and consumes
// nothing: no Service, no lease store. client is typically
// kinesis.NewFromConfig(cfg); the publisher logs with slog.Default. Close
// it to send what is buffered and stop its goroutine.
func NewPublisherFromClient[T any](client Producer, stream string, opts ...PublishOption) (*Publisher[T], error) {
	if client == nil {
		return nil, fmt.Errorf("%w: NewPublisherFromClient with a nil client", ErrInvalidOption)
	}
	return newPublisher[T](client, slog.Default(), stream, opts)
}

func newPublisher[T any](client Producer, log *slog.Logger, stream string, opts []PublishOption) (*Publisher[T], error) {
	if err := validStream(stream); err != nil {
		return nil, err
	}
	cfg, err := newPubConfig(opts)
	if err != nil {
		return nil, err
	}
	p := &Publisher[T]{client: client, log: log, stream: stream, cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go p.loop()
	return p, nil
}

// Stream returns the stream the publisher puts to, as given (a name or an
// ARN).
func (p *Publisher[T]) Stream() string { return p.stream }

// Put encodes v and sends it under partitionKey, waiting until Kinesis
// accepted it or the publisher's attempts ran out (*PublishError), or ctx
// ends (the record may still be sent).
func (p *Publisher[T]) Put(ctx context.Context, partitionKey string, v T) error {
	res, err := p.PutAsync(partitionKey, v)
	if err != nil {
		return err
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PutAsync encodes v and queues it; the channel receives the outcome once.
func (p *Publisher[T]) PutAsync(partitionKey string, v T) (<-chan error, error) {
	if partitionKey == "" || utf8.RuneCountInString(partitionKey) > 256 {
		return nil, fmt.Errorf("%w: partition key %q: want 1 to 256 characters", ErrInvalidOption, partitionKey)
	}
	data, err := p.cfg.codec.Marshal(v)
	if err != nil {
		return nil, err
	}
	size := len(data) + len(partitionKey)
	if size > maxRecordBytes {
		return nil, fmt.Errorf("%w: %d bytes with partition key %q", ErrRecordTooLarge, size, partitionKey)
	}
	e := ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(partitionKey)}
	if p.cfg.hashKey != nil {
		if h := p.cfg.hashKey(partitionKey); h != "" {
			e.ExplicitHashKey = aws.String(h)
		}
	}
	rec := &pending{entry: e, size: size, result: make(chan error, 1)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("kinesislease: publisher closed")
	}
	p.queue = append(p.queue, rec)
	p.bytes += size
	full := len(p.queue) >= maxBatchRecords || p.bytes >= maxBatchBytes
	p.mu.Unlock()
	if full || p.cfg.linger == 0 {
		p.signal()
	}
	return rec.result, nil
}

func (p *Publisher[T]) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close sends what is queued (until ctx ends) and stops the publisher.
func (p *Publisher[T]) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.mu.Unlock()
	select {
	case <-p.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Publisher[T]) loop() {
	defer close(p.stopped)
	timer := time.NewTimer(p.cfg.linger)
	defer timer.Stop()
	for {
		closing := false
		select {
		case <-p.wake:
		case <-timer.C:
		case <-p.done:
			closing = true
		}
		for p.sendOne() {
			// Keep sending while full batches are waiting, or until empty when
			// closing or when there is no linger to wait for.
			p.mu.Lock()
			more := len(p.queue) > 0 && (closing || p.cfg.linger == 0 || len(p.queue) >= maxBatchRecords || p.bytes >= maxBatchBytes)
			p.mu.Unlock()
			if !more {
				break
			}
		}
		if closing {
			p.mu.Lock()
			empty := len(p.queue) == 0
			p.mu.Unlock()
			if empty {
				return
			}
			continue
		}
		if p.cfg.linger > 0 {
			// With no linger every put wakes the loop: a timer of 0 would spin.
			timer.Reset(p.cfg.linger)
		}
	}
}

// sendOne sends one batch from the head of the queue and reports whether it
// sent anything.
func (p *Publisher[T]) sendOne() bool {
	p.mu.Lock()
	var batch []*pending
	keys := map[string]bool{}
	size := 0
	rest := p.queue[:0:0]
	blocked := map[string]bool{} // keys with an older record left in the queue
	for _, r := range p.queue {
		k := aws.ToString(r.entry.PartitionKey)
		if keys[k] || blocked[k] || len(batch) == maxBatchRecords || size+r.size > maxBatchBytes {
			rest = append(rest, r)
			blocked[k] = true
			continue
		}
		keys[k] = true
		size += r.size
		batch = append(batch, r)
	}
	p.queue = rest
	p.bytes -= size
	p.mu.Unlock()
	if len(batch) == 0 {
		return false
	}

	in := &kinesis.PutRecordsInput{Records: make([]ktypes.PutRecordsRequestEntry, len(batch))}
	in.StreamName, in.StreamARN = kinesisx.Fields(p.stream)
	for i, r := range batch {
		in.Records[i] = r.entry
		r.attempts++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	out, err := p.client.PutRecords(ctx, in)
	cancel()
	var retry []*pending
	var failed []FailedRecord
	for i, r := range batch {
		var code, msg string
		switch {
		case err != nil:
			code, msg = "RequestFailed", err.Error()
			if kinesisx.Permanent(err) {
				r.attempts = p.cfg.maxAttempts
			}
		case i < len(out.Records) && out.Records[i].ErrorCode != nil:
			code, msg = aws.ToString(out.Records[i].ErrorCode), aws.ToString(out.Records[i].ErrorMessage)
		default:
			r.result <- nil
			continue
		}
		if r.attempts >= p.cfg.maxAttempts {
			fr := FailedRecord{PartitionKey: aws.ToString(r.entry.PartitionKey), Code: code, Message: msg}
			failed = append(failed, fr)
			pe := &PublishError{Stream: p.stream, Failed: []FailedRecord{fr}}
			if err != nil {
				r.result <- fmt.Errorf("%w: %w", pe, err)
			} else {
				r.result <- pe
			}
			continue
		}
		retry = append(retry, r)
	}
	if len(retry) > 0 {
		// Failed entries go back to the head of the queue, ahead of younger
		// records of their keys, after a backoff.
		d := backoffDelay(retry[0].attempts)
		time.Sleep(d)
		p.mu.Lock()
		for _, r := range retry {
			p.bytes += r.size
		}
		p.queue = append(retry, p.queue...)
		p.mu.Unlock()
		p.signal()
	}
	p.log.DebugContext(ctx, "kinesislease: published batch", "stream", p.stream, "records", len(batch), "retried", len(retry), "failed", len(failed))
	return true
}

func backoffDelay(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt-1, 6)
	return d/2 + rand.N(d/2+1)
}
