package main

// From rendered templates to `helm template`'s output: each template's output split into YAML
// documents, each document checked to be YAML and sorted into hooks (helm.sh/hook annotation)
// and plain manifests, manifests ordered by kind as Helm installs them, hooks printed after.

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

// installOrder is Helm's install order of kinds; other kinds come after, alphabetically.
var installOrder = []string{
	"PriorityClass",
	"Namespace",
	"NetworkPolicy",
	"ResourceQuota",
	"LimitRange",
	"PodSecurityPolicy",
	"PodDisruptionBudget",
	"ServiceAccount",
	"Secret",
	"SecretList",
	"ConfigMap",
	"StorageClass",
	"PersistentVolume",
	"PersistentVolumeClaim",
	"CustomResourceDefinition",
	"ClusterRole",
	"ClusterRoleList",
	"ClusterRoleBinding",
	"ClusterRoleBindingList",
	"Role",
	"RoleList",
	"RoleBinding",
	"RoleBindingList",
	"Service",
	"DaemonSet",
	"Pod",
	"ReplicationController",
	"ReplicaSet",
	"Deployment",
	"HorizontalPodAutoscaler",
	"StatefulSet",
	"Job",
	"CronJob",
	"IngressClass",
	"Ingress",
	"APIService",
	"MutatingWebhookConfiguration",
	"ValidatingWebhookConfiguration",
}

var hookEvents = map[string]bool{
	"pre-install": true, "post-install": true, "pre-delete": true, "post-delete": true,
	"pre-upgrade": true, "post-upgrade": true, "pre-rollback": true, "post-rollback": true,
	"test": true, "test-success": true,
}

// simpleHead is what Helm reads of each document.
type simpleHead struct {
	Version  string `json:"apiVersion"`
	Kind     string `json:"kind,omitempty"`
	Metadata *struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata,omitempty"`
}

type manifest struct {
	source  string // the template, e.g. demo/templates/deployment.yaml
	content string
	kind    string
	test    bool // a test hook
}

var documentSeparator = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

func splitDocuments(text string) []string {
	var docs []string
	for _, doc := range documentSeparator.Split(strings.TrimSpace(text), -1) {
		if doc == "" {
			continue
		}
		docs = append(docs, strings.TrimSpace(doc))
	}
	return docs
}

// sortManifests splits the rendered templates into plain manifests and hooks, each in Helm's
// order. Hooks of an unknown event are left out, as Helm does.
func sortManifests(rendered map[string]string, warn func(string)) (manifests, hooks []manifest, err error) {
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		text := rendered[name]
		if strings.HasPrefix(path.Base(name), "_") || strings.TrimSpace(text) == "" {
			continue
		}
		for _, doc := range splitDocuments(text) {
			var head simpleHead
			if err := yamlUnmarshal([]byte(doc), &head); err != nil {
				return nil, nil, fmt.Errorf("YAML parse error on %s: %w", name, err)
			}
			m := manifest{source: name, content: doc, kind: head.Kind}
			var hookValue string
			isHook := false
			if head.Metadata != nil {
				hookValue, isHook = head.Metadata.Annotations["helm.sh/hook"]
			}
			if !isHook {
				manifests = append(manifests, m)
				continue
			}
			known := true
			for _, event := range strings.Split(hookValue, ",") {
				event = strings.ToLower(strings.TrimSpace(event))
				if !hookEvents[event] {
					known = false
					break
				}
				if event == "test" || event == "test-success" {
					m.test = true
				}
			}
			if !known {
				warn(fmt.Sprintf("info: skipping unknown hook: %q", hookValue))
				continue
			}
			hooks = append(hooks, m)
		}
	}
	sortByKind(manifests)
	sortByKind(hooks)
	return manifests, hooks, nil
}

func sortByKind(manifests []manifest) {
	rank := map[string]int{}
	for i, kind := range installOrder {
		rank[kind] = i
	}
	sort.SliceStable(manifests, func(i, j int) bool {
		a, aKnown := rank[manifests[i].kind]
		b, bKnown := rank[manifests[j].kind]
		switch {
		case !aKnown && !bKnown:
			return manifests[i].kind < manifests[j].kind
		case !aKnown:
			return false
		case !bKnown:
			return true
		}
		return a < b
	})
}

// formatOutput prints manifests then hooks as `helm template` does.
func formatOutput(manifests, hooks []manifest, withHooks, withTests bool) string {
	var body strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&body, "---\n# Source: %s\n%s\n", m.source, m.content)
	}
	var out strings.Builder
	out.WriteString(strings.TrimSpace(body.String()))
	out.WriteString("\n")
	if withHooks {
		for _, h := range hooks {
			if h.test && !withTests {
				continue
			}
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", h.source, h.content)
		}
	}
	return out.String()
}
