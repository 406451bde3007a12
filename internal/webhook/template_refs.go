package webhook

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/userland-dev/userland/api/v1alpha1"
	"github.com/userland-dev/userland/internal/access"
)

// A template names Secrets, ServiceAccounts and claims that the
// controller, with its wide rights, puts into every environment's
// Deployment: the kubelet then mounts them and runs the pod as the
// ServiceAccount. Without a
// check, anyone who may write a Template could read every Secret of the
// namespace through an environment, or act as any ServiceAccount in it,
// although their own RBAC allows neither. So the webhook asks the API
// server (SubjectAccessReview) whether the requester may do it themselves:
//
//   - get on each Secret, by name;
//   - get on each PersistentVolumeClaim a volume mounts or an ephemeral
//     volume copies, and on each VolumeSnapshot one restores, by name;
//   - use on each ServiceAccount, by name (a custom verb, as Kubernetes
//     uses approve on signers: no built-in verb means "run a pod as",
//     and get would grant reading it, which is not the point), or
//     impersonate on it, which is more (require).
//
// A Template asks in its own namespace. A ClusterTemplate runs in every
// namespace it allows, so it asks cluster-wide (namespace ""), which only
// a ClusterRoleBinding grants.

// podRef is one object a pod template names, at path, and what the
// requester must be allowed to do with it.
type podRef struct {
	path   *field.Path
	action access.Action
}

func secretRef(path *field.Path, namespace, name string) podRef {
	return podRef{path: path, action: access.Action{Verb: "get", Resource: "secrets", Namespace: namespace, Name: name}}
}

func claimRef(path *field.Path, namespace, name string) podRef {
	return podRef{path: path, action: access.Action{Verb: "get", Resource: "persistentvolumeclaims", Namespace: namespace, Name: name}}
}

func snapshotRef(path *field.Path, namespace, name string) podRef {
	return podRef{path: path, action: access.Action{Verb: "get", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: namespace, Name: name}}
}

func serviceAccountRef(path *field.Path, namespace, name string) podRef {
	return podRef{path: path, action: access.Action{Verb: v1alpha1.VerbUse, Resource: "serviceaccounts", Namespace: namespace, Name: name}}
}

// podRefs lists what spec makes the controller use in namespace ("" for a
// ClusterTemplate), with field paths under path.
func podRefs(spec *corev1.PodSpec, path *field.Path, namespace string) []podRef {
	var refs []podRef
	add := func(p *field.Path, name string, ref func(*field.Path, string, string) podRef) {
		// An empty name refers to nothing the controller could lend; the
		// API server rejects the Deployment if a name is required.
		if name != "" {
			refs = append(refs, ref(p, namespace, name))
		}
	}
	// Every pod without a serviceAccountName runs as "default", which
	// anyone who may create pods in the namespace gets, and the controller
	// mounts no token unless the template asks: naming it lends nothing,
	// and checking it would refuse templates that merely spell it out.
	for _, sa := range []struct {
		field, name string
	}{{"serviceAccountName", spec.ServiceAccountName}, {"serviceAccount", spec.DeprecatedServiceAccount}} {
		if sa.name != "default" {
			add(path.Child(sa.field), sa.name, serviceAccountRef)
		}
	}
	for i, s := range spec.ImagePullSecrets {
		add(path.Child("imagePullSecrets").Index(i).Child("name"), s.Name, secretRef)
	}
	for i := range spec.Volumes {
		refs = append(refs, volumeRefs(&spec.Volumes[i], path.Child("volumes").Index(i), namespace)...)
	}
	containers := func(field string, cs []corev1.Container) {
		for i := range cs {
			refs = append(refs, envRefs(cs[i].Env, cs[i].EnvFrom, path.Child(field).Index(i), namespace)...)
		}
	}
	containers("initContainers", spec.InitContainers)
	containers("containers", spec.Containers)
	for i := range spec.EphemeralContainers {
		c := &spec.EphemeralContainers[i]
		refs = append(refs, envRefs(c.Env, c.EnvFrom, path.Child("ephemeralContainers").Index(i), namespace)...)
	}
	return refs
}

// envRefs lists the Secrets a container's environment reads.
func envRefs(env []corev1.EnvVar, envFrom []corev1.EnvFromSource, path *field.Path, namespace string) []podRef {
	var refs []podRef
	for j, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
			refs = append(refs, secretRef(path.Child("env").Index(j).Child("valueFrom", "secretKeyRef", "name"), namespace, e.ValueFrom.SecretKeyRef.Name))
		}
	}
	for j, e := range envFrom {
		if e.SecretRef != nil && e.SecretRef.Name != "" {
			refs = append(refs, secretRef(path.Child("envFrom").Index(j).Child("secretRef", "name"), namespace, e.SecretRef.Name))
		}
	}
	return refs
}

