package ddbmeter

import (
	"fmt"
	"strings"
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
