package main

// .Capabilities as `helm template` fills it without a cluster: the Kubernetes version given
// with --kube-version, the API versions built into Helm's Kubernetes client (plus any given
// with --api-versions), and Helm's own version.

import (
	"fmt"
	"runtime"
	"strconv"

	"github.com/Masterminds/semver/v3"
)

// helmVersion is the Helm release this renderer stands in for (.Capabilities.HelmVersion); its
// Kubernetes client (0.30) is where defaultAPIVersions come from.
const helmVersion = "v3.15.4"

// KubeVersion is .Capabilities.KubeVersion.
type KubeVersion struct {
	Version string
	Major   string
	Minor   string
}

// String is the version, e.g. v1.30.0 (what {{ .Capabilities.KubeVersion }} prints).
func (kv *KubeVersion) String() string { return kv.Version }

// GitVersion is the version (deprecated in Helm in favour of .Version).
func (kv *KubeVersion) GitVersion() string { return kv.Version }

// VersionSet is .Capabilities.APIVersions.
type VersionSet []string

// Has tells whether an API version (e.g. "apps/v1") is available.
func (v VersionSet) Has(apiVersion string) bool {
	for _, known := range v {
		if known == apiVersion {
			return true
		}
	}
	return false
}

// BuildInfo is .Capabilities.HelmVersion.
type BuildInfo struct {
	Version      string `json:"version,omitempty"`
	GitCommit    string `json:"git_commit,omitempty"`
	GitTreeState string `json:"git_tree_state,omitempty"`
	GoVersion    string `json:"go_version,omitempty"`
}

// Capabilities is .Capabilities.
type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
	HelmVersion BuildInfo
}

func parseKubeVersion(version string) (*KubeVersion, error) {
	sv, err := semver.NewVersion(version)
	if err != nil {
		return nil, fmt.Errorf("invalid kube version '%s': %s", version, err)
	}
	return &KubeVersion{
		Version: "v" + sv.String(),
		Major:   strconv.FormatUint(sv.Major(), 10),
		Minor:   strconv.FormatUint(sv.Minor(), 10),
	}, nil
}

func newCapabilities(kubeVersion string, extraAPIVersions []string) (*Capabilities, error) {
	kv, err := parseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	apis := append(VersionSet{}, defaultAPIVersions...)
	apis = append(apis, extraAPIVersions...)
	return &Capabilities{
		KubeVersion: *kv,
		APIVersions: apis,
		HelmVersion: BuildInfo{Version: helmVersion, GoVersion: runtime.Version()},
	}, nil
}

// isCompatibleRange tells whether version satisfies the semver constraint (Chart.yaml's
// kubeVersion).
func isCompatibleRange(constraint, version string) bool {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return false
	}
	v, err := semver.NewVersion(version)
	if err != nil {
		return false
	}
	return c.Check(v)
}

// defaultAPIVersions are the group/versions of Kubernetes client-go 0.30's scheme plus the
// apiextensions ones, which is what Helm 3.15 answers .Capabilities.APIVersions.Has with when
// it renders without a cluster. Like Helm's, the set holds no "group/version/Kind" entries.
var defaultAPIVersions = VersionSet{
	"v1",
	"admissionregistration.k8s.io/v1",
	"admissionregistration.k8s.io/v1alpha1",
	"admissionregistration.k8s.io/v1beta1",
	"internal.apiserver.k8s.io/v1alpha1",
	"apps/v1",
	"apps/v1beta1",
	"apps/v1beta2",
	"authentication.k8s.io/v1",
	"authentication.k8s.io/v1alpha1",
	"authentication.k8s.io/v1beta1",
	"authorization.k8s.io/v1",
	"authorization.k8s.io/v1beta1",
	"autoscaling/v1",
	"autoscaling/v2",
	"autoscaling/v2beta1",
	"autoscaling/v2beta2",
	"batch/v1",
	"batch/v1beta1",
	"certificates.k8s.io/v1",
	"certificates.k8s.io/v1alpha1",
	"certificates.k8s.io/v1beta1",
	"coordination.k8s.io/v1",
	"coordination.k8s.io/v1beta1",
	"discovery.k8s.io/v1",
	"discovery.k8s.io/v1beta1",
	"events.k8s.io/v1",
	"events.k8s.io/v1beta1",
	"extensions/v1beta1",
	"flowcontrol.apiserver.k8s.io/v1",
	"flowcontrol.apiserver.k8s.io/v1beta1",
	"flowcontrol.apiserver.k8s.io/v1beta2",
	"flowcontrol.apiserver.k8s.io/v1beta3",
	"networking.k8s.io/v1",
	"networking.k8s.io/v1alpha1",
	"networking.k8s.io/v1beta1",
	"node.k8s.io/v1",
	"node.k8s.io/v1alpha1",
	"node.k8s.io/v1beta1",
	"policy/v1",
	"policy/v1beta1",
	"rbac.authorization.k8s.io/v1",
	"rbac.authorization.k8s.io/v1alpha1",
	"rbac.authorization.k8s.io/v1beta1",
	"resource.k8s.io/v1alpha2",
	"scheduling.k8s.io/v1",
	"scheduling.k8s.io/v1alpha1",
	"scheduling.k8s.io/v1beta1",
	"storage.k8s.io/v1",
	"storage.k8s.io/v1alpha1",
	"storage.k8s.io/v1beta1",
	"storagemigration.k8s.io/v1alpha1",
	"apiextensions.k8s.io/v1",
	"apiextensions.k8s.io/v1beta1",
}
