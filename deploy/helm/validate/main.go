// Command validate checks the manifests that `helm template` renders, offline.
//
// Each YAML document is decoded strictly into its Kubernetes API type from k8s.io/api (the structs the API server
// itself decodes into), the way `kubectl apply --validate=strict` has the server do it: an unknown or misspelt
// field, a field of the wrong type, a duplicate key or a malformed quantity is an error. Then the checks the API
// server would refuse the object for and that need no cluster: names and labels (apimachinery's validation),
// workload selectors that match their pod template, volume mounts of volumes that exist, environment variable
// names and container ports. Strimzi's KafkaTopic and KafkaUser (kafka.strimzi.io/v1) are decoded into the structs
// in strimzi.go (kafka.strimzi.io/v1beta2 too), written after the fields and enums of Strimzi's CRDs. Any other kind
// is an error: it has no schema.
//
// Usage: helm template … | validate [-] ; validate FILE…   Exit status 0: every document valid; 1: any error.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// document is one YAML document of the input, with where it came from for the messages.
type document struct {
	index  int
	source string // helm's "# Source:" comment, if any
	body   []byte
}

func main() {
	inputs := os.Args[1:]
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	scheme := newScheme()
	valid, failed := 0, 0
	kinds := map[string]int{}
	for _, input := range inputs {
		docs, err := read(input)
		if err != nil {
			fmt.Fprintf(os.Stderr, "error: %s: %v\n", input, err)
			os.Exit(1)
		}
		for _, doc := range docs {
			kind, problems := validate(scheme, doc.body)
			if kind == "" {
				continue // an empty document (only comments)
			}
			if len(problems) > 0 {
				failed++
				fmt.Fprintf(os.Stderr, "invalid: document %d of %s (%s%s):\n", doc.index, input, kind, from(doc.source))
				for _, problem := range problems {
					fmt.Fprintf(os.Stderr, "  - %s\n", problem)
				}
				continue
			}
			valid++
			kinds[strings.SplitN(kind, " ", 2)[0]]++
		}
	}
	if valid+failed == 0 {
		fmt.Fprintln(os.Stderr, "error: no document to validate; pass the output of `helm template`")
		os.Exit(1)
	}
	fmt.Printf("%d documents valid, %d invalid: %s\n", valid, failed, summary(kinds))
	if failed > 0 {
		os.Exit(1)
	}
}

// read splits a file ("-": standard input) into its YAML documents.
func read(input string) ([]document, error) {
	var source io.Reader = os.Stdin
	if input != "-" {
		file, err := os.Open(input)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		source = file
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(source))
	var docs []document
	for index := 1; ; index++ {
		body, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, document{index: index, source: sourceComment(body), body: body})
	}
}

// sourceComment is the template helm rendered a document from ("# Source: chart/templates/x.yaml").
func sourceComment(body []byte) string {
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "# Source: "); ok {
			return rest
		}
	}
	return ""
}

// from names the template a document came from, for a message.
func from(source string) string {
	if source == "" {
		return ""
	}
	return ", from " + source
}

// validate decodes one document strictly and checks it; it returns "Kind name" and the problems found.
func validate(scheme *runtime.Scheme, body []byte) (string, []string) {
	data, err := yaml.YAMLToJSONStrict(body)
	if err != nil {
		return "YAML", []string{err.Error()}
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return "", nil
	}
	var meta struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.UnmarshalCaseSensitivePreserveInts(data, &meta); err != nil {
		return "document", []string{"not a Kubernetes object: " + err.Error()}
	}
	if meta.Kind == "" || meta.APIVersion == "" {
		return "document", []string{"apiVersion and kind are required"}
	}
	gvk := schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind)
	name := fmt.Sprintf("%s %s", meta.Kind, meta.Metadata.Name)
	object, err := newObject(scheme, gvk)
	if err != nil {
		return name, []string{err.Error()}
	}
	strict, err := json.UnmarshalStrict(data, object) // no option: every strict check (unknown and duplicate fields)
	var problems []string
	for _, e := range strict {
		problems = append(problems, e.Error())
	}
	if err != nil {
		problems = append(problems, err.Error())
		return name, problems
	}
	for _, e := range check(object) {
		problems = append(problems, e.Error())
	}
	return name, problems
}

// newScheme knows the API groups a chart renders; a kind outside them has no schema here.
func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme,
		networkingv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	return scheme
}

// newObject is an empty object of the kind: a k8s.io/api type, or one of Strimzi's in strimzi.go.
func newObject(scheme *runtime.Scheme, gvk schema.GroupVersionKind) (any, error) {
	if empty, ok := strimziKinds[gvk]; ok {
		return empty(), nil
	}
	object, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("no schema for apiVersion %q kind %q: this validator knows the core, apps, batch, "+
			"policy, rbac and networking groups of k8s.io/api and Strimzi's KafkaTopic and KafkaUser (%s)",
			gvk.GroupVersion().String(), gvk.Kind, strimziGroupVersion)
	}
	return object, nil
}

