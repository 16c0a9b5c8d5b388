package jmespath

import (
	"fmt"
)

// MaxStringLength bounds, in bytes, every string a function call returns.
// Functions whose output can grow faster than their input (replace,
// pad_left, join, to_string, ...) check the bound before allocating, so an
// expression cannot exhaust memory by repeated or nested growth.
const MaxStringLength = 16 << 20

const maxStringLength = MaxStringLength

func errTooLong(name string) error {
	return fnErrorf(name, "result would exceed %d bytes", maxStringLength)
}

// preCallGuards check the arguments of standard library functions whose
// output can be much larger than their input, before they run.
var preCallGuards = map[string]func(args []any) error{
	"pad_left":  guardPadWidth,
	"pad_right": guardPadWidth,
	"join":      guardJoin,
	"to_string": guardToString,
}

func guardPadWidth(args []any) error {
	if len(args) < 2 {
		return nil
	}
	if width, ok := args[1].(float64); ok && width > maxStringLength {
		return fmt.Errorf("width %v exceeds %d", width, maxStringLength)
	}
	return nil
}

func guardJoin(args []any) error {
	if len(args) < 2 {
		return nil
	}
	sep, _ := args[0].(string)
	items, _ := args[1].([]any)
	total := 0
	for n, item := range items {
		s, _ := item.(string)
		if n > 0 {
			total += len(sep)
		}
		total += len(s)
		if total > maxStringLength {
			return fmt.Errorf("result would exceed %d bytes", maxStringLength)
		}
	}
	return nil
}

func guardToString(args []any) error {
	if len(args) < 1 {
		return nil
	}
	if _, ok := args[0].(string); ok {
		return nil
	}
	budget := maxStringLength
	if !fitsJSON(args[0], &budget) {
		return fmt.Errorf("result would exceed %d bytes", maxStringLength)
	}
	return nil
}

// fitsJSON subtracts an estimate of the JSON encoding size of v from budget
// and reports whether it stayed non-negative. Escaping is ignored, so the
// estimate is low by a constant factor at most: enough to refuse values that
// share structure and would encode to exponentially large text. It stops as
// soon as the budget is spent; the result itself is checked afterwards.
func fitsJSON(v any, budget *int) bool {
	switch t := v.(type) {
	case string:
		*budget -= len(t) + 2
	case []any:
		*budget -= 2 + len(t)
		for _, e := range t {
			if *budget < 0 || !fitsJSON(e, budget) {
				return false
			}
		}
	case map[string]any:
		*budget -= 2 + len(t)
		for k, e := range t {
			*budget -= len(k) + 3
			if *budget < 0 || !fitsJSON(e, budget) {
				return false
			}
		}
	default:
		// Numbers, booleans and null.
		*budget -= 32
	}
	return *budget >= 0
}
