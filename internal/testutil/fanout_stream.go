package testutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/eventstream"
)

// endReason says why a subscription was told to stop.
type endReason int

const (
	endNone     endReason = iota
	endClean              // FanOut.Close: end the response cleanly
	endTakeover           // a newer call took over: ResourceInUseException, then end
	endDrop               // FanOut.Drop: reset the connection
)

// subscription is one running SubscribeToShard response.
type subscription struct {
	key      subKey
	consumer *consumer
	cancel   context.CancelFunc // cancels the loop's context
	conn     net.Conn           // the response's connection, if known

	mu     sync.Mutex
	reason endReason
	msg    string
}

// stop tells the subscription to end for reason r, unless it was told
// already; it reports whether this call told it. endDrop resets the
// connection at once, even if the handler is blocked writing to a client
// that does not read.
func (s *subscription) stop(r endReason, msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != endNone {
		return false
	}
	s.reason, s.msg = r, msg
	if r == endDrop && s.conn != nil {
		resetConn(s.conn)
	}
	s.cancel()
	return true
}

// resetConn closes c with a TCP RST, so its peer reads an error rather
// than the end of the stream.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (s *subscription) stopReason() (endReason, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason, s.msg
}

// subscribeInput is SubscribeToShard's request.
type subscribeInput struct {
	ConsumerARN      string
	ShardId          string
	StartingPosition *struct {
		Type           string
		SequenceNumber string
		Timestamp      json.Number
	}
}

// iteratorInput returns the GetShardIterator call for a starting position.
func iteratorInput(streamName, shardID string, in *subscribeInput) (*kinesis.GetShardIteratorInput, *apiError) {
	pos := in.StartingPosition
	if pos == nil {
		return nil, errInvalid("StartingPosition is required")
	}
	gi := &kinesis.GetShardIteratorInput{
		StreamName:        aws.String(streamName),
		ShardId:           aws.String(shardID),
		ShardIteratorType: ktypes.ShardIteratorType(pos.Type),
	}
	switch ktypes.ShardIteratorType(pos.Type) {
	case ktypes.ShardIteratorTypeAtSequenceNumber, ktypes.ShardIteratorTypeAfterSequenceNumber:
		if pos.SequenceNumber == "" {
			return nil, errInvalid("StartingPosition %s needs a SequenceNumber", pos.Type)
		}
		gi.StartingSequenceNumber = aws.String(pos.SequenceNumber)
	case ktypes.ShardIteratorTypeAtTimestamp:
		if pos.Timestamp == "" {
			return nil, errInvalid("StartingPosition AT_TIMESTAMP needs a Timestamp")
		}
		t, err := parseEpochSeconds(pos.Timestamp)
		if err != nil {
			return nil, errInvalid("StartingPosition: %v", err)
		}
		gi.Timestamp = aws.Time(t)
	case ktypes.ShardIteratorTypeTrimHorizon, ktypes.ShardIteratorTypeLatest:
	default:
		return nil, errInvalid("invalid StartingPosition Type %q", pos.Type)
	}
	return gi, nil
}

