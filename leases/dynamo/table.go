package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// TableClient is the part of *dynamodb.Client that CreateTable uses. The
// Store itself never calls these operations (it needs only Client).
type TableClient interface {
	// DescribeTable reads the table's description: its status, key schema,
	// billing mode and ARN (and lets dynamodb.NewTableExistsWaiter wait).
	dynamodb.DescribeTableAPIClient
	// CreateTable creates the table, with its tags.
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	// UpdateContinuousBackups turns point-in-time recovery on
	// (WithPointInTimeRecovery).
	UpdateContinuousBackups(ctx context.Context, in *dynamodb.UpdateContinuousBackupsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error)
	// TagResource tags a table that existed already (WithTableTags).
	TagResource(ctx context.Context, in *dynamodb.TagResourceInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error)
	// UpdateItem records when the table was born in its membership header
	// (leases.MemberHeader.Born).
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ TableClient = (*dynamodb.Client)(nil)

// TableOption configures CreateTable.
type TableOption interface{ applyTable(*tableConfig) }

type tableConfig struct {
	pitr    bool
	tags    map[string]string
	maxWait time.Duration
}

type tableOptionFunc func(*tableConfig)

func (f tableOptionFunc) applyTable(c *tableConfig) { f(c) }

// WithPointInTimeRecovery makes CreateTable turn on point-in-time recovery
// (continuous backups) on the table, created or existing: one
// UpdateContinuousBackups call, which needs
// dynamodb:UpdateContinuousBackups. Without it CreateTable leaves an
// existing table's setting as it is (a new table starts without).
func WithPointInTimeRecovery() TableOption {
	return tableOptionFunc(func(c *tableConfig) { c.pitr = true })
}

// WithTableTags makes CreateTable tag the table: a new table is created
// with the tags (dynamodb:CreateTable and dynamodb:TagResource), an
// existing one gets them with one TagResource call, which overwrites the
// values of keys it has already and leaves its other tags alone. Calls add
// up: the last value of a key wins.
func WithTableTags(tags map[string]string) TableOption {
	tags = maps.Clone(tags)
	return tableOptionFunc(func(c *tableConfig) {
		if c.tags == nil {
			c.tags = map[string]string{}
		}
		maps.Copy(c.tags, tags)
	})
}

// WithTableWait bounds how long CreateTable waits for the table to become
// ACTIVE (DefaultTableWait by default; the context may end it sooner).
func WithTableWait(d time.Duration) TableOption {
	return tableOptionFunc(func(c *tableConfig) { c.maxWait = d })
}

// DefaultTableWait is how long CreateTable waits for the table to become
// ACTIVE, unless WithTableWait says otherwise. A new on-demand table is
// usually ACTIVE within seconds.
const DefaultTableWait = 5 * time.Minute

// Table is what CreateTable found and did.
type Table struct {
	// Name is the table's name.
	Name string
	// ARN is the table's ARN, as DescribeTable returns it
	// (arn:aws:dynamodb:region:account:table/name).
	ARN string
	// Created is true when this call created the table, false when it
	// existed already (with the right key schema).
	Created bool
	// BillingMode is the table's billing mode: PAY_PER_REQUEST for a table
	// CreateTable created; an existing table's is left as it is.
	BillingMode types.BillingMode
	// PointInTimeRecovery is true when WithPointInTimeRecovery was given
	// and DynamoDB reported the recovery enabled.
	PointInTimeRecovery bool
	// Tags are the tags this call wrote (WithTableTags); nil for none, or
	// when writing them failed.
	Tags map[string]string
	// Born is the table's CreationDateTime, as DynamoDB describes it,
	// recorded in the table's membership header (leases.MemberHeader.Born)
	// unless a time was recorded there already: members start the streams
	// of a table born longer ago than twice their timeout at once, without
	// waiting for a holder of an earlier table of the name to pass its
	// fence.
	Born time.Time
}

// CreateTable creates the lease table Store needs (string partition key
// lease_key, no sort key, on-demand billing: PAY_PER_REQUEST) and waits
// until it is ACTIVE (dynamodb.NewTableExistsWaiter). The options turn on
// point-in-time recovery and tag the table.
//
// It is idempotent: when the table exists already (ResourceInUseException)
// it describes it instead, waits for it to be ACTIVE and checks its key
// schema; an existing table keeps its billing mode. A table whose key is
// not the string partition key lease_key alone is refused with an error
// that names the table and the key schema found and wanted, and matches
// leases.ErrMisconfigured; nothing is written to it. Other errors wrap the
// SDK's (errors.As finds an access denied smithy.APIError, ...). When an
// option fails once the table is ACTIVE, the Table returned with the error
// says what is done (its Name is set from then on).
//
// client is usually a *dynamodb.Client; it needs dynamodb:CreateTable and
// dynamodb:DescribeTable, and dynamodb:UpdateContinuousBackups and
// dynamodb:TagResource with the options. A service running on the table
// needs none of these: only dynamodb:GetItem and dynamodb:UpdateItem.
func CreateTable(ctx context.Context, client TableClient, table string, opts ...TableOption) (Table, error) {
	cfg := tableConfig{maxWait: DefaultTableWait}
	for _, o := range opts {
		o.applyTable(&cfg)
	}
	if !tableName.MatchString(table) {
		return Table{}, fmt.Errorf("dynamo: table name %q: want 3 to 255 of a-z, A-Z, 0-9, '_', '-', '.': %w", table, leases.ErrMisconfigured)
	}
	if cfg.maxWait <= 0 {
		return Table{}, fmt.Errorf("dynamo: creating table %q: WithTableWait(%v): want a positive duration", table, cfg.maxWait)
	}
	for k := range cfg.tags {
		if k == "" {
			return Table{}, fmt.Errorf("dynamo: creating table %q: WithTableTags: a tag key is empty", table)
		}
	}
	t := Table{Name: table}
	var tags []types.Tag
	for _, k := range slices.Sorted(maps.Keys(cfg.tags)) {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(cfg.tags[k])})
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
		Tags:                 tags,
	})
	var inUse *types.ResourceInUseException
	switch {
	case err == nil:
		t.Created = true
	case errors.As(err, &inUse):
		// It exists: refuse a table being deleted at once (the waiter
		// would wait for it until it is gone, then time out).
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return Table{}, fmt.Errorf("dynamo: table %q exists: describing it: %w", table, err)
		}
		if out.Table != nil && out.Table.TableStatus == types.TableStatusDeleting {
			return Table{}, fmt.Errorf("dynamo: table %q is being deleted: try again once it is gone", table)
		}
	default:
		return Table{}, fmt.Errorf("dynamo: creating table %q: %w", table, err)
	}

	deadline := time.Now().Add(cfg.maxWait)
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		// The SDK's default first delay (20s) is longer than a new
		// on-demand table usually takes.
		o.MinDelay, o.MaxDelay = time.Second, 10*time.Second
	})
	out, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, cfg.maxWait)
	if err != nil {
		return Table{}, fmt.Errorf("dynamo: table %q: waiting for it to be ACTIVE: %w", table, err)
	}
	desc := out.Table
	if desc == nil {
		return Table{}, fmt.Errorf("dynamo: table %q: DescribeTable returned no table", table)
	}
	if found := keySchema(desc); found != wantKeySchema {
		return Table{}, fmt.Errorf("dynamo: table %q exists with key schema %s, want %s: it is not a kinesislease lease table: "+
			"name another table (or delete this one if nothing uses it): %w", table, found, wantKeySchema, leases.ErrMisconfigured)
	}
	t.ARN = aws.ToString(desc.TableArn)
	if err := recordBorn(ctx, client, table, desc); err != nil {
		return t, err
	}
	t.Born = aws.ToTime(desc.CreationDateTime)
	switch {
	case desc.BillingModeSummary != nil && desc.BillingModeSummary.BillingMode != "":
		t.BillingMode = desc.BillingModeSummary.BillingMode
	case t.Created:
		t.BillingMode = types.BillingModePayPerRequest
	default:
		// DescribeTable omits the summary of a table that was always
		// provisioned.
		t.BillingMode = types.BillingModeProvisioned
	}

	if len(cfg.tags) > 0 {
		if !t.Created {
			if _, err := client.TagResource(ctx, &dynamodb.TagResourceInput{ResourceArn: desc.TableArn, Tags: tags}); err != nil {
				return t, fmt.Errorf("dynamo: table %q exists: tagging it: %w", table, err)
			}
		}
		t.Tags = maps.Clone(cfg.tags)
	}
	if cfg.pitr {
		on, err := enablePITR(ctx, client, table, deadline)
		if err != nil {
			return t, err
		}
		t.PointInTimeRecovery = on
		if !on {
			return t, fmt.Errorf("dynamo: table %q: UpdateContinuousBackups did not report point-in-time recovery ENABLED", table)
		}
	}
	return t, nil
}

