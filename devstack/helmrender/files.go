package main

// .Files: the chart's files that are neither templates nor Chart.yaml/values.yaml, with the
// methods Helm gives templates (Get, GetBytes, Glob, AsConfig, AsSecrets, Lines).

import (
	"encoding/base64"
	"path"
	"regexp"
	"strings"
)

type files map[string][]byte

// GetBytes is a file's content, empty when there is no such file.
func (f files) GetBytes(name string) []byte {
	if data, ok := f[name]; ok {
		return data
	}
	return []byte{}
}

// Get is a file's content as a string, empty when there is no such file.
func (f files) Get(name string) string { return string(f.GetBytes(name)) }

// Glob is the files whose path matches pattern (`*` within a path segment, `**` across them,
// `?`, `[...]` and `{a,b}`); an invalid pattern matches everything, as in Helm.
func (f files) Glob(pattern string) files {
	matcher, err := compileGlob(pattern)
	if err != nil {
		matcher = regexp.MustCompile(`^.*$`)
	}
	out := files{}
	for name, data := range f {
		if matcher.MatchString(name) {
			out[name] = data
		}
	}
	return out
}

// AsConfig is the files as the YAML of a ConfigMap's data (keyed by base name).
func (f files) AsConfig() string {
	if f == nil {
		return ""
	}
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = string(data)
	}
	return toYAML(m)
}

// AsSecrets is the files as the YAML of a Secret's data (base64, keyed by base name).
func (f files) AsSecrets() string {
	if f == nil {
		return ""
	}
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = base64.StdEncoding.EncodeToString(data)
	}
	return toYAML(m)
}

// Lines is a file's lines (without a final empty one).
func (f files) Lines(name string) []string {
	data, ok := f[name]
	if !ok || len(data) == 0 {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// compileGlob translates a glob with `/` as separator into a regular expression.
func compileGlob(pattern string) (*regexp.Regexp, error) {
	runes := []rune(pattern)
	var out strings.Builder
	out.WriteString("^")
	depth := 0
	for i := 0; i < len(runes); i++ {
		c := runes[i]
		switch {
		case c == '\\' && i+1 < len(runes):
			i++
			out.WriteString(regexp.QuoteMeta(string(runes[i])))
		case c == '*' && i+1 < len(runes) && runes[i+1] == '*':
			i++
			out.WriteString(".*")
		case c == '*':
			out.WriteString("[^/]*")
		case c == '?':
			out.WriteString("[^/]")
		case c == '[':
			end := -1
			for j := i + 1; j < len(runes); j++ {
				if runes[j] == ']' {
					end = j
					break
				}
			}
			if end < 0 {
				return nil, errBadGlob
			}
			class := string(runes[i+1 : end])
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			out.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i = end
		case c == '{':
			depth++
			out.WriteString("(?:")
		case c == '}' && depth > 0:
			depth--
			out.WriteString(")")
		case c == ',' && depth > 0:
			out.WriteString("|")
		default:
			out.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if depth != 0 {
		return nil, errBadGlob
	}
	out.WriteString("$")
	return regexp.Compile(out.String())
}

type globError struct{}

func (globError) Error() string { return "invalid glob pattern" }

var errBadGlob error = globError{}
