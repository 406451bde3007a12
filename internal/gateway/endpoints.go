package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/naming"
)

// endpointSliceManagedBy is the value of discoveryv1.LabelManagedBy on the
// slices Kubernetes' own EndpointSlice controller writes from a Service's
// selector.
const endpointSliceManagedBy = "endpointslice-controller.k8s.io"

// ErrNoReadyEndpoint is returned when an environment's Service has no ready
// pod address within the wait.
var ErrNoReadyEndpoint = errors.New("no ready address for the environment")

// ErrSeveralReadyPods is returned when an environment's Service lists more
// than one ready pod. An environment is one replica replaced by Recreate,
// so it never has two: another pod carries its label, made by someone who
// may create pods in the namespace. Which one is the environment's cannot
// be told from the slice, so nobody is sent to either.
var ErrSeveralReadyPods = errors.New("several ready pods for the environment")

// EndpointSliceResolver finds an environment's pod address in its
// Service's EndpointSlices, as the gateway's informer cache holds them.
//
// Why not the Service's cluster DNS name: the Service is headless, so the
// name resolves to the pod's own address, and DNS caches answers (CoreDNS's
// default Corefile keeps them 30 s). After a stop and a wake the name can
// still give the old pod's address: the dial then hangs until its timeout
// (seen on the real node as a 502 after a wake), and once the address is
// given to another pod (another user's environment of the same template
// listens on the same port) the person's request would reach that other
// environment. The EndpointSlice controller marks an endpoint not ready
// as soon as its pod starts terminating, and the watch brings that here
// within milliseconds, so an address read here belongs to this
// environment's pod.
//
// Only the slices of the Service the environment's Userland controls now
// count: when a Userland is deleted and another is created with its name
// (another user's, from the same template), the old Service's slices stay
// in the cache until the garbage collector removes them, listing the old
// pod, whose name has the new environment's shape, at an address that may
// be given to another pod.
type EndpointSliceResolver struct {
	Reader client.Reader
	// Wait bounds how long Resolve waits for a ready address: a Userland
	// turns Ready with its pod, and the slice follows a moment later.
	Wait time.Duration
	// Poll is how often the cache is read while waiting.
	Poll time.Duration
}

// Resolve returns ip:port of a ready, not terminating pod behind the
// Service of the Userland namespace/name whose UID is uid (the one the
// request was authorised for), waiting up to Wait for one to appear.
func (e EndpointSliceResolver) Resolve(ctx context.Context, namespace, name string, uid types.UID, port int32) (string, error) {
	poll := cmp.Or(e.Poll, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, e.Wait)
	defer cancel()
	for {
		addr, err := e.readyAddress(ctx, namespace, name, uid)
		if err != nil {
			return "", err
		}
		if addr != "" {
			return net.JoinHostPort(addr, strconv.Itoa(int(port))), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s/%s: %w", namespace, name, ErrNoReadyEndpoint)
		case <-time.After(poll):
		}
	}
}

// ServiceIndex indexes the environments' EndpointSlices that Kubernetes'
// EndpointSlice controller wrote by the Service they are for: a request
// reads its environment's slices without scanning the namespace's.
const ServiceIndex = "userland.dev/service"

// serviceOfSlice is ServiceIndex's key: the Service's name, for slices of
// the EndpointSlice controller only. Anyone else's slice naming the
// Service (a mirror, a hand-written one) is not evidence of which pod is
// the environment's.
func serviceOfSlice(o client.Object) []string {
	l := o.GetLabels()
	if l[discoveryv1.LabelManagedBy] != endpointSliceManagedBy || l[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue || l[discoveryv1.LabelServiceName] == "" {
		return nil
	}
	return []string{l[discoveryv1.LabelServiceName]}
}

// ServiceMetadata is how the gateway caches environments' Services: their
// metadata (owner references) is all it reads of them.
func ServiceMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}}
}

// readyAddress reads the Service's slices once; "" when none is ready or
// the cache does not show the Service of Userland uid yet.
func (e EndpointSliceResolver) readyAddress(ctx context.Context, namespace, name string, uid types.UID) (string, error) {
	svc := ServiceMetadata()
	if err := e.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading service %s/%s: %w", namespace, name, err)
	}
	if owner := metav1.GetControllerOfNoCopy(svc); owner == nil || owner.UID != uid || owner.Kind != "Userland" {
		// Another Userland's of the same name (the cache has not seen it
		// go yet), or not a Userland's at all.
		return "", nil
	}
	var list discoveryv1.EndpointSliceList
	if err := e.Reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{ServiceIndex: name}); err != nil {
		return "", fmt.Errorf("listing endpoint slices of %s/%s: %w", namespace, name, err)
	}
	addr, pods := ReadyAddress(list.Items, svc.UID, namespace, name)
	if pods > 1 {
		return "", fmt.Errorf("%s/%s: %d ready pods: %w", namespace, name, pods, ErrSeveralReadyPods)
	}
	return addr, nil
}

// ReadyAddress picks the address of a ready, not terminating pod endpoint
// of the slices, preferring IPv4, the lowest address first so that every
// gateway replica picks the same one; "" when there is none. Only slices
// the Service with UID service controls count (an earlier Service of the
// same name left its slices behind), and of them only endpoints whose
// target is a Pod of namespace named as a pod of the environment's
// Deployment (userland, see naming.IsEnvironmentPod). pods is how many
// distinct such pods are ready (one pod of a dual-stack Service appears
// in an IPv4 and an IPv6 slice).
func ReadyAddress(items []discoveryv1.EndpointSlice, service types.UID, namespace, userland string) (addr string, pods int) {
	var v4, v6 []string
	ready := map[string]bool{}
	for i := range items {
		s := &items[i]
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		if owner := metav1.GetControllerOfNoCopy(s); owner == nil || owner.UID != service || owner.Kind != "Service" {
			continue
		}
		for _, ep := range s.Endpoints {
			if !endpointServes(ep, namespace) || !naming.IsEnvironmentPod(userland, ep.TargetRef.Name) {
				continue
			}
			ready[string(ep.TargetRef.UID)+"/"+ep.TargetRef.Name] = true
			for _, a := range ep.Addresses {
				if net.ParseIP(a) == nil {
					continue
				}
				if s.AddressType == discoveryv1.AddressTypeIPv4 {
					v4 = append(v4, a)
				} else {
					v6 = append(v6, a)
				}
			}
		}
	}
	for _, found := range [][]string{v4, v6} {
		if len(found) > 0 {
			return slices.Min(found), len(ready)
		}
	}
	return "", len(ready)
}

// endpointServes: ready (nil means ready, per the API), not terminating,
// and a pod of the Service's own namespace.
func endpointServes(ep discoveryv1.Endpoint, namespace string) bool {
	c := ep.Conditions
	if c.Ready != nil && !*c.Ready {
		return false
	}
	if c.Terminating != nil && *c.Terminating {
		return false
	}
	return ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && ep.TargetRef.Namespace == namespace
}
