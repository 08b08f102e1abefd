package migrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/leases"
)

// Format is the schema of a foreign lease table.
type Format string

const (
	// KCL is the lease table of the Java Kinesis Client Library 1.x, 2.x and
	// 3.x, single-stream (leaseKey = shard id) or multi-stream (leaseKey =
	// account:stream:creationEpoch:shardId).
	KCL Format = "kcl"
	// VMware is the checkpoint table of vmware-go-kcl-v2 (ShardID,
	// Checkpoint, AssignedTo, LeaseTimeout, ParentShardId).
	VMware Format = "vmware-go-kcl"
)

// Client is the part of *dynamodb.Client used on the foreign table: Scan
// (Import and Export read the whole table, twice), GetItem and UpdateItem
// (Export writes KCL items).
type Client interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ Client = (*dynamodb.Client)(nil)

// Kinesis is the part of *kinesis.Client used: ListShards, and
// GetShardIterator and GetRecords to read the record a checkpoint names.
type Kinesis interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ Kinesis = (*kinesis.Client)(nil)

// Foreign is a foreign lease table.
type Foreign struct {
	// Client reaches the table: a *dynamodb.Client.
	Client Client
	// Table is the table's name.
	Table string
	// Format is the table's schema. Import detects it from the items when
	// empty; Export writes KCL items whatever it says (VMware is refused).
	Format Format
	// StreamID is the KCL multi-stream identifier of the stream,
	// "account:stream:creationEpoch". Import picks the items of that
	// identifier; without it, those of the stream's name (and, for a stream
	// named by ARN, its account), refusing when several creation epochs
	// match. Export keys its items "StreamID:shardId" with it, and by the
	// bare shard id without it.
	StreamID string
}

// Ours is the kinesislease side: the lease store, a Kinesis client, the
// stream and the namespace of its rows.
type Ours struct {
	// Store is the lease store (a *dynamo.Store). A Store that implements
	// leases.Membership lets the import tell a live holder from a dead
	// one; without it every held row counts as live.
	Store leases.Store
	// Kinesis lists the stream's shards and reads the records checkpoints
	// name (to count the user records of KPL aggregates).
	Kinesis Kinesis
	// Stream is the stream's name or ARN, as the service subscribes to it
	// (rows are keyed by its name). Every Kinesis call names it.
	Stream string
	// LeaseNamespace is the lease namespace of the subscription
	// (kinesislease.WithLeaseNamespace): rows are keyed by the namespace
	// and the stream's name, "namespace/stream:shard", as
	// WithLeaseNamespace keys them. Empty: the stream's name alone. It is
	// held to WithLeaseNamespace's rule (1 to 128 letters, digits, '_', '.'
	// and '-'); anything else is refused with ErrInvalid.
	LeaseNamespace string
}

// leaseStream is the stream part of the keys of our rows (Stream's name,
// after LeaseNamespace if any).
func (o Ours) leaseStream() string { return kinesisx.LeaseStream(o.LeaseNamespace, o.Stream) }

// rows names the stream in errors, and its rows' key when namespaced.
func (o Ours) rows() string {
	if o.LeaseNamespace != "" {
		return fmt.Sprintf("stream %q (rows %q)", kinesisx.Name(o.Stream), o.leaseStream())
	}
	return fmt.Sprintf("stream %q", kinesisx.Name(o.Stream))
}

// Option adjusts Import and Export.
type Option interface{ apply(*options) }

type options struct {
	dryRun   bool
	force    bool
	interval time.Duration
	at       time.Time
	errs     []error
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// DefaultInterval is the time between the two reads that tell whether an
// application is still running.
const DefaultInterval = 10 * time.Second

// WithDryRun reads the tables and plans every row, and writes nothing. The
// Report lists what would be written; refusals are returned as without it.
func WithDryRun() Option { return optionFunc(func(o *options) { o.dryRun = true }) }

// WithForce writes despite the safety checks: a running source, a
// checkpoint moving backwards, a row held by a live member (which gets a
// rewind request that its holder applies).
func WithForce() Option { return optionFunc(func(o *options) { o.force = true }) }

// WithInterval sets the time between the two reads of the tables
// (DefaultInterval). It must be positive; keep it above the source's lease
// renewal period.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d <= 0 {
			o.errs = append(o.errs, fmt.Errorf("WithInterval(%v): want a positive duration", d))
			return
		}
		o.interval = d
	})
}

// WithAtTimestamp gives the time of the KCL application's AT_TIMESTAMP
// initial position (InitialPositionInStreamExtended.newInitialPositionAtTimestamp),
// which the KCL does not keep in its table: rows at AT_TIMESTAMP are imported
// as AT_TIMESTAMP:<t>. Without it Import refuses them.
func WithAtTimestamp(t time.Time) Option {
	return optionFunc(func(o *options) {
		if t.IsZero() {
			o.errs = append(o.errs, errors.New("WithAtTimestamp: zero time"))
			return
		}
		o.at = t
	})
}