// check is what the API server refuses besides the schema, where no cluster is needed to know it.
func check(object any) field.ErrorList {
	var errs field.ErrorList
	if accessor, ok := object.(metav1.ObjectMetaAccessor); ok {
		nameFn := apivalidation.NameIsDNSSubdomain
		if _, service := object.(*corev1.Service); service {
			nameFn = apivalidation.NameIsDNS1035Label
		}
		errs = append(errs, apivalidation.ValidateObjectMeta(accessor.GetObjectMeta().(*metav1.ObjectMeta), false,
			nameFn, field.NewPath("metadata"))...)
	}
	spec := field.NewPath("spec")
	switch o := object.(type) {
	case *appsv1.Deployment:
		errs = append(errs, checkWorkload(o.Spec.Selector, &o.Spec.Template, nil, spec)...)
	case *appsv1.StatefulSet:
		errs = append(errs, checkWorkload(o.Spec.Selector, &o.Spec.Template, o.Spec.VolumeClaimTemplates, spec)...)
		if o.Spec.ServiceName == "" {
			errs = append(errs, field.Required(spec.Child("serviceName"), "a StatefulSet's pods are named through it"))
		}
	case *appsv1.DaemonSet:
		errs = append(errs, checkWorkload(o.Spec.Selector, &o.Spec.Template, nil, spec)...)
	case *batchv1.Job:
		errs = append(errs, checkPod(&o.Spec.Template.Spec, nil, spec.Child("template", "spec"))...)
		if policy := o.Spec.Template.Spec.RestartPolicy; policy != corev1.RestartPolicyOnFailure && policy != corev1.RestartPolicyNever {
			errs = append(errs, field.NotSupported(spec.Child("template", "spec", "restartPolicy"), policy,
				[]string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
		}
	case *corev1.Pod:
		errs = append(errs, checkPod(&o.Spec, nil, spec)...)
	case *corev1.Service:
		for i, port := range o.Spec.Ports {
			errs = append(errs, checkPort(port.Port, spec.Child("ports").Index(i).Child("port"))...)
		}
	case strimziObject:
		errs = append(errs, o.check()...)
	}
	return errs
}

// checkWorkload: the selector must select the pod template's labels, then the pod itself.
func checkWorkload(selector *metav1.LabelSelector, template *corev1.PodTemplateSpec, claims []corev1.PersistentVolumeClaim, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), ""))
	} else if parsed, err := metav1.LabelSelectorAsSelector(selector); err != nil {
		errs = append(errs, field.Invalid(spec.Child("selector"), selector, err.Error()))
	} else if parsed.Empty() || !parsed.Matches(labels.Set(template.Labels)) {
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), template.Labels,
			"`selector` does not match template `labels`"))
	}
	errs = append(errs, checkPod(&template.Spec, claims, spec.Child("template", "spec"))...)
	return errs
}

// checkPod: containers with a name and an image, unique volumes, mounts of volumes that exist, valid env names
// and ports.
func checkPod(pod *corev1.PodSpec, claims []corev1.PersistentVolumeClaim, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := map[string]bool{}
	for i, volume := range pod.Volumes {
		if volumes[volume.Name] {
			errs = append(errs, field.Duplicate(path.Child("volumes").Index(i).Child("name"), volume.Name))
		}
		volumes[volume.Name] = true
	}
	for _, claim := range claims {
		volumes[claim.Name] = true
	}
	if len(pod.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), "a pod needs a container"))
	}
	for group, containers := range map[string][]corev1.Container{"initContainers": pod.InitContainers, "containers": pod.Containers} {
		for i, container := range containers {
			at := path.Child(group).Index(i)
			for _, msg := range apivalidation.NameIsDNSLabel(container.Name, false) {
				errs = append(errs, field.Invalid(at.Child("name"), container.Name, msg))
			}
			if strings.TrimSpace(container.Image) == "" {
				errs = append(errs, field.Required(at.Child("image"), ""))
			}
			for j, mount := range container.VolumeMounts {
				if !volumes[mount.Name] {
					errs = append(errs, field.NotFound(at.Child("volumeMounts").Index(j).Child("name"), mount.Name))
				}
			}
			for j, env := range container.Env {
				for _, msg := range validation.IsEnvVarName(env.Name) {
					errs = append(errs, field.Invalid(at.Child("env").Index(j).Child("name"), env.Name, msg))
				}
			}
			for j, port := range container.Ports {
				errs = append(errs, checkPort(port.ContainerPort, at.Child("ports").Index(j).Child("containerPort"))...)
			}
		}
	}
	return errs
}

func checkPort(port int32, path *field.Path) field.ErrorList {
	if port < 1 || port > 65535 {
		return field.ErrorList{field.Invalid(path, port, "must be between 1 and 65535")}
	}
	return nil
}

func summary(kinds map[string]int) string {
	names := make([]string, 0, len(kinds))
	for kind, count := range kinds {
		names = append(names, fmt.Sprintf("%s %d", kind, count))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
