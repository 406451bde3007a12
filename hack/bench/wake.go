package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
)

// wakeSample is one request to an idle-stopped environment.
type wakeSample struct {
	// Request is from sending the request to its proxied answer.
	Request time.Duration
	// Pod is the pod's own time to Ready: from its creation to the status
	// write that made it Ready, both as the API server logged them.
	Pod time.Duration
}

// Overhead is what Userland adds to a wake.
func (w wakeSample) Overhead() time.Duration { return w.Request - w.Pod }

// measureWakes stops the environment as idle (its last activity and last
// start moved two hours back), then sends one plain request through the gateway and times
// it, samples times.
func measureWakes(ctx context.Context, c client.WithWatch, auditLog, gatewayURL, cookie string, key types.NamespacedName, samples int) ([]wakeSample, error) {
	var out []wakeSample
	for range samples {
		// Idle time counts from the later of the last activity and the
		// last start (an annotation on the Deployment): both move back.
		past := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, controller.AnnotationStartedAt, past)
		if err := c.Patch(ctx, dep, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return nil, fmt.Errorf("moving the start back: %w", err)
		}
		time.Sleep(500 * time.Millisecond) // the controller's cache sees it
		ul := &v1alpha1.Userland{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		patch = fmt.Appendf(nil, `{"status":{"lastActivityTime":%q}}`, past)
		if err := c.Status().Patch(ctx, ul, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return nil, fmt.Errorf("moving last activity back: %w", err)
		}
		err := waitAll(ctx, c, &v1alpha1.UserlandList{}, key.Namespace, 1, func(obj client.Object) bool {
			u := obj.(*v1alpha1.Userland)
			return u.Name == key.Name && u.Status.Phase == v1alpha1.PhaseStopped && u.Status.StoppedReason == v1alpha1.StoppedIdle
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for the idle stop: %w", err)
		}
		err = waitAll(ctx, c, &appsv1.DeploymentList{}, key.Namespace, 1, func(obj client.Object) bool {
			d := obj.(*appsv1.Deployment)
			return d.Name == key.Name && d.Status.Replicas == 0
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for the pod to go: %w", err)
		}
		time.Sleep(2 * time.Second) // the stopped state reaches the gateway's cache
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gatewayURL+"/small", nil)
		req.Header.Set("Cookie", cookie)
		start := time.Now()
		resp, err := newLoadClient(1).Do(req)
		took := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("waking request: %w", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("waking request: %s", resp.Status)
		}
		time.Sleep(time.Second) // audit entries of the last requests
		pod, err := podReadyTime(auditLog, key.Namespace, start)
		if err != nil {
			logf("wake sample left out: %v", err)
			continue
		}
		out = append(out, wakeSample{Request: took, Pod: pod})
	}
	return out, nil
}

// podReadyTime finds, in the audit log, the first pod created in namespace
// after since and the first status write to it, and returns the time
// between them.
func podReadyTime(auditLog, namespace string, since time.Time) (time.Duration, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	type entry struct {
		Verb      string `json:"verb"`
		ObjectRef *struct {
			Resource, Subresource, Namespace, Name string
		} `json:"objectRef"`
		ResponseStatus *struct {
			Code int `json:"code"`
		} `json:"responseStatus"`
		StageTimestamp time.Time `json:"stageTimestamp"`
	}
	var created time.Time
	var name string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ObjectRef == nil || e.ObjectRef.Namespace != namespace ||
			e.ObjectRef.Resource != "pods" || e.StageTimestamp.Before(since) {
			continue
		}
		switch {
		case name == "" && e.Verb == "create" && e.ObjectRef.Subresource == "" && e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusCreated:
			// A generated name is only in the response, which the
			// Metadata audit level leaves out; the binding names it.
			created = e.StageTimestamp
			name = "?"
		case name == "?" && e.Verb == "create" && e.ObjectRef.Subresource == "binding":
			name = e.ObjectRef.Name
		case name != "" && name != "?" && e.ObjectRef.Name == name && e.ObjectRef.Subresource == "status":
			return e.StageTimestamp.Sub(created), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no pod creation and status write in %s after %s in the audit log", namespace, since.Format(time.RFC3339Nano))
}

// medianWake is the sample with the median overhead.
func medianWake(samples []wakeSample) wakeSample {
	s := append([]wakeSample(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i].Overhead() < s[j].Overhead() })
	return s[len(s)/2]
}
