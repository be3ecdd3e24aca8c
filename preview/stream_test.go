package preview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
)

func crontabCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "crds", "crontab.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd, err := crdinfo.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// streamOutcomes previews jobs on a Stream of 3 workers and returns the outcomes as delivered.
func streamOutcomes(t *testing.T, o StreamOptions, jobs []Job) []Outcome {
	t.Helper()
	var got []Outcome
	s := NewStream(context.Background(), o, func(o Outcome) Outcome { return o }, func(o Outcome) error {
		got = append(got, o)
		return nil
	})
	for _, j := range jobs {
		if err := s.Submit(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestStreamOutcomes: a Stream hands every job's outcome on in submission order: a result
// (accepted or rejected), or the error of the step that failed — building the CRD's previewer
// (no storage version), finding the stored object (Old), or the preview itself.
func TestStreamOutcomes(t *testing.T) {
	crd := crontabCRD(t)
	noStorage := crd.DeepCopy()
	noStorage.Name = "nostorage." + crd.Spec.Group
	for i := range noStorage.Spec.Versions {
		noStorage.Spec.Versions[i].Storage = false
	}
	object := func(i int, replicas string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c%d","namespace":"default"},"spec":{"cronSpec":"* * * * */5","image":"x","replicas":%s}}`, i, replicas))
	}
	var jobs []Job
	for i := 0; i < 40; i++ {
		replicas := "1"
		if i%5 == 0 {
			replicas = `"many"` // a string where the schema says integer: rejected
		}
		jobs = append(jobs, Job{Source: fmt.Sprint(i), JSON: object(i, replicas), CRD: crd})
	}
	jobs = append(jobs, Job{Source: "no storage", JSON: object(99, "1"), CRD: noStorage}, Job{Source: "not json", JSON: []byte("{"), CRD: crd})
	got := streamOutcomes(t, StreamOptions{Workers: 3}, jobs)
	if len(got) != len(jobs) {
		t.Fatalf("%d outcomes for %d jobs", len(got), len(jobs))
	}
	for i, o := range got {
		if o.Job.Source != jobs[i].Source {
			t.Fatalf("outcome %d is of job %q; want %q (submission order)", i, o.Job.Source, jobs[i].Source)
		}
		switch {
		case i < 40:
			if o.Err != nil || o.Result == nil {
				t.Errorf("job %d: %v", i, o.Err)
			} else if want := i%5 != 0; o.Result.Accepted() != want {
				t.Errorf("job %d: accepted %v; want %v (%v)", i, o.Result.Accepted(), want, o.Result.Errors)
			}
		case o.Job.Source == "no storage":
			if o.Step != StepPreviewer || o.Err == nil || o.Result != nil {
				t.Errorf("no storage version: step %d, %v; want the previewer's error", o.Step, o.Err)
			}
		default:
			if o.Step != StepPreview || o.Err == nil || o.Result != nil {
				t.Errorf("not JSON: step %d, %v; want the preview's error", o.Step, o.Err)
			}
		}
	}

	// With Old, every job is an update of the object Old finds; Old's error is the job's.
	notStored := errors.New("not stored")
	got = streamOutcomes(t, StreamOptions{Workers: 2, Old: func(j Job) ([]byte, error) {
		if j.Source == "1" {
			return nil, notStored
		}
		return j.JSON, nil
	}}, jobs[:3])
	if len(got) != 3 || got[0].Result == nil || got[0].Result.Operation != "update" || got[1].Step != StepOld || !errors.Is(got[1].Err, notStored) {
		t.Errorf("with Old: %+v", got)
	}
}

// TestStreamJudgesAsTheRunsVersion: the objects are judged as StreamOptions.KubeVersion, which
// the process must run as (kubeversion.Use by the caller): another is refused, not switched to.
func TestStreamJudgesAsTheRunsVersion(t *testing.T) {
	crd := crontabCRD(t)
	v34 := kubeversion.Version{Major: 1, Minor: 34}
	job := Job{Source: "x", JSON: []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x","namespace":"default"},"spec":{"replicas":1}}`), CRD: crd}
	got := streamOutcomes(t, StreamOptions{Workers: 1, KubeVersion: v34}, []Job{job})
	var notInUse *kubeversion.NotInUseError
	if len(got) != 1 || got[0].Step != StepPreviewer || !errors.As(got[0].Err, &notInUse) {
		t.Fatalf("as %s without kubeversion.Use: %+v; want a *kubeversion.NotInUseError", v34, got)
	}
	release, err := kubeversion.Use(v34)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	got = streamOutcomes(t, StreamOptions{Workers: 1, KubeVersion: v34}, []Job{job})
	if len(got) != 1 || got[0].Result == nil {
		t.Fatalf("as %s in use: %+v", v34, got)
	}
}
