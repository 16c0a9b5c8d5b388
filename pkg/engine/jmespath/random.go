package jmespath

import (
	"math/rand/v2"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

const (
	// randomMaxUnbounded is how many times *, + and {n,} may repeat.
	randomMaxUnbounded = 10
	// randomMaxLength bounds the output of random, in bytes.
	randomMaxLength = 64 << 10
	// randomMaxSteps bounds the work of random, counted in visited nodes.
	randomMaxSteps = 1 << 20
	// Printable ASCII, preferred when a character class allows it.
	printableLow, printableHigh = 0x20, 0x7e
)

// random(pattern string) string: a random string matching the regular
// expression pattern, e.g. random('[a-z0-9]{6}'). Unbounded repetitions
// repeat at most 10 times; anchors and word boundaries are ignored.
func jpRandom(a []any) (any, error) {
	const name = "random"
	pattern, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	if pattern == "" {
		return nil, fnErrorf(name, "no pattern provided")
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fnWrap(name, err)
	}
	g := generator{name: name}
	if err := g.generate(re); err != nil {
		return nil, err
	}
	return g.out.String(), nil
}

type generator struct {
	name  string
	out   strings.Builder
	steps int
}

func (g *generator) write(r rune) error {
	if g.out.Len()+utf8.RuneLen(r) > randomMaxLength {
		return fnErrorf(g.name, "generated string longer than %d bytes", randomMaxLength)
	}
	g.out.WriteRune(r)
	return nil
}

func (g *generator) repeat(re *syntax.Regexp, lo, hi int) error {
	if hi < 0 {
		hi = lo + randomMaxUnbounded
	}
	n := lo
	if hi > lo {
		n += rand.IntN(hi - lo + 1)
	}
	for range n {
		if err := g.generate(re); err != nil {
			return err
		}
	}
	return nil
}

func (g *generator) generate(re *syntax.Regexp) error {
	g.steps++
	if g.steps > randomMaxSteps {
		return fnErrorf(g.name, "pattern too complex")
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return fnErrorf(g.name, "pattern matches no string")
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if err := g.write(r); err != nil {
				return err
			}
		}
		return nil
	case syntax.OpCharClass:
		r, ok := pickRune(re.Rune)
		if !ok {
			return fnErrorf(g.name, "empty character class")
		}
		return g.write(r)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return g.write(rune(printableLow + rand.IntN(printableHigh-printableLow+1)))
	case syntax.OpCapture:
		return g.generate(re.Sub[0])
	case syntax.OpStar:
		return g.repeat(re.Sub[0], 0, -1)
	case syntax.OpPlus:
		return g.repeat(re.Sub[0], 1, -1)
	case syntax.OpQuest:
		return g.repeat(re.Sub[0], 0, 1)
	case syntax.OpRepeat:
		return g.repeat(re.Sub[0], re.Min, re.Max)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if err := g.generate(sub); err != nil {
				return err
			}
		}
		return nil
	case syntax.OpAlternate:
		return g.generate(re.Sub[rand.IntN(len(re.Sub))])
	default:
		// Empty matches, anchors and word boundaries produce nothing.
		return nil
	}
}

// pickRune picks a rune from a character class given as [lo, hi] pairs,
// preferring printable ASCII and never returning a surrogate.
func pickRune(ranges []rune) (rune, bool) {
	var printable []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := max(ranges[i], printableLow), min(ranges[i+1], printableHigh)
		if lo <= hi {
			printable = append(printable, lo, hi)
		}
	}
	if len(printable) > 0 {
		ranges = printable
	}
	total := 0
	for i := 0; i+1 < len(ranges); i += 2 {
		total += int(ranges[i+1]-ranges[i]) + 1
	}
	if total <= 0 {
		return 0, false
	}
	for range 16 {
		n := rand.IntN(total)
		for i := 0; i+1 < len(ranges); i += 2 {
			size := int(ranges[i+1]-ranges[i]) + 1
			if n < size {
				if r := ranges[i] + rune(n); utf8.ValidRune(r) {
					return r, true
				}
				break
			}
			n -= size
		}
	}
	// Unlucky draws of surrogates only: fall back to the first valid rune.
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r <= ranges[i]+0x800; r++ {
			if utf8.ValidRune(r) {
				return r, true
			}
		}
	}
	return 0, false
}
