package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/crdver/kubectl-crdver/internal/buildinfo"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/migrate"
)

// clientSet is the one set of API clients of a command run: the kubeconfig is loaded once and
// API server warnings (deprecated versions, unknown fields) are counted by one handler and
// summarised on stderr once the command ends (warnings.go). Each client is built on first use from the same configuration.
type clientSet struct {
	config *rest.Config

	mu      sync.Mutex
	crds    apiextensionsclient.Interface
	dynamic dynamic.Interface
	kube    kubernetes.Interface
	migrate *migrate.Clients

	// The server's /version, read once per run (serverVersion).
	versionRead bool
	version     *apimachineryversion.Info
	versionErr  error
}

// clients returns the run's client set, building it on the first call (Globals live for one
// command run: every root command gets its own).
func (g *Globals) clients() (*clientSet, error) {
	g.clientsMu.Lock()
	defer g.clientsMu.Unlock()
	if g.clientSet != nil {
		return g.clientSet, nil
	}
	cfg, err := g.ConfigFlags.ToRESTConfig()
	if err != nil {
		usage := unknownKubeconfigEntry(err)
		err = fmt.Errorf("cannot load the kubeconfig: %w (check --kubeconfig and --context)", err)
		if usage {
			return nil, Usage(err) // a --context, --cluster or --user that the kubeconfig lacks
		}
		return nil, Unavailable(err)
	}
	cfg = rest.CopyConfig(cfg)
	// Client-side rate limiting is left to each command: the defaults of 5 QPS would throttle
	// bulk work.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "kubectl-crdver/" + buildinfo.Version
	cfg.WarningHandler = &g.warnings
	g.clientSet = &clientSet{config: cfg}
	return g.clientSet, nil
}

// RESTConfig returns the client configuration for the selected kubeconfig context, loaded once.
func (g *Globals) RESTConfig() (*rest.Config, error) {
	c, err := g.clients()
	if err != nil {
		return nil, err
	}
	return c.config, nil
}

func buildErr(err error) error { return Unavailable(fmt.Errorf("cannot build a client: %w", err)) }

// CRDs is the apiextensions clientset, talking protobuf: CRDs with large schemas decode several
// times faster than from JSON.
func (c *clientSet) CRDs() (apiextensionsclient.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crds == nil {
		cs, err := newCRDClient(c.config)
		if err != nil {
			return nil, err
		}
		c.crds = cs
	}
	return c.crds, nil
}

func newCRDClient(cfg *rest.Config) (apiextensionsclient.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, buildErr(err)
	}
	return cs, nil
}

// Dynamic is the dynamic client, for custom resources.
func (c *clientSet) Dynamic() (dynamic.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dynamic == nil {
		d, err := dynamic.NewForConfig(c.config)
		if err != nil {
			return nil, buildErr(err)
		}
		c.dynamic = d
	}
	return c.dynamic, nil
}

// Kube is the core clientset (discovery, service proxy, access reviews).
func (c *clientSet) Kube() (kubernetes.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kube == nil {
		k, err := kubernetes.NewForConfig(c.config)
		if err != nil {
			return nil, buildErr(err)
		}
		c.kube = k
	}
	return c.kube, nil
}

// Discovery is the discovery client.
func (c *clientSet) Discovery() (discovery.DiscoveryInterface, error) {
	k, err := c.Kube()
	if err != nil {
		return nil, err
	}
	return k.Discovery(), nil
}

// Migrate are the clients of the migrate library (with client-go's rate limiter off: the
// rewrite has its own).
func (c *clientSet) Migrate() (*migrate.Clients, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.migrate == nil {
		m, err := migrate.NewClients(c.config)
		if err != nil {
			return nil, buildErr(err)
		}
		c.migrate = m
	}
	return c.migrate, nil
}

// unknownKubeconfigEntry reports whether err says that a --context, --cluster or --user names
// something the kubeconfig does not have: the user's input is wrong (exit 2), not the cluster.
func unknownKubeconfigEntry(err error) bool {
	if clientcmd.IsContextNotFound(err) || (clientcmd.IsConfigurationInvalid(err) && !clientcmd.IsEmptyConfig(err)) {
		return true
	}
	// clientcmd words these as plain errors (client_config.go getContext, getAuthInfo, getCluster).
	msg := err.Error()
	for _, what := range []string{"context ", "auth info ", "cluster "} {
		if strings.HasPrefix(msg, what+`"`) && strings.HasSuffix(msg, `" does not exist`) {
			return true
		}
	}
	return false
}

// migrateClients are the migrate engine's clients for the selected kubeconfig context.
func (g *Globals) migrateClients() (*migrate.Clients, error) {
	cs, err := g.clients()
	if err != nil {
		return nil, err
	}
	return cs.Migrate()
}

// crdClient is the run's apiextensions clientset (protobuf).
func (g *Globals) crdClient() (apiextensionsclient.Interface, error) {
	c, err := g.clients()
	if err != nil {
		return nil, err
	}
	return c.CRDs()
}

// serverVersionTimeout bounds reading /version when the command could do without the cluster
// (preview with the CRDs in the input): an unreachable kubeconfig context must not hang it.
const serverVersionTimeout = 5 * time.Second

// serverVersion reads the API server's /version once per run (discovery's ServerVersion, with
// the run's context). bounded limits the wait (the command can do without the cluster).
func (g *Globals) serverVersion(ctx context.Context, bounded bool) (kubeversion.Version, string, error) {
	cs, err := g.clients()
	if err != nil {
		return kubeversion.Version{}, "", err
	}
	return cs.serverVersion(ctx, bounded)
}

func (c *clientSet) serverVersion(ctx context.Context, bounded bool) (kubeversion.Version, string, error) {
	c.mu.Lock()
	done, info, err := c.versionRead, c.version, c.versionErr
	c.mu.Unlock()
	if !done {
		d, derr := c.Discovery()
		if derr != nil {
			return kubeversion.Version{}, "", derr
		}
		rctx := ctx
		if bounded {
			var cancel context.CancelFunc
			rctx, cancel = context.WithTimeout(ctx, serverVersionTimeout)
			defer cancel()
		}
		// discovery.ServerVersion without a context: the same GET /version.
		var body []byte
		body, err = d.RESTClient().Get().AbsPath("/version").Do(rctx).Raw()
		info = &apimachineryversion.Info{}
		if err == nil {
			err = json.Unmarshal(body, info)
		}
		if err != nil {
			err = clusterError("reading the server's version", err)
		}
		if ctx.Err() == nil {
			c.mu.Lock()
			c.versionRead, c.version, c.versionErr = true, info, err
			c.mu.Unlock()
		}
	}
	if err != nil {
		return kubeversion.Version{}, "", err
	}
	v, perr := kubeversion.FromInfo(info)
	if perr != nil {
		return kubeversion.Version{}, "", Unavailable(perr)
	}
	git := info.GitVersion
	if git == "" {
		git = v.String()
	}
	return v, git, nil
}
