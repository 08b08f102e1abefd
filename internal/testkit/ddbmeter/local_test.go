package ddbmeter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/internal/testkit/ddbmeter"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestSizesAgreeWithDynamoDBLocal checks Size against the capacity DynamoDB
// Local reports (ReturnConsumedCapacity): for items of every shape the
// lease rows and membership rows have (strings, numbers of many lengths,
// maps of entries, booleans), padded so that Size says exactly 1,024 bytes
// and then 1,025, a write of the new item must cost 1 and then 2 write
// units; padded to 4,096 and 4,097 bytes, a strongly consistent read 1 and
// then 2 read units. A size off by one byte either way fails.
func TestSizesAgreeWithDynamoDBLocal(t *testing.T) {
	client := testutil.DynamoClient(t)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, client, table)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	entry := func(inc string, hb string, extra bool) types.AttributeValue {
		m := map[string]types.AttributeValue{
			"i": &types.AttributeValueMemberS{Value: inc},
			"h": &types.AttributeValueMemberN{Value: hb},
		}
		if extra {
			m["l"] = &types.AttributeValueMemberBOOL{Value: true}
			m["k"] = &types.AttributeValueMemberN{Value: "120"}
			m["e"] = &types.AttributeValueMemberN{Value: "1000"}
			m["n"] = &types.AttributeValueMemberN{Value: "99"}
		}
		return &types.AttributeValueMemberM{Value: m}
	}
	shapes := map[string]map[string]types.AttributeValue{
		"strings": {
			"owner":       &types.AttributeValueMemberS{Value: strings.Repeat("o", 64)},
			"incarnation": &types.AttributeValueMemberS{Value: "12.ABCDEFGHIJ"},
			"write_token": &types.AttributeValueMemberS{Value: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
			"checkpoint":  &types.AttributeValueMemberS{Value: "49590338271490256608559692538361571095921575989136588898"},
		},
		"numbers": {
			"a": &types.AttributeValueMemberN{Value: "0"}, "b": &types.AttributeValueMemberN{Value: "7"},
			"c": &types.AttributeValueMemberN{Value: "10"}, "d": &types.AttributeValueMemberN{Value: "99"},
			"e": &types.AttributeValueMemberN{Value: "100"}, "f": &types.AttributeValueMemberN{Value: "120"},
			"g": &types.AttributeValueMemberN{Value: "12345"}, "h": &types.AttributeValueMemberN{Value: "1234"},
			"i": &types.AttributeValueMemberN{Value: "9223372036854775807"}, "j": &types.AttributeValueMemberN{Value: "-5"},
			"k": &types.AttributeValueMemberN{Value: "25228800"}, "l": &types.AttributeValueMemberN{Value: "1000000"},
		},
		"membership row": {
			"n":                            &types.AttributeValueMemberN{Value: "3"},
			"m_" + strings.Repeat("a", 64): entry("0.ABCDEFGHIJ", "1", false),
			"m_" + strings.Repeat("b", 64): entry("0.KLMNOPQRST", "25228800", true),
			"m_" + strings.Repeat("c", 10): entry("0.UVWXYZABCD", "120", true),
			"m_" + strings.Repeat("é", 10): entry("0.UVWXYZABCD", "4", false),
			"list":                         &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}, &types.AttributeValueMemberN{Value: "12"}}},
			"vanished":                     &types.AttributeValueMemberN{Value: "2"},
			"r4095":                        &types.AttributeValueMemberN{Value: "345"},
		},
	}
	n := 0
	for name, attrs := range shapes {
		for _, target := range []int{1024, 1025, 4096, 4097} {
			n++
			key := fmt.Sprintf("size-%d", n)
			item := map[string]types.AttributeValue{ddbmeter.KeyAttr: &types.AttributeValueMemberS{Value: key}}
			for k, v := range attrs {
				item[k] = v
			}
			base := ddbmeter.Size(item) + len("pad")
			if base > target {
				t.Fatalf("%s: %d bytes before padding, above %d", name, base, target)
			}
			item["pad"] = &types.AttributeValueMemberS{Value: strings.Repeat("p", target-base)}
			if got := ddbmeter.Size(item); got != target {
				t.Fatalf("%s: padded to %d bytes, want %d", name, got, target)
			}
			var sets []string
			names := map[string]string{}
			values := map[string]types.AttributeValue{}
			i := 0
			for k, v := range item {
				if k == ddbmeter.KeyAttr {
					continue
				}
				sets = append(sets, fmt.Sprintf("#a%d = :v%d", i, i))
				names[fmt.Sprintf("#a%d", i)] = k
				values[fmt.Sprintf(":v%d", i)] = v
				i++
			}
			out, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: map[string]types.AttributeValue{ddbmeter.KeyAttr: item[ddbmeter.KeyAttr]},
				UpdateExpression: aws.String("SET " + strings.Join(sets, ", ")), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
				ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			})
			if err != nil {
				t.Fatalf("%s, %d bytes: %v", name, target, err)
			}
			if got, want := aws.ToFloat64(out.ConsumedCapacity.CapacityUnits), float64(ddbmeter.WriteUnits(target)); got != want {
				t.Errorf("%s: writing an item of %d bytes (by Size) cost %v write units, want %v", name, target, got, want)
			}
			get, err := client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(table), Key: map[string]types.AttributeValue{ddbmeter.KeyAttr: item[ddbmeter.KeyAttr]},
				ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			})
			if err != nil {
				t.Fatalf("%s, %d bytes: %v", name, target, err)
			}
			if got, want := aws.ToFloat64(get.ConsumedCapacity.CapacityUnits), float64(ddbmeter.ReadUnits(target)); got != want {
				t.Errorf("%s: reading an item of %d bytes (by Size) cost %v read units, want %v", name, target, got, want)
			}
		}
	}
}