// volumeRefs lists the Secrets a volume makes the kubelet read: the secret
// and projected volumes, and the volume plugins' credentials, which are
// Secrets in the pod's namespace too.
func volumeRefs(v *corev1.Volume, path *field.Path, namespace string) []podRef {
	var refs []podRef
	add := func(p *field.Path, name string) {
		if name != "" {
			refs = append(refs, secretRef(p, namespace, name))
		}
	}
	local := func(p *field.Path, ref *corev1.LocalObjectReference) {
		if ref != nil {
			add(p.Child("name"), ref.Name)
		}
	}
	switch {
	case v.PersistentVolumeClaim != nil:
		// Somebody's data: a claim of the namespace, such as a person's
		// home, mounted in every environment of the template.
		if name := v.PersistentVolumeClaim.ClaimName; name != "" {
			refs = append(refs, claimRef(path.Child("persistentVolumeClaim", "claimName"), namespace, name))
		}
	case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
		// A new claim that starts as a copy of a claim or a snapshot.
		spec := &v.Ephemeral.VolumeClaimTemplate.Spec
		specPath := path.Child("ephemeral", "volumeClaimTemplate", "spec")
		if ds := spec.DataSource; ds != nil {
			refs = append(refs, dataSourceRef(specPath.Child("dataSource", "name"), namespace, ds.APIGroup, ds.Kind, ds.Name)...)
		}
		if ds := spec.DataSourceRef; ds != nil && (ds.Namespace == nil || *ds.Namespace == "") {
			refs = append(refs, dataSourceRef(specPath.Child("dataSourceRef", "name"), namespace, ds.APIGroup, ds.Kind, ds.Name)...)
		}
	case v.Secret != nil:
		add(path.Child("secret", "secretName"), v.Secret.SecretName)
	case v.Projected != nil:
		for j, src := range v.Projected.Sources {
			if src.Secret != nil {
				add(path.Child("projected", "sources").Index(j).Child("secret", "name"), src.Secret.Name)
			}
		}
	case v.CSI != nil:
		local(path.Child("csi", "nodePublishSecretRef"), v.CSI.NodePublishSecretRef)
	case v.AzureFile != nil:
		add(path.Child("azureFile", "secretName"), v.AzureFile.SecretName)
	case v.CephFS != nil:
		local(path.Child("cephfs", "secretRef"), v.CephFS.SecretRef)
	case v.RBD != nil:
		local(path.Child("rbd", "secretRef"), v.RBD.SecretRef)
	case v.ISCSI != nil:
		local(path.Child("iscsi", "secretRef"), v.ISCSI.SecretRef)
	case v.FlexVolume != nil:
		local(path.Child("flexVolume", "secretRef"), v.FlexVolume.SecretRef)
	case v.ScaleIO != nil:
		local(path.Child("scaleIO", "secretRef"), v.ScaleIO.SecretRef)
	case v.StorageOS != nil:
		local(path.Child("storageos", "secretRef"), v.StorageOS.SecretRef)
	}
	return refs
}

// dataSourceRef is the claim or snapshot a new claim is copied from;
// other populators' sources are not read for anyone.
func dataSourceRef(path *field.Path, namespace string, group *string, kind, name string) []podRef {
	switch {
	case name == "":
		return nil
	case (group == nil || *group == "") && kind == "PersistentVolumeClaim":
		return []podRef{claimRef(path, namespace, name)}
	case group != nil && *group == "snapshot.storage.k8s.io" && kind == "VolumeSnapshot":
		return []podRef{snapshotRef(path, namespace, name)}
	}
	return nil
}

// checkTemplateRefs asks, for the requester, about every Secret,
// ServiceAccount, claim and snapshot spec's pod template names. An update
// that leaves the pod template as it was (old is nil on create) asks
// nothing: re-applying the same manifest (GitOps), or changing the idle
// timeout or the display name, needs only the right to write the
// template. Any other change to the pod template asks about every
// reference again, not only the added ones: a new image or command next
// to a Secret that is already mounted is a new way to read it.
// Each refusal is a Forbidden error at the reference's path; an error is
// returned only when the API server could not answer.
func checkTemplateRefs(ctx context.Context, reviewer access.Reviewer, namespace string, old, spec *v1alpha1.TemplateSpec, fldPath *field.Path) (field.ErrorList, error) {
	if old != nil && equality.Semantic.DeepEqual(old.PodTemplate, spec.PodTemplate) {
		return nil, nil
	}
	added := podRefs(&spec.PodTemplate.Spec, fldPath.Child("podTemplate", "spec"), namespace)
	if len(added) == 0 {
		return nil, nil
	}
	who, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	// One review per distinct action, however often the template names it.
	decided := map[access.Action]error{}
	var errs field.ErrorList
	for _, r := range added {
		err, seen := decided[r.action]
		if !seen {
			err = require(ctx, reviewer, who, r.action)
			decided[r.action] = err
		}
		var denied *access.Denied
		switch {
		case err == nil:
		case errors.As(err, &denied):
			errs = append(errs, field.Forbidden(r.path, denied.Error()))
		default:
			return nil, err
		}
	}
	return errs, nil
}

// require asks whether who may do a. For use on a ServiceAccount,
// impersonate on it is enough too: whoever may act as the ServiceAccount
// directly gains nothing by running a pod as it. Namespace admins and
// editors hold impersonate on their namespace's ServiceAccounts through
// Kubernetes' built-in admin and edit roles, so they need no extra grant.
// A refusal names use, the permission to ask for.
func require(ctx context.Context, reviewer access.Reviewer, who access.Subject, a access.Action) error {
	err := reviewer.Require(ctx, who, a)
	var denied *access.Denied
	if a.Verb != v1alpha1.VerbUse || !errors.As(err, &denied) {
		return err
	}
	impersonate := a
	impersonate.Verb = "impersonate"
	ok, ierr := reviewer.Allowed(ctx, who, impersonate)
	switch {
	case ierr != nil:
		return ierr
	case ok:
		return nil
	}
	return err
}
