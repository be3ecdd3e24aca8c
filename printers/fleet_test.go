package printers

import (
	"bytes"
	"testing"

	"github.com/crdver/kubectl-crdver/fleet"
	goldenfile "github.com/crdver/kubectl-crdver/internal/golden"
)

// fleetReport is a plan of a release on six clusters: one ready, one through a release
// between, one with objects to fix, one whose run failed, one unreachable, and a second name
// of the ready one; with its waves.
func fleetReport() *fleet.Report {
	no := false
	rows := []fleet.Row{
		{Cluster: fleet.Cluster{Name: "prod-eu", Context: "prod-eu"}, ClusterID: "3f2a9c1e-0000", KubernetesVersion: "v1.37.1", InPlace: &no, Verdict: "stricter",
			Blocker: "crontabs.stable.example.com: v1 spec.image: maxLength none → 20", State: fleet.StateDone, Need: fleet.NeedUpgrade, Seconds: 1.24},
		{Cluster: fleet.Cluster{Name: "prod-us", Context: "prod-us"}, KubernetesVersion: "v1.34.4", InPlace: &no, Verdict: "safe", Path: []string{"v0.2.0", "v0.3.0"},
			State: fleet.StateDone, Need: fleet.NeedPath([]string{"v0.2.0"}), Seconds: 2.5},
		{Cluster: fleet.Cluster{Name: "staging", Context: "staging"}, KubernetesVersion: "v1.37.1", InPlace: &no, Verdict: "invalid-on-recreate", Objects: 12,
			Blocker: "crontabs.stable.example.com: 12 objects violate the new schema: writes are accepted (the API server ratchets unchanged fields), but a re-create as listed (a restore, a GitOps replace) is rejected",
			State:   fleet.StateDone, ExitCode: 1, Need: fleet.NeedFixObjects, Seconds: 3.01},
		{Cluster: fleet.Cluster{Name: "edge-1", Context: "edge-1"}, KubernetesVersion: "v1.34.4", InPlace: &no,
			Error: "planning: conversion webhook for stable.example.com/v1beta1, Kind=CronTab failed: connection refused", State: fleet.StateFailed, ExitCode: 3, Need: fleet.NeedLook, Seconds: 0.4},
		{Cluster: fleet.Cluster{Name: "edge-2", Context: "edge-2"}, Error: "reading the server's version: cannot reach the API server: connection refused", State: fleet.StateUnreachable, ExitCode: 3, Need: fleet.NeedReachable},
		{Cluster: fleet.Cluster{Name: "prod-eu-admin", Context: "prod-eu-admin"}, ClusterID: "3f2a9c1e-0000", KubernetesVersion: "v1.37.1", InPlace: &no, Verdict: "stricter",
			State: fleet.StateDone, Need: fleet.NeedUpgrade, Seconds: 1.1},
	}
	r := fleet.NewReport("plan -f release-0.3.0/", rows, false)
	r.PlanWaves(fleet.DefaultWaves, "")
	return r
}

func TestGoldenFleet(t *testing.T) {
	cli := Human{AllListed: "-o json", WideListed: "-o wide"}
	for _, tc := range []struct {
		name string
		p    ReportPrinter
	}{
		{"fleet/plan.txt", cli},
		{"fleet/plan-wide.txt", Human{Wide: true, AllListed: "-o json"}},
		{"fleet/plan.json", Data{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.p.PrintReport(&b, Fleet(fleetReport())); err != nil {
				t.Fatal(err)
			}
			goldenfile.Check(t, tc.name, b.String())
		})
	}
	t.Run("fleet/plan.md", func(t *testing.T) {
		goldenfile.Check(t, "fleet/plan.md", Fleet(fleetReport()).Markdown(0))
	})
	t.Run("fleet/waves.txt", func(t *testing.T) {
		var b bytes.Buffer
		r := &fleet.Report{Rows: fleetReport().Rows, Waves: [][]string{{"prod-eu"}, {"prod-us", "staging", "edge-1", "edge-2"}}}
		if err := cli.PrintPart(&b, FleetWaves(r, "--waves 1,rest")); err != nil {
			t.Fatal(err)
		}
		goldenfile.Check(t, "fleet/waves.txt", b.String())
	})
}
