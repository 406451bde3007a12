package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommandPrintsVersionCommitAndGo(t *testing.T) {
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("version: %v", err)
	}
	got := out.String()
	for _, want := range []string{"userland ", "commit ", runtime.Version()} {
		if !strings.Contains(got, want) {
			t.Errorf("version output %q does not contain %q", got, want)
		}
	}
}

func TestVersionCommandRejectsArguments(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"version", "extra"})
	if err := cmd.Execute(); err == nil {
		t.Fatal("version with an argument succeeded, want an error")
	}
}

func TestGatewayFlagsComeFromTheEnvironment(t *testing.T) {
	t.Setenv("USERLAND_SESSION_TTL", "3h")
	t.Setenv("USERLAND_ADMIN_GROUPS", "a,b")
	t.Setenv("USERLAND_LISTEN", ":1")
	cmd := newGatewayCommand()
	if err := cmd.Flags().Parse([]string{"--listen", ":2"}); err != nil {
		t.Fatal(err)
	}
	if err := flagsFromEnv(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"session-ttl": "3h0m0s", "admin-groups": "[a,b]", "listen": ":2"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s = %q, want %q (command line beats environment)", flag, got, want)
		}
	}
	t.Setenv("USERLAND_WAKE_TIMEOUT", "soon")
	if err := flagsFromEnv(newGatewayCommand().Flags()); err == nil || !strings.Contains(err.Error(), "USERLAND_WAKE_TIMEOUT") {
		t.Errorf("a bad value gave %v, want an error naming the variable", err)
	}
}
