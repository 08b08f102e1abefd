package ddbmeter

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint is a DynamoDB endpoint of Tables by name, for processes that
// reach DynamoDB over HTTP (a real dynamodb.Client whose BaseEndpoint is
// a server of it): the fulfilment demo's instances. It serves, on
// DynamoDB's JSON protocol (awsJson1_0), CreateTable and DescribeTable for
// tables of the lease table's schema (a string hash key KeyAttr; a table
// is ACTIVE at once) and GetItem and UpdateItem on them (Client.ServeHTTP,
// billed to client id 0). A call on a table that does not exist is a
// ResourceNotFoundException, creating one that does a
// ResourceInUseException, as DynamoDB answers. Other operations are an
// UnknownOperationException. It is safe for concurrent use.
type Endpoint struct {
	opts     []Option
	requests atomic.Uint64

	mu     sync.Mutex
	tables map[string]*endpointTable
}

type endpointTable struct {
	t       *Table
	created time.Time
}

// NewEndpoint returns an endpoint without tables; opts apply to every
// table it creates (NewTable).
func NewEndpoint(opts ...Option) *Endpoint {
	return &Endpoint{opts: opts, tables: map[string]*endpointTable{}}
}

// CreateTable creates the table name, or returns it if it exists.
func (e *Endpoint) CreateTable(name string) *Table {
	t, _ := e.create(name)
	return t
}

// create creates the table name; created is false if it existed.
func (e *Endpoint) create(name string) (t *Table, created bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if et, ok := e.tables[name]; ok {
		return et.t, false
	}
	et := &endpointTable{t: NewTable(e.opts...), created: time.Now()}
	e.tables[name] = et
	return et.t, true
}

// Table returns the table name, nil if there is none.
func (e *Endpoint) Table(name string) *Table {
	e.mu.Lock()
	defer e.mu.Unlock()
	if et, ok := e.tables[name]; ok {
		return et.t
	}
	return nil
}

const (
	ddbNS      = "com.amazonaws.dynamodb.v20120810#"
	validateNS = "com.amazon.coral.validate#"
)

// endpointInput is what the endpoint reads of a request itself.
type endpointInput struct {
	TableName            string
	KeySchema            []struct{ AttributeName, KeyType string }
	AttributeDefinitions []struct{ AttributeName, AttributeType string }
}

// ServeHTTP serves the endpoint's operations (see Endpoint).
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	if r.Method != http.MethodPost || !ok {
		e.error(w, "com.amazon.coral.service#UnknownOperationException", "")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		e.error(w, "com.amazon.coral.service#SerializationException", err.Error())
		return
	}
	var in endpointInput
	if err := json.Unmarshal(body, &in); err != nil {
		e.error(w, "com.amazon.coral.service#SerializationException", err.Error())
		return
	}
	if in.TableName == "" {
		e.error(w, validateNS+"ValidationException", "1 validation error detected: Value null at 'tableName' failed to satisfy constraint: Member must not be null")
		return
	}
	switch op {
	case "CreateTable":
		if len(in.KeySchema) != 1 || in.KeySchema[0].AttributeName != KeyAttr || in.KeySchema[0].KeyType != "HASH" ||
			len(in.AttributeDefinitions) != 1 || in.AttributeDefinitions[0].AttributeName != KeyAttr || in.AttributeDefinitions[0].AttributeType != "S" {
			e.error(w, validateNS+"ValidationException", "ddbmeter: a table has one key, the string hash key "+KeyAttr)
			return
		}
		if _, created := e.create(in.TableName); !created {
			e.error(w, ddbNS+"ResourceInUseException", "Table already exists: "+in.TableName)
			return
		}
		e.answer(w, map[string]any{"TableDescription": e.describe(in.TableName)})
	case "DescribeTable":
		d := e.describe(in.TableName)
		if d == nil {
			e.notFound(w)
			return
		}
		e.answer(w, map[string]any{"Table": d})
	case "GetItem", "UpdateItem":
		t := e.Table(in.TableName)
		if t == nil {
			e.notFound(w)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		t.Client(0).ServeHTTP(w, r)
	default:
		e.error(w, "com.amazon.coral.service#UnknownOperationException", "")
	}
}

// describe returns the TableDescription of the table name, nil if there
// is none.
func (e *Endpoint) describe(name string) map[string]any {
	e.mu.Lock()
	et, ok := e.tables[name]
	e.mu.Unlock()
	if !ok {
		return nil
	}
	return map[string]any{
		"TableName":            name,
		"TableArn":             tableARN(name),
		"TableStatus":          "ACTIVE",
		"CreationDateTime":     float64(et.created.UnixMilli()) / 1000,
		"KeySchema":            []map[string]string{{"AttributeName": KeyAttr, "KeyType": "HASH"}},
		"AttributeDefinitions": []map[string]string{{"AttributeName": KeyAttr, "AttributeType": "S"}},
		"BillingModeSummary":   map[string]string{"BillingMode": "PAY_PER_REQUEST"},
		"ItemCount":            len(et.t.Keys()),
	}
}

func (e *Endpoint) requestID(w http.ResponseWriter) {
	w.Header().Set("X-Amzn-Requestid", "DDBMETER-E"+strconv.FormatUint(e.requests.Add(1), 10))
}

func (e *Endpoint) answer(w http.ResponseWriter, out map[string]any) {
	e.requestID(w)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	json.NewEncoder(w).Encode(out)
}

func (e *Endpoint) error(w http.ResponseWriter, typ, msg string) {
	e.requestID(w)
	writeError(w, http.StatusBadRequest, typ, msg, nil)
}

func (e *Endpoint) notFound(w http.ResponseWriter) {
	e.error(w, ddbNS+"ResourceNotFoundException", "Requested resource not found")
}
