package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdver/kubectl-crdver/internal/proc"
)

// Where and for how long a run holds its CRDs.
const (
	// LeaseNamespace holds the leases (coordination.k8s.io/v1), one per CRD.
	LeaseNamespace = "kube-system"
	// LeaseDuration: a lease not renewed for this long belongs to a run that died.
	LeaseDuration = 30 * time.Second
	leaseLabel    = "crdver.io/lease"
	leaseHost     = "crdver.io/host"
	leasePID      = "crdver.io/pid"
	// leasePIDStart is the holder's start time (/proc/PID/stat), so that another process
	// given the same PID later is not taken for the holder.
	leasePIDStart = "crdver.io/pid-start"
	// leaseTake marks one taking of the lease (see take).
	leaseTake    = "crdver.io/take"
	leaseCommand = "crdver.io/command"
)

// HeldError: another run holds a CRD (its lease is renewed): this run writes nothing.
type HeldError struct {
	CRD     string
	Holder  string // "kubectl crdver upgrade, pid 1234 on laptop"
	Renewed time.Time
	StaleAt time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is being changed by another run (%s, lease %s/%s renewed %s ago): nothing was written; wait for it to end, or run again after %s if that run died",
		e.CRD, e.Holder, LeaseNamespace, LeaseName(e.CRD), time.Since(e.Renewed).Round(time.Second), e.StaleAt.Format(time.RFC3339))
}

// Lease is what a run holds on its CRDs while it writes: one coordination.k8s.io Lease per CRD
// in kube-system, renewed in the background, released by Release. A run that dies (SIGKILL, the
// machine) leaves it to go stale after LeaseDuration; on the same machine a later run takes
// it over at once when the holder's process is gone.
type Lease struct {
	c       *Clients
	names   []string
	holder  string
	stop    context.CancelFunc
	ctx     context.Context // cancelled by Release: the renewals stop at once
	done    sync.WaitGroup
	release sync.Once
}

// LeaseName is the Lease object of a CRD.
func LeaseName(crd string) string {
	if n := "crdver." + crd; len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(crd))
	return "crdver." + hex.EncodeToString(sum[:16])
}

// AcquireLease takes the lease of every CRD named, for command (e.g. "kubectl crdver
// upgrade"). A CRD held by a live run is a *HeldError (leases already taken are given back).
// When the cluster does not let this user read or write leases, the run goes on without one:
// note says so (two runs at once are then not detected), and the Lease is nil.
func AcquireLease(ctx context.Context, c *Clients, command string, crds ...string) (l *Lease, note string, err error) {
	if c.Kube == nil {
		return nil, "", nil
	}
	host, _ := os.Hostname()
	l = &Lease{c: c, holder: fmt.Sprintf("%s, pid %d on %s", command, os.Getpid(), host)}
	l.ctx, l.stop = context.WithCancel(context.Background())
	for _, n := range crds {
		err := l.take(ctx, n, command, host)
		if errors.Is(err, errHeldHere) {
			continue // this process's outer run (upgrade → migrate) holds it and renews it
		}
		if err != nil {
			l.Release(context.WithoutCancel(ctx))
			if apierrors.IsForbidden(err) {
				return nil, fmt.Sprintf("two runs on the same CRDs at once are not detected: this user may not hold a lease in %s (%v)", LeaseNamespace, err), nil
			}
			return nil, "", err
		}
		l.names = append(l.names, n)
	}
	l.done.Add(1)
	go l.renew()
	return l, "", nil
}

func (l *Lease) take(ctx context.Context, crd, command, host string) error {
	leases := l.c.Kube.CoordinationV1().Leases(LeaseNamespace)
	// take marks this taking: a create whose answer the network lost may have gone through,
	// and the lease found on the next try is then this one's, not an outer run's.
	take := strconv.FormatInt(time.Now().UnixNano(), 36)
	for attempt := 0; ; attempt++ {
		now := metav1.NewMicroTime(time.Now())
		secs := int32(LeaseDuration / time.Second)
		cur, err := leases.Get(ctx, LeaseName(crd), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: LeaseName(crd), Labels: map[string]string{leaseLabel: "true"},
					Annotations: map[string]string{leaseHost: host, leasePID: strconv.Itoa(os.Getpid()), leasePIDStart: selfStart(), leaseCommand: command, "crdver.io/crd": crd, leaseTake: take}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &l.holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
			}, metav1.CreateOptions{FieldManager: "kubectl-crdver"})
			if (apierrors.IsAlreadyExists(err) || lostOnTheWay(err)) && attempt < 5 {
				if lostOnTheWay(err) {
					if err := Sleep(ctx, 200*time.Millisecond<<attempt); err != nil {
						return err
					}
				}
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		if cur.Annotations[leaseTake] == take && cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == l.holder {
			return nil // this taking's create went through; its answer was lost
		}
		if heldHere(cur, host) {
			return errHeldHere
		}
		if held := heldBy(cur, host); held != nil {
			held.CRD = crd
			return held
		}
		cur.Spec.HolderIdentity, cur.Spec.LeaseDurationSeconds, cur.Spec.AcquireTime, cur.Spec.RenewTime = &l.holder, &secs, &now, &now
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[leaseHost], cur.Annotations[leasePID], cur.Annotations[leasePIDStart], cur.Annotations[leaseCommand] = host, strconv.Itoa(os.Getpid()), selfStart(), command
		cur.Annotations[leaseTake] = take
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "kubectl-crdver"})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue // another run took it at the same moment: decide again
		}
		return err
	}
}

