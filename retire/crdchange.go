package retire

import (
	"context"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// changeCRD unserves or removes the version: a fresh GET, the guards re-checked, an update
// carrying the resourceVersion just read (re-read and re-checked on conflict).
func (r *runner) changeCRD(ctx context.Context, name string, wanted bool) error {
	s := r.step(name)
	if !wanted || s.State != StatePending {
		return nil
	}
	v := r.o.Version
	var detail string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := r.getCRD(ctx)
		if err != nil {
			return err
		}
		detail = ""
		if by := ManagedBy(crd); by.Managed() && !r.o.Force {
			detail = fmt.Sprintf("%s is managed by %s, which would put %s back or fight the change: change the CRD there (--force to do it anyway)", crd.Name, by, v)
			return nil
		}
		ver, ok := lookup(crd, v)
		switch {
		case !ok:
			s.State, s.Detail = StateAlready, fmt.Sprintf("%s is not in spec.versions", v)
			return nil
		case name == StepUnserve && !ver.Served:
			s.State, s.Detail = StateAlready, fmt.Sprintf("%s is not served", v)
			return nil
		case ver.Storage:
			detail = fmt.Sprintf("%s is the storage version again", v)
			return nil
		case name == StepRemove && slices.Contains(crd.Status.StoredVersions, v):
			detail = fmt.Sprintf("%s is still in status.storedVersions [%s]", v, strings.Join(crd.Status.StoredVersions, " "))
			return nil
		}
		if name == StepUnserve {
			served := 0
			for i := range crd.Spec.Versions {
				if crd.Spec.Versions[i].Name == v {
					crd.Spec.Versions[i].Served = false
				}
				if crd.Spec.Versions[i].Served {
					served++
				}
			}
			if served == 0 {
				detail = fmt.Sprintf("%s is the only served version", v)
				return nil
			}
		} else {
			kept := crd.Spec.Versions[:0]
			for _, x := range crd.Spec.Versions {
				if x.Name != v {
					kept = append(kept, x)
				}
			}
			crd.Spec.Versions = kept
		}
		// crd carries the resourceVersion just read: a concurrent change is a conflict.
		_, err = r.c.CRDs.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		if err == nil {
			s.State = StateDone
			if name == StepUnserve {
				s.Detail = fmt.Sprintf("%s is no longer served", v)
			} else {
				s.Detail = fmt.Sprintf("%s removed from spec.versions", v)
			}
		}
		return err
	})
	if err != nil {
		s.State, s.Detail = StateFailed, err.Error()
		return fmt.Errorf("%s %s of %s: %w", name, v, r.o.CRD, err)
	}
	if detail != "" {
		s.State, s.Detail = StateRefused, detail
		r.problem("not %s %s: %s", map[string]string{StepUnserve: "unserving", StepRemove: "removing"}[name], v, detail)
		if name == StepUnserve {
			if rs := r.step(StepRemove); rs.State == StatePending {
				rs.State, rs.Detail = StateRefused, "not unserved first"
			}
		}
		return nil
	}
	r.notify("%s", s.Detail)
	return nil
}
