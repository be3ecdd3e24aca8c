package testwebhook

import (
	"encoding/json"
	"strconv"
	"strings"
)

// The CronTab conversion the webhook performs (and the tests and the docs/commands/convert.md demo rely on).

// version is the version part of an apiVersion.
func version(apiVersion any) string {
	s, _ := apiVersion.(string)
	_, v, _ := strings.Cut(s, "/")
	return v
}

// Convert converts one CronTab to desiredAPIVersion: v1beta1 spec.hostPort "host:port" ↔ v1
// spec.host and spec.port (in any group, so that tests can rename the CRD). With lossy, v1 -> v1beta1 forgets the port.
func Convert(obj map[string]any, desiredAPIVersion string, lossy bool) (map[string]any, error) {
	from, _ := obj["apiVersion"].(string)
	out := map[string]any{}
	for k, v := range obj {
		out[k] = v
	}
	out["apiVersion"] = desiredAPIVersion
	spec, ok := obj["spec"].(map[string]any)
	if !ok || from == desiredAPIVersion {
		return out, nil
	}
	ns := map[string]any{}
	for k, v := range spec {
		ns[k] = v
	}
	switch {
	case version(from) == "v1beta1" && version(desiredAPIVersion) == "v1":
		hp, hasHP := ns["hostPort"].(string)
		delete(ns, "hostPort")
		if saved, ok := takeAnnotation(out, hp); ok {
			// The v1 fields "host:port" cannot represent, saved by the v1 -> v1beta1 conversion.
			for k, v := range saved {
				ns[k] = v
			}
		} else if hasHP {
			ns["host"], ns["port"] = splitHostPort(hp)
			if ns["port"] == nil {
				delete(ns, "port")
			}
		}
	case version(from) == "v1" && version(desiredAPIVersion) == "v1beta1":
		host, hasHost := ns["host"].(string)
		port, hasPort := ns["port"].(string)
		delete(ns, "host")
		delete(ns, "port")
		hp, hasHP := "", false
		switch {
		case hasPort && !lossy:
			hp, hasHP = host+":"+port, true
		case hasHost:
			hp, hasHP = host, true
		}
		if hasHP {
			ns["hostPort"] = hp
		}
		if !lossy {
			// Keep what "host:port" cannot say in an annotation (the API server keeps
			// annotations), so that v1 -> v1beta1 -> v1 gives back the same object.
			bh, bp := splitHostPort(hp)
			_, backHasPort := bp.(string)
			if !hasHP || bh != host || backHasPort != hasPort || (hasPort && bp != port) || !hasHost {
				saved := map[string]any{}
				if hasHost {
					saved["host"] = host
				}
				if hasPort {
					saved["port"] = port
				}
				if len(saved) > 0 {
					putAnnotation(out, hp, saved)
				}
			}
		}
	}
	out["spec"] = ns
	return out, nil
}

const savedAnnotation = "crontab.stable.example.com/v1-host-port"

// splitHostPort splits at the last colon; without one, everything is the host and port is
// nil (absent).
func splitHostPort(hp string) (host string, port any) {
	if i := strings.LastIndex(hp, ":"); i >= 0 {
		return hp[:i], hp[i+1:]
	}
	return hp, nil
}

func putAnnotation(obj map[string]any, hostPort string, saved map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return
	}
	m := map[string]any{}
	for k, v := range meta {
		m[k] = v
	}
	ann := map[string]any{}
	if a, ok := m["annotations"].(map[string]any); ok {
		for k, v := range a {
			ann[k] = v
		}
	}
	b, _ := json.Marshal(map[string]any{"hostPort": hostPort, "v1": saved})
	ann[savedAnnotation] = string(b)
	m["annotations"] = ann
	obj["metadata"] = m
}

// takeAnnotation removes the saved-fields annotation and returns what it holds if it was
// written for this hostPort.
func takeAnnotation(obj map[string]any, hostPort string) (map[string]any, bool) {
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	raw, ok := ann[savedAnnotation].(string)
	if !ok {
		return nil, false
	}
	m := map[string]any{}
	for k, v := range meta {
		m[k] = v
	}
	a := map[string]any{}
	for k, v := range ann {
		if k != savedAnnotation {
			a[k] = v
		}
	}
	if len(a) > 0 {
		m["annotations"] = a
	} else {
		delete(m, "annotations")
	}
	obj["metadata"] = m
	var saved struct {
		HostPort string         `json:"hostPort"`
		V1       map[string]any `json:"v1"`
	}
	if json.Unmarshal([]byte(raw), &saved) != nil || saved.HostPort != hostPort {
		return nil, false
	}
	return saved.V1, true
}

// BadHostPort is a webhook bug for FailBatchIf and Non200BatchIf (SetPoison): it cannot parse a
// CronTab's spec.hostPort whose port is not a number, and fails the whole ConversionReview.
func BadHostPort(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	hp, _ := spec["hostPort"].(string)
	i := strings.LastIndex(hp, ":")
	if i < 0 {
		return false
	}
	_, err := strconv.Atoi(hp[i+1:])
	return err != nil
}
