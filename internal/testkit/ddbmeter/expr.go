package ddbmeter

import (
	"fmt"
	"maps"
	"math/big"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The subset of DynamoDB's expression language the leases/dynamo Store
// sends: update expressions of SET path = operand, REMOVE path and ADD path
// value clauses; condition expressions of comparisons, attribute_exists,
// attribute_not_exists, AND, OR, NOT and parentheses. Paths are names
// (literal, or #placeholders) joined by dots: map members. Anything else is
// a ValidationException, so that a Store that starts sending more fails
// here instead of being billed wrong.

type tokKind int

const (
	tName  tokKind = iota + 1 // a literal name or a keyword
	tRef                      // #name
	tValue                    // :value
	tPunct                    // ( ) , . = < > <= >= <>
)

type token struct {
	kind tokKind
	text string
}

func tokenize(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '#' || c == ':' || isNameByte(c):
			j := i + 1
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			k := tName
			switch c {
			case '#':
				k = tRef
			case ':':
				k = tValue
			}
			if j == i+1 && k != tName {
				return nil, fmt.Errorf("empty placeholder at offset %d", i)
			}
			out = append(out, token{k, s[i:j]})
			i = j
		case c == '<' && i+1 < len(s) && (s[i+1] == '=' || s[i+1] == '>'):
			out = append(out, token{tPunct, s[i : i+2]})
			i += 2
		case c == '>' && i+1 < len(s) && s[i+1] == '=':
			out = append(out, token{tPunct, ">="})
			i += 2
		case strings.IndexByte("(),.=<>", c) >= 0:
			out = append(out, token{tPunct, string(c)})
			i++
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", c, i)
		}
	}
	return out, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// path is a document path: each element a literal name or a #placeholder.
type path []string

// operand is a path or a :value.
type operand struct {
	p     path
	value string // ":name" when the operand is a value
}

type parser struct {
	toks   []token
	pos    int
	names  map[string]bool // #placeholders used
	values map[string]bool // :placeholders used
}

func newParser(s string) (*parser, error) {
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	return &parser{toks: toks, names: map[string]bool{}, values: map[string]bool{}}, nil
}

func (p *parser) peek() token {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return token{}
}

func (p *parser) next() token {
	t := p.peek()
	if p.pos < len(p.toks) {
		p.pos++
	}
	return t
}

func (p *parser) keyword(k string) bool {
	if t := p.peek(); t.kind == tName && strings.EqualFold(t.text, k) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) punct(s string) bool {
	if t := p.peek(); t.kind == tPunct && t.text == s {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(s string) error {
	if !p.punct(s) {
		return fmt.Errorf("want %q, found %q", s, p.peek().text)
	}
	return nil
}

var keywords = map[string]bool{"SET": true, "REMOVE": true, "ADD": true, "DELETE": true, "AND": true, "OR": true, "NOT": true, "BETWEEN": true, "IN": true}

func (p *parser) path() (path, error) {
	var out path
	for {
		t := p.next()
		switch {
		case t.kind == tRef:
			p.names[t.text] = true
		case t.kind == tName && !keywords[strings.ToUpper(t.text)]:
		default:
			return nil, fmt.Errorf("want an attribute name, found %q", t.text)
		}
		out = append(out, t.text)
		if !p.punct(".") {
			return out, nil
		}
	}
}

func (p *parser) operand() (operand, error) {
	if t := p.peek(); t.kind == tValue {
		p.pos++
		p.values[t.text] = true
		return operand{value: t.text}, nil
	}
	pa, err := p.path()
	return operand{p: pa}, err
}

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
