package migrate

import (
	"errors"
	"fmt"
)

// The errors of this package say what went wrong and on which object; they name no
// command-line flag. A command adds its own advice (package plugin words them with its flags).

// CheckpointOp is what was being done with a checkpoint file.
type CheckpointOp string

// Checkpoint operations.
const (
	CheckpointLocate CheckpointOp = "locate" // there is no cache folder for the default file
	CheckpointRead   CheckpointOp = "read"   // the file exists but cannot be read
	CheckpointParse  CheckpointOp = "parse"  // the file is not a checkpoint
	CheckpointWrite  CheckpointOp = "write"  // the file cannot be written
)

// CheckpointError is a checkpoint file that cannot be used: choose another file.
type CheckpointError struct {
	Op   CheckpointOp
	Path string
	Err  error
}

func (e *CheckpointError) Error() string {
	switch e.Op {
	case CheckpointLocate:
		return fmt.Sprintf("no cache folder for the checkpoint (%v)", e.Err)
	case CheckpointRead:
		return fmt.Sprintf("reading the checkpoint: %v", e.Err)
	case CheckpointParse:
		return fmt.Sprintf("checkpoint %s is not a kubectl-crdver checkpoint (%v)", e.Path, e.Err)
	}
	return fmt.Sprintf("saving the checkpoint: %v", e.Err)
}

func (e *CheckpointError) Unwrap() error { return e.Err }

// ErrClusterEngineUnavailable: the cluster cannot run a StorageVersionMigration (the API is
// not served, or no controller processes it). The client engine still works.
var ErrClusterEngineUnavailable = errors.New("the cluster cannot run a StorageVersionMigration")

// clusterUnavailable is an ErrClusterEngineUnavailable with its own message.
type clusterUnavailable struct{ msg string }

func (e *clusterUnavailable) Error() string        { return e.msg }
func (e *clusterUnavailable) Is(target error) bool { return target == ErrClusterEngineUnavailable }

func clusterUnavailablef(format string, args ...any) error {
	return &clusterUnavailable{msg: fmt.Sprintf(format, args...)}
}

// ErrNotConfirmed: the storage version switch was not confirmed; nothing was written.
var ErrNotConfirmed = errors.New("storage version not changed: not confirmed")

// Step names a step of a migration, for StepError.
type Step string

// The steps of Migrator.Run, in order.
const (
	StepPlan          Step = "plan"
	StepPreWrite      Step = "pre-write"
	StepAccess        Step = "access"
	StepLease         Step = "lease"
	StepClusterAPI    Step = "cluster-api"
	StepConfirm       Step = "confirm"
	StepSwitchStorage Step = "switch-storage"
	StepGetCRD        Step = "get-crd"
	StepWaitStorage   Step = "wait-storage"
	StepBeforeRewrite Step = "before-rewrite"
	StepCheckpoint    Step = "checkpoint"
	StepRewrite       Step = "rewrite"
	StepCluster       Step = "cluster"
	StepTrim          Step = "trim"
)

// StepError is an error of one step of Migrator.Run: Err is the cause, unwrapped for errors.Is
// and errors.As (ErrAccessDenied, ErrClusterEngineUnavailable, *CheckpointError, API errors).
type StepError struct {
	Step Step
	CRD  string
	// Version is the target version (for StepSwitchStorage).
	Version string
	Err     error
}

func (e *StepError) Error() string { return fmt.Sprintf("%s: %s: %v", e.CRD, e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// InterruptedError: the run was cancelled during the rewrite; progress is in the checkpoint and
// a new run with the same checkpoint resumes it.
type InterruptedError struct {
	CRD        string
	Done       int64
	Checkpoint string
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("%s: interrupted: %d objects done, progress saved in %s", e.CRD, e.Done, e.Checkpoint)
}