func newOptions(opts []Option) (options, error) {
	o := options{interval: DefaultInterval}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if len(o.errs) > 0 {
		return o, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(o.errs...))
	}
	return o, nil
}

// Errors. Match them with errors.Is; the typed errors carry the details.
var (
	// ErrInvalid: an argument or option cannot work (a missing client, a
	// malformed stream identifier, a lease namespace WithLeaseNamespace
	// would refuse, a zero interval).
	ErrInvalid = errors.New("migrate: invalid argument")
	// ErrSchema: the table's items are not of the expected format, or name
	// no shard of the stream.
	ErrSchema = errors.New("migrate: unexpected table contents")
	// ErrStillRunning: the application using a table is still running (see
	// RunningError).
	ErrStillRunning = errors.New("migrate: application still running")
	// ErrBackwards: a checkpoint would move backwards (see BackwardsError).
	ErrBackwards = errors.New("migrate: checkpoint would move backwards")
	// ErrHeld: a row is held by a live member (see HeldError).
	ErrHeld = errors.New("migrate: row held by a live member")
	// ErrNeedTimestamp: a KCL row is at AT_TIMESTAMP and no WithAtTimestamp
	// says which time.
	ErrNeedTimestamp = errors.New("migrate: AT_TIMESTAMP needs the application's timestamp")
	// ErrRefused: the safety checks refused the import or export; the
	// error wraps each reason (RunningError, BackwardsError, HeldError, ...).
	ErrRefused = errors.New("migrate: refused")
)

// Action is what happens to one shard's row.
type Action string

const (
	// Write: the row's checkpoint is written (created first if missing).
	Write Action = "write"
	// Create: a row is created without a checkpoint (the source has none).
	Create Action = "create"
	// Request: the row is held; a rewind request is written that its
	// holder (or its next holder) applies.
	Request Action = "request"
	// Unchanged: the row already says this.
	Unchanged Action = "unchanged"
	// Skip: nothing to write (a shard the stream no longer lists, a shard
	// without a checkpoint to export).
	Skip Action = "skip"
	// Refused: a safety check refused the row (Row.Err says why).
	Refused Action = "refused"
)

// Report is what an Import or Export did, or, with WithDryRun, would do.
type Report struct {
	// Stream is our stream's name.
	Stream string
	// Source and Target name the tables read and written ("" for ours).
	Source, Target string
	// Rows holds one entry per shard, sorted by shard id.
	Rows []Row
	// DryRun: nothing was written.
	DryRun bool
	// Forced lists the refusals WithForce overrode.
	Forced []error
}

// refused returns the error of the refusals found, if any: hard ones
// always, the others unless forced (then Report.Forced lists them).
func refused(o options, rep *Report, what string, ours Ours, hard, soft []error) error {
	if len(hard) == 0 && (len(soft) == 0 || o.force) {
		rep.Forced = soft
		return nil
	}
	hint := ""
	if len(hard) == 0 {
		hint = " (forcing overrides: --force, WithForce)"
	}
	return fmt.Errorf("%w: %s %s%s: %w", ErrRefused, what, ours.rows(), hint, errors.Join(append(hard, soft...)...))
}

// Row is one shard's checkpoint as found and moved.
type Row struct {
	// Shard is the shard id.
	Shard string
	// Parents are the shard's parents as Kinesis lists them.
	Parents []string
	// Key is the key of the row written: ours ("stream:shard", or
	// "namespace/stream:shard" with Ours.LeaseNamespace) on import, the KCL
	// leaseKey on export.
	Key string
	// From is the source's checkpoint in its own notation ("-" for none):
	// the foreign item's on import, ours on export.
	From string
	// To is what is written, in the target's notation.
	To string
	// Before is the target's checkpoint before ("-": none, or no row).
	Before string
	// Checkpoint is ours: the one written (or that would be) on import,
	// the one read on export.
	Checkpoint leases.Checkpoint
	// Action is what happened.
	Action Action
	// Note explains a translation or an action, for people.
	Note string
	// Err is why the row was refused (Action Refused), or, with
	// WithForce, the refusal overridden.
	Err error
}

// String renders the row on one line, as the command prints it.
func (r Row) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", r.Shard)
	switch r.Action {
	case Write, Request:
		fmt.Fprintf(&b, "%s %s -> %s (source %s)", r.Action, r.Before, r.To, r.From)
	case Create:
		fmt.Fprintf(&b, "create (source %s)", r.From)
	case Unchanged:
		fmt.Fprintf(&b, "unchanged %s (source %s)", r.Before, r.From)
	case Skip:
		fmt.Fprintf(&b, "skip (source %s)", r.From)
	case Refused:
		fmt.Fprintf(&b, "refused %s -> %s (source %s): %v", r.Before, r.To, r.From, r.Err)
	}
	if r.Err != nil && r.Action != Refused {
		fmt.Fprintf(&b, "; forced past: %v", r.Err)
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "; %s", r.Note)
	}
	return b.String()
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// bounded runs fn(0..n-1), 8 at a time.
func bounded(n int, fn func(i int)) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}
