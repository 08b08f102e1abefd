// Package kinesisfake is an in-memory Amazon Kinesis Data Streams for tests
// of a whole service, without AWS or emulators. Kinesis keeps streams,
// shards with hash ranges, PutRecords routed by partition key, iterators,
// resharding (SplitShard, MergeShards) and injected throttling, and answers
// with the SDK's own request, response and error types (see Example). It
// satisfies kinesislease.Kinesis and kinesislease.Producer: with
// kinesislease.WithKinesisClient and the memory lease store a test runs
// several Services of its own, publishes, stops one and checks that every
// record was handled, without AWS, and under testing/synctest without real
// time (see ExampleKinesis and TestTwoServicesOnInMemoryKinesis).
//
//	k := kinesisfake.New()
//	k.CreateStream("orders", 4)
//	svc, _ := kinesislease.New(aws.Config{},
//		kinesislease.WithKinesisClient(k),
//		kinesislease.WithLeaseStore(memory.New()))
//
// Kinesis also keeps enhanced fan-out: registered consumers and
// SubscribeToShard with Kinesis' rules (the 5-second rule, one call a
// second, the 5-minute end; FanOutRules shortens them), DropSubscriptions
// and FailSubscriptions to break subscriptions, SubscribeStats to count
// them. The SDK's SubscribeToShardOutput cannot be built outside the SDK,
// so fan-out goes through the wire: Kinesis.Client is an SDK client that
// Kinesis answers in the process, with no network, on AWS JSON 1.1 and
// the event stream, through the SDK's own serialisation and decoders;
// Kinesis.ServeHTTP serves the same to other processes. Hand Client to
// kinesislease.WithKinesisClient with kinesislease.WithEnhancedFanOut (see
// ExampleKinesis_Client).
//
// It is the one Kinesis fake of this module: the library's own tests, the
// simulation of its lease protocol, the fulfilment example and the bench's
// fan-out mode run on it too. To test a handler alone, without a service,
// use package kinesisleasetest.
package kinesisfake
