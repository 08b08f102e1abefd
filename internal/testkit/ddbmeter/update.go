package ddbmeter

// Update expressions, as UpdateItem applies them to an item: the SET,
// REMOVE and ADD clauses parsed (parseUpdate), their names and values
// resolved (env), and the item's paths read, written and copied.

import (
	"fmt"
	"maps"
	"math/big"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ---------------------------------------------------------------------------
// Update expressions.

type setAction struct {
	p path
	v operand
}

type addAction struct {
	p     path
	value string
}

type updateExpr struct {
	sets    []setAction
	removes []path
	adds    []addAction
	names   map[string]bool
	values  map[string]bool
}

func parseUpdate(s string) (*updateExpr, error) {
	p, err := newParser(s)
	if err != nil {
		return nil, err
	}
	u := &updateExpr{}
	for p.pos < len(p.toks) {
		switch {
		case p.keyword("SET"):
			for {
				pa, err := p.path()
				if err != nil {
					return nil, err
				}
				if err := p.expect("="); err != nil {
					return nil, err
				}
				v, err := p.operand()
				if err != nil {
					return nil, err
				}
				u.sets = append(u.sets, setAction{pa, v})
				if !p.punct(",") {
					break
				}
			}
		case p.keyword("REMOVE"):
			for {
				pa, err := p.path()
				if err != nil {
					return nil, err
				}
				u.removes = append(u.removes, pa)
				if !p.punct(",") {
					break
				}
			}
		case p.keyword("ADD"):
			for {
				pa, err := p.path()
				if err != nil {
					return nil, err
				}
				t := p.next()
				if t.kind != tValue {
					return nil, fmt.Errorf("ADD %v: want a :value, found %q", pa, t.text)
				}
				p.values[t.text] = true
				u.adds = append(u.adds, addAction{pa, t.text})
				if !p.punct(",") {
					break
				}
			}
		default:
			return nil, fmt.Errorf("want SET, REMOVE or ADD, found %q", p.peek().text)
		}
	}
	u.names, u.values = p.names, p.values
	return u, nil
}

// env resolves placeholders for one call.
type env struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func (e env) resolve(pa path) []string {
	out := make([]string, len(pa))
	for i, s := range pa {
		if strings.HasPrefix(s, "#") {
			out[i] = e.names[s]
		} else {
			out[i] = s
		}
	}
	return out
}

// apply applies u to item (which it modifies).
func (u *updateExpr) apply(item map[string]types.AttributeValue, e env) error {
	for _, s := range u.sets {
		var v types.AttributeValue
		if s.v.value != "" {
			v = e.values[s.v.value]
		} else if v = get(item, e.resolve(s.v.p)); v == nil {
			return fmt.Errorf("SET: the operand %v names no attribute", s.v.p)
		}
		if err := set(item, e.resolve(s.p), clone(v)); err != nil {
			return err
		}
	}
	for _, r := range u.removes {
		remove(item, e.resolve(r))
	}
	for _, a := range u.adds {
		p := e.resolve(a.p)
		add, ok := e.values[a.value].(*types.AttributeValueMemberN)
		if !ok {
			return fmt.Errorf("ADD %v: only numbers are supported", a.p)
		}
		cur := get(item, p)
		if cur == nil {
			if err := set(item, p, &types.AttributeValueMemberN{Value: add.Value}); err != nil {
				return err
			}
			continue
		}
		n, ok := cur.(*types.AttributeValueMemberN)
		if !ok {
			return fmt.Errorf("ADD %v: the attribute is not a number", a.p)
		}
		sum, err := addNumbers(n.Value, add.Value)
		if err != nil {
			return err
		}
		if err := set(item, p, &types.AttributeValueMemberN{Value: sum}); err != nil {
			return err
		}
	}
	return nil
}

func addNumbers(a, b string) (string, error) {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	if !ok1 || !ok2 {
		return "", fmt.Errorf("ADD: %q + %q: not numbers", a, b)
	}
	x.Add(x, y)
	if x.IsInt() {
		return x.Num().String(), nil
	}
	return x.FloatString(38), nil
}

func get(item map[string]types.AttributeValue, p []string) types.AttributeValue {
	var v types.AttributeValue = &types.AttributeValueMemberM{Value: item}
	for _, name := range p {
		m, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			return nil
		}
		if v = m.Value[name]; v == nil {
			return nil
		}
	}
	return v
}

// set sets the attribute at p in item, copying the maps on the way (item
// is the caller's own copy; the maps below it may be shared with stored
// items, which are never modified).
func set(item map[string]types.AttributeValue, p []string, v types.AttributeValue) error {
	m, ok := parentOf(item, p)
	if !ok {
		return fmt.Errorf("the document path %v is invalid for update", p)
	}
	m[p[len(p)-1]] = v
	return nil
}

func remove(item map[string]types.AttributeValue, p []string) {
	if m, ok := parentOf(item, p); ok {
		delete(m, p[len(p)-1])
	}
}

// parentOf returns the map holding the attribute at p, after replacing
// every map on the way below item with a copy; false if one is missing.
func parentOf(item map[string]types.AttributeValue, p []string) (map[string]types.AttributeValue, bool) {
	m := item
	for _, name := range p[:len(p)-1] {
		child, ok := m[name].(*types.AttributeValueMemberM)
		if !ok {
			return nil, false
		}
		c := &types.AttributeValueMemberM{Value: maps.Clone(child.Value)}
		m[name] = c
		m = c.Value
	}
	return m, true
}

// clone returns a deep copy of v (maps and lists copied, scalars shared:
// nobody modifies them).
func clone(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberM:
		m := make(map[string]types.AttributeValue, len(v.Value))
		for k, e := range v.Value {
			m[k] = clone(e)
		}
		return &types.AttributeValueMemberM{Value: m}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = clone(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	}
	return v
}

func cloneItem(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		out[k] = clone(v)
	}
	return out
}
