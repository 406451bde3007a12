//go:build realnode

package realnode_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/controller"
	"github.com/userland-dev/userland/internal/realnode"
	"github.com/userland-dev/userland/internal/testobj"
)

// pullerPulls: the image puller really pulls, from a private registry,
// with the credentials the template names. The test serves an OCI
// registry of its own inside the node's network namespace (plain HTTP,
// trusted by the node's containerd alone) that answers nothing without a
// user name and password (HTTP Basic, as a private registry's token
// endpoint or a mirror's would), holding one small image that containerd
// has not got; a course whose session's warm-up is open names it in its
// template, and the template lists an imagePullSecret of type
// kubernetes.io/dockerconfigjson holding those credentials. Once the
// course reports its images on the node, containerd has the image, the
// registry served its manifest and every blob to the credentials and
// refused the attempts without them, and no pod but the course's puller
// ever named it: the image came before any environment of the course.
func pullerPulls(ctx context.Context, t *testing.T, n *realnode.Node, ns string) {
	t.Helper()
	c := n.Cluster.Client
	now := time.Now().UTC()
	start := now.Truncate(time.Minute).Add(15 * time.Minute)
	end := start.Add(30 * time.Minute)
	if end.Day() != now.Day() {
		t.Logf("NOT RUN: the puller pulls: a session %s-%s UTC would cross midnight", start.Format("15:04"), end.Format("15:04"))
		return
	}

	reg := &servingRegistry{
		handler:  registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		user:     "course-puller",
		password: rand.Text(),
	}
	l, err := n.Listen("tcp", realnode.NodeIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: reg, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	host := l.Addr().String()
	if err := n.TrustPlainHTTPRegistry(host); err != nil {
		t.Fatal(err)
	}

	img, err := pullMeImage()
	if err != nil {
		t.Fatal(err)
	}
	tag := now.Format("20060102t150405")
	ref := host + "/userland-test/pullme:" + tag
	if err := pushImage(reg.handler, "userland-test/pullme", tag, img); err != nil {
		t.Fatalf("pushing %s to the test's registry: %v", ref, err)
	}
	have, err := n.Images()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(have, ref) {
		t.Fatalf("the node's containerd has %s before any pull: %v", ref, have)
	}

	// The registry is private: the manifest is refused to anyone without
	// the credentials, so a pull below can only have used them.
	if code := anonymousGet(ctx, t, n, "http://"+host+"/v2/userland-test/pullme/manifests/"+tag); code != http.StatusUnauthorized {
		t.Fatalf("the test's registry answered an anonymous manifest request with %d, want 401", code)
	}
	probed := len(reg.requests())
	pullSecret := dockerConfigSecret(ns, "registry-credentials", host, reg.user, reg.password)
	if err := c.Create(ctx, pullSecret); err != nil {
		t.Fatal(err)
	}

	tmpl := testobj.MakeTemplate(ns, "pullme").Image(ref).Obj()
	tmpl.Spec.PodTemplate.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: pullSecret.Name}}
	createAdmitted(ctx, t, c, tmpl, "a template of the registry's image", time.Minute)
	course := testobj.MakeCourse(ns, "pull").Term(now.Add(-time.Hour), now.Add(30*24*time.Hour)).
		Students("dave").Template("pullme", v1alpha1.ProvisionOnSignIn).
		Dated(now.Format(time.DateOnly), start.Format("15:04"), end.Format("15:04"), "UTC").
		Warmup(20 * time.Minute).Obj()
	createAdmitted(ctx, t, c, course, "a course with a session in 15 minutes of the registry's image", time.Minute)
	created := time.Now()

	var live v1alpha1.Course
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(course), &live); err != nil {
			t.Fatal(err)
		}
		if s := live.Status.NextSession; s != nil && s.Images != nil && s.Images.Desired == 1 && s.Images.Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not on the node 3 minutes after the course was created: %+v; %s; the registry served %v",
				ref, live.Status.NextSession, pullerPods(ctx, t, c, ns), reg.requests())
		}
		time.Sleep(time.Second)
	}
	t.Logf("TIMING %s pulled from the test's registry, images on 1 of 1 nodes, %s after the course was created", ref, time.Since(created).Round(100*time.Millisecond))

	have, err = n.Images()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(have, ref) {
		t.Errorf("the node's containerd has no %s after the puller reported it: %v", ref, have)
	}
	// containerd fetches the manifest by tag or digest, then each blob.
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	repo := "/v2/userland-test/pullme/"
	served := reg.requests()[probed:]
	if !slices.Contains(served, "GET "+repo+"manifests/"+digest.String()+" 200") && !slices.Contains(served, "GET "+repo+"manifests/"+tag+" 200") {
		t.Errorf("the registry did not serve the manifest %s: %v", digest, served)
	}
	blobs := []v1.Hash{m.Config.Digest}
	for _, l := range m.Layers {
		blobs = append(blobs, l.Digest)
	}
	for _, b := range blobs {
		if !slices.Contains(served, "GET "+repo+"blobs/"+b.String()+" 200") {
			t.Errorf("the registry did not serve blob %s: %v", b, served)
		}
	}
	t.Logf("the registry served, for the pull: %s", strings.Join(served, "; "))
	// containerd asks without credentials first, is told to bring them
	// (401 with a Basic challenge), and the blobs above came to them.
	if !slices.ContainsFunc(served, refusedManifest) {
		t.Errorf("the registry refused no manifest request of the pull, so the pull is not shown to have needed the credentials: %v", served)
	}

	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	pullers := 0
	for _, p := range pods.Items {
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, ct := range cs {
				if ct.Image != ref {
					continue
				}
				if p.Labels[controller.LabelImagePullerFor] != string(live.UID) {
					t.Errorf("pod %s, not the course's puller, runs %s", p.Name, ref)
					continue
				}
				pullers++
			}
		}
		if p.Labels[controller.LabelImagePullerFor] != string(live.UID) {
			continue
		}
		for _, st := range p.Status.InitContainerStatuses {
			if term := st.State.Terminated; term == nil || term.ExitCode != 0 {
				t.Errorf("puller %s: init container %s (%s) did not exit 0: %+v", p.Name, st.Name, st.Image, st.State)
			}
		}
	}
	if pullers != 1 {
		t.Errorf("%d puller containers name %s, want 1", pullers, ref)
	}
	pulledImageStaysPrivate(ctx, t, n, ns+"-outsider", ref, reg)
}

