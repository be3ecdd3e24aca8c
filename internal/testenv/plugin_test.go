package testenv

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// failingBuild is an environment in which go build fails: a call given it must not build.
var failingBuild = append(os.Environ(), "GOFLAGS=-no-such-flag")

// TestBuildPluginSharesTheCache: with PluginCacheVar set and the plugin in the cache, every
// caller (here four at once, as test packages are) gets that build, linked into its own folder,
// and nothing is built; a build left half-way (a "building-" folder) is not taken for one.
func TestBuildPluginSharesTheCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(PluginCacheVar, cache)
	built := filepath.Join(cache, "plugin")
	if err := os.MkdirAll(filepath.Join(cache, "building-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(built, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{PluginFront, PluginEngine} {
		if err := os.WriteFile(filepath.Join(built, name), []byte("#!/bin/sh\necho "+name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	errs := make([]error, 4)
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), "bin")
		wg.Add(1)
		go func() {
			defer wg.Done()
			var bin string
			bin, errs[i] = BuildPlugin(dirs[i], BuildOptions{Env: failingBuild})
			if errs[i] == nil && bin != filepath.Join(dirs[i], PluginFront) {
				t.Errorf("BuildPlugin returned %s, want kubectl-crdver in %s", bin, dirs[i])
			}
		}()
	}
	wg.Wait()
	for i, dir := range dirs {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		for _, name := range []string{PluginFront, PluginEngine} {
			got, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := os.Stat(filepath.Join(built, name))
			if !os.SameFile(got, want) {
				t.Errorf("caller %d: %s is not the cached build", i, name)
			}
			if got.Mode()&0o111 == 0 {
				t.Errorf("caller %d: %s is not executable (%v)", i, name, got.Mode())
			}
		}
	}
}

// TestBuildPluginBuildsOnceIntoTheCache: the first caller fills the cache, the build renamed
// into place (no "building-" folder left behind), and the second takes it. Under `make test`
// the cache is the run's (this package may be the first caller or not: the plugin is linked
// once either way); otherwise an empty one.
func TestBuildPluginBuildsOnceIntoTheCache(t *testing.T) {
	cache := os.Getenv(PluginCacheVar)
	if cache == "" {
		cache = t.TempDir()
		t.Setenv(PluginCacheVar, cache)
	}
	bin, err := BuildPlugin(filepath.Join(t.TempDir(), "a"), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := BuildPlugin(filepath.Join(t.TempDir(), "b"), BuildOptions{Env: failingBuild})
	if err != nil {
		t.Fatalf("the second call built again (and failed): %v", err)
	}
	a, _ := os.Stat(bin)
	b, _ := os.Stat(again)
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Errorf("the two calls did not get the same build: %v %v", a, b)
	}
	left, _ := filepath.Glob(filepath.Join(cache, "building-*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
