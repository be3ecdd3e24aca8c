package migrate

import (
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
)

// CompletedEvidence is the evidence of the completed run recorded in the checkpoint at path,
// when that run was for crd as it is now on server (same UID, storage version and generation);
// nil when there is no such record. It lets a workflow that was interrupted after the rewrite
// (kubectl crdver retire, for one) trim without rewriting every object again.
func CompletedEvidence(server string, crd *apiextensionsv1.CustomResourceDefinition, path string) (*Evidence, error) {
	cp, err := LoadCheckpoint(path)
	if err != nil || cp == nil || cp.State != StateComplete {
		return nil, err
	}
	if ok, _ := cp.matches(server, crd.Name, string(crd.UID), crdinfo.StorageVersion(crd), crd.Generation); !ok {
		return nil, nil
	}
	// storedVersions lists a version again after a trim based on this run: someone changed it
	// through /status (which leaves the generation alone), e.g. after restoring objects stored
	// at that version. The run no longer proves where the objects are.
	for _, v := range crd.Status.StoredVersions {
		if cp.TrimmedTo != nil && !slices.Contains(cp.TrimmedTo, v) {
			return nil, nil
		}
	}
	return &Evidence{CRD: cp.CRD, UID: cp.UID, StorageVersion: cp.StorageVersion, Generation: cp.Generation,
		Complete: true, Failed: cp.Counts.Failed, Engine: "the recorded run", Checkpoint: path}, nil
}
