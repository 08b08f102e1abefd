// Package kinesisleasetest tests kinesislease handlers: it runs a
// Handler[T] on records of your making through the library's real record
// pipeline (the pipeline.Processor a subscription's shard workers run, with the
// real codecs, retry policy and dead-lettering) and reports what became of
// each record, without AWS, emulators, a lease store or real time.
//
//	func TestFulfil(t *testing.T) {
//		h := kinesisleasetest.New(t, fulfil, kinesisleasetest.WithSubscribeOptions(kinesislease.WithCodec(codec.Msgpack)))
//
//		res := h.Handle(ctx, Order{ID: "o-1"})
//		res.RequireAcked(t)
//
//		res = h.HandleRaw(ctx, []byte("not msgpack"))
//		res.RequireDeadLettered(t, "decode")
//	}
//
// Handle encodes a value with the harness's codec, HandleRaw takes the
// record's bytes as they would be in the stream; both deliver the record the
// way a shard worker does: decoded into T, its metadata available to the
// handler through kinesislease.RecordFrom (Attempt counting 1, 2, ... on
// retries), panics recovered, errors retried per the RetryPolicy, and the
// special outcomes (kinesislease.RetryAfter, Drop, DeadLetter) honoured.
//
// No time passes: every wait the pipeline asks for (a retry's backoff, a
// RetryAfter delay) returns at once and is recorded in Result.Delays, so a
// handler that fails four times is tested in microseconds.
//
// Dead letters go by default to a recording sink: Result.DeadLetter and
// Harness.DeadLetters show them. kinesislease.WithDeadLetter (or
// WithDeadLetterStream with WithKinesisClient) among WithSubscribeOptions puts
// the subscription's own sink in its place; WithoutDeadLetter simulates a
// subscription with no sink, where a record that would be dead-lettered
// holds its shard (see Result.Held).
//
// Handle and HandleRaw may be called from several goroutines at once; each
// call processes its record alone, as a shard worker does.
//
// # Whole services
//
// To test a whole service (several Services publishing and consuming,
// resharding, enhanced fan-out) without AWS, run it on package kinesisfake,
// an in-memory Kinesis.
package kinesisleasetest
