package main

// Helm reads and writes YAML with sigs.k8s.io/yaml, which is not packaged by Debian. That library
// is a thin layer over gopkg.in/yaml.v2 (which is): YAML is decoded by yaml.v2, turned into JSON
// and decoded again by encoding/json; YAML is written by encoding the value as JSON, decoding that
// JSON with yaml.v2 and encoding the result with yaml.v2. This file does the same, so that values
// behave as they do in Helm (every number a float64, so 1000000 prints as 1e+06; numbers given
// for string fields of Chart.yaml read as strings) and toYaml's output is Helm's (keys sorted,
// lists not indented under their key, long strings folded at 80 columns).

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	yaml "gopkg.in/yaml.v2"
)

// yamlUnmarshal decodes YAML into out (a pointer) through JSON.
func yamlUnmarshal(data []byte, out interface{}) error {
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("error converting YAML to JSON: %w", err)
	}
	converted, err := jsonable(raw, reflect.TypeOf(out))
	if err != nil {
		return fmt.Errorf("error converting YAML to JSON: %w", err)
	}
	encoded, err := json.Marshal(converted)
	if err != nil {
		return fmt.Errorf("error converting YAML to JSON: %w", err)
	}
	if err := json.NewDecoder(bytes.NewReader(encoded)).Decode(out); err != nil {
		return fmt.Errorf("error unmarshaling JSON: while decoding JSON: %w", err)
	}
	return nil
}

// yamlMarshal encodes v as YAML through JSON (so struct fields follow their json tags).
func yamlMarshal(v interface{}) ([]byte, error) {
	encoded, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("error marshaling into JSON: %w", err)
	}
	// yaml.v2 reads JSON (a subset of YAML) and, unlike encoding/json, keeps integers integers.
	var generic interface{}
	if err := yaml.Unmarshal(encoded, &generic); err != nil {
		return nil, err
	}
	return yaml.Marshal(generic)
}

var (
	jsonUnmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// decodeTarget is the concrete type a value will be decoded into, or nil when that does not
// matter (an interface, or a type that decodes itself).
func decodeTarget(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(jsonUnmarshalerType) || t.Implements(textUnmarshalerType) {
			return nil
		}
		if t.Kind() != reflect.Ptr {
			break
		}
		t = t.Elem()
	}
	if t != nil && t.Kind() == reflect.Interface {
		return nil
	}
	return t
}

// jsonable turns what yaml.v2 decoded into something encoding/json can encode: map keys become
// strings, and a number or boolean bound for a string becomes that string.
func jsonable(value interface{}, target reflect.Type) (interface{}, error) {
	target = decodeTarget(target)
	switch typed := value.(type) {
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(typed))
		for k, item := range typed {
			key, err := jsonKey(k, item)
			if err != nil {
				return nil, err
			}
			converted, err := jsonable(item, memberType(target, key))
			if err != nil {
				return nil, err
			}
			out[key] = converted
		}
		return out, nil
	case []interface{}:
		var elem reflect.Type
		if target != nil && (target.Kind() == reflect.Slice || target.Kind() == reflect.Array) {
			elem = target.Elem()
		}
		out := make([]interface{}, len(typed))
		for i, item := range typed {
			converted, err := jsonable(item, elem)
			if err != nil {
				return nil, err
			}
			out[i] = converted
		}
		return out, nil
	default:
		if target != nil && target.Kind() == reflect.String {
			if s, ok := scalarText(value); ok {
				return s, nil
			}
		}
		return value, nil
	}
}

func jsonKey(key, value interface{}) (string, error) {
	switch typed := key.(type) {
	case string:
		return typed, nil
	case int:
		return strconv.Itoa(typed), nil
	case int64:
		return strconv.FormatInt(typed, 10), nil
	case float64:
		s := strconv.FormatFloat(typed, 'g', -1, 32)
		switch s {
		case "+Inf":
			s = ".inf"
		case "-Inf":
			s = "-.inf"
		case "NaN":
			s = ".nan"
		}
		return s, nil
	case bool:
		return strconv.FormatBool(typed), nil
	}
	return "", fmt.Errorf("unsupported map key of type: %s, key: %+#v, value: %+#v",
		reflect.TypeOf(key), key, value)
}

// scalarText is a YAML number or boolean as the string encoding/json would need.
func scalarText(value interface{}) (string, bool) {
	switch typed := value.(type) {
	case int:
		return strconv.Itoa(typed), true
	case int64:
		return strconv.FormatInt(typed, 10), true
	case uint64:
		return strconv.FormatUint(typed, 10), true
	case float64:
		return strconv.FormatFloat(typed, 'g', -1, 32), true
	case bool:
		return strconv.FormatBool(typed), true
	}
	return "", false
}

// memberType is the type the member key of a struct or map of type t decodes into.
func memberType(t reflect.Type, key string) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		return t.Elem()
	case reflect.Struct:
		var folded reflect.Type
		for i := 0; i < t.NumField(); i++ {
			field := t.Field(i)
			if field.PkgPath != "" {
				continue
			}
			name := jsonFieldName(field)
			if name == "" {
				continue
			}
			if name == key {
				return field.Type
			}
			if folded == nil && strings.EqualFold(name, key) {
				folded = field.Type
			}
		}
		return folded
	}
	return nil
}

func jsonFieldName(field reflect.StructField) string {
	tag := field.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return field.Name
	}
	return name
}