// listShards returns every shard of the backend's stream.
func (f *FanOut) listShards(ctx context.Context, streamName string) ([]ktypes.Shard, error) {
	var shards []ktypes.Shard
	in := &kinesis.ListShardsInput{StreamName: aws.String(streamName)}
	for {
		out, err := f.backend.ListShards(ctx, in)
		if err != nil {
			return nil, err
		}
		shards = append(shards, out.Shards...)
		if aws.ToString(out.NextToken) == "" {
			return shards, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

func (f *FanOut) subscribe(w http.ResponseWriter, r *http.Request, body []byte) {
	var in subscribeInput
	if err := decodeRequest(body, &in); err != nil {
		writeErr(w, err)
		return
	}
	if in.ConsumerARN == "" || in.ShardId == "" {
		writeErr(w, errInvalid("ConsumerARN and ShardId are required"))
		return
	}
	ctx := r.Context()

	f.mu.Lock()
	f.pruneLocked(time.Now())
	c := f.findLocked(in.ConsumerARN, "", "")
	f.mu.Unlock()
	if c == nil {
		writeErr(w, errNotFound("Consumer %s not found", in.ConsumerARN))
		return
	}
	gi, aerr := iteratorInput(c.streamName, in.ShardId, &in)
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	shards, err := f.listShards(ctx, c.streamName)
	if err != nil {
		writeErr(w, backendError(err))
		return
	}
	var shard *ktypes.Shard
	for i := range shards {
		if aws.ToString(shards[i].ShardId) == in.ShardId {
			shard = &shards[i]
		}
	}
	if shard == nil {
		writeErr(w, errNotFound("Shard %s in stream %s does not exist", in.ShardId, c.streamARN))
		return
	}

	key := subKey{in.ConsumerARN, in.ShardId}
	f.mu.Lock()
	now := time.Now()
	cs := f.calls[key]
	if cs == nil {
		cs = &callState{}
		f.calls[key] = cs
	}
	var refused *apiError
	switch st := c.status(now, &f.cfg); {
	case !cs.lastCall.IsZero() && now.Sub(cs.lastCall) < f.cfg.MinCallInterval:
		f.stats.LimitExceeded++
		refused = errLimit("Rate exceeded for consumer %s and shard %s: one SubscribeToShard call per %v", c.arn, in.ShardId, f.cfg.MinCallInterval)
	case st != ktypes.ConsumerStatusActive:
		f.stats.ResourceInUse++
		if st == consumerGone {
			st = ktypes.ConsumerStatusDeleting
		}
		refused = errInUse("Consumer %s is %s, not ACTIVE", c.arn, st)
	case cs.pending || !cs.lastSuccess.IsZero() && now.Sub(cs.lastSuccess) < f.cfg.TakeoverAfter:
		f.stats.ResourceInUse++
		refused = errInUse("Another active subscription exists for consumer %s and shard %s (a successful call came less than %v ago)", c.arn, in.ShardId, f.cfg.TakeoverAfter)
	}
	cs.lastCall = now
	if refused != nil {
		f.mu.Unlock()
		writeErr(w, refused)
		return
	}
	cs.pending = true
	f.mu.Unlock()

	var iter string
	if out, err := f.backend.GetShardIterator(ctx, gi); err != nil {
		aerr = backendError(err)
	} else {
		iter = aws.ToString(out.ShardIterator)
	}

	loopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &subscription{key: key, consumer: c, cancel: cancel}
	s.conn, _ = ctx.Value(connKey{}).(net.Conn)
	f.mu.Lock()
	cs.pending = false
	if aerr == nil && f.closed {
		aerr = &apiError{http.StatusServiceUnavailable, "ServiceUnavailable", "testutil fan-out bench: closed"}
	}
	if aerr != nil {
		f.mu.Unlock()
		writeErr(w, aerr)
		return
	}
	cs.lastSuccess = now
	f.stats.Subscribes++
	old := cs.active
	cs.active = s
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.subs, s)
		if cs.active == s {
			cs.active = nil
		}
		f.mu.Unlock()
	}()
	if old != nil && old.stop(endTakeover, fmt.Sprintf("Another subscription of consumer %s to shard %s took over", c.arn, in.ShardId)) {
		f.mu.Lock()
		f.stats.Takeovers++
		f.mu.Unlock()
	}

	// What an event without records continues from until records come: the
	// position asked for, as the real service gives it (resuming after it
	// with AFTER_SEQUENCE_NUMBER skips nothing and repeats nothing).
	startSeq := in.StartingPosition.SequenceNumber
	switch t := ktypes.ShardIteratorType(in.StartingPosition.Type); t {
	case ktypes.ShardIteratorTypeAtSequenceNumber, ktypes.ShardIteratorTypeAfterSequenceNumber:
	case ktypes.ShardIteratorTypeLatest, ktypes.ShardIteratorTypeAtTimestamp:
		// The last record before the position, or the shard's start.
		var before *time.Time
		if t == ktypes.ShardIteratorTypeAtTimestamp {
			before = gi.Timestamp
		}
		startSeq = aws.ToString(shard.SequenceNumberRange.StartingSequenceNumber)
		if seq := f.lastRecordBefore(ctx, c.streamName, in.ShardId, before); seq != "" {
			startSeq = seq
		}
	default:
		startSeq = aws.ToString(shard.SequenceNumberRange.StartingSequenceNumber)
	}
	l := &subLoop{
		f: f, s: s, ctx: loopCtx, reqCtx: ctx,
		ew:         newEventWriter(w),
		streamName: c.streamName,
		shardID:    in.ShardId,
		reiterate:  gi,
		iter:       iter,
		lastSeq:    startSeq,
		deadline:   now.Add(f.cfg.Lifetime),
	}
	l.run()
}

// lastRecordBefore returns the sequence number of the shard's last record
// (arrived before before, if set), "" if there is none or the backend
// fails: it reads the shard from TRIM_HORIZON (the bench's shards are
// small).
func (f *FanOut) lastRecordBefore(ctx context.Context, stream, shardID string, before *time.Time) string {
	out, err := f.backend.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shardID), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return ""
	}
	last, iter := "", out.ShardIterator
	for iter != nil {
		recs, err := f.backend.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil || len(recs.Records) == 0 {
			return last
		}
		for _, r := range recs.Records {
			if before != nil && !aws.ToTime(r.ApproximateArrivalTimestamp).Before(*before) {
				return last
			}
			last = aws.ToString(r.SequenceNumber)
		}
		iter = recs.NextShardIterator
	}
	return last
}

