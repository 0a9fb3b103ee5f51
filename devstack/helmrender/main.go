// helm-render renders a Helm chart directory as `helm template` does, with Helm's template
// engine: Go's text/template, the sprig functions (Helm's, without env and expandenv) and the
// functions and objects Helm adds. Helm itself cannot be installed where this project is built;
// Go and sprig can, from Debian's golang-go and golang-github-masterminds-sprig-dev packages, so
// the chart's tests render the chart with the same engine Helm uses.
//
//	helm-render --chart DIR [--release NAME] [--namespace NS] [--values FILE]...
//	            [--set-json KEY=JSON]... [--kube-version 1.30] [--api-versions GROUP/VERSION]...
//
// The manifests go to stdout; an error (a template error, `required`, `fail`, bad YAML in the
// output) goes to stderr as "Error: ..." with exit status 1.
//
// Not supported: subcharts (charts/), values.schema.json validation (refused unless
// --skip-schema-validation), toToml/fromToml, packaged (.tgz) charts, --set/--set-string.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	chart, release, namespace, kubeVersion string
	valueFiles, setJSON, apiVersions       listFlag
	noHooks, skipTests, isUpgrade          bool
	skipSchemaValidation                   bool
}

func main() {
	var opts options
	flag.StringVar(&opts.chart, "chart", "", "chart directory (required)")
	flag.StringVar(&opts.release, "release", "release-name", "release name")
	flag.StringVar(&opts.namespace, "namespace", "default", "release namespace")
	flag.StringVar(&opts.kubeVersion, "kube-version", "1.30", "Kubernetes version of .Capabilities.KubeVersion")
	flag.Var(&opts.valueFiles, "values", "values file (repeatable; later files win)")
	flag.Var(&opts.setJSON, "set-json", "KEY.PATH=JSON value, applied after the values files (repeatable)")
	flag.Var(&opts.apiVersions, "api-versions", "extra API version for .Capabilities.APIVersions (repeatable)")
	flag.BoolVar(&opts.noHooks, "no-hooks", false, "leave hooks out of the output")
	flag.BoolVar(&opts.skipTests, "skip-tests", false, "leave test hooks out of the output")
	flag.BoolVar(&opts.isUpgrade, "is-upgrade", false, "set .Release.IsUpgrade instead of .Release.IsInstall")
	flag.BoolVar(&opts.skipSchemaValidation, "skip-schema-validation", false,
		"render a chart that has a values.schema.json without validating against it")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "Error: unexpected arguments: %s\n", strings.Join(flag.Args(), " "))
		os.Exit(1)
	}
	out, err := run(opts, func(message string) { fmt.Fprintln(os.Stderr, message) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

func run(opts options, warn func(string)) (string, error) {
	if opts.chart == "" {
		return "", errors.New("--chart is required")
	}
	caps, err := newCapabilities(opts.kubeVersion, opts.apiVersions)
	if err != nil {
		return "", err
	}
	if err := validateReleaseName(opts.release); err != nil {
		return "", err
	}
	ch, err := loadChart(opts.chart)
	if err != nil {
		return "", err
	}
	if ch.meta.Type == "library" {
		return "", errors.New("library charts are not installable")
	}
	if ch.meta.KubeVersion != "" && !isCompatibleRange(ch.meta.KubeVersion, caps.KubeVersion.String()) {
		return "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s",
			ch.meta.KubeVersion, caps.KubeVersion.String())
	}

	user := map[string]interface{}{}
	for _, file := range opts.valueFiles {
		extra, err := readValuesFile(file)
		if err != nil {
			return "", err
		}
		user = mergeMaps(user, extra)
	}
	for _, spec := range opts.setJSON {
		if user, err = applySetJSON(user, spec); err != nil {
			return "", err
		}
	}
	values := coalesceRoot(user, ch.values, ch.meta.Name, warn)
	if ch.schema != nil && !opts.skipSchemaValidation {
		return "", errors.New("the chart has a values.schema.json, which helm-render cannot validate " +
			"values against (pass --skip-schema-validation to render without validating)")
	}

	top := map[string]interface{}{
		"Values":       values,
		"Chart":        chartObject{Metadata: *ch.meta, IsRoot: true},
		"Capabilities": caps,
		"Files":        ch.files,
		"Subcharts":    map[string]interface{}{},
		"Release": map[string]interface{}{
			"Name":      opts.release,
			"Namespace": opts.namespace,
			"IsUpgrade": opts.isUpgrade,
			"IsInstall": !opts.isUpgrade,
			"Revision":  1,
			"Service":   "Helm",
		},
	}
	templates := map[string]string{}
	for _, t := range ch.templates {
		templates[path.Join(ch.meta.Name, t.name)] = string(t.data)
	}
	rendered, err := renderTemplates(templates, top, path.Join(ch.meta.Name, "templates"))
	if err != nil {
		return "", err
	}
	// NOTES.txt is rendered (its errors count) but is not a manifest.
	for name := range rendered {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(rendered, name)
		}
	}
	manifests, hooks, err := sortManifests(rendered, warn)
	if err != nil {
		return "", err
	}
	return formatOutput(manifests, hooks, !opts.noHooks, !opts.skipTests), nil
}
