package engine

// What the external tests (package engine_test, which may import
// kinesisleasetest: it imports this package) reach of the subscriber.
type (
	Subscriber       = subscriber
	SubscriberConfig = subscriberConfig
)

var (
	NewSubscriber = newSubscriber
	ErrIdle       = errIdle
)
