// Package kubeversion is the Kubernetes version the API server's code is run as: which minor
// versions kubectl-crdver can judge as (Oldest to Newest, the minor of the linked
// k8s.io libraries), parsing a version from a flag or from the server's discovery, making the
// linked code behave as an earlier minor with Kubernetes' own compatibility-version machinery
// (Use: chosen once per run, guarded; libraries check the version they were given with
// Require), and the table of known differences that no switch covers (Differences).
//
// It names no flags and prints nothing.
package kubeversion

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	baseversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"

	// The apiextensions feature gates (CRDValidationRatcheting, CustomResourceFieldSelectors,
	// …) register with the default feature gate in this package's init: they must be known
	// before the emulation version is set, or their versioned defaults would not follow it.
	_ "k8s.io/apiextensions-apiserver/pkg/features"
)

// Version is a Kubernetes minor version (1.33). The zero value means "not chosen".
type Version struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
}

// Oldest is the oldest minor kubectl-crdver judges as: older versions are refused.
var Oldest = Version{Major: 1, Minor: 32}

// Newest is the minor of the linked API server libraries (k8s.io/* v0.<minor>): the newest
// version whose behaviour is known. A newer server is judged as Newest, with a warning.
var Newest = mustParse(baseversion.DefaultKubeBinaryVersion)

// EmulationFloor is the oldest version Kubernetes' own emulation supports for the linked
// libraries (binary minor - 3, as kube-apiserver's --emulated-version): from it to Newest,
// feature-gate defaults follow the emulated version as kube-apiserver's would. Below it
// (Oldest up to EmulationFloor-1) the CEL environment and the supported formats are still
// exact (their version tables go back to 1.0), but feature gates removed from the linked code
// after graduating are judged as graduated (see docs/kubernetes-versions.md).
var EmulationFloor = Version{Major: Newest.Major, Minor: Newest.Minor - 3}

func mustParse(s string) Version {
	v, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Parse reads "1.33", "v1.33", "1.33.4" or a full git version ("v1.33.4-gke.1200"); only the
// major and minor are kept.
func Parse(s string) (Version, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Version{}, fmt.Errorf("empty Kubernetes version (want MAJOR.MINOR, e.g. 1.33)")
	}
	v, err := utilversion.ParseGeneric(t)
	if err != nil || len(v.Components()) < 2 {
		// ParseGeneric wants MAJOR.MINOR[.PATCH]: "1.33.4-gke.1" has a suffix it may refuse.
		if sv, serr := utilversion.ParseSemantic(strings.TrimPrefix(t, "v")); serr == nil {
			v, err = sv, nil
		}
	}
	if err != nil || v == nil {
		return Version{}, fmt.Errorf("%q is not a Kubernetes version (want MAJOR.MINOR, e.g. 1.33)", s)
	}
	if v.Major() == 0 {
		return Version{}, fmt.Errorf("%q is not a Kubernetes version (want MAJOR.MINOR, e.g. 1.33)", s)
	}
	return Version{Major: int(v.Major()), Minor: int(v.Minor())}, nil
}

// FromInfo is the version of a server's discovery /version answer: its gitVersion, else its
// major and minor fields (managed clusters write minor as "33+").
func FromInfo(info *apimachineryversion.Info) (Version, error) {
	if info == nil {
		return Version{}, errors.New("the server did not say its version")
	}
	if v, err := Parse(info.GitVersion); err == nil {
		return v, nil
	}
	major, err1 := strconv.Atoi(strings.TrimRight(info.Major, "+"))
	minor, err2 := strconv.Atoi(strings.TrimRight(info.Minor, "+"))
	if err1 != nil || err2 != nil || major == 0 {
		return Version{}, fmt.Errorf("the server's version %q (major %q, minor %q) is not a Kubernetes version", info.GitVersion, info.Major, info.Minor)
	}
	return Version{Major: major, Minor: minor}, nil
}

// String is "1.33" ("" for the zero value).
func (v Version) String() string {
	if v.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d.%d", v.Major, v.Minor)
}

// IsZero reports whether no version was chosen.
func (v Version) IsZero() bool { return v == Version{} }

