package main

// Loading a chart directory the way Helm's loader does: Chart.yaml into the chart's metadata,
// values.yaml into its default values, everything under templates/ into templates, and every
// other file (minus those .helmignore names) into .Files.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Maintainer is a maintainer of the chart, as in Chart.yaml.
type Maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// Dependency is a chart this chart depends on, as in Chart.yaml.
type Dependency struct {
	Name         string        `json:"name"`
	Version      string        `json:"version,omitempty"`
	Repository   string        `json:"repository"`
	Condition    string        `json:"condition,omitempty"`
	Tags         []string      `json:"tags,omitempty"`
	Enabled      bool          `json:"enabled,omitempty"`
	ImportValues []interface{} `json:"import-values,omitempty"`
	Alias        string        `json:"alias,omitempty"`
}

// Metadata is Chart.yaml, with the field names templates see as .Chart.
type Metadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []*Maintainer     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []*Dependency     `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// chartObject is .Chart: the metadata plus IsRoot (always true: subcharts are not supported).
type chartObject struct {
	Metadata
	IsRoot bool
}

type chartTemplate struct {
	name string // relative to the chart, e.g. templates/deployment.yaml
	data []byte
}

type loadedChart struct {
	meta      *Metadata
	values    map[string]interface{}
	templates []chartTemplate
	files     files
	schema    []byte
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

func loadChart(dir string) (*loadedChart, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("path %q not found", dir)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a chart directory (packaged charts are not supported)", dir)
	}
	rules, err := loadIgnoreRules(filepath.Join(dir, ".helmignore"))
	if err != nil {
		return nil, err
	}
	ch := &loadedChart{values: map[string]interface{}{}, files: files{}}
	var subcharts []string
	walkErr := filepath.WalkDir(dir, func(p string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if rules.ignore(rel, entry.IsDir()) {
			if entry.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if entry.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		data = bytes.TrimPrefix(data, utf8BOM)
		switch {
		case rel == "Chart.yaml":
			ch.meta = &Metadata{}
			if err := yamlUnmarshal(data, ch.meta); err != nil {
				return fmt.Errorf("cannot load Chart.yaml: %w", err)
			}
		case rel == "values.yaml":
			if err := yamlUnmarshal(data, &ch.values); err != nil {
				return fmt.Errorf("cannot load values.yaml: %w", err)
			}
			if ch.values == nil {
				ch.values = map[string]interface{}{}
			}
		case rel == "values.schema.json":
			ch.schema = data
		case rel == "Chart.lock" || rel == "requirements.lock":
		case strings.HasPrefix(rel, "templates/"):
			ch.templates = append(ch.templates, chartTemplate{name: rel, data: data})
		case strings.HasPrefix(rel, "charts/") && !strings.HasSuffix(rel, ".prov"):
			subcharts = append(subcharts, rel)
		default:
			ch.files[rel] = data
		}
		return nil
	})
	if walkErr != nil {
		return nil, walkErr
	}
	if ch.meta == nil {
		return nil, errors.New("Chart.yaml file is missing")
	}
	if ch.meta.APIVersion == "" {
		ch.meta.APIVersion = "v1"
	}
	if err := ch.meta.validate(); err != nil {
		return nil, err
	}
	if len(subcharts) > 0 {
		sort.Strings(subcharts)
		return nil, fmt.Errorf("subcharts are not supported by helm-render (found %s)", subcharts[0])
	}
	return ch, nil
}

// validate checks Chart.yaml as Helm's loader does.
func (m *Metadata) validate() error {
	invalid := func(format string, args ...interface{}) error {
		return fmt.Errorf("validation: "+format, args...)
	}
	if m.Name == "" {
		return invalid("chart.metadata.name is required")
	}
	if m.Name != path.Base(m.Name) || strings.ContainsAny(m.Name, `/\`) {
		return invalid("chart.metadata.name %q is invalid", m.Name)
	}
	if m.Version == "" {
		return invalid("chart.metadata.version is required")
	}
	if _, err := semver.NewVersion(m.Version); err != nil {
		return invalid("chart.metadata.version %q is invalid", m.Version)
	}
	if m.Type != "" && m.Type != "application" && m.Type != "library" {
		return invalid("chart.metadata.type must be application or library")
	}
	for _, maintainer := range m.Maintainers {
		if maintainer == nil || maintainer.Name == "" {
			return invalid("chart.metadata.maintainers must have a name")
		}
	}
	for _, dependency := range m.Dependencies {
		if dependency == nil || dependency.Name == "" {
			return invalid("dependencies must have a name")
		}
	}
	return nil
}

// ignoreRules are the patterns of a .helmignore file, plus Helm's default (hidden files in
// templates/ are never templates).
type ignoreRules []ignoreRule

type ignoreRule struct {
	pattern string
	negate  bool
	mustDir bool
	match   func(name string) bool
}

func loadIgnoreRules(file string) (ignoreRules, error) {
	var rules ignoreRules
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	lines = append(lines, "templates/.?*")
	for _, line := range lines {
		rule, err := parseIgnoreRule(line)
		if err != nil {
			return nil, err
		}
		if rule != nil {
			rules = append(rules, *rule)
		}
	}
	return rules, nil
}

func parseIgnoreRule(line string) (*ignoreRule, error) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return nil, nil
	}
	if strings.Contains(line, "**") {
		return nil, errors.New(".helmignore: double-star (**) syntax is not supported")
	}
	rule := &ignoreRule{pattern: line}
	if strings.HasPrefix(line, "!") {
		rule.negate = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		rule.mustDir = true
		line = strings.TrimSuffix(line, "/")
	}
	if _, err := filepath.Match(line, "x"); err != nil {
		return nil, fmt.Errorf(".helmignore: bad pattern %q: %w", rule.pattern, err)
	}
	switch {
	case strings.HasPrefix(line, "/"):
		anchored := strings.TrimPrefix(line, "/")
		rule.match = func(name string) bool { ok, _ := filepath.Match(anchored, name); return ok }
	case strings.Contains(line, "/"):
		rule.match = func(name string) bool { ok, _ := filepath.Match(line, name); return ok }
	default:
		rule.match = func(name string) bool { ok, _ := filepath.Match(line, path.Base(name)); return ok }
	}
	return rule, nil
}

// ignore tells whether a path of the chart (slash-separated, relative) is left out, with Helm's
// reading of the rules (a negated rule ignores every path it does not match).
func (rules ignoreRules) ignore(name string, isDir bool) bool {
	for _, rule := range rules {
		if rule.negate {
			if rule.mustDir && !isDir {
				return true
			}
			if !rule.match(name) {
				return true
			}
			continue
		}
		if rule.mustDir && !isDir {
			continue
		}
		if rule.match(name) {
			return true
		}
	}
	return false
}

var releaseNamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func validateReleaseName(name string) error {
	if name == "" {
		return errors.New("no name provided")
	}
	if len(name) > 53 || !releaseNamePattern.MatchString(name) {
		return fmt.Errorf("release name %q: invalid release name, must match regex %s and the length must not be longer than 53",
			name, releaseNamePattern.String())
	}
	return nil
}