// subLoop streams one subscription.
type subLoop struct {
	f          *FanOut
	s          *subscription
	ctx        context.Context // ends with the request or when s is stopped
	reqCtx     context.Context // ends when the client goes away
	ew         *eventWriter
	streamName string
	shardID    string
	reiterate  *kinesis.GetShardIteratorInput // gets an iterator again if the current one expires
	iter       string
	lastSeq    string // the ContinuationSequenceNumber of an event without records
	sentAny    bool   // records were sent
	lastEvent  time.Time
	behind     int64
	deadline   time.Time
}

func (l *subLoop) run() {
	cfg := &l.f.cfg
	if l.ew.initialResponse() != nil {
		return
	}
	l.lastEvent = time.Now()
	for {
		if l.reqCtx.Err() != nil {
			return
		}
		if l.stopped() {
			return
		}
		if !time.Now().Before(l.deadline) {
			return // Lifetime: a clean end
		}
		l.f.mu.Lock()
		gone := l.s.consumer.status(time.Now(), cfg) == consumerGone
		l.f.mu.Unlock()
		if gone {
			_ = l.ew.exception("ResourceNotFoundException", fmt.Sprintf("Consumer %s was deleted", l.s.consumer.arn))
			return
		}
		if typ := l.f.takeFailure(l.shardID); typ != "" {
			_ = l.ew.exception(typ, "testutil fan-out bench: injected "+typ)
			return
		}

		out, err := l.f.backend.GetRecords(l.ctx, &kinesis.GetRecordsInput{
			ShardIterator: aws.String(l.iter),
			Limit:         aws.Int32(cfg.Limit),
		})
		if err != nil {
			if l.ctx.Err() != nil {
				continue // stopped, or the client went away: see above
			}
			if l.retryable(err) {
				continue
			}
			aerr := backendError(err)
			_ = l.ew.exception(aerr.typ, aerr.msg)
			return
		}
		l.behind = aws.ToInt64(out.MillisBehindLatest)
		if n := len(out.Records); n > 0 {
			next := aws.ToString(out.Records[n-1].SequenceNumber)
			if l.ew.event(out.Records, &next, l.behind, nil) != nil {
				return
			}
			l.lastSeq, l.sentAny, l.lastEvent = next, true, time.Now()
		}
		if out.NextShardIterator == nil {
			l.shardEnd(out.ChildShards)
			return
		}
		l.iter = *out.NextShardIterator
		if n := len(out.Records); n > 0 && (l.behind > 0 || n >= int(cfg.Limit)) {
			continue // more to read at once
		}
		if time.Since(l.lastEvent) >= cfg.Heartbeat {
			seq := l.lastSeq
			if l.ew.event(nil, &seq, l.behind, nil) != nil {
				return
			}
			l.lastEvent = time.Now()
		}
		l.wait(cfg.Poll)
	}
}

