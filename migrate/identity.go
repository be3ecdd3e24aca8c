package migrate

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterID identifies the cluster by something the server owns: the UID of its kube-system
// namespace, which every cluster has from its first start and no other cluster shares. Tunnels,
// bastions and local clusters put many clusters at one address (127.0.0.1:6443, minikube's
// 192.168.49.2:8443), so the server URL never identifies one. "" when it cannot be read (not
// allowed to get namespaces): state is then tied to the CRDs' UIDs alone.
//
// The answer is kept for the life of c (one run).
func (c *Clients) ClusterID(ctx context.Context) string {
	if c.clusterID != nil && *c.clusterID != "" {
		return *c.clusterID
	}
	if c.Kube == nil {
		return ""
	}
	ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	id := string(ns.UID)
	if c.clusterID == nil {
		c.clusterID = new(string)
	}
	*c.clusterID = id
	return id
}

// SameCluster reports whether state written for cluster (a ClusterID, "" when unknown) may be
// trusted on the cluster now reached; why says in a few words why not. Unknown on either side
// is not a match by itself: the caller then relies on the CRDs' UIDs.
func SameCluster(recorded, now string) (ok bool, why string) {
	if recorded == "" || now == "" || recorded == now {
		return true, ""
	}
	return false, "it was written for another cluster (kube-system namespace " + ShortUID(recorded) + ", this one is " + ShortUID(now) + ")"
}

// ShortUID is the first 8 characters of a UID, enough to tell two objects apart in a message.
func ShortUID(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}
