package ddbmeter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ServeHTTP answers DynamoDB's JSON protocol (awsJson1_0) for GetItem and
// UpdateItem, billed to c's client id, so that a real dynamodb.Client can
// use the table: its endpoint (or an http.RoundTripper calling ServeHTTP
// in the process, which also runs inside a testing/synctest bubble). Errors
// are the bodies DynamoDB sends, with its status codes, so that the SDK's
// own deserializer makes its types of them (a throttled call's
// *types.ThrottlingException, which the SDK's retryer retries as a
// throttle). Requests are not authenticated; other operations are an
// UnknownOperationException.
func (c *Client) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Amzn-Requestid", c.t.requestID())
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	if r.Method != http.MethodPost || !ok {
		writeError(w, http.StatusBadRequest, "com.amazon.coral.service#UnknownOperationException", "", nil)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "com.amazon.coral.service#SerializationException", err.Error(), nil)
		return
	}
	var in wireInput
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "com.amazon.coral.service#SerializationException", err.Error(), nil)
		return
	}
	var out map[string]any
	switch op {
	case "GetItem":
		var o *dynamodb.GetItemOutput
		if o, err = c.GetItem(r.Context(), &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key.m, ConsistentRead: in.ConsistentRead}); err == nil {
			out = map[string]any{}
			if o.Item != nil {
				out["Item"] = wireItem(o.Item)
			}
		}
	case "UpdateItem":
		var o *dynamodb.UpdateItemOutput
		if o, err = c.UpdateItem(r.Context(), &dynamodb.UpdateItemInput{
			TableName: in.TableName, Key: in.Key.m, UpdateExpression: in.UpdateExpression, ConditionExpression: in.ConditionExpression,
			ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues.m,
			ReturnValues: types.ReturnValue(in.ReturnValues), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailure(in.ReturnValuesOnConditionCheckFailure),
		}); err == nil {
			out = map[string]any{}
			if o.Attributes != nil {
				out["Attributes"] = wireItem(o.Attributes)
			}
		}
	default:
		writeError(w, http.StatusBadRequest, "com.amazon.coral.service#UnknownOperationException", "", nil)
		return
	}
	if err != nil {
		serveError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	json.NewEncoder(w).Encode(out)
}

// serveError writes err as DynamoDB would.
func serveError(w http.ResponseWriter, err error) {
	const ns = "com.amazonaws.dynamodb.v20120810#"
	var (
		ccf  *types.ConditionalCheckFailedException
		thr  *types.ThrottlingException
		ptee *types.ProvisionedThroughputExceededException
		api  smithy.APIError
	)
	switch {
	case errors.As(err, &ccf):
		extra := map[string]any{}
		if ccf.Item != nil {
			extra["Item"] = wireItem(ccf.Item)
		}
		writeError(w, http.StatusBadRequest, ns+"ConditionalCheckFailedException", ccf.ErrorMessage(), extra)
	case errors.As(err, &thr):
		// The member is throttlingReasons here, ThrottlingReasons in the
		// ProvisionedThroughputExceededException (DynamoDB's model).
		writeError(w, http.StatusBadRequest, ns+"ThrottlingException", thr.ErrorMessage(), map[string]any{"throttlingReasons": wireReasons(thr.ThrottlingReasons)})
	case errors.As(err, &ptee):
		writeError(w, http.StatusBadRequest, ns+"ProvisionedThroughputExceededException", ptee.ErrorMessage(), map[string]any{"ThrottlingReasons": wireReasons(ptee.ThrottlingReasons)})
	case errors.As(err, &api) && api.ErrorCode() == "ValidationException":
		writeError(w, http.StatusBadRequest, "com.amazon.coral.validate#ValidationException", api.ErrorMessage(), nil)
	default:
		writeError(w, http.StatusInternalServerError, ns+"InternalServerError", err.Error(), nil)
	}
}