// stopped handles a stop of the subscription, reporting whether there was one.
func (l *subLoop) stopped() bool {
	r, msg := l.s.stopReason()
	switch r {
	case endNone:
		return false
	case endTakeover:
		_ = l.ew.exception("ResourceInUseException", msg)
	case endDrop:
		if l.s.conn == nil {
			l.ew.abort()
		}
	}
	return true
}

// retryable handles a backend error the loop can get past.
func (l *subLoop) retryable(err error) bool {
	var expired *ktypes.ExpiredIteratorException
	var throttled *ktypes.ProvisionedThroughputExceededException
	switch {
	case errors.As(err, &expired):
		in := *l.reiterate
		if l.sentAny {
			in.ShardIteratorType = ktypes.ShardIteratorTypeAfterSequenceNumber
			in.StartingSequenceNumber = aws.String(l.lastSeq)
			in.Timestamp = nil
		}
		out, err := l.f.backend.GetShardIterator(l.ctx, &in)
		if err != nil {
			return l.ctx.Err() != nil
		}
		l.iter = aws.ToString(out.ShardIterator)
		return true
	case errors.As(err, &throttled):
		l.wait(l.f.cfg.Poll)
		return true
	}
	return false
}

// wait sleeps d, or less if the lifetime ends first, or until stopped.
func (l *subLoop) wait(d time.Duration) {
	if left := time.Until(l.deadline); left < d {
		d = left
	}
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.ctx.Done():
	}
}

// shardEnd sends the last event of a closed shard: no records, no
// ContinuationSequenceNumber, and the child shards.
func (l *subLoop) shardEnd(children []ktypes.ChildShard) {
	if len(children) == 0 {
		shards, err := l.f.listShards(l.ctx, l.streamName)
		if err != nil {
			if l.ctx.Err() == nil {
				aerr := backendError(err)
				_ = l.ew.exception(aerr.typ, aerr.msg)
			}
			return
		}
		for _, sh := range shards {
			parent, adjacent := aws.ToString(sh.ParentShardId), aws.ToString(sh.AdjacentParentShardId)
			if parent != l.shardID && adjacent != l.shardID {
				continue
			}
			c := ktypes.ChildShard{ShardId: sh.ShardId, HashKeyRange: sh.HashKeyRange}
			for _, p := range []string{parent, adjacent} {
				if p != "" {
					c.ParentShards = append(c.ParentShards, p)
				}
			}
			children = append(children, c)
		}
	}
	_ = l.ew.event(nil, nil, l.behind, children)
}

// eventWriter writes a SubscribeToShard response's event stream.
type eventWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	enc *eventstream.Encoder
}

func newEventWriter(w http.ResponseWriter) *eventWriter {
	return &eventWriter{w: w, rc: http.NewResponseController(w), enc: eventstream.NewEncoder()}
}

// initialResponse starts the response: status 200 and the initial-response
// message.
func (e *eventWriter) initialResponse() error {
	e.w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	e.w.Header().Set("X-Amzn-Requestid", requestID())
	e.w.WriteHeader(http.StatusOK)
	return e.write(eventstream.EventMessageType, eventstream.EventTypeHeader, "initial-response", []byte("{}"))
}

