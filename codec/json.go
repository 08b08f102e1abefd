package codec

import "encoding/json"

// JSON is a Codec for encoding/json, named "json".
//
// It has the semantics of json.Marshal and json.Unmarshal: struct fields are
// named by the `json` tag, unknown object keys are ignored, and data must hold
// exactly one JSON value (trailing bytes other than white space are an error).
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

const jsonName = "json"

func (jsonCodec) Name() string { return jsonName }

func (jsonCodec) Marshal(v any) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			data, err = nil, encodeError(jsonName, v, panicError(r))
		}
	}()
	data, err = json.Marshal(v)
	if err != nil {
		return nil, encodeError(jsonName, v, err)
	}
	return data, nil
}

func (jsonCodec) Unmarshal(data []byte, v any) (err error) {
	if err := checkTarget(v); err != nil {
		return decodeError(jsonName, v, err)
	}
	// encoding/json does not panic on malformed input, but a type's own
	// UnmarshalJSON might.
	defer func() {
		if r := recover(); r != nil {
			err = decodeError(jsonName, v, panicError(r))
		}
	}()
	if err := json.Unmarshal(data, v); err != nil {
		return decodeError(jsonName, v, err)
	}
	return nil
}