var errHeldHere = errors.New("held by this process")

// heldHere: this process holds cur (an outer run of the same process took it).
func heldHere(cur *coordinationv1.Lease, host string) bool {
	return cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity != "" &&
		cur.Annotations[leaseHost] == host && cur.Annotations[leasePID] == strconv.Itoa(os.Getpid())
}

// heldBy says who holds cur when that run is alive: nil when the lease is free, stale, or
// held by a process of this machine that is gone.
func heldBy(cur *coordinationv1.Lease, host string) *HeldError {
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity == "" {
		return nil
	}
	renewed := cur.CreationTimestamp.Time
	if cur.Spec.RenewTime != nil {
		renewed = cur.Spec.RenewTime.Time
	}
	dur := LeaseDuration
	if cur.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*cur.Spec.LeaseDurationSeconds) * time.Second
	}
	if time.Now().After(renewed.Add(dur)) {
		return nil
	}
	if cur.Annotations[leaseHost] == host {
		if pid, err := strconv.Atoi(cur.Annotations[leasePID]); err == nil && !processAlive(pid, cur.Annotations[leasePIDStart]) {
			return nil
		}
	}
	return &HeldError{Holder: *cur.Spec.HolderIdentity, Renewed: renewed, StaleAt: renewed.Add(dur)}
}

// processAlive: the process that took a lease on this machine still runs. On Linux it reads
// /proc/PID/stat: a process gone, a zombie (killed, not yet reaped: in a container whose first
// process reaps no orphans, a SIGKILLed run stays one for good) or another process that got the
// same PID since (its start time differs from the one the lease recorded, when it did) is not
// alive. Elsewhere on unix, signal 0 must reach it; on Windows a process is taken for alive and
// its lease goes stale after LeaseDuration.
func processAlive(pid int, started string) bool {
	if runtime.GOOS == "linux" {
		st, err := proc.ReadStat(pid)
		if err == nil {
			return st.State != "Z" && st.State != "X" && (started == "" || started == st.Start)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	if runtime.GOOS == "windows" {
		return true
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// selfStart is this process's start time as /proc/self/stat says it ("" where there is no /proc).
func selfStart() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	st, err := proc.ReadStat(os.Getpid())
	if err != nil {
		return ""
	}
	return st.Start
}

func (l *Lease) renew() {
	defer l.done.Done()
	t := time.NewTicker(LeaseDuration / 3)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range l.names {
			ctx, cancel := context.WithTimeout(l.ctx, LeaseDuration/3)
			cur, err := l.c.Kube.CoordinationV1().Leases(LeaseNamespace).Get(ctx, LeaseName(n), metav1.GetOptions{})
			if err == nil && cur.Spec.HolderIdentity != nil && *cur.Spec.HolderIdentity == l.holder {
				now := metav1.NewMicroTime(time.Now())
				cur.Spec.RenewTime = &now
				_, _ = l.c.Kube.CoordinationV1().Leases(LeaseNamespace).Update(ctx, cur, metav1.UpdateOptions{FieldManager: "kubectl-crdver"})
			}
			cancel()
		}
	}
}

// Release gives the leases back (deletes those this run still holds). Safe on nil and twice.
func (l *Lease) Release(ctx context.Context) {
	if l == nil {
		return
	}
	l.release.Do(func() {
		l.stop()
		l.done.Wait()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, n := range l.names {
			leases := l.c.Kube.CoordinationV1().Leases(LeaseNamespace)
			cur, err := leases.Get(ctx, LeaseName(n), metav1.GetOptions{})
			if err != nil || cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.holder {
				continue
			}
			uid, rv := cur.UID, cur.ResourceVersion
			_ = leases.Delete(ctx, LeaseName(n), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		}
	})
}

// LeaseHolder is the live run that holds crd's lease (nil when none does). It writes nothing.
func LeaseHolder(ctx context.Context, c *Clients, crd string) (*HeldError, error) {
	if c.Kube == nil {
		return nil, nil
	}
	cur, err := c.Kube.CoordinationV1().Leases(LeaseNamespace).Get(ctx, LeaseName(crd), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	held := heldBy(cur, host)
	if held != nil {
		held.CRD = crd
	}
	return held, nil
}

// lostOnTheWay: the request or its answer was lost on the network (a connection reset or cut
// short), or the server could not serve it now: it may or may not have been carried out.
func lostOnTheWay(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
}
