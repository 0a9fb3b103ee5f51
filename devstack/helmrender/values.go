package main

// The values a chart renders with, put together as Helm does: the --values files merged in order
// (maps key by key, anything else replaced), then each --set-json, and the result coalesced with
// the chart's values.yaml (a null given for a key deletes the chart's default).

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func readValuesFile(file string) (map[string]interface{}, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yamlUnmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", file, err)
	}
	if out == nil {
		out = map[string]interface{}{}
	}
	return out, nil
}

// mergeMaps is b over a: maps merged key by key, anything else replaced.
func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if nested, ok := v.(map[string]interface{}); ok {
			if existing, ok := out[k].(map[string]interface{}); ok {
				out[k] = mergeMaps(existing, nested)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// applySetJSON applies one --set-json: `key.path=JSON` sets the value at the path (creating
// maps on the way, `\.` for a dot inside a key); a bare JSON object is merged at the top.
func applySetJSON(values map[string]interface{}, spec string) (map[string]interface{}, error) {
	trimmed := strings.TrimSpace(spec)
	if strings.HasPrefix(trimmed, "{") {
		object := map[string]interface{}{}
		if err := json.Unmarshal([]byte(trimmed), &object); err != nil {
			return nil, fmt.Errorf("failed parsing --set-json data JSON: %s", trimmed)
		}
		return mergeMaps(values, object), nil
	}
	key, raw, found := strings.Cut(spec, "=")
	if !found || key == "" {
		return nil, fmt.Errorf("failed parsing --set-json data %s: want key=JSON", spec)
	}
	var value interface{}
	if err := json.Unmarshal([]byte(raw), &value); err != nil {
		return nil, fmt.Errorf("failed parsing --set-json data %s: %w", spec, err)
	}
	parts, err := splitKeyPath(key)
	if err != nil {
		return nil, err
	}
	current := values
	for _, part := range parts[:len(parts)-1] {
		next, ok := current[part].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			current[part] = next
		}
		current = next
	}
	current[parts[len(parts)-1]] = value
	return values, nil
}

func splitKeyPath(key string) ([]string, error) {
	var parts []string
	var part strings.Builder
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '\\':
			if i+1 < len(key) {
				i++
				part.WriteByte(key[i])
			}
		case '.':
			parts = append(parts, part.String())
			part.Reset()
		case '[', ']':
			return nil, fmt.Errorf("--set-json %s: list indexes are not supported by helm-render", key)
		default:
			part.WriteByte(c)
		}
	}
	parts = append(parts, part.String())
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("--set-json %s: empty key", key)
		}
	}
	return parts, nil
}

// coalesceRoot puts the chart's defaults under the user's values (which it changes in place and
// returns): a key the user left out takes the default, a key the user set to null is deleted,
// maps are coalesced key by key, and anything else the user gave wins.
func coalesceRoot(user, defaults map[string]interface{}, chartName string, warn func(string)) map[string]interface{} {
	for key, def := range defaults {
		value, given := user[key]
		if !given {
			user[key] = def
			continue
		}
		if value == nil {
			delete(user, key)
			continue
		}
		if table, ok := value.(map[string]interface{}); ok {
			defTable, ok := def.(map[string]interface{})
			if !ok {
				if def != nil {
					warn(fmt.Sprintf("warning: skipped value for %s.%s: Not a table.", chartName, key))
				}
				continue
			}
			coalesceTables(table, defTable, chartName+"."+key, warn)
		}
	}
	return user
}

func coalesceTables(dst, src map[string]interface{}, prefix string, warn func(string)) {
	for key, val := range src {
		fullKey := prefix + "." + key
		dv, given := dst[key]
		switch {
		case given && dv == nil:
			delete(dst, key)
		case !given:
			dst[key] = val
		default:
			srcTable, srcIsTable := val.(map[string]interface{})
			dstTable, dstIsTable := dv.(map[string]interface{})
			if srcIsTable {
				if dstIsTable {
					coalesceTables(dstTable, srcTable, fullKey, warn)
				} else {
					warn(fmt.Sprintf("warning: cannot overwrite table with non table for %s (%v)", fullKey, val))
				}
			} else if dstIsTable && val != nil {
				warn(fmt.Sprintf("warning: destination for %s is a table. Ignoring non-table value (%v)", fullKey, val))
			}
		}
	}
}