// Compare is -1, 0 or 1 as v is older than, equal to or newer than o.
func (v Version) Compare(o Version) int {
	switch {
	case v.Major != o.Major:
		if v.Major < o.Major {
			return -1
		}
		return 1
	case v.Minor < o.Minor:
		return -1
	case v.Minor > o.Minor:
		return 1
	}
	return 0
}

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool { return v.Compare(o) < 0 }

// AtLeast reports whether v is o or newer.
func (v Version) AtLeast(o Version) bool { return v.Compare(o) >= 0 }

// AddMinor is the version n minors later (earlier when n < 0).
func (v Version) AddMinor(n int) Version { return Version{Major: v.Major, Minor: v.Minor + n} }

// MarshalText writes "1.33", so JSON shows `"kubernetesVersion": "1.33"`.
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText reads what Parse reads.
func (v *Version) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*v = Version{}
		return nil
	}
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

func (v Version) util() *utilversion.Version {
	return utilversion.MajorMinor(uint(v.Major), uint(v.Minor))
}

// CompatibilityVersion is what a kube-apiserver of version v uses for new CEL expressions and
// CRD formats (its min compatibility version: v - 1, so that a rollback to v - 1 keeps working):
// a CEL library introduced in 1.34 is admitted in new rules from 1.35 on.
func (v Version) CompatibilityVersion() Version { return v.AddMinor(-1) }

// TooOldError says a version is older than Oldest.
type TooOldError struct{ Version Version }

func (e *TooOldError) Error() string {
	return fmt.Sprintf("Kubernetes %s is older than the oldest version kubectl-crdver can judge as (%s; supported: %s to %s)", e.Version, Oldest, Oldest, Newest)
}

// Check says whether v can be judged as: an error (*TooOldError) when it is older than
// Oldest; a warning when it is newer than Newest (it is then judged as Newest); nothing when
// it is supported.
func Check(v Version) (warning string, err error) {
	if v.Less(Oldest) {
		return "", &TooOldError{Version: v}
	}
	if Newest.Less(v) {
		return fmt.Sprintf("Kubernetes %s is newer than the API server code kubectl-crdver links (%s): judged as %s; answers that changed in %s are not known", v, Newest, Newest, v), nil
	}
	return "", nil
}

// Effective is the version the code is run as for v: v itself, or Newest when v is newer.
func Effective(v Version) Version {
	if v.IsZero() || Newest.Less(v) {
		return Newest
	}
	return v
}

var (
	emulateMu sync.Mutex
	// inUse is the version held by Use (the effective one) and held the number of Uses not
	// yet released.
	inUse Version
	held  int
)

// InUseError is a Use of a version while another is in use: the API server code runs as one
// Kubernetes version at a time in a process.
type InUseError struct {
	// InUse is the version in use, Asked the one refused (both as the code runs them).
	InUse, Asked Version
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("cannot judge as Kubernetes %s: this process already judges as Kubernetes %s, and the API server code runs as one version at a time (judge as %s in a run of its own)", e.Asked, e.InUse, e.Asked)
}

// NotInUseError is a library asked to judge as a version that the process does not run as:
// the version of a run is chosen once, with Use, before the libraries judge.
type NotInUseError struct {
	// Want is the version asked for, InUse the one the code runs as (both as the code runs them).
	Want, InUse Version
}

func (e *NotInUseError) Error() string {
	return fmt.Sprintf("cannot judge as Kubernetes %s: the API server code runs as Kubernetes %s (choose the run's version once, with kubeversion.Use(%s), before judging)", e.Want, e.InUse, e.Want)
}

// Use makes the linked API server code behave as Kubernetes v (Newest when v is newer; the
// zero value means Newest) for the rest of the run, and holds that version until release is
// called: it is the one way to choose the version a process judges as. Using the version in
// use again is accepted (each Use has its own release); a different version while one is held
// is refused with an *InUseError, and a version older than Oldest with a *TooOldError. When the
// last holder releases, the code goes back to Newest, so the next run (a test's next command)
// inherits nothing. release may be called more than once.
//
// Libraries do not call Use: they take the version as a value and check it with Require. The
// command layer calls it once per run, where the version is resolved (--kube-version, the
// cluster's, or the newest known).
func Use(v Version) (release func(), err error) {
	if !v.IsZero() {
		if _, err := Check(v); err != nil {
			return nil, err
		}
	}
	e := Effective(v)
	emulateMu.Lock()
	defer emulateMu.Unlock()
	if held > 0 {
		if inUse != e {
			return nil, &InUseError{InUse: inUse, Asked: e}
		}
	} else if err := emulate(e); err != nil {
		return nil, err
	}
	inUse = e
	held++
	var once sync.Once
	return func() { once.Do(releaseOne) }, nil
}