// pulledImageStaysPrivate: what the puller pulled with a course's
// credentials is not thereby anyone's. A pod of another namespace, with
// no pull secret, names the image that is now on the node, with
// imagePullPolicy IfNotPresent; the kubelet (KubeletEnsureSecretPulledImages,
// on by default since Kubernetes 1.35) asks the registry again, without
// credentials, is refused, and never starts it.
func pulledImageStaysPrivate(ctx context.Context, t *testing.T, n *realnode.Node, ns, ref string, reg *servingRegistry) {
	t.Helper()
	c := n.Cluster.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	before := len(reg.requests())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "borrow"},
		Spec: corev1.PodSpec{
			NodeName:                      realnode.NodeName,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "borrow", Image: ref, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/userland-test/pullme"},
				// Pod Security's restricted level, wherever it is enforced.
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             ptr.To(true),
					RunAsUser:                ptr.To[int64](65534),
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
			}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var live corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &live); err != nil {
			t.Fatal(err)
		}
		for _, st := range live.Status.ContainerStatuses {
			switch w := st.State.Waiting; {
			case w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff"):
				// Refused by the registry, for want of credentials, and
				// not for another reason (an unreachable registry).
				if !slices.ContainsFunc(reg.requests()[before:], refusedManifest) {
					t.Fatalf("the pod without the pull secret failed its pull (%s: %s), but the registry refused it no manifest: %v",
						w.Reason, w.Message, reg.requests()[before:])
				}
				t.Logf("a pod of another namespace without the pull secret was refused %s: %s: %s; the registry then saw: %s",
					ref, w.Reason, w.Message, strings.Join(reg.requests()[before:], "; "))
				return
			case w != nil && w.Reason == "ContainerCreating", w != nil && w.Reason == "":
			default:
				// Any other state means the kubelet used the image
				// without asking the registry for this pod.
				t.Fatalf("a pod of another namespace without the pull secret got past the pull of the private image %s: %+v", ref, st.State)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a pod of another namespace naming %s has no pull verdict after 2 minutes: %+v", ref, live.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pullMeImage is an image only the test's registry has: one layer with
// one file, for the node's platform (containerd pulls only a matching
// one). The puller runs its own binary in it, so it needs nothing else.
func pullMeImage() (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("pulled by the image puller, from the real-node test's registry\n")
	epoch := time.Unix(0, 0)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "userland-test/", Mode: 0o755, ModTime: epoch},
		{Typeflag: tar.TypeReg, Name: "userland-test/pullme", Mode: 0o644, Size: int64(len(body)), ModTime: epoch},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Created = v1.Time{Time: epoch}
	return mutate.ConfigFile(img, cfg)
}

// pushImage puts img into the registry h as repo:tag, through its
// handler (the registry API's monolithic uploads), so the registry's
// record starts with the node's pull.
func pushImage(h http.Handler, repo, tag string, img v1.Image) error {
	put := func(method, path, mediaType string, body []byte) error {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		if mediaType != "" {
			req.Header.Set("Content-Type", mediaType)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			return fmt.Errorf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return nil
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return err
		}
		if err := put(http.MethodPost, "/v2/"+repo+"/blobs/uploads/?digest="+d.String(), "", data); err != nil {
			return err
		}
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cd, err := img.ConfigName()
	if err != nil {
		return err
	}
	if err := put(http.MethodPost, "/v2/"+repo+"/blobs/uploads/?digest="+cd.String(), "", cfg); err != nil {
		return err
	}
	m, err := img.RawManifest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	return put(http.MethodPut, "/v2/"+repo+"/manifests/"+tag, string(mt), m)
}

// servingRegistry is an in-memory OCI registry that remembers each
// request it answered, as "METHOD path status". With a user set, it is
// private: a request without that user's password is refused with 401
// and a Basic challenge, as the distribution spec's authentication does.
type servingRegistry struct {
	handler        http.Handler
	user, password string
	mu             sync.Mutex
	served         []string
}

func (r *servingRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	if user, password, ok := req.BasicAuth(); r.user != "" && (!ok ||
		subtle.ConstantTimeCompare([]byte(user), []byte(r.user)) != 1 ||
		subtle.ConstantTimeCompare([]byte(password), []byte(r.password)) != 1) {
		sw.Header().Set("WWW-Authenticate", `Basic realm="userland-test"`)
		http.Error(sw, "authentication required", http.StatusUnauthorized)
	} else {
		r.handler.ServeHTTP(sw, req)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.served = append(r.served, fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, sw.status))
}

func (r *servingRegistry) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.served)
}

// refusedManifest is whether a line of servingRegistry's record is a
// manifest request refused for want of credentials.
func refusedManifest(line string) bool {
	return strings.Contains(line, "/manifests/") && strings.HasSuffix(line, " 401")
}

// dockerConfigSecret is an image pull secret for one registry, in the
// format kubectl create secret docker-registry writes.
func dockerConfigSecret(ns, name, host, user, password string) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{
		host: map[string]string{"username": user, "password": password, "auth": auth},
	}})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}
}

// anonymousGet is the status of a GET without credentials, from inside
// the node's network namespace.
func anonymousGet(ctx context.Context, t *testing.T, n *realnode.Node, url string) int {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: n.DialContext}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}
