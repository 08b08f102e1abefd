package read

// What the external tests (package read_test) reach of the subscriber.
var ErrIdle = errIdle