// write sends one message, flushed.
func (e *eventWriter) write(msgType, typeHeader, typ string, payload []byte) error {
	var msg eventstream.Message
	msg.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(msgType))
	msg.Headers.Set(typeHeader, eventstream.StringValue(typ))
	msg.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
	msg.Payload = payload
	if err := e.enc.Encode(e.w, msg); err != nil {
		return err
	}
	return e.rc.Flush()
}

// recordJSON is a Record in a SubscribeToShardEvent.
type recordJSON struct {
	Data                        []byte       `json:"Data"`
	PartitionKey                string       `json:"PartitionKey"`
	SequenceNumber              string       `json:"SequenceNumber"`
	ApproximateArrivalTimestamp epochSeconds `json:"ApproximateArrivalTimestamp"`
	EncryptionType              string       `json:"EncryptionType"`
}

// childShardJSON is a ChildShard in a SubscribeToShardEvent.
type childShardJSON struct {
	ShardId      string   `json:"ShardId"`
	ParentShards []string `json:"ParentShards"`
	HashKeyRange struct {
		StartingHashKey string `json:"StartingHashKey"`
		EndingHashKey   string `json:"EndingHashKey"`
	} `json:"HashKeyRange"`
}

// event sends a SubscribeToShardEvent; a nil continuation is sent as null.
func (e *eventWriter) event(records []ktypes.Record, continuation *string, behind int64, children []ktypes.ChildShard) error {
	ev := struct {
		Records                    []recordJSON     `json:"Records"`
		ContinuationSequenceNumber *string          `json:"ContinuationSequenceNumber"`
		MillisBehindLatest         int64            `json:"MillisBehindLatest"`
		ChildShards                []childShardJSON `json:"ChildShards,omitempty"`
	}{Records: make([]recordJSON, 0, len(records)), ContinuationSequenceNumber: continuation, MillisBehindLatest: behind}
	for _, r := range records {
		enc := string(r.EncryptionType)
		if enc == "" {
			enc = string(ktypes.EncryptionTypeNone)
		}
		ev.Records = append(ev.Records, recordJSON{
			Data:                        r.Data,
			PartitionKey:                aws.ToString(r.PartitionKey),
			SequenceNumber:              aws.ToString(r.SequenceNumber),
			ApproximateArrivalTimestamp: epochSeconds(aws.ToTime(r.ApproximateArrivalTimestamp)),
			EncryptionType:              enc,
		})
	}
	for _, c := range children {
		cj := childShardJSON{ShardId: aws.ToString(c.ShardId), ParentShards: c.ParentShards}
		if c.HashKeyRange != nil {
			cj.HashKeyRange.StartingHashKey = aws.ToString(c.HashKeyRange.StartingHashKey)
			cj.HashKeyRange.EndingHashKey = aws.ToString(c.HashKeyRange.EndingHashKey)
		}
		ev.ChildShards = append(ev.ChildShards, cj)
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return e.write(eventstream.EventMessageType, eventstream.EventTypeHeader, "SubscribeToShardEvent", payload)
}

// exception sends an exception message; the response must end after it.
func (e *eventWriter) exception(typ, message string) error {
	payload, err := json.Marshal(map[string]string{"message": message})
	if err != nil {
		return err
	}
	return e.write(eventstream.ExceptionMessageType, eventstream.ExceptionTypeHeader, typ, payload)
}

// abort resets the response's connection: the client reads an error, not
// the end of the stream.
func (e *eventWriter) abort() {
	conn, _, err := e.rc.Hijack()
	if err != nil {
		// Not hijackable: net/http closes the connection without the
		// closing chunk.
		panic(http.ErrAbortHandler)
	}
	resetConn(conn)
}
