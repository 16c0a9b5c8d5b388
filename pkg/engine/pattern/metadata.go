package pattern

import "github.com/verdict-dev/verdict/pkg/engine/wildcard"

// ExpandMetadataWildcards replaces wildcard keys of metadata.labels and
// metadata.annotations in a pattern (anchored or not) by the resource keys
// they match.
func ExpandMetadataWildcards(pat, res map[string]any) map[string]any {
	metaKey, pm := anchoredField(pat, "metadata")
	if pm == nil {
		return pat
	}
	rm, _ := res["metadata"].(map[string]any)
	var newMeta map[string]any
	for _, field := range []string{"labels", "annotations"} {
		fieldKey, pf := anchoredField(pm, field)
		if pf == nil || !hasWildcardKey(pf) {
			continue
		}
		rf, _ := rm[field].(map[string]any)
		expanded := make(map[string]any, len(pf))
		for k, v := range pf {
			kind, plainKey := ParseAnchor(k)
			if !wildcard.Contains(plainKey) {
				expanded[k] = v
				continue
			}
			matched := false
			for rk := range rf {
				if wildcard.Match(plainKey, rk) {
					expanded[FormatAnchor(kind, rk)] = v
					matched = true
				}
			}
			if !matched {
				expanded[k] = v
			}
		}
		if newMeta == nil {
			newMeta = make(map[string]any, len(pm))
			for mk, mv := range pm {
				newMeta[mk] = mv
			}
		}
		newMeta[fieldKey] = expanded
	}
	if newMeta == nil {
		return pat
	}
	out := make(map[string]any, len(pat))
	for k, v := range pat {
		out[k] = v
	}
	out[metaKey] = newMeta
	return out
}

// ExpandMetadataWildcardsCost is an upper bound of the work of
// ExpandMetadataWildcards(pat, res), in the units of Meter: each wildcard
// key of the pattern's labels and annotations matched against each key
// of the resource's (wildcard.Cost). It matches nothing, so a caller can
// charge the expansion before it runs.
func ExpandMetadataWildcardsCost(pat, res map[string]any) int64 {
	_, pm := anchoredField(pat, "metadata")
	if pm == nil {
		return 0
	}
	rm, _ := res["metadata"].(map[string]any)
	var cost int64
	for _, field := range [...]string{"labels", "annotations"} {
		_, pf := anchoredField(pm, field)
		rf, _ := rm[field].(map[string]any)
		if pf == nil || len(rf) == 0 {
			continue
		}
		keyBytes := 0
		for rk := range rf {
			keyBytes += len(rk)
		}
		for k := range pf {
			_, plainKey := ParseAnchor(k)
			if !wildcard.Contains(plainKey) {
				continue
			}
			// wildcard.Cost is a + b*n in the length n of the key.
			a := wildcard.Cost(plainKey, 0)
			cost += a*int64(len(rf)) + (wildcard.Cost(plainKey, 1)-a)*int64(keyBytes)
		}
	}
	return cost
}

// anchoredField finds the object under name, whatever its anchor.
func anchoredField(m map[string]any, name string) (string, map[string]any) {
	if v, ok := m[name].(map[string]any); ok {
		return name, v
	}
	for k, v := range m {
		if StripAnchor(k) == name {
			if vm, ok := v.(map[string]any); ok {
				return k, vm
			}
		}
	}
	return "", nil
}

func hasWildcardKey(m map[string]any) bool {
	for k := range m {
		if wildcard.Contains(StripAnchor(k)) {
			return true
		}
	}
	return false
}