func writeError(w http.ResponseWriter, status int, typ, msg string, extra map[string]any) {
	body := map[string]any{"__type": typ}
	if msg != "" {
		body["message"] = msg
	}
	for k, v := range extra {
		body[k] = v
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func wireReasons(rs []types.ThrottlingReason) []map[string]string {
	out := make([]map[string]string, len(rs))
	for i, r := range rs {
		out[i] = map[string]string{"reason": aws.ToString(r.Reason), "resource": aws.ToString(r.Resource)}
	}
	return out
}

// wireInput is the part of a GetItem or UpdateItem request the table
// evaluates; ReturnConsumedCapacity and the like are accepted and ignored.
type wireInput struct {
	TableName                           *string
	Key                                 wireMap
	ConsistentRead                      *bool
	UpdateExpression                    *string
	ConditionExpression                 *string
	ExpressionAttributeNames            map[string]string
	ExpressionAttributeValues           wireMap
	ReturnValues                        string
	ReturnValuesOnConditionCheckFailure string
}

// wireMap is a map of attribute values in DynamoDB's JSON.
type wireMap struct {
	m map[string]types.AttributeValue
}

func (w *wireMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		return nil
	}
	w.m = make(map[string]types.AttributeValue, len(raw))
	for k, v := range raw {
		av, err := decodeValue(v)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		w.m[k] = av
	}
	return nil
}

// decodeValue decodes one attribute value of DynamoDB's JSON ({"S": "x"},
// {"N": "1"}, {"B": base64}, {"BOOL": true}, {"NULL": true}, {"M": {...}},
// {"L": [...]}, {"SS": [...]}, {"NS": [...]}, {"BS": [...]}).
func decodeValue(b []byte) (types.AttributeValue, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	if len(raw) != 1 {
		return nil, fmt.Errorf("an attribute value has one type, not %d", len(raw))
	}
	for typ, v := range raw {
		switch typ {
		case "S":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberS{Value: s}, err
		case "N":
			var s string
			err := json.Unmarshal(v, &s)
			if err == nil {
				_, err = strconv.ParseFloat(s, 64)
			}
			return &types.AttributeValueMemberN{Value: s}, err
		case "B":
			var p []byte
			err := json.Unmarshal(v, &p)
			return &types.AttributeValueMemberB{Value: p}, err
		case "BOOL":
			var p bool
			err := json.Unmarshal(v, &p)
			return &types.AttributeValueMemberBOOL{Value: p}, err
		case "NULL":
			var p bool
			err := json.Unmarshal(v, &p)
			return &types.AttributeValueMemberNULL{Value: p}, err
		case "M":
			var m wireMap
			err := m.UnmarshalJSON(v)
			if m.m == nil {
				m.m = map[string]types.AttributeValue{}
			}
			return &types.AttributeValueMemberM{Value: m.m}, err
		case "L":
			var raws []json.RawMessage
			if err := json.Unmarshal(v, &raws); err != nil {
				return nil, err
			}
			l := make([]types.AttributeValue, len(raws))
			for i, r := range raws {
				var err error
				if l[i], err = decodeValue(r); err != nil {
					return nil, err
				}
			}
			return &types.AttributeValueMemberL{Value: l}, nil
		case "SS":
			var p []string
			err := json.Unmarshal(v, &p)
			return &types.AttributeValueMemberSS{Value: p}, err
		case "NS":
			var p []string
			err := json.Unmarshal(v, &p)
			return &types.AttributeValueMemberNS{Value: p}, err
		case "BS":
			var p [][]byte
			err := json.Unmarshal(v, &p)
			return &types.AttributeValueMemberBS{Value: p}, err
		default:
			return nil, fmt.Errorf("unknown attribute value type %q", typ)
		}
	}
	panic("unreachable")
}

// wireItem returns item in DynamoDB's JSON, for encoding/json.
func wireItem(item map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(item))
	for k, v := range item {
		out[k] = wireValue(v)
	}
	return out
}

func wireValue(v types.AttributeValue) any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberM:
		return map[string]any{"M": wireItem(v.Value)}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = wireValue(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": v.Value}
	}
	return nil
}