// enablePITR turns on point-in-time recovery and reports whether DynamoDB
// says it is enabled. Right after CreateTable, DynamoDB may answer
// ContinuousBackupsUnavailableException ("Backups are being enabled for the
// table"): it tries again every few seconds until deadline.
func enablePITR(ctx context.Context, client TableClient, table string, deadline time.Time) (bool, error) {
	for wait := time.Second; ; wait = min(2*wait, 10*time.Second) {
		out, err := client.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{
			TableName:                        aws.String(table),
			PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)},
		})
		var unavailable *types.ContinuousBackupsUnavailableException
		if errors.As(err, &unavailable) && time.Now().Add(wait).Before(deadline) {
			select {
			case <-ctx.Done():
				return false, fmt.Errorf("dynamo: table %q: turning on point-in-time recovery: %w (after %w)", table, ctx.Err(), err)
			case <-time.After(wait):
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("dynamo: table %q: turning on point-in-time recovery: %w", table, err)
		}
		d := out.ContinuousBackupsDescription
		return d != nil && d.PointInTimeRecoveryDescription != nil &&
			d.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == types.PointInTimeRecoveryStatusEnabled, nil
	}
}

// recordBorn writes the table's CreationDateTime into its membership
// header as attribute born, unless one is there (a table's header is
// removed only with the table, so a born found is this table's).
func recordBorn(ctx context.Context, client TableClient, table string, desc *types.TableDescription) error {
	if desc.CreationDateTime == nil {
		return fmt.Errorf("dynamo: table %q: DescribeTable returned no CreationDateTime", table)
	}
	_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       keyAttr(driver.MemberHeaderKey),
		UpdateExpression:          aws.String("SET #b = if_not_exists(#b, :b)"),
		ExpressionAttributeNames:  map[string]string{"#b": attrBorn},
		ExpressionAttributeValues: map[string]types.AttributeValue{":b": numAttr(desc.CreationDateTime.UnixMilli())},
	})
	if err != nil {
		return fmt.Errorf("dynamo: table %q: recording when it was born in item %s: %w", table, driver.MemberHeaderKey, err)
	}
	return nil
}

// wantKeySchema is keySchema's text for a lease table.
var wantKeySchema = "HASH " + attrKey + " (S)"

// keySchema describes a table's key: "HASH lease_key (S)", "HASH leaseKey
// (S), RANGE n (N)".
func keySchema(d *types.TableDescription) string {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range d.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	var parts []string
	for _, k := range d.KeySchema {
		name := aws.ToString(k.AttributeName)
		typ := string(attrTypes[name])
		if typ == "" {
			typ = "?"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", k.KeyType, name, typ))
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}
