package main

// The template engine: Go's text/template with sprig's functions and the ones Helm adds, every
// template of the chart parsed into one set (so any file's `define`s are visible everywhere),
// then each non-partial template executed with the chart's top-level object.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig/v3"
	yamlv3 "gopkg.in/yaml.v3"
)

const (
	warnStart      = "HELM_ERR_START"
	warnEnd        = "HELM_ERR_END"
	maxIncludeDeep = 1000
)

var warnPattern = regexp.MustCompile(warnStart + `((?s).*)` + warnEnd)

// wrapWarning marks a message (of required or fail) so that the error report shows only it.
func wrapWarning(message string) string { return warnStart + message + warnEnd }

// toYAML is Helm's toYaml: the value as YAML without the final newline, empty on error.
func toYAML(v interface{}) string {
	data, err := yamlMarshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

// toYAMLPretty is Helm's toYamlPretty (yaml.v3, lists indented under their key).
func toYAMLPretty(v interface{}) string {
	var buf bytes.Buffer
	encoder := yamlv3.NewEncoder(&buf)
	encoder.SetIndent(2)
	if err := encoder.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func fromYAML(text string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yamlUnmarshal([]byte(text), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(text string) []interface{} {
	a := []interface{}{}
	if err := yamlUnmarshal([]byte(text), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(text string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(text string) []interface{} {
	a := []interface{}{}
	if err := json.Unmarshal([]byte(text), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func required(message string, value interface{}) (interface{}, error) {
	if value == nil {
		return value, errors.New(wrapWarning(message))
	}
	if s, ok := value.(string); ok && s == "" {
		return value, errors.New(wrapWarning(message))
	}
	return value, nil
}

func fail(message string) (string, error) { return "", errors.New(wrapWarning(message)) }

// lookup answers as `helm template` does without a cluster: nothing found.
func lookup(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
	return map[string]interface{}{}, nil
}

func unsupported(name string) func(interface{}) (string, error) {
	return func(interface{}) (string, error) {
		return "", fmt.Errorf("%s is not supported by helm-render", name)
	}
}

// funcMap is sprig's text functions without env and expandenv, and Helm's own functions
// (include and tpl are bound to a template set by bindTemplateFuncs).
func funcMap() template.FuncMap {
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	extra := template.FuncMap{
		"toToml":        unsupported("toToml"),
		"fromToml":      unsupported("fromToml"),
		"toYaml":        toYAML,
		"toYamlPretty":  toYAMLPretty,
		"fromYaml":      fromYAML,
		"fromYamlArray": fromYAMLArray,
		"toJson":        toJSON,
		"fromJson":      fromJSON,
		"fromJsonArray": fromJSONArray,
		"required":      required,
		"fail":          fail,
		"lookup":        lookup,
		"include":       func(string, interface{}) (string, error) { return "", errors.New("include is not bound") },
		"tpl":           func(string, interface{}) (string, error) { return "", errors.New("tpl is not bound") },
	}
	for name, f := range extra {
		funcs[name] = f
	}
	return funcs
}

// includeFunc renders a named template of t to a string; includes nest at most 1000 deep per name.
func includeFunc(t *template.Template, depth map[string]int) func(string, interface{}) (string, error) {
	return func(name string, data interface{}) (string, error) {
		if depth[name] > maxIncludeDeep {
			return "", fmt.Errorf("rendering template has a nested reference name: %s: unable to execute template", name)
		}
		depth[name]++
		defer func() { depth[name]-- }()
		var buf strings.Builder
		err := t.ExecuteTemplate(&buf, name, data)
		return buf.String(), err
	}
}

// tplFunc renders a string as a template, in a copy of t's set (so it sees every `define`, and
// its own `define`s stay its own).
func tplFunc(parent *template.Template, depth map[string]int) func(string, interface{}) (string, error) {
	return func(text string, data interface{}) (string, error) {
		t, err := parent.Clone()
		if err != nil {
			return "", fmt.Errorf("cannot clone template: %w", err)
		}
		// Clone does not carry the missingkey option over (golang/go#43022).
		t.Option("missingkey=zero")
		t.Funcs(template.FuncMap{"include": includeFunc(t, depth), "tpl": tplFunc(t, depth)})
		t, err = t.New(parent.Name()).Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var buf strings.Builder
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
}

// templateOrder is the order Helm parses templates in (later `define`s of a name win): deeper
// paths first, then reverse lexical order.
func templateOrder(names []string) []string {
	sorted := append([]string(nil), names...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		da, db := strings.Count(a, "/"), strings.Count(b, "/")
		if da != db {
			return da > db
		}
		return a > b
	})
	return sorted
}

// renderTemplates executes every template (name → text) but the partials with top (whose
// "Template" entry is set for each), returning each one's output.
func renderTemplates(templates map[string]string, top map[string]interface{}, basePath string) (rendered map[string]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rendering template failed: %v", r)
		}
	}()
	t := template.New("gotpl")
	t.Option("missingkey=zero")
	depth := map[string]int{}
	funcs := funcMap()
	funcs["include"] = includeFunc(t, depth)
	funcs["tpl"] = tplFunc(t, depth)
	t.Funcs(funcs)

	names := make([]string, 0, len(templates))
	for name := range templates {
		names = append(names, name)
	}
	order := templateOrder(names)
	for _, name := range order {
		if _, err := t.New(name).Parse(templates[name]); err != nil {
			return nil, parseError(name, err)
		}
	}
	rendered = map[string]string{}
	for _, name := range order {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		top["Template"] = map[string]interface{}{"Name": name, "BasePath": basePath}
		var buf strings.Builder
		if err := t.ExecuteTemplate(&buf, name, top); err != nil {
			return nil, execError(name, err)
		}
		// With missingkey=zero Go still prints "<no value>" for a missing key of an
		// interface-valued map; Helm prints nothing.
		rendered[name] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return rendered, nil
}

func parseError(name string, err error) error {
	tokens := strings.Split(err.Error(), ": ")
	if len(tokens) == 1 {
		return fmt.Errorf("parse error in (%s): %s", name, err)
	}
	return fmt.Errorf("parse error at (%s): %s", tokens[1], tokens[len(tokens)-1])
}

func execError(name string, err error) error {
	var execErr template.ExecError
	if !errors.As(err, &execErr) {
		return err
	}
	tokens := strings.SplitN(err.Error(), ": ", 3)
	if len(tokens) != 3 {
		return fmt.Errorf("execution error in (%s): %s", name, err)
	}
	if parts := warnPattern.FindStringSubmatch(tokens[2]); len(parts) >= 2 {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], parts[1])
	}
	return err
}