func releaseOne() {
	emulateMu.Lock()
	defer emulateMu.Unlock()
	if held--; held > 0 {
		return
	}
	held, inUse = 0, Version{}
	// Newest is what the code behaves as when nothing chose: setting it back cannot fail
	// where setting an older version succeeded.
	_ = emulate(Newest)
}

// Require is what a library calls with the version it was given (its Options.KubeVersion):
// the version it judges as. The zero value means "the version the process runs as" (Newest
// unless a run chose another with Use); any other version must be the one the process runs
// as, else *NotInUseError: libraries never switch the process-wide version themselves.
func Require(v Version) (Version, error) {
	emulateMu.Lock()
	defer emulateMu.Unlock()
	cur := emulatedLocked()
	if v.IsZero() {
		return cur, nil
	}
	if e := Effective(v); e != cur {
		return cur, &NotInUseError{Want: e, InUse: cur}
	}
	return cur, nil
}

// emulate makes the linked API server code behave as Kubernetes e (an effective version:
// Oldest to Newest), as `kube-apiserver --emulated-version` does: it sets the emulation and
// min compatibility version (e - 1) of the kube component in the process-wide component
// registry, which environment.DefaultCompatibilityVersion reads (the CEL environment for new
// expressions in CRD validation, the formats the schema validator knows), and of the default
// feature gate (versioned defaults: ratcheting, CRD field selectors, declarative validation,
// …). The caller holds emulateMu.
func emulate(e Version) error {
	emu, compat := e.util(), e.CompatibilityVersion().util()
	ev := compatibility.DefaultComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent)
	mev, ok := ev.(basecompatibility.MutableEffectiveVersion)
	if !ok {
		return fmt.Errorf("the kube component's effective version (%T) cannot be changed", ev)
	}
	if !mev.EmulationVersion().EqualTo(emu) || !mev.MinCompatibilityVersion().EqualTo(compat) {
		// SetEmulationVersion clamps the min compatibility version to the emulation floor
		// (binary - 3); the CEL and format tables go back further, so it is set after.
		mev.SetEmulationVersion(emu)
		mev.SetMinCompatibilityVersion(compat)
	}
	// The feature gate logs each default that a switch flips after it was read ("will change
	// already queried feature"): switching is the point here, so that goes nowhere.
	var err error
	if fg, ok := utilfeature.DefaultMutableFeatureGate.(featuregate.MutableVersionedFeatureGateWithLogger); ok {
		err = fg.SetEmulationVersionAndMinCompatibilityVersionWithLogger(klog.Background().V(10), emu, compat)
	} else {
		err = utilfeature.DefaultMutableFeatureGate.SetEmulationVersionAndMinCompatibilityVersion(emu, compat)
	}
	if err != nil {
		return fmt.Errorf("setting the feature gates' emulation version to %s: %w", e, err)
	}
	return nil
}

// Emulated is the version the linked code currently behaves as.
func Emulated() Version {
	emulateMu.Lock()
	defer emulateMu.Unlock()
	return emulatedLocked()
}

func emulatedLocked() Version {
	ev := compatibility.DefaultComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent)
	if ev == nil || ev.EmulationVersion() == nil {
		return Newest
	}
	return Version{Major: int(ev.EmulationVersion().Major()), Minor: int(ev.EmulationVersion().Minor())}
}

// compatibilityVersionInUse is what the API server code reads now (for tests).
func compatibilityVersionInUse() Version {
	c := environment.DefaultCompatibilityVersion()
	return Version{Major: int(c.Major()), Minor: int(c.Minor())}
}
