// helm-render renders a Helm chart the way `helm template` does, with Helm's own engine: Go's
// text/template, the sprig functions, and the functions Helm adds (include, tpl, required,
// fail, toYaml, fromYaml, toJson, fromJson, lookup). Helm itself is not installable where this
// project is built; its template engine is, from Debian's golang-go and
// golang-github-masterminds-sprig-dev, so the chart's tests render with the real thing.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig/v3"
	yaml "gopkg.in/yaml.v3"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var valueFiles, setJSON listFlag
	chart := flag.String("chart", "", "chart directory")
	release := flag.String("release", "release-name", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kubeVersion := flag.String("kube-version", "1.30", "Kubernetes version (major.minor)")
	flag.Var(&valueFiles, "values", "values file (repeatable, later wins)")
	flag.Var(&setJSON, "set-json", "key.path=JSON (repeatable)")
	flag.Parse()
	out, err := render(*chart, *release, *namespace, *kubeVersion, valueFiles, setJSON)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

func readYAML(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// merge deep-merges src into dst: maps merge key by key, anything else replaces.
func merge(dst, src map[string]interface{}) map[string]interface{} {
	for key, value := range src {
		if srcMap, ok := value.(map[string]interface{}); ok {
			if dstMap, ok := dst[key].(map[string]interface{}); ok {
				dst[key] = merge(dstMap, srcMap)
				continue
			}
		}
		dst[key] = value
	}
	return dst
}

func setPath(values map[string]interface{}, path string, value interface{}) {
	parts := strings.Split(path, ".")
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
}

func toYAML(v interface{}) string {
	var buf bytes.Buffer
	encoder := yaml.NewEncoder(&buf)
	encoder.SetIndent(2)
	if err := encoder.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func fromYAML(text string) map[string]interface{} {
	out := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &out); err != nil {
		out["Error"] = err.Error()
	}
	return out
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(text string) map[string]interface{} {
	out := map[string]interface{}{}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		out["Error"] = err.Error()
	}
	return out
}

type files map[string][]byte

func (f files) Get(name string) string { return string(f[name]) }

func render(chartDir, release, namespace, kubeVersion string, valueFiles, setJSON []string) (string, error) {
	if chartDir == "" {
		return "", errors.New("--chart is required")
	}
	chartMeta, err := readYAML(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	values, err := readYAML(filepath.Join(chartDir, "values.yaml"))
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	if values == nil {
		values = map[string]interface{}{}
	}
	for _, path := range valueFiles {
		extra, err := readYAML(path)
		if err != nil {
			return "", err
		}
		values = merge(values, extra)
	}
	for _, item := range setJSON {
		key, raw, found := strings.Cut(item, "=")
		if !found {
			return "", fmt.Errorf("--set-json %q: want key=JSON", item)
		}
		var value interface{}
		if err := json.Unmarshal([]byte(raw), &value); err != nil {
			return "", fmt.Errorf("--set-json %q: %w", item, err)
		}
		setPath(values, key, value)
	}

	// Helm's capitalised view of Chart.yaml.
	chartObj := map[string]interface{}{}
	for key, value := range chartMeta {
		chartObj[strings.ToUpper(key[:1])+key[1:]] = value
	}
	chartName, _ := chartMeta["name"].(string)
	major, minor, _ := strings.Cut(kubeVersion, ".")
	version := fmt.Sprintf("v%s.%s.0", major, minor)
	top := map[string]interface{}{
		"Values": values,
		"Chart":  chartObj,
		"Release": map[string]interface{}{
			"Name": release, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{
				"Version": version, "GitVersion": version, "Major": major, "Minor": minor,
			},
			"APIVersions": apiVersions{},
		},
		"Files": files{},
	}

	pattern := filepath.Join(chartDir, "templates", "*")
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return "", err
	}
	sort.Strings(paths)
	root := template.New("chart")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	includeDepth := 0
	funcs["include"] = func(name string, data interface{}) (string, error) {
		includeDepth++
		defer func() { includeDepth-- }()
		if includeDepth > 1000 {
			return "", fmt.Errorf("include %q: recursion too deep", name)
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	funcs["required"] = func(message string, value interface{}) (interface{}, error) {
		if value == nil {
			return nil, errors.New(message)
		}
		if s, ok := value.(string); ok && s == "" {
			return nil, errors.New(message)
		}
		return value, nil
	}
	funcs["fail"] = func(message string) (string, error) { return "", errors.New(message) }
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["lookup"] = func(...interface{}) map[string]interface{} { return map[string]interface{}{} }
	root.Funcs(funcs).Option("missingkey=zero")

	var manifests []string
	for _, path := range paths {
		base := filepath.Base(path)
		if base == "NOTES.txt" || strings.HasPrefix(base, ".") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		name := chartName + "/templates/" + base
		if _, err := root.New(name).Parse(string(data)); err != nil {
			return "", err
		}
		if !strings.HasPrefix(base, "_") {
			manifests = append(manifests, name)
		}
	}
	var out strings.Builder
	for _, name := range manifests {
		var buf bytes.Buffer
		scope := copyTop(top, name, chartName)
		if err := root.ExecuteTemplate(&buf, name, scope); err != nil {
			return "", err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if strings.TrimSpace(text) == "" {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, strings.TrimLeft(text, "\n"))
	}
	return out.String(), nil
}

func copyTop(top map[string]interface{}, name, chartName string) map[string]interface{} {
	scope := map[string]interface{}{}
	for key, value := range top {
		scope[key] = value
	}
	scope["Template"] = map[string]interface{}{"Name": name, "BasePath": chartName + "/templates"}
	return scope
}

// apiVersions answers .Capabilities.APIVersions.Has for the built-in API groups.
type apiVersions struct{}

func (apiVersions) Has(version string) bool {
	known := []string{"v1", "apps/v1", "policy/v1", "networking.k8s.io/v1", "rbac.authorization.k8s.io/v1"}
	for _, k := range known {
		if version == k || strings.HasPrefix(version, k+"/") {
			return true
		}
	}
	return false
}
