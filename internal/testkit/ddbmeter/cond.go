package ddbmeter

// Condition expressions, as UpdateItem checks them against an item: the
// comparisons, attribute_exists, attribute_not_exists, AND, OR and NOT
// (cond and its kinds), how they compare attribute values (equal, order),
// and their parser (parseCondition and the parser's or, and, not and
// primary).

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ---------------------------------------------------------------------------
// Condition expressions.

type cond interface {
	eval(item map[string]types.AttributeValue, e env) (bool, error)
}

type andCond struct{ l, r cond }
type orCond struct{ l, r cond }
type notCond struct{ c cond }
type existsCond struct {
	p   path
	not bool
}
type cmpCond struct {
	op   string
	l, r operand
}

func (c andCond) eval(item map[string]types.AttributeValue, e env) (bool, error) {
	l, err := c.l.eval(item, e)
	if err != nil || !l {
		return false, err
	}
	return c.r.eval(item, e)
}

func (c orCond) eval(item map[string]types.AttributeValue, e env) (bool, error) {
	l, err := c.l.eval(item, e)
	if err != nil || l {
		return l, err
	}
	return c.r.eval(item, e)
}

func (c notCond) eval(item map[string]types.AttributeValue, e env) (bool, error) {
	v, err := c.c.eval(item, e)
	return !v, err
}

func (c existsCond) eval(item map[string]types.AttributeValue, e env) (bool, error) {
	return (get(item, e.resolve(c.p)) != nil) != c.not, nil
}

func (c cmpCond) eval(item map[string]types.AttributeValue, e env) (bool, error) {
	val := func(o operand) types.AttributeValue {
		if o.value != "" {
			return e.values[o.value]
		}
		return get(item, e.resolve(o.p))
	}
	l, r := val(c.l), val(c.r)
	if l == nil || r == nil {
		return c.op == "<>" && (l != nil || r != nil), nil
	}
	switch c.op {
	case "=":
		return equal(l, r), nil
	case "<>":
		return !equal(l, r), nil
	}
	o, ok := order(l, r)
	if !ok {
		return false, nil
	}
	switch c.op {
	case "<":
		return o < 0, nil
	case "<=":
		return o <= 0, nil
	case ">":
		return o > 0, nil
	case ">=":
		return o >= 0, nil
	}
	return false, fmt.Errorf("unknown comparator %q", c.op)
}

// equal compares two values as DynamoDB does: same type, same value
// (numbers compared as numbers).
func equal(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return false
		}
		o, ok := order(a, b)
		return ok && o == 0
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && string(a.Value) == string(b.Value)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			w, ok := b.Value[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for i := range a.Value {
			if !equal(a.Value[i], b.Value[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// order compares two numbers, or two strings (byte order); false for
// anything else.
func order(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		x, ok1 := new(big.Rat).SetString(a.Value)
		y, ok2 := new(big.Rat).SetString(b.Value)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Cmp(y), true
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return 0, false
		}
		return strings.Compare(a.Value, b.Value), true
	}
	return 0, false
}

type condExpr struct {
	c      cond
	names  map[string]bool
	values map[string]bool
}

func parseCondition(s string) (*condExpr, error) {
	p, err := newParser(s)
	if err != nil {
		return nil, err
	}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.peek().text)
	}
	return &condExpr{c: c, names: p.names, values: p.values}, nil
}

func (p *parser) or() (cond, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.keyword("OR") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = orCond{l, r}
	}
	return l, nil
}

func (p *parser) and() (cond, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.keyword("AND") {
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = andCond{l, r}
	}
	return l, nil
}

func (p *parser) not() (cond, error) {
	if p.keyword("NOT") {
		c, err := p.not()
		if err != nil {
			return nil, err
		}
		return notCond{c}, nil
	}
	return p.primary()
}

func (p *parser) primary() (cond, error) {
	if p.punct("(") {
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		return c, p.expect(")")
	}
	if t := p.peek(); t.kind == tName && (t.text == "attribute_exists" || t.text == "attribute_not_exists") {
		p.pos++
		if err := p.expect("("); err != nil {
			return nil, err
		}
		pa, err := p.path()
		if err != nil {
			return nil, err
		}
		return existsCond{p: pa, not: t.text == "attribute_not_exists"}, p.expect(")")
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	t := p.next()
	switch t.text {
	case "=", "<>", "<", "<=", ">", ">=":
	default:
		return nil, fmt.Errorf("want a comparator, found %q", t.text)
	}
	r, err := p.operand()
	if err != nil {
		return nil, err
	}
	return cmpCond{op: t.text, l: l, r: r}, nil
}
